"""A GE task run again in a token (issue 22, item 4): one stray execution of an op — another task id, an earlier
timestamp, tensors of another shape — against goldens that ran it once. The stray run has no partner: it is listed
with all its tensors, inputs included, and both counts; the real run and every other op compare as if it were not
there; and a clean dump keeps a clean verdict and no first divergence."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from fx_dumps import _spec, by_design, data, op, out, values

from tcmp.compare.execute.run import run_compare
from tcmp.compare.judge.verdict import Result
from tcmp.compare.records import Role, UnmatchedKind
from tcmp.compare.report.outcome import CompareOptions, DataMode
from tcmp.daemon.retention import RetentionPolicy
from tcmp.daemon.service import WatchConfig, run_watch
from tcmp.schemas.dump_records import IO
from tcmp.schemas.ge_dump import read_ge_dump
from tcmp.schemas.synth.faults import Fault, FaultKind
from tcmp.schemas.synth.ge_writer import write_ge_dump
from tcmp.schemas.synth.graph_writer import graph_file_name, write_graph
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

RERUN = "MatMul_0"  # its input 0 comes from the fused RMS norm (Mul_1_0 is not dumped under its own name)
MUL = "mul-aten.mul.Tensor"


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    """The same clean dump (one token) written twice, the second time with MatMul_0's task run again."""
    config = ScenarioConfig(model=ModelConfig(layers=2), tokens=1)
    plain = write_scenario(tmp_path_factory.mktemp("plain"), config)
    rerun = write_scenario(tmp_path_factory.mktemp("rerun"), ScenarioConfig(model=config.model, tokens=1,
                                                                             reruns=(RERUN,)))  # fmt: skip
    return plain, rerun


def _golden(scenario, kind: str):
    return scenario.golden_fx if kind == "fx" else scenario.golden_ge


def test_the_writer_puts_the_stray_run_just_before_the_real_one(trees):
    plain, rerun = trees
    runs = [o for o in rerun.target_ops if o.op_name == RERUN]
    assert [(o.execution, o.rerun) for o in runs] == [(0, True), (1, False)]
    stray, real = (read_ge_dump(o.paths[0]) for o in runs)
    assert stray.dump_time < real.dump_time
    assert runs[0].paths[0].name.split(".")[2] != runs[1].paths[0].name.split(".")[2]  # another task id
    assert stray.outputs[0].nd_shape != real.outputs[0].nd_shape
    others = [o for o in rerun.target_ops if not o.rerun]
    assert len(others) == len(plain.target_ops)  # nothing else written differently


@pytest.mark.parametrize("kind", ["fx", "ge"])
def test_a_stray_run_is_listed_whole_and_nothing_else_changes(trees, kind):
    plain, rerun = trees
    before, _ = run_compare(CompareOptions(plain.target, _golden(plain, kind)), keep_rows=True)
    after, _ = run_compare(CompareOptions(rerun.target, _golden(rerun, kind)), keep_rows=True)
    base, rank = before.ranks[0], after.ranks[0]
    assert not [r.pair.api_name for r in rank.rows if r.result is not Result.PASS]
    # the stray run (execution 0): no row; each of its tensors listed, with both counts
    assert not [r for r in rank.rows if r.pair.op_name == RERUN and r.pair.execution == 0]
    stray = read_ge_dump(next(o for o in rerun.target_ops if o.rerun).paths[0])
    listed = [u for u in rank.unmatched if u.role is Role.TARGET and u.op_name == RERUN]
    want = {(IO.INPUT, k) for k in range(len(stray.inputs))} | {(IO.OUTPUT, j) for j in range(len(stray.outputs))}
    assert {(u.io, u.index) for u in listed} == want and len(listed) == len(want)
    for u in listed:
        assert u.kind is UnmatchedKind.NO_PARTNER and "ran 2 time(s)" in u.reason and " 1" in u.reason, u.reason
        assert "execution 0" in u.reason
    # the real run (execution 1) is compared as the only run was, tensor for tensor, with the same goldens
    real = {(r.pair.io, r.pair.index): r for r in rank.rows if r.pair.op_name == RERUN}
    only = {(r.pair.io, r.pair.index): r for r in base.rows if r.pair.op_name == RERUN}
    assert set(real) == set(only) == want
    assert {r.pair.execution for r in real.values()} == {1}
    for key, row in real.items():
        assert row.pair.bench.label == only[key].pair.bench.label and row.result is Result.PASS

    # every other op: the same rows and the same verdicts; no input dropped because of the stray run
    def others(rows):
        return Counter((r.pair.op_name, r.pair.io, r.pair.index, r.result) for r in rows if r.pair.op_name != RERUN)

    def other_unmatched(items):
        return Counter((u.role, u.op_name, u.io, u.index, u.kind) for u in items if u.op_name != RERUN)

    assert others(rank.rows) == others(base.rows)
    assert other_unmatched(rank.unmatched) == other_unmatched(base.unmatched)
    assert not rank.divergences and not base.divergences  # a clean dump: no first divergence, no note


