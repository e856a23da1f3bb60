"""The compare of ops with tensors the writer did not dump (device address 0: CANN's AICPU `OpDumpTask` skips them,
keeping their sizes in the header): every other tensor of the op is compared as usual, the undumped one is listed
in the unmatched report by design, never as a FAIL or N/A row — from raw files and from `tcmp watch`'s index after
`--drop-raw` deleted them."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest

from tcmp.compare.execute.run import run_compare
from tcmp.compare.judge.verdict import Result
from tcmp.compare.records import Role, UnmatchedKind
from tcmp.compare.report.outcome import CompareOptions
from tcmp.daemon.retention import RetentionPolicy
from tcmp.daemon.service import WatchConfig, run_watch
from tcmp.schemas.dump_records import IO
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, Undumped, write_scenario

NOT_DUMPED = "not dumped: device address 0"
# MatMul_0's weight (input 1) and the graph's last output (Add_1_0 output 0) not dumped in the target
UNDUMPED = (Undumped("MatMul_0", IO.INPUT, 1), Undumped("Add_1_0", IO.OUTPUT, 0))
SKIPPED = {("MatMul_0", "input", 1), ("Add_1_0", "output", 0)}


def rows_of(rank) -> dict[tuple[str, str, int], object]:
    return {(r.pair.op_name, r.pair.io.value, r.pair.index): r for r in rank.rows}


def by_design_not_dumped(rank) -> set[tuple[str, str, int]]:
    return {
        (u.op_name, u.io.value, u.index)
        for u in rank.unmatched
        if u.role is Role.TARGET and u.kind is UnmatchedKind.BY_DESIGN and u.reason == NOT_DUMPED
    }


def watch_once(root: Path) -> None:
    config = WatchConfig(roots=(root,), retention=RetentionPolicy(True, 0, ()), workers=1, once=True)
    report = run_watch(config)
    assert report.error is None and report.summarized > 0


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    """The same model dumped twice: with every tensor, and with the two tensors of UNDUMPED skipped."""
    model = ModelConfig(layers=1)
    full = write_scenario(tmp_path_factory.mktemp("full"), ScenarioConfig(model=model, tokens=1))
    skipped = write_scenario(tmp_path_factory.mktemp("skip"), ScenarioConfig(model=model, tokens=1, undumped=UNDUMPED))
    return full, skipped


def _check(rank, baseline, *, from_index: bool) -> None:
    rows, expected = rows_of(rank), rows_of(baseline)
    assert set(expected) >= SKIPPED  # with every tensor dumped they are compared
    assert set(rows) == set(expected) - SKIPPED  # the rest of each op is compared, nothing else is lost
    assert {r.result for r in rows.values()} == {Result.PASS}  # no fault: no FAIL, and no N/A row for the skipped
    assert all(r.from_index is from_index for r in rows.values())
    for key in (("MatMul_0", "input", 0), ("MatMul_0", "output", 0), ("Add_1_0", "input", 0), ("Add_1_0", "input", 1)):
        assert key in rows
    assert by_design_not_dumped(rank) == SKIPPED
    # the golden FX tensors only the skipped target tensors pair with (the output's FX output, the weight's FX input
    # copy): listed too, by design, with the reason
    golden = [u for u in rank.unmatched if u.role is Role.GOLDEN and "was not dumped" in u.reason]
    assert sorted((u.kind, u.reason) for u in golden) == [
        (UnmatchedKind.BY_DESIGN, f"its target tensor Add_1_0 output 0 was {NOT_DUMPED}"),
        (UnmatchedKind.BY_DESIGN, f"its target tensor MatMul_0 input 1 was {NOT_DUMPED}"),
    ]
    names = sorted(Path(u.path).name for u in golden)
    assert (
        "add" in names[0].lower()
        and ".OUTPUT.0." in names[0]
        and names[1].startswith("mm_0-")
        and ".INPUT.1." in names[1]
    )
    # nothing else changed: the same unmatched items as with every tensor dumped, apart from these
    others = {(u.role, u.op_name, u.reason) for u in rank.unmatched if u.reason != NOT_DUMPED and u not in golden}
    assert others == {(u.role, u.op_name, u.reason) for u in baseline.unmatched}


def test_raw_tensors_not_dumped_are_listed_by_design_and_the_rest_compared(dumps, tmp_path):
    full, skipped = dumps
    baseline, _ = run_compare(CompareOptions(full.target, full.golden_fx), keep_rows=True)
    result, _ = run_compare(CompareOptions(skipped.target, skipped.golden_fx), tmp_path, keep_rows=True)
    assert result.mode is baseline.mode and result.mode.value == "tensor"
    _check(result.ranks[0], baseline.ranks[0], from_index=False)
    for key, row in rows_of(result.ranks[0]).items():  # the same numbers as with every tensor dumped
        assert row.tensor == rows_of(baseline.ranks[0])[key].tensor
    unmatched = list(csv.DictReader(next(tmp_path.glob("*_unmatched.csv")).open(encoding="utf-8")))
    listed = {(u["Op Name"], u["IO"], u["Index"], u["Kind"]) for u in unmatched if u["Reason"] == NOT_DUMPED}
    assert listed == {("MatMul_0", "input", "1", "by design"), ("Add_1_0", "output", "0", "by design")}
    table = next(p for p in tmp_path.glob("tcmp_compare_*.csv") if "unmatched" not in p.name).read_text("utf-8")
    assert "MatMul_0.input.1" not in table and "Add_1_0.output.0" not in table


def test_tensors_not_dumped_from_the_index_after_drop_raw(tmp_path):
    config = ScenarioConfig(model=ModelConfig(layers=1), tokens=1)
    full = write_scenario(tmp_path / "full", config)
    skipped = write_scenario(tmp_path / "skip", replace(config, undumped=UNDUMPED))
    files = [p for o in skipped.target_ops if o.undumped for p in o.paths]
    assert len(files) == 2
    for scenario in (full, skipped):
        watch_once(scenario.root)
    assert not any(p.exists() for p in files)  # summarized and deleted like any other
    baseline, _ = run_compare(CompareOptions(full.target, full.golden_fx), keep_rows=True)
    result, _ = run_compare(CompareOptions(skipped.target, skipped.golden_fx), keep_rows=True)
    assert result.mode.value == baseline.mode.value == "statistics"
    _check(result.ranks[0], baseline.ranks[0], from_index=True)
    for key, row in rows_of(result.ranks[0]).items():
        assert row.statistics == rows_of(baseline.ranks[0])[key].statistics


def test_fusion_off_golden_with_tensors_not_dumped(tmp_path):
    """Against a fusion-off GE dump: the op's skipped input in both dumps is the target's by design; a golden tensor
    alone not dumped leaves its target tensor without anything to compare with, also by design."""
    undumped = (
        Undumped("MatMul_0", IO.INPUT, 1, golden=True),
        Undumped("Cast_0", IO.OUTPUT, 0, target=False, golden=True),
    )
    scenario = write_scenario(tmp_path, ScenarioConfig(model=ModelConfig(layers=1), tokens=1, undumped=undumped))
    result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_ge), keep_rows=True)
    rank = result.ranks[0]
    rows = rows_of(rank)
    assert ("MatMul_0", "input", 1) not in rows and ("Cast_0", "output", 0) not in rows
    assert {("MatMul_0", "input", 0), ("MatMul_0", "output", 0), ("Cast_0", "input", 0)} <= set(rows)
    assert {r.result for r in rows.values()} == {Result.PASS}
    target = {(u.op_name, u.io.value if u.io else None, u.index): u for u in rank.unmatched if u.role is Role.TARGET}
    assert target[("MatMul_0", "input", 1)].reason == NOT_DUMPED
    cast = target[("Cast_0", "output", 0)]
    assert cast.kind is UnmatchedKind.BY_DESIGN and cast.reason.startswith("golden Cast.Cast_0.")
    assert cast.reason.endswith(f" output 0: {NOT_DUMPED}")
    assert all(u.kind is UnmatchedKind.BY_DESIGN for u in target.values() if NOT_DUMPED in u.reason)


def test_ffts_slices_with_a_tensor_not_dumped(tmp_path):
    """FFTS+ slice files are merged for every tensor but the one not dumped in them."""
    config = ScenarioConfig(
        model=ModelConfig(layers=1), tokens=1, ffts_ops=("MatMul_0",), undumped=(Undumped("MatMul_0", IO.INPUT, 1),)
    )
    scenario = write_scenario(tmp_path, config)
    [op] = [o for o in scenario.target_ops if o.op_name == "MatMul_0"]
    assert len(op.paths) == 2 and op.undumped == ((IO.INPUT, 1),)
    result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx), keep_rows=True)
    rank = result.ranks[0]
    rows = {k: r for k, r in rows_of(rank).items() if k[0] == "MatMul_0"}
    assert set(rows) == {("MatMul_0", "input", 0), ("MatMul_0", "output", 0)}
    assert {r.result for r in rows.values()} == {Result.PASS}
    assert by_design_not_dumped(rank) == {("MatMul_0", "input", 1)}
