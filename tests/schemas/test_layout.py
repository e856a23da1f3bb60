"""Dump-tree discovery (docs/formats.md, "GE dump tree", "FX layout eras") on trees written by the synthetic
writer: every FX era, GE
with and without rank directories, several ranks and graphs, hashed long names, FFTS+ and capture-mode names,
graph files, and the problems a tree can hold. Expected locations come from the layout tables of
docs/formats.md applied to
the paths the writer reports, never from the code under test."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tcmp.schemas.dump_outline import discover, dump_names, outline
from tcmp.schemas.dump_records import IO, Side
from tcmp.schemas.dump_tree import DumpFile, FileKind, GraphFile, Unrecognized, classify_name, locate
from tcmp.schemas.ge_names import GeNameForm
from tcmp.schemas.graph_files import graph_files_in, other_graph_dumps
from tcmp.schemas.graph_names import GraphKind, GraphNameForm
from tcmp.schemas.synth.fx_writer import FxEra
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

TS = 1764400000000000
FX_TS = "20261129083000000017"
# docs/formats.md, "FX layout eras": the step directory of the first token, per era
FIRST_STEP_DIR = {
    FxEra.RANKED: 0,
    FxEra.MSPROBE_DATA_DUMP: 1,
    FxEra.CWD_DATA_DUMP: 1,
    FxEra.STEP_GM: 1,
    FxEra.GM_STEP: 1,
}


def sanitized(name: str) -> str:
    """docs/formats.md, "GE file names": space, `.`, `/` and `\\` become `_` in GE-path file names."""
    return "".join("_" if ch in " ./\\" else ch for ch in name)


def every_file(root: Path) -> set[Path]:
    """Every non-directory entry under root (symlinks included, symlinked directories not entered)."""
    found = set()
    for directory, dirs, files in os.walk(root):
        for name in dirs:
            if os.path.islink(os.path.join(directory, name)):
                found.add(Path(directory, name))
        found.update(Path(directory, name) for name in files)
    return found


def accounted(tree) -> set[Path]:
    return {f.path for f in tree.files} | {g.path for g in tree.graphs} | {p.path for p in tree.problems}


def assert_all_accounted(tree, root: Path) -> None:
    """Every file is a dump file, a graph file, a reported problem, or a mapping.csv (ignored by design)."""
    written = every_file(root)
    ignored = {p for p in written if p.name == "mapping.csv"}
    assert accounted(tree) | ignored == written
    assert not accounted(tree) & ignored
    assert_outline_agrees(root, tree)


def assert_outline_agrees(root: Path, tree, **options) -> None:
    """`discover` lists a tree directory by directory, as a compare does: each directory of the outline is placed
    (rank, token, model, run) as each of its files is, holds the kinds its files have, and binding reads from
    its names alone the ops its files hold."""
    shape = outline(root, **options)
    assert shape.graphs == tree.graphs
    by_directory: dict[tuple, list[DumpFile]] = {}
    for f in tree.files:
        by_directory.setdefault((f.path.parent, f.side), []).append(f)
    assert {(d.path, d.side) for d in shape.dirs} >= set(by_directory)
    for d in shape.dirs:
        files = by_directory.get((d.path, d.side), [])
        for f in files:
            assert (f.rank, f.token, f.model, f.run) == (d.rank, d.token, d.model, d.run)
            assert f.kind in d.kinds
        if not any(p.path.parent == d.path for p in tree.problems):
            assert sorted(dump_names(d.path, d.side)) == sorted((f.op_name, f.op_type) for f in files)


# ------------------------------------------------------------------------------------------------------------
# FX eras


@pytest.mark.parametrize("era", list(FxEra), ids=lambda e: e.value)
def test_fx_eras_give_zero_based_tokens(tmp_path, era):
    config = ScenarioConfig(fx_era=era, tokens=3, write_fusion_off=False)
    scenario = write_scenario(tmp_path, config)
    tree = discover(scenario.golden_fx)

    assert tree.problems == () and tree.graphs == ()
    assert {f.path for f in tree.files} == every_file(scenario.golden_fx)
    assert_outline_agrees(scenario.golden_fx, tree)
    assert all(f.side is Side.FX and f.kind is FileKind.FX_NPY for f in tree.files)
    assert sorted({f.token for f in tree.files}) == list(range(config.tokens))
    per_token = Counter(f.token for f in tree.files)
    assert len(set(per_token.values())) == 1  # every token dumps the same node calls
    for file in tree.files:
        relative = file.path.relative_to(scenario.golden_fx).parts
        step_dirs = [int(p) for p in relative[:-1] if p.isdigit()]
        gm_dirs = [p for p in relative[:-1] if p.startswith("gm_") and p.endswith("_dump")]
        assert len(step_dirs) == 1 and len(gm_dirs) == 1, relative
        assert file.token == step_dirs[0] - FIRST_STEP_DIR[era]
        assert file.model == file.run == gm_dirs[0]
        assert file.rank == (0 if era is FxEra.RANKED else None)
        assert file.timestamp is not None and len(str(file.timestamp)) == 20


def test_fx_files_carry_node_target_io_and_index(tmp_path):
    scenario = write_scenario(tmp_path, ScenarioConfig(tokens=1, write_fusion_off=False))
    tree = discover(scenario.golden_fx)
    cat_inputs = [f for f in tree.files if f.op_name == "cat_big" and f.io is IO.INPUT and f.index == 0]
    assert {f.op_type for f in cat_inputs} == {"aten.cat.default"}
    assert sorted(f.name.sub_index for f in cat_inputs) == list(range(12))  # INPUT.0.{0..11}
    mm_out = [f for f in tree.files if f.op_name == "mm_0" and f.io is IO.OUTPUT]
    assert [(f.op_type, f.index) for f in mm_out] == [("aten.mm.default", 0)]
    repeated = [f for f in tree.files if f.op_name == "mul_rep_0" and f.io is IO.OUTPUT]
    assert len({f.timestamp for f in repeated}) == 2  # executed twice per token: two calls, two timestamps


def test_fx_ranks_and_graph_modules(tmp_path):
    config = ScenarioConfig(ranks=2, graphs=(2, 10), tokens=2, write_fusion_off=False)
    scenario = write_scenario(tmp_path, config)
    tree = discover(scenario.golden_fx)
    assert tree.problems == () and set(tree.ranks) == {0, 1}
    for file in tree.files:
        rank_dir, gm_dir, step, _ = file.path.parts[-4:]
        assert (rank_dir, file.model, file.token) == (f"worldsize2_global_rank{file.rank}", gm_dir, int(step))
    modules = Counter((f.rank, f.model) for f in tree.files)
    assert len(modules) == 4 and len({m for _, m in modules}) == 4  # one GraphModule dir per rank and graph
    per_token = Counter((f.rank, f.model, f.token) for f in tree.files)
    assert all(per_token[(r, m, 0)] == per_token[(r, m, 1)] > 0 for r, m in modules)


def test_fx_token_base_override(tmp_path):
    scenario = write_scenario(tmp_path, ScenarioConfig(fx_era=FxEra.STEP_GM, tokens=2, write_fusion_off=False))
    assert {f.token for f in discover(scenario.golden_fx, fx_token_base=0).files} == {1, 2}
    assert_outline_agrees(scenario.golden_fx, discover(scenario.golden_fx, fx_token_base=0), fx_token_base=0)
    assert {f.token for f in discover(scenario.golden_fx).files} == {0, 1}


def test_fx_step_directory_below_the_token_base_is_a_problem(tmp_path):
    scenario = write_scenario(tmp_path, ScenarioConfig(fx_era=FxEra.GM_STEP, tokens=1, write_fusion_off=False))
    step = next(p for p in every_file(scenario.golden_fx)).parent
    zero = step.parent / "0"  # eras without rank directories count from 1
    zero.mkdir()
    stray = zero / f"mm_0-aten.mm.default.OUTPUT.0.{FX_TS}.npy"
    np.save(stray, np.zeros(3))
    tree = discover(scenario.golden_fx)
    assert [(p.path, "below the token base" in p.reason) for p in tree.problems] == [(stray, True)]
    assert_outline_agrees(scenario.golden_fx, tree)


# ------------------------------------------------------------------------------------------------------------
# GE trees


@pytest.mark.parametrize("rank_dirs", [True, False], ids=["worldsize_dirs", "no_rank_dirs"])
def test_ge_ranks_graphs_and_steps(tmp_path, rank_dirs):
    config = ScenarioConfig(ranks=2, tokens=2, graphs=(2, 10), ge_rank_dirs=rank_dirs, write_fx=False)
    scenario = write_scenario(tmp_path, config)
    for root, time_dir in ((scenario.target, "20261129083000"), (scenario.golden_ge, "20261129084500")):
        tree = discover(root)
        assert tree.problems == ()
        assert_all_accounted(tree, root)
        assert all(f.side is Side.GE and f.kind is FileKind.GE_BINARY for f in tree.files)
        for file in tree.files:
            # docs/formats.md, "GE dump tree":
            # …/[worldsize{W}_global_rank{R}/]{time}/{device}/{model}/{model_id}/{step}/file
            *_, time, device, model, model_id, step, _ = file.path.parts
            assert time == time_dir
            assert (file.run, file.device, file.model, file.model_id, file.token) == (
                time,
                int(device),
                model,
                int(model_id),
                int(step),
            )
            assert file.graph_number == int(model.split("_")[1])
            if rank_dirs:
                assert file.path.parts[-7] == f"worldsize2_global_rank{file.rank}"
            else:  # the layout before rank directories: one process per device (docs/formats.md, "GE dump tree")
                assert file.rank == int(device)
        assert {f.model for f in tree.files} == {"graph_2_0", "graph_10_0"}
        assert {f.graph_number for f in tree.files} == {2, 10}
        assert {f.token for f in tree.files} == {0, 1}
        assert {f.device for f in tree.files} == {0, 1}
        assert set(tree.ranks) == {0, 1}
        # graph files: per rank and graph, the original and the optimized one
        kinds = Counter((g.name.rank, g.name.number, g.name.kind) for g in tree.graphs)
        assert kinds == Counter({(r, n, k): 1 for r in (0, 1) for n in (2, 10) for k in GraphKind})


def test_ge_files_match_the_manifest(tmp_path):
    config = ScenarioConfig(ranks=2, tokens=2, graphs=(2, 10), write_fx=False, write_fusion_off=False)
    scenario = write_scenario(tmp_path, config)
    by_path = {f.path: f for f in discover(scenario.target).files}
    assert len(by_path) == sum(len(o.paths) for o in scenario.target_ops)
    for op in scenario.target_ops:
        (path,) = op.paths
        file = by_path[path]
        assert (file.rank, file.token, file.graph_number) == (op.rank, op.token, op.graph)
        assert (file.op_type, file.op_name) == (op.op_type, sanitized(op.op_name))
        assert file.name.form is GeNameForm.STANDARD and file.io is None and file.index is None
    # the repeated op: two files per step directory (2 ranks x 2 graphs), told apart by their timestamps
    repeated = [by_path[o.paths[0]] for o in scenario.target_ops if o.op_name == "Mul_rep_0" and o.token == 0]
    assert len(repeated) == 8 and len({(f.rank, f.graph_number, f.timestamp) for f in repeated}) == 8
    assert len({f.path.parent for f in repeated}) == 4


def test_hashed_long_names_and_ub_fusion_names(tmp_path):
    config = ScenarioConfig(model=ModelConfig(layers=4, long_names=(2, 3)), tokens=1, write_fx=False)
    scenario = write_scenario(tmp_path, config)
    tree = discover(scenario.target)
    assert tree.problems == ()
    assert_all_accounted(tree, scenario.target)
    by_path = {f.path: f for f in tree.files}
    fused = {o.op_name: o for o in scenario.target_ops if o.members}

    hashed = [o for o in fused.values() if o.paths[0].name.isdigit()]
    assert len(hashed) == 1
    (op,) = hashed
    file = by_path[op.paths[0]]
    rows = dict(line.split(",", 1) for line in (op.paths[0].parent / "mapping.csv").read_text().splitlines())
    original = rows[op.paths[0].name]  # docs/formats.md, "Hashed long names": `hash,original file name`
    op_type, *middle, task, stream, timestamp = original.split(".")
    assert (file.op_type, file.op_name, file.timestamp) == (op_type, ".".join(middle), int(timestamp))
    assert file.op_name == sanitized(op.op_name) and len(original.encode()) > 255
    assert file.name.hashed_as == op.paths[0].name
    assert (file.name.task_id, file.name.stream_id) == (int(task), int(stream))

    ub = [o for o in fused.values() if o.op_name.endswith("_ub_fusion")]
    assert len(ub) == 1
    (op,) = ub
    assert op.op_name == op.members[0] + "_ub_fusion" and len("".join(op.members)) > 512
    file = by_path[op.paths[0]]
    assert file.op_name == sanitized(op.members[0]) + "_ub_fusion" and file.name.hashed_as is None


def test_ffts_slice_files(tmp_path):
    config = ScenarioConfig(tokens=1, write_fx=False, write_fusion_off=False, ffts_ops=("MatMul_0", "Cast_1_0"))
    scenario = write_scenario(tmp_path, config)
    tree = discover(scenario.target)
    assert tree.problems == ()
    assert_outline_agrees(scenario.target, tree)
    by_path = {f.path: f for f in tree.files}
    sliced = [o for o in scenario.target_ops if len(o.paths) > 1]
    assert sorted(o.op_name for o in sliced) == ["Cast_1_0", "MatMul_0"]
    for op in sliced:
        files = [by_path[p] for p in op.paths]
        # docs/formats.md, "FFTS+ slice files": {type}.{name}.{task}.{stream}.{ts}.4.{context}.{thread}.{device}
        for path, file in zip(op.paths, files):
            fields = path.name.split(".")
            assert len(fields) == 9 and fields[5] == "4"
            assert (file.name.ffts.context_id, file.name.ffts.thread_id, file.name.ffts.device_id) == tuple(
                map(int, fields[6:])
            )
            assert (file.op_type, file.op_name, file.token) == (op.op_type, op.op_name, 0)
        assert sorted(f.name.ffts.thread_id for f in files) == [0, 1]
    assert all(by_path[p].name.ffts is None for o in scenario.target_ops if len(o.paths) == 1 for p in o.paths)


def test_capture_mode_names(tmp_path):
    config = ScenarioConfig(model=ModelConfig(layers=1), tokens=1, write_fx=False, capture_names=True)
    scenario = write_scenario(tmp_path, config)
    tree = discover(scenario.target)
    assert tree.problems == ()
    by_path = {f.path: f for f in tree.files}
    assert len(by_path) == len(scenario.target_ops)
    for op in scenario.target_ops:
        file = by_path[op.paths[0]]
        # docs/formats.md, "GE file names":
        # {OpType}.{OpName}.{dumpNumber}.{task}.{stream}.{timestamp}, names not sanitized
        assert file.name.form is GeNameForm.CAPTURE
        assert (file.op_type, file.op_name, file.name.dump_number) == (op.op_type, op.op_name, op.execution)
        assert file.token == 0 and file.model == "graph_1_0"
    # the capture writer keeps dots in op names; the name still parses from its tail
    source = scenario.target_ops[0].paths[0]
    dotted = source.parent / f"Add.model.layers.0.add.3.44.2.{TS}"
    shutil.copyfile(source, dotted)
    file = discover(scenario.target).files
    (found,) = [f for f in file if f.path == dotted]
    assert (found.op_type, found.op_name, found.name.dump_number, found.name.task_id) == (
        "Add",
        "model.layers.0.add",
        3,
        44,
    )


def test_capture_mode_scoped_names_stay_in_the_step_directory(tmp_path):
    config = ScenarioConfig(tokens=1, write_fx=False, write_fusion_off=False, capture_names=True)
    scenario = write_scenario(tmp_path, config)
    step_dirs = {p.parent for o in scenario.target_ops for p in o.paths}
    assert len(step_dirs) == 1  # layer 1's `layers.1/…` names must not create sub-directories
    dotted = [p.name for o in scenario.target_ops for p in o.paths if o.op_name.startswith("layers.1/")]
    assert dotted and all(".layers.1_" in name for name in dotted)  # dots kept, the separator replaced


@pytest.mark.parametrize(
    ("form", "kinds"),
    [
        (GraphNameForm.NUMBERED, [GraphKind.OPTIMIZED, GraphKind.ORIGINAL]),
        (GraphNameForm.KIND, [GraphKind.OPTIMIZED, GraphKind.ORIGINAL]),
        (GraphNameForm.DYNAMO, [GraphKind.ORIGINAL]),  # before 2024-01 only the converted graph was dumped
    ],
)
def test_graph_files_in_every_naming_form_torchair_used(tmp_path, form, kinds):
    config = ScenarioConfig(tokens=1, write_fx=False, write_fusion_off=False, graph_name_form=form)
    scenario = write_scenario(tmp_path, config)
    graphs = discover(scenario.target).graphs
    assert sorted(g.name.kind for g in graphs) == kinds
    assert all(g.name.form is form and g.name.timestamp is not None for g in graphs)
    if form is GraphNameForm.NUMBERED:
        assert all(g.name.rank == 0 and g.name.number == 1 and g.name.pid is not None for g in graphs)
    else:
        assert all(g.name.rank is None and g.name.number is None and g.name.pid is None for g in graphs)


def test_graph_files_in_a_file_or_a_directory(tmp_path):
    scenario = write_scenario(tmp_path, ScenarioConfig(tokens=1, write_fx=False, write_fusion_off=False))
    (original,) = [g for g in discover(scenario.target).graphs if g.name.kind is GraphKind.ORIGINAL]
    renamed = tmp_path / "elsewhere" / "ge_proto_00000001_graph.txt"
    renamed.parent.mkdir()
    shutil.copyfile(original.path, renamed)
    (given,) = graph_files_in(renamed)  # a file named on the command line is read whatever its name
    assert (given.path, given.name.kind, given.name.form) == (renamed, GraphKind.ORIGINAL, GraphNameForm.GIVEN)
    assert graph_files_in(renamed.parent) == ()  # in a directory only torchair's names count
    assert len(graph_files_in(scenario.root)) == 2 and graph_files_in(scenario.root, top_level_only=True) == ()
    (renamed.parent / "dynamo_original_graph_20240101120000123456.pbtxt").write_text("")
    assert other_graph_dumps(renamed.parent) == (renamed.parent / "dynamo_original_graph_20240101120000123456.pbtxt",)


# ------------------------------------------------------------------------------------------------------------
# Problems: reported, never dropped


@pytest.fixture
def damaged_tree(tmp_path):
    """A scenario root (target GE + ranked FX) with one instance of every problem, and what was planted."""
    scenario = write_scenario(tmp_path / "dump", ScenarioConfig(tokens=1, write_fusion_off=False))
    clean_dump_files = len(every_file(scenario.root)) - len(list(scenario.root.rglob("dynamo_*_graph_*.txt")))
    ge_step = scenario.target_ops[0].paths[0].parent
    ge_file = scenario.target_ops[0].paths[0]
    fx_file = next(p for p in every_file(scenario.golden_fx))
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    shutil.copyfile(ge_file, outside / "Add.Add_9.1.2.1764400000000999")
    (outside / "gm_x_dump").mkdir()
    shutil.copyfile(fx_file, outside / "gm_x_dump" / fx_file.name)

    planted: dict[str, Path] = {}
    planted["bad_ge_name"] = ge_step / "Add.Add_1.x.y"
    planted["bad_fx_name"] = fx_file.parent / "garbage.npy"
    planted["hash_without_mapping"] = ge_step / "1234567890123"
    other_step = ge_step.parent / "7"
    other_step.mkdir()
    (other_step / "mapping.csv").write_text(f"99,Add.Add_1.1.2.{TS}\n")
    planted["hash_without_row"] = other_step / "1234567890123"
    planted["fx_outside_step"] = fx_file.parent.parent.parent / fx_file.name  # in worldsize1_global_rank0/
    planted["link_outside"] = ge_step / "Add.Add_9.1.2.1764400000000999"
    planted["linked_dir"] = ge_step.parent / "8"
    planted["linked_dir_outside"] = fx_file.parent.parent.parent / "gm_x_dump"
    for name in ("bad_ge_name", "hash_without_mapping", "hash_without_row"):
        shutil.copyfile(ge_file, planted[name])
    for name in ("bad_fx_name", "fx_outside_step"):
        shutil.copyfile(fx_file, planted[name])
    planted["link_outside"].symlink_to(outside / "Add.Add_9.1.2.1764400000000999")
    planted["linked_dir"].symlink_to(ge_step, target_is_directory=True)
    planted["linked_dir_outside"].symlink_to(outside / "gm_x_dump", target_is_directory=True)
    link_inside = ge_step / "Add.Add_8.1.2.1764400000000998"
    link_inside.symlink_to(ge_file)
    planted["fifo"] = ge_step / "Add.Add_7.1.2.1764400000000997"
    os.mkfifo(planted["fifo"])  # reading it would wait for a writer forever
    planted["broken_link"] = ge_step / "Add.Add_6.1.2.1764400000000996"
    planted["broken_link"].symlink_to(ge_step / "gone")
    return scenario, planted, link_inside, clean_dump_files


PROBLEM_REASONS = {
    "bad_ge_name": "is not a GE dump file name",
    "bad_fx_name": "not an FX dump file name",
    "hash_without_mapping": "no mapping.csv beside it",
    "hash_without_row": "has no row for 1234567890123",
    "fx_outside_step": "outside a step directory",
    "link_outside": "outside the dump tree",
    "linked_dir": "symlinked directory",
    "linked_dir_outside": "symlinked directory",
    "fifo": "not a regular file",
    "broken_link": "not a regular file",
}


def test_problems_are_reported_with_their_reason(damaged_tree):
    scenario, planted, link_inside, clean_dump_files = damaged_tree
    tree = discover(scenario.root)
    reasons = {p.path: p.reason for p in tree.problems}
    assert set(reasons) == set(planted.values())
    for key, path in planted.items():
        assert PROBLEM_REASONS[key] in reasons[path], (key, reasons[path])
    # a symlink inside the tree to a file inside it is an ordinary dump file, found under the link's name
    (linked,) = [f for f in tree.files if f.path == link_inside]
    assert (linked.op_type, linked.op_name, linked.token, linked.timestamp) == ("Add", "Add_8", 0, 1764400000000998)
    # the symlinked directories are not entered: nothing below them is listed
    assert not [p for p in accounted(tree) if planted["linked_dir"] in p.parents]
    assert not [p for p in accounted(tree) if planted["linked_dir_outside"] in p.parents]
    assert_all_accounted(tree, scenario.root)
    assert len(tree.files) == clean_dump_files + 1  # what the writer wrote, and the link inside the tree


def test_ignored_files_and_index_directory(tmp_path):
    scenario = write_scenario(tmp_path, ScenarioConfig(tokens=1, write_fx=False, write_fusion_off=False))
    step = scenario.target_ops[0].paths[0].parent
    for name in ("acl.json", "notes.txt", "fusion_switch.cfg", ".hidden", "results.csv", "x.swp"):
        (step / name).write_text("x")
    index = scenario.target / ".tcmp"
    index.mkdir()
    shutil.copyfile(scenario.target_ops[0].paths[0], index / scenario.target_ops[0].paths[0].name)
    tree = discover(scenario.target)
    assert tree.problems == ()
    assert {f.path for f in tree.files} == {p for o in scenario.target_ops for p in o.paths}


def test_summary_files_in_a_tree(tmp_path):
    scenario = write_scenario(tmp_path, ScenarioConfig(tokens=1, write_fx=False, write_fusion_off=False))
    ge_file = scenario.target_ops[0].paths[0]
    stats = ge_file.parent / (ge_file.name + ".csv")
    npz = ge_file.parent / (ge_file.name + "_min_max.npz")
    stats.write_text("Input/Output,Index,Max Value,Min Value\n")
    np.savez(npz, inputs=np.zeros((0,)), outputs=np.zeros((1, 2)))
    fx_dir = tmp_path / "fx" / "worldsize1_global_rank0" / "gm_1_dump" / "0"
    fx_dir.mkdir(parents=True)
    np.save(fx_dir / f"mm_0-aten.mm.default.OUTPUT.0.{FX_TS}_min_max.npy", np.array([0.0, 1.0]))
    tree = discover(scenario.target)
    assert_outline_agrees(scenario.target, tree)
    kinds = {f.path: f.kind for f in tree.files}
    assert (kinds[ge_file], kinds[stats], kinds[npz]) == (
        FileKind.GE_BINARY,
        FileKind.GE_STATS_CSV,
        FileKind.GE_MIN_MAX_NPZ,
    )
    (fx,) = discover(tmp_path / "fx").files
    assert (fx.kind, fx.token, fx.rank, fx.op_name, fx.name.min_max) == (FileKind.FX_MIN_MAX_NPY, 0, 0, "mm_0", True)
    by_path = {f.path: f for f in discover(scenario.target).files}
    assert by_path[stats].op_name == by_path[npz].op_name == by_path[ge_file].op_name


# ------------------------------------------------------------------------------------------------------------
# classify_name / locate on single files


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        (f"Add.Add_1.1.2.{TS}", FileKind.GE_BINARY),
        (f"Add.Add_1.1.2.{TS}.4.3.1.0", FileKind.GE_BINARY),
        (f"Add.Add_1.1.2.{TS}.csv", FileKind.GE_STATS_CSV),
        (f"Add.Add_1.1.2.{TS}_min_max.npz", FileKind.GE_MIN_MAX_NPZ),
        ("1234567890", FileKind.GE_BINARY),
        ("1234567890.csv", FileKind.GE_STATS_CSV),
        (f"mm_0-aten.mm.default.OUTPUT.0.{FX_TS}.npy", FileKind.FX_NPY),
        (f"mm_0-aten.mm.default.OUTPUT.0.{FX_TS}_min_max.npy", FileKind.FX_MIN_MAX_NPY),
        ("dynamo_original_graph_1_rank_0_pid_42_ts_20261129083000000000.txt", FileKind.GRAPH),
        ("dynamo_optimized_graph_20240101120000123456.txt", FileKind.GRAPH),
        ("dynamo_20231101120000123456.txt", FileKind.GRAPH),
        ("dynamo_optimized_graph_3_20240101120000123456.txt", None),  # a form torchair never wrote
        ("mapping.csv", None),
        ("results.csv", None),
        ("acl.json", None),
        ("graph.pbtxt", None),
        (".Add.Add_1.1.2.swp", None),
        ("report.xlsx", None),
        ("README", None),
    ],
)
def test_classify_name(name, kind):
    assert classify_name(name) is kind


def test_locate_single_files(tmp_path):
    scenario = write_scenario(tmp_path, ScenarioConfig(tokens=1, write_fusion_off=False))
    op = scenario.target_ops[0]
    found = locate(op.paths[0])
    assert isinstance(found, DumpFile)
    assert (found.token, found.rank, found.model, found.run, found.op_name) == (
        0,
        0,
        "graph_1_0",
        "20261129083000",
        sanitized(op.op_name),
    )
    assert found == next(f for f in discover(scenario.target).files if f.path == op.paths[0])
    graph = next(scenario.target.glob("dynamo_original_graph_*.txt"))
    assert isinstance(locate(graph), GraphFile)
    assert locate(op.paths[0].parent / "mapping.csv") is None
    bad = locate(tmp_path / "1234567890")  # a hashed name with no mapping.csv beside it
    assert isinstance(bad, Unrecognized) and "mapping.csv" in bad.reason
    fx = next(p for p in every_file(scenario.golden_fx))
    assert isinstance(locate(fx), DumpFile) and locate(fx).token == 0
    assert locate(fx, fx_token_base=1) == Unrecognized(fx, "FX step directory 0 is below the token base 1")