@pytest.mark.parametrize("kind", ["fx", "ge"])
def test_a_stray_run_does_not_hide_the_first_divergence(tmp_path, kind):
    """The fault is in an op after the re-executed one: it is still the token's first divergence."""
    config = ScenarioConfig(model=ModelConfig(layers=1), tokens=1, reruns=("SoftmaxV2_0",),
                            faults=(Fault("Gelu_0", FaultKind.REL_ERROR),))  # fmt: skip
    scenario = write_scenario(tmp_path, config)
    result, _ = run_compare(CompareOptions(scenario.target, _golden(scenario, kind)), keep_rows=True)
    rank = result.ranks[0]
    assert {r.pair.op_name for r in rank.rows if r.result is Result.FAIL} == {"Gelu_0"}
    [divergence] = rank.divergences
    assert divergence.op_name == "Gelu_0" and not divergence.note


def test_an_inner_op_before_a_stray_run_still_reads_its_nodes_arguments(dumps):
    """aten.mul → Mul (unnamed) + Cast (named mul's output); the Cast's task ran again on one row before its real
    run. Mul's graph inputs are mul's FX arguments (they used to be dropped: the run after Mul was the stray one),
    and the stray Cast is listed with its input."""
    x, y = values(2, 3), values(2, 3, start=10)
    product = x * y
    dumps.graph(
        data("x", (2, 3)),
        data("y", (2, 3)),
        op("Mul", "Mul", ("x:0", "y:0"), (out(None, (2, 3)),)),
        op("Cast", "Cast", ("Mul:0",), (out(f"{MUL}.OUTPUT.0", (2, 3)),)),
    )
    dumps.ge("Mul", "Mul", [x, y], [product])
    dumps.ge("Cast", "Cast", [product[:1]], [product[:1]])  # the task run again, first
    dumps.ge("Cast", "Cast", [product], [product])
    call = dumps.fx(MUL, [x, y], [product])
    o = dumps.compare()
    for k in (0, 1):
        row = o.row("Mul", IO.INPUT, k)
        assert row.pair.bench.label == call[f"{MUL}.INPUT.{k}"].name and row.result is Result.PASS
    real = o.row("Cast", IO.OUTPUT, 0, execution=1)
    assert real.pair.bench.label == call[f"{MUL}.OUTPUT.0"].name and real.result is Result.PASS
    assert not [r for r in o.rows if r.pair.op_name == "Cast" and r.pair.execution == 0]
    stray = [u for u in o.target_unmatched() if u.op_name == "Cast" and "execution 0" in u.reason]
    assert {(u.io, u.index) for u in stray} == {(IO.INPUT, 0), (IO.OUTPUT, 0)}
    assert all(u.kind is UnmatchedKind.NO_PARTNER and "ran 2 time(s)" in u.reason for u in stray)
    by_design(o.one_unmatched("Mul", IO.OUTPUT, 0), "inner")
    assert not o.golden_unmatched()


def test_a_consumer_reads_the_run_of_its_producer_that_has_a_call(dumps):
    """Tanh ran, then its task again on one row (a later timestamp here), then Neg read the real run's output: Neg's
    input is the tanh call's output, not 'no call left'."""
    x = values(2, 3, start=-1)
    t = np.tanh(x)
    tanh, neg = "tanh-aten.tanh.default", "neg-aten.neg.default"
    dumps.graph(
        data("x", (2, 3)),
        op("Tanh", "Tanh", ("x:0",), (out(f"{tanh}.OUTPUT.0", (2, 3)),)),
        op("Neg", "Neg", ("Tanh:0",), (out(f"{neg}.OUTPUT.0", (2, 3)),)),
    )
    dumps.ge("Tanh", "Tanh", [x], [t])
    dumps.ge("Tanh", "Tanh", [x[:1]], [t[:1]])
    dumps.ge("Neg", "Neg", [t], [-t])
    produced = dumps.fx(tanh, [x], [t])
    dumps.fx(neg, [t], [-t])
    o = dumps.compare()
    row = o.row("Neg", IO.INPUT, 0)
    assert row.pair.bench.label == produced[f"{tanh}.OUTPUT.0"].name and row.result is Result.PASS
    assert o.row("Tanh", IO.OUTPUT, 0).result is Result.PASS
    stray = [u for u in o.target_unmatched() if u.op_name == "Tanh"]
    assert {(u.io, u.index) for u in stray} == {(IO.INPUT, 0), (IO.OUTPUT, 0)}
    assert all("execution 1" in u.reason for u in stray)
    assert not [r for r in o.rows if r.result is not Result.PASS]


