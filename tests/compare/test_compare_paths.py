"""`tcmp compare` given paths that are not one dump each, graph files that are not the run's or are named
otherwise, and a damaged index that holds the only record (issue 22, items 5, 6, 7 and 11's exit code): through
the command line, with the exit code and the one line it prints."""

from __future__ import annotations

import csv
import shutil
import sqlite3
from pathlib import Path

import pytest

from tcmp.daemon.retention import RetentionPolicy
from tcmp.daemon.service import WatchConfig, run_watch
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

# torchair's `convert_to_pbtxt` (graph_dump.type "pbtxt"): TensorFlow nodes, descs flattened into strings
TORCHAIR_PBTXT = """node {
  name: "arg0_1"
  op: "Data"
  attr {
    key: "[o]y0"
    value {
      s: "name: \\"y0\\"\\ndtype: DT_FLOAT16\\n"
    }
  }
}
"""
UNRELATED_GRAPH = 'name: "other"\nop {\n  name: "Unrelated_7"\n  type: "Relu"\n}\n'


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    return write_scenario(tmp_path_factory.mktemp("paths"), ScenarioConfig(model=ModelConfig(layers=1), tokens=1))


def compare(cli, target, golden, out, *extra):
    return cli("compare", "-tp", target, "-gp", golden, "-o", out, "--jobs", "1", *extra)


