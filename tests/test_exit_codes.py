"""The README's exit-code table, row by row (issue 18, item 16), and a stdout closed by its reader, which is not
"failures found". The watch and status rows are tested in tests/daemon/test_cli.py."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tcmp.schemas.synth.faults import Fault, FaultKind
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    faults = (Fault("MatMul_0", FaultKind.REL_ERROR, magnitude=0.05),)  # rows that FAIL
    config = ScenarioConfig(model=ModelConfig(layers=1), tokens=1, faults=faults)
    return write_scenario(tmp_path_factory.mktemp("codes"), config)


@pytest.fixture
def copy(scenario, tmp_path):
    """A copy of the scenario to damage: (target, golden FX)."""
    root = tmp_path / "copy"
    shutil.copytree(scenario.root, root)
    return root / scenario.target.relative_to(scenario.root), root / scenario.golden_fx.relative_to(scenario.root)


def compare(cli, target, golden, out, *extra):
    return cli("compare", "-tp", target, "-gp", golden, "-o", out, "--jobs", "1", *extra)


def test_0_the_compare_ran_even_with_failing_rows(cli, scenario, tmp_path):
    result = compare(cli, scenario.target, scenario.golden_fx, tmp_path)
    assert result.exit_code == 0, result.output
    assert ", 1 FAIL" in result.stdout  # found, reported, and not a failure of the command without --fail-on-diff


def test_1_failing_rows_with_fail_on_diff(cli, scenario, tmp_path):
    assert compare(cli, scenario.target, scenario.golden_fx, tmp_path, "--fail-on-diff").exit_code == 1


def _cut_short(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])


def test_1_a_target_file_cut_short(cli, copy, tmp_path):
    target, golden = copy
    _cut_short(next(target.rglob("Gelu.Gelu_0.*")))
    result = compare(cli, target, golden, tmp_path)
    assert result.exit_code == 1, result.output
    assert "1 unreadable" in result.stdout and "error" not in result.stderr


def test_1_a_golden_file_cut_short(cli, copy, tmp_path):
    """A golden FX file that does not parse makes its row "not compared", not an unmatched item: the same code."""
    target, golden = copy
    _cut_short(next(golden.rglob("gelu_0-aten.gelu.default.OUTPUT.0.*.npy")))
    result = compare(cli, target, golden, tmp_path)
    assert result.exit_code == 1, result.output
    assert "not compared (" in result.stdout and "for a file that could not be read" in result.stdout


def test_1_parse_of_a_file_that_does_not_parse(cli, scenario, tmp_path):
    bad = tmp_path / "Add.Add_1.1.2.1764400000000000"
    bad.write_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00garbage")
    assert cli("parse", bad, "--info").exit_code == 1


def test_2_no_ge_dump_files_the_same_in_compare_and_parse(cli, scenario, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not a dump")
    compared = compare(cli, empty, scenario.golden_fx, tmp_path / "out")
    parsed = cli("parse", empty, "--info")
    assert compared.exit_code == parsed.exit_code == 2
    assert "no GE dump files under" in compared.stderr and "no GE dump files under" in parsed.stderr


@pytest.mark.parametrize(
    "extra, message",
    [
        (("--cosine", "1.5"), "--cosine"),
        (("--cosine", "-2"), "--cosine"),
        (("--max-rel-err", "0"), "--max-rel-err"),
        (("--max-rel-err", "-0.1"), "--max-rel-err"),
        (("--stats-rel-err", "-1"), "--stats-rel-err"),
        (("--rank", "-1"), "--rank"),
        (("--rank", "3"), "--rank 3: rank 3 is not in the target dump (it holds rank 0)"),
        (("--db", "nope.sqlite"), "--db nope.sqlite: no such index file"),
        (("--data-mode", "bogus"), "--data-mode"),
        (("--mode", "msprobe"), "--mode"),
    ],
)
def test_2_impossible_values(cli, scenario, tmp_path, extra, message):
    result = compare(cli, scenario.target, scenario.golden_fx, tmp_path, *extra)
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.stderr.split())
    assert not list(tmp_path.glob("tcmp_compare_*"))


def test_2_paths_that_are_not_what_they_must_be(cli, scenario, tmp_path):
    assert compare(cli, tmp_path / "missing", scenario.golden_fx, tmp_path).exit_code == 2
    assert compare(cli, scenario.golden_fx, scenario.target, tmp_path).exit_code == 2  # swapped
    assert compare(cli, scenario.target, scenario.target, tmp_path).exit_code == 2  # the same dump twice
    assert compare(cli, scenario.target, scenario.root, tmp_path).exit_code == 2  # one inside the other
    step = next(scenario.target.glob("worldsize*/*/*/graph_1_0/*/0"))
    assert compare(cli, step, scenario.golden_fx, tmp_path).exit_code == 2  # one level (or more) too deep


def test_3_the_compare_cannot_run(cli, copy, tmp_path):
    target, golden = copy
    time_dir = next(target.glob("worldsize*/[0-9]*"))
    shutil.copytree(time_dir, time_dir.with_name("20261129120000"))  # a second run in the same tree
    result = compare(cli, target, golden, tmp_path)
    assert result.exit_code == 3 and "2 runs" in result.stderr and "Traceback" not in result.stderr


def test_3_an_index_given_that_cannot_be_read(cli, scenario, tmp_path):
    damaged = tmp_path / "index.sqlite"
    damaged.write_bytes(b"not a database, whatever its name says" * 100)
    result = compare(cli, scenario.target, scenario.golden_fx, tmp_path / "out", "--db", damaged)
    assert result.exit_code == 3 and f"--db {damaged}: index unusable" in result.stderr  # not a note, then raw files


def test_3_a_damaged_index_holding_the_only_record_of_deleted_files(copy, tmp_path):
    """Issue 23, item 6: `tcmp watch --drop-raw` deleted the raw files, then its index was garbled: one line and 3
    from a real `tcmp compare` (it said 2, "no GE dump files", as if the path were wrong)."""
    target, golden = copy
    root = tmp_path / "copy"  # both dumps, one index
    tcmp = [sys.executable, "-m", "tcmp"]
    watched = subprocess.run([*tcmp, "watch", root, "--once", "--drop-raw", "--workers", "1"], capture_output=True,
                             text=True, timeout=300, cwd=tmp_path)  # fmt: skip
    assert watched.returncode == 0, watched.stderr
    index = root / ".tcmp" / "index.sqlite"
    index.write_bytes(b"garbage garbage!" + index.read_bytes()[16:])
    result = subprocess.run([*tcmp, "compare", "-tp", target, "-gp", golden, "-o", tmp_path / "out", "--jobs", "1"],
                            capture_output=True, text=True, timeout=300, cwd=tmp_path)  # fmt: skip
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 3 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith("error: ") and f"index {index} unusable" in lines[0] and "not a database" in lines[0]


def _closed_stdout(*args: object) -> subprocess.CompletedProcess:
    """`tcmp … | head -0`: the reader has closed the pipe before the command prints."""
    process = subprocess.Popen([sys.executable, "-m", "tcmp", *map(str, args)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)  # fmt: skip
    process.stdout.close()
    stderr = process.stderr.read()
    return subprocess.CompletedProcess(process.args, process.wait(timeout=300), "", stderr)


def test_a_closed_stdout_is_not_failures_found(scenario, tmp_path):
    args = ["compare", "-tp", scenario.target, "-gp", scenario.golden_fx, "--jobs", "1"]
    done = _closed_stdout(*args, "-o", tmp_path / "a")
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "" and list((tmp_path / "a").glob("*_summary.json"))  # reports written
    failing = _closed_stdout(*args, "-o", tmp_path / "b", "--fail-on-diff")
    assert failing.returncode == 1, failing.stderr  # the compare's own code, as with an open stdout