def test_fusion_off_golden_run_again_is_paired_by_shape_and_its_extra_run_listed(tmp_path):
    """GE vs fusion-off GE by hand: the golden ran Tanh twice (first on one row), the target once. The target run
    is paired with the golden run of its shape — not the first — and the other golden run is listed with both
    counts; with the counts reversed (a stray target run), the stray is listed whole, and the real run PASSes."""
    x = values(2, 3, start=-1)
    t = np.tanh(x)
    graph = [data("x", (2, 3)), op("Tanh", "Tanh", ("x:0",), (out("tanh-aten.tanh.default.OUTPUT.0", (2, 3)),))]

    def tree(root, time_dir: str, runs) -> None:
        step = root / "msprobe_ge_dump" / "worldsize1_global_rank0" / time_dir / "0" / "graph_1_0" / "1" / "0"
        step.mkdir(parents=True)
        for task, (a, b) in enumerate(runs, start=1):
            ts = 1_764_405_000_000_000 + 10 * task
            write_ge_dump(step / f"Tanh.Tanh.{task}.0.{ts}", "Tanh", [_spec(a)], [_spec(b)], dump_time=ts)
        write_graph(root / "msprobe_ge_dump", graph_file_name(1, 0, 4242, f"{time_dir}000000"), "graph_1", graph)

    for case, (target_runs, golden_runs) in enumerate((([(x, t)], [(x[:1], t[:1]), (x, t)]),
                                                        ([(x[:1], t[:1]), (x, t)], [(x, t)]))):  # fmt: skip
        target, golden = tmp_path / f"target{case}", tmp_path / f"golden{case}"
        tree(target, "20261129083000", target_runs)
        tree(golden, "20261129084500", golden_runs)
        result, _ = run_compare(CompareOptions(target / "msprobe_ge_dump", golden / "msprobe_ge_dump"), keep_rows=True)
        rank = result.ranks[0]
        assert [(r.pair.io, r.pair.execution, r.result) for r in rank.rows] == [
            (IO.INPUT, len(target_runs) - 1, Result.PASS), (IO.OUTPUT, len(target_runs) - 1, Result.PASS)]  # fmt: skip
        paired = {Path(f.path).name for r in rank.rows for f in r.pair.bench.files}
        assert paired == {f"Tanh.Tanh.{len(golden_runs)}.0.{1_764_405_000_000_000 + 10 * len(golden_runs)}"}
        if case == 0:
            [left] = [u for u in rank.unmatched if u.kind is not UnmatchedKind.BY_DESIGN]
            assert left.role is Role.GOLDEN and left.kind is UnmatchedKind.NO_PARTNER
            assert "ran 2 time(s)" in left.reason and "1 in the target" in left.reason, left.reason
        else:
            stray = [u for u in rank.unmatched if u.role is Role.TARGET]
            assert {(u.io, u.index) for u in stray} == {(IO.INPUT, 0), (IO.OUTPUT, 0)}
            assert all("ran 2 time(s)" in u.reason and "Tanh 1 time(s) in the golden" in u.reason for u in stray)
            assert not [u for u in rank.unmatched if u.role is Role.GOLDEN]


@pytest.mark.parametrize("kind", ["fx", "ge"])
def test_a_stray_run_is_listed_the_same_from_the_index(tmp_path, kind):
    """`tcmp watch --drop-raw`, then compare from the index: the stray run's tensors are paired by the shapes the
    index stored, so the same run is listed and the same rows compared as from the raw files."""
    config = ScenarioConfig(model=ModelConfig(layers=1), tokens=1, reruns=(RERUN,))
    scenario = write_scenario(tmp_path, config)
    golden = _golden(scenario, kind)

    def outcome(result):
        rank = result.ranks[0]
        rows = sorted((r.pair.op_name, r.pair.execution, r.pair.io.value, r.pair.index, r.result.value)
                      for r in rank.rows)  # fmt: skip
        listed = sorted((u.op_name, u.io.value, u.index) for u in rank.unmatched
                        if u.role is Role.TARGET and u.kind is UnmatchedKind.NO_PARTNER)  # fmt: skip
        return rows, listed

    raw, _ = run_compare(CompareOptions(scenario.target, golden, mode=DataMode.STATISTICS), keep_rows=True)
    watch = WatchConfig(roots=(scenario.root,), retention=RetentionPolicy(True, 0, ()), workers=1, once=True)
    assert run_watch(watch).error is None
    assert not [p for p in scenario.target.rglob("*") if p.is_file() and p.name.startswith("MatMulV2.")]
    indexed, _ = run_compare(CompareOptions(scenario.target, golden), keep_rows=True)
    assert indexed.ranks[0].counts.rows_from_index == indexed.ranks[0].counts.rows > 0
    rows, listed = outcome(indexed)
    assert (rows, listed) == outcome(raw)
    assert listed == [(RERUN, "input", 0), (RERUN, "input", 1), (RERUN, "output", 0)]
    assert not [r for r in rows if r[-1] == "FAIL"] and not indexed.ranks[0].divergences