def one_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def csv_rows(out: Path) -> list[dict]:
    (table,) = (p for p in out.glob("tcmp_compare_*.csv") if not p.name.endswith("_unmatched.csv"))
    with open(table, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


# --- item 5: one dump per path


def test_a_target_path_holding_a_ge_and_a_fusion_off_dump_is_refused_naming_both(cli, scenario, tmp_path):
    shallow = tmp_path / "D"
    shutil.copytree(scenario.root / "target", shallow / "ge")
    shutil.copytree(scenario.root / "golden_ge", shallow / "ge_fusion_off")
    result = compare(cli, shallow, scenario.golden_fx, tmp_path / "out")
    assert result.exit_code == 2, result.output
    line = one_line(result)
    assert str(shallow / "ge" / "msprobe_ge_dump") in line
    assert str(shallow / "ge_fusion_off" / "msprobe_ge_dump") in line
    assert "2 dumps" in line and "-tp" in line
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_a_golden_path_holding_a_ge_and_an_fx_dump_is_refused_naming_both(cli, scenario, tmp_path):
    shallow = tmp_path / "G"
    shutil.copytree(scenario.root / "golden_ge", shallow / "ge_fusion_off")
    shutil.copytree(scenario.root / "golden_fx", shallow / "fx")
    result = compare(cli, scenario.target, shallow, tmp_path / "out")
    assert result.exit_code == 2, result.output
    line = one_line(result)
    assert f"{shallow / 'fx' / 'msprobe_fx_dump'} (FX)" in line
    assert f"{shallow / 'ge_fusion_off' / 'msprobe_ge_dump'} (GE)" in line and "-gp" in line


def test_an_aclgraph_save_among_ge_files_is_refused_naming_the_directory(cli, scenario, tmp_path):
    import torch  # the dev extra: a real torch.save file

    target = tmp_path / "T"
    shutil.copytree(scenario.target, target)
    rank_dir = next(p for p in target.rglob("worldsize1_global_rank0") if p.is_dir())
    torch.save(torch.ones(3), rank_dir / "relu_device_0_0.pt")  # what torch_npu's save_npugraph_tensor names
    result = compare(cli, target, scenario.golden_fx, tmp_path / "out")
    assert result.exit_code == 2, result.output
    line = one_line(result)
    assert "mixes two dumps in one directory" in line and "aclgraph and GE dump files" in line
    assert str(rank_dir.parent) in line or str(rank_dir) in line
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_one_dump_with_several_ranks_is_one_dump(cli, tmp_path):
    two = write_scenario(tmp_path / "s", ScenarioConfig(model=ModelConfig(layers=1), tokens=1, ranks=2))
    result = compare(cli, two.target, two.golden_fx, tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "rank 0:" in result.stdout and "rank 1:" in result.stdout


# --- item 6: --graph is checked


def test_a_graph_file_naming_none_of_the_dumped_ops_is_refused(cli, scenario, tmp_path):
    other = tmp_path / "ge_proto_00000062_Build.txt"
    other.write_text(UNRELATED_GRAPH)
    for golden in (scenario.golden_fx, scenario.golden_ge):
        result = compare(cli, scenario.target, golden, tmp_path / "out", "--graph", other)
        assert result.exit_code == 2, result.output
        line = one_line(result)
        assert f"--graph {other}" in line and "none of the dumped ops" in line and "model graph_1_0" in line


def test_a_graph_directory_of_another_run_is_refused_even_under_the_graphs_number(cli, scenario, tmp_path):
    directory = tmp_path / "graphs"
    directory.mkdir()
    (directory / "dynamo_original_graph_1_rank_0_pid_7_ts_20250101120000000000.txt").write_text(UNRELATED_GRAPH)
    result = compare(cli, scenario.target, scenario.golden_fx, tmp_path / "out", "--graph", directory)
    assert result.exit_code == 2, result.output
    assert "dynamo_original_graph_1_rank_0_pid_7" in one_line(result)


def test_torchairs_pbtxt_and_py_graph_dumps_are_refused_naming_the_file_tcmp_reads(cli, scenario, tmp_path):
    pbtxt, py = tmp_path / "dynamo_original_graph_1.pbtxt", tmp_path / "dynamo_original_graph_1.py"
    pbtxt.write_text(TORCHAIR_PBTXT)
    py.write_text("from torchair.ge._ge_graph import GeGraph\n")
    for given, kind in ((pbtxt, '"pbtxt"'), (py, '"py"')):
        result = compare(cli, scenario.target, scenario.golden_fx, tmp_path / "out", "--graph", given)
        assert result.exit_code == 2, result.output
        line = one_line(result)
        assert str(given) in line and f"of type {kind}" in line and "dynamo_original_graph_*.txt" in line
        assert 'graph_dump.type = "txt"' in line


def test_a_pbtxt_holding_a_ge_graphs_text_is_read(cli, scenario, tmp_path):
    plain = compare(cli, scenario.target, scenario.golden_fx, tmp_path / "plain")
    assert plain.exit_code == 0, plain.output
    renamed = tmp_path / "graph.pbtxt"
    shutil.copy(next(scenario.target.glob("dynamo_original_graph_*.txt")), renamed)
    result = compare(cli, scenario.target, scenario.golden_fx, tmp_path / "given", "--graph", renamed)
    assert result.exit_code == 0, result.output
    expected = [(r["API Name"], r["Result"]) for r in csv_rows(tmp_path / "plain")]
    assert expected and [(r["API Name"], r["Result"]) for r in csv_rows(tmp_path / "given")] == expected


# --- item 7: graph files found by content


@pytest.mark.parametrize(
    "name", ["dynamo_original_graph_17065969118878_test.txt", "dynamo_original_graph_20250101120000_rank_0_x.txt"]
)
def test_a_graph_file_named_otherwise_is_found_by_its_content_with_a_note(cli, tmp_path, name):
    s = write_scenario(tmp_path / "s", ScenarioConfig(model=ModelConfig(layers=1), tokens=1))
    plain = compare(cli, s.target, s.golden_fx, tmp_path / "plain")
    assert plain.exit_code == 0, plain.output
    for graph in s.target.glob("dynamo_*graph_*.txt"):
        if "original" in graph.name:
            graph.rename(s.target / name)
        else:
            graph.unlink()
    (s.target / "notes.txt").write_text("op {\nnot a graph\n")  # a text file that is no GE graph: not taken
    result = compare(cli, s.target, s.golden_fx, tmp_path / "renamed")
    assert result.exit_code == 0, result.output
    said = " ".join(result.stdout.split())
    assert f"graph file {s.target / name} taken as torchair's original graph" in said and "notes.txt" not in said
    expected = [(r["API Name"], r["Result"]) for r in csv_rows(tmp_path / "plain")]
    assert expected and [(r["API Name"], r["Result"]) for r in csv_rows(tmp_path / "renamed")] == expected


# --- item 11: a damaged index


def test_a_damaged_index_holding_the_only_record_exits_3(cli, tmp_path):
    s = write_scenario(tmp_path / "s", ScenarioConfig(model=ModelConfig(layers=1), tokens=1))
    config = WatchConfig(roots=(s.root,), db=None, retention=RetentionPolicy(True, 0, ()), workers=1, once=True)
    assert run_watch(config).error is None
    (index,) = s.root.rglob("index.sqlite")
    with pytest.raises(sqlite3.DatabaseError):  # what the damage is: the file is no database any more
        index.write_bytes(b"garbage garbage!" + index.read_bytes()[16:])
        sqlite3.connect(index).execute("select * from sqlite_master").fetchall()
    result = compare(cli, s.target, s.golden_fx, tmp_path / "out")
    assert result.exit_code == 3, result.output
    line = one_line(result)
    assert "no GE dump files under the target path" in line and "unusable" in line


GE_FILE = "Add.Add_0.1.2.1764400000000037"
FX_FILE = "add-aten.add.Tensor.OUTPUT.0.1764400000000037.npy"


def _touch(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")


@pytest.mark.parametrize(
    ("files", "roots"),
    [
        # ranks below the root, as torchair >= 2025-08 writes them, and above it: one dump either way
        (
            [f"msprobe_ge_dump/worldsize2_global_rank{r}/20250101120000/{r}/graph_1_0/1/0/{GE_FILE}" for r in (0, 1)],
            [("msprobe_ge_dump", "ge")],
        ),
        (
            [f"worldsize2_rank{r}/msprobe_ge_dump/20250101120000/{r}/graph_1_0/1/0/{GE_FILE}" for r in (0, 1)],
            [(".", "ge")],
        ),
        # two {time} directories of one root: two runs of one dump (refused elsewhere, with --target-run)
        (
            [f"msprobe_ge_dump/{t}/0/graph_1_0/1/0/{GE_FILE}" for t in ("20250101120000", "20250101130000")],
            [("msprobe_ge_dump", "ge")],
        ),
        (
            [
                "ge/msprobe_ge_dump/20250101120000/0/graph_1_0/1/0/" + GE_FILE,
                "ge_fusion_off/msprobe_ge_dump/20250101120000/0/graph_1_0/1/0/" + GE_FILE,
            ],
            [("ge/msprobe_ge_dump", "ge"), ("ge_fusion_off/msprobe_ge_dump", "ge")],
        ),
        # the FX eras: ranked, data_dump/{step}/gm_*, gm_*/{step}
        ([f"fx/worldsize1_global_rank0/graph_1/{k}/{FX_FILE}" for k in (0, 1)], [("fx", "fx")]),
        ([f"fx/data_dump/{k}/gm_1764400000_dump/{FX_FILE}" for k in (1, 2)], [("fx", "fx")]),
        ([f"fx/gm_1764400000_dump/{k}/{FX_FILE}" for k in (1, 2)], [("fx", "fx")]),
        (
            ["ge/msprobe_ge_dump/20250101120000/0/graph_1_0/1/0/" + GE_FILE, f"fx/gm_1764400000_dump/1/{FX_FILE}"],
            [("fx", "fx"), ("ge/msprobe_ge_dump", "ge")],
        ),
    ],
)
def test_the_dumps_a_tree_holds_are_told_by_their_roots(tmp_path, files, roots):
    from tcmp.schemas.dump_outline import dump_roots, outline

    for name in files:
        _touch(tmp_path / name)
    found = [(str(r.path.relative_to(tmp_path)), r.side.value) for r in dump_roots(outline(tmp_path))]
    assert found == roots


def test_two_copies_of_a_graph_file_in_one_dump_are_told_apart_by_their_paths(cli, tmp_path):
    s = write_scenario(tmp_path / "s", ScenarioConfig(model=ModelConfig(layers=1), tokens=1))
    (graph,) = s.target.glob("dynamo_original_graph_*.txt")
    copy = s.target / "copy" / graph.name
    copy.parent.mkdir()
    shutil.copy(graph, copy)
    result = compare(cli, s.target, s.golden_fx, tmp_path / "out")
    assert result.exit_code == 0, result.output
    said = " ".join(result.stdout.split())
    assert "2 graph files for one graph" in said and str(graph) in said and str(copy) in said
