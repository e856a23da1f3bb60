"""The GE → FX matcher's rules for repeated executions (rules 13–14 of test_fx_rules.py's list), and FxSide's
own checks: which input copies are the same tensor (by content), and which one a producer's output claims."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
from fx_dumps import FX_RANK_DIR, by_design, data, op, out, values

from tcmp.compare.judge.verdict import Result
from tcmp.compare.match.executions import fx_calls
from tcmp.compare.match.fx_side import FxSide
from tcmp.compare.records import UnmatchedKind
from tcmp.schemas.dump_outline import scan_directory
from tcmp.schemas.dump_records import IO, Side, Summary, TensorKind, TensorSummary

ADD = "add_2-aten.add.Tensor"
TANH, NEG = "tanh-aten.tanh.default", "neg-aten.neg.default"


def _add_graph(d) -> None:
    d.graph(
        data("x", (2, 3)),
        data("y", (2, 3)),
        op("Add_2", "Add", ("x:0", "y:0"), (out(f"{ADD}.OUTPUT.0", (2, 3)),)),
    )


# --- rule 13: an op executed more or less often than its FX node was called -------------------------------------


def test_extra_execution_of_another_shape_is_listed_with_both_counts(dumps):
    """Add_2 ran twice in the token — first on 1-element tensors (a warm-up), then on the real shapes — while the FX
    node add_2 was called once: the run of its shapes is paired, the other listed."""
    x, y = values(2, 3), values(2, 3, start=4)
    one = np.ones(1, dtype=np.float32)
    _add_graph(dumps)
    dumps.ge("Add_2", "Add", [one, one], [one * 2])
    dumps.ge("Add_2", "Add", [x, y], [x + y])
    call = dumps.fx(ADD, [x, y], [x + y])
    o = dumps.compare()
    row = o.row("Add_2", IO.OUTPUT, 0, execution=1)
    assert row.pair.bench.label == call[f"{ADD}.OUTPUT.0"].name and row.result is Result.PASS
    for k in (0, 1):
        assert o.row("Add_2", IO.INPUT, k, execution=1).pair.bench.label == call[f"{ADD}.INPUT.{k}"].name
    assert {r.pair.execution for r in o.rows} == {1}
    [first] = o.unmatched("Add_2", IO.OUTPUT, 0)
    assert first.kind is UnmatchedKind.NO_PARTNER
    assert "Add_2 ran 2 time(s)" in first.reason and f"{ADD} 1" in first.reason and "execution 0" in first.reason
    assert len(o.unmatched("Add_2", IO.INPUT, 0)) == len(o.unmatched("Add_2", IO.INPUT, 1)) == 1  # execution 0's
    assert not o.golden_unmatched()


def test_equal_counts_pair_the_kth_execution_with_the_kth_call(dumps):
    x, y = values(2, 3), values(2, 3, start=4)
    _add_graph(dumps)
    runs = [(x, y), (x * 3, y - 1)]
    for a, b in runs:
        dumps.ge("Add_2", "Add", [a, b], [a + b])
    calls = [dumps.fx(ADD, [a, b], [a + b]) for a, b in runs]
    o = dumps.compare()
    for k, call in enumerate(calls):
        for io, index, stem in ((IO.INPUT, 0, "INPUT.0"), (IO.INPUT, 1, "INPUT.1"), (IO.OUTPUT, 0, "OUTPUT.0")):
            row = o.row("Add_2", io, index, execution=k)
            assert row.pair.bench.label == call[f"{ADD}.{stem}"].name and row.result is Result.PASS
    assert not o.target_unmatched() and not o.golden_unmatched()


def test_equal_counts_in_reverse_order_fail(dumps):
    """The k-th with the k-th, not by value: GE's two runs in the other order than FX's calls FAIL both."""
    x, y = values(2, 3), values(2, 3, start=4)
    _add_graph(dumps)
    runs = [(x, y), (x * 3, y - 1)]
    for a, b in reversed(runs):
        dumps.ge("Add_2", "Add", [a, b], [a + b])
    for a, b in runs:
        dumps.fx(ADD, [a, b], [a + b])
    o = dumps.compare()
    assert {o.row("Add_2", IO.OUTPUT, 0, execution=k).result for k in (0, 1)} == {Result.FAIL}


# --- rule 14: the inputs of a consumer of a re-executed producer --------------------------------------------------


def test_consumer_reads_the_producers_last_execution_before_it(dumps):
    """Tanh ran twice, then Neg once (FX: tanh, tanh, neg): Neg's input is the second tanh call's output."""
    x1, x2 = values(2, 3), values(2, 3, start=-2)
    t1, t2 = np.tanh(x1), np.tanh(x2)
    dumps.graph(
        data("x", (2, 3)),
        op("Tanh", "Tanh", ("x:0",), (out(f"{TANH}.OUTPUT.0", (2, 3)),)),
        op("Neg", "Neg", ("Tanh:0",), (out(f"{NEG}.OUTPUT.0", (2, 3)),)),
    )
    dumps.ge("Tanh", "Tanh", [x1], [t1])
    dumps.ge("Tanh", "Tanh", [x2], [t2])
    dumps.ge("Neg", "Neg", [t2], [-t2])
    dumps.fx(TANH, [x1], [t1])
    second = dumps.fx(TANH, [x2], [t2])
    dumps.fx(NEG, [t2], [-t2])
    o = dumps.compare()
    row = o.row("Neg", IO.INPUT, 0)
    assert row.pair.bench.label == second[f"{TANH}.OUTPUT.0"].name and row.result is Result.PASS
    by_design(o.golden(f"{NEG}.INPUT.0"), "FX input copy", second[f"{TANH}.OUTPUT.0"].name)
    assert not o.target_unmatched()


def test_consumers_between_executions_read_the_execution_before_each(dumps):
    """Tanh, Neg, Tanh, Neg (a loop): each Neg reads the Tanh run just before it."""
    x1, x2 = values(2, 3), values(2, 3, start=-2)
    dumps.graph(
        data("x", (2, 3)),
        op("Tanh", "Tanh", ("x:0",), (out(f"{TANH}.OUTPUT.0", (2, 3)),)),
        op("Neg", "Neg", ("Tanh:0",), (out(f"{NEG}.OUTPUT.0", (2, 3)),)),
    )
    tanh_calls = []
    for x in (x1, x2):
        t = np.tanh(x)
        dumps.ge("Tanh", "Tanh", [x], [t])
        dumps.ge("Neg", "Neg", [t], [-t])
        tanh_calls.append(dumps.fx(TANH, [x], [t]))
        dumps.fx(NEG, [t], [-t])
    o = dumps.compare()
    for k, call in enumerate(tanh_calls):
        row = o.row("Neg", IO.INPUT, 0, execution=k)
        assert row.pair.bench.label == call[f"{TANH}.OUTPUT.0"].name and row.result is Result.PASS


# --- FxSide: input copies and content ---------------------------------------------------------------------------


def _side(root: Path, calls: dict, stored=None) -> tuple[FxSide, dict]:
    """The FX files of `calls` ({key: ([inputs], [outputs])}, one call each) in one step directory, as FxSide."""
    directory = root / FX_RANK_DIR / "0"
    directory.mkdir(parents=True)
    ts = 20261129083000000000
    for key, (inputs, outputs) in calls.items():
        ts += 17
        for i, value in enumerate(inputs):
            np.save(directory / f"{key}.INPUT.{i}.{ts}.npy", value, allow_pickle=value.dtype.hasobject)
        for k, value in enumerate(outputs):
            np.save(directory / f"{key}.OUTPUT.{k}.{ts}.npy", value, allow_pickle=value.dtype.hasobject)
    files = scan_directory(root, directory, side=Side.FX).files
    found = fx_calls(files)
    return FxSide(found, stored or {}), {k: v[0] for k, v in found.items()}


def test_same_content_compares_the_tensor_bytes(tmp_path):
    a = values(2, 3)
    b = a.copy()
    b[1, 2] += 1
    side, calls = _side(
        tmp_path,
        {
            "p-aten.tanh.default": ([a], [a]),
            "q-aten.neg.default": ([b, a], [b]),
            "r-aten.index.Tensor": ([np.array([None, 1], dtype=object)], [a]),
        },
    )
    p, q, r = calls["p-aten.tanh.default"], calls["q-aten.neg.default"], calls["r-aten.index.Tensor"]
    p_in, p_out = p.inputs[0][2], p.output(0)
    assert side.same_content(p_in, p_out) and side.same_content(p_out, q.inputs[1][2])  # other files, same bytes
    assert not side.same_content(p_out, q.inputs[0][2])  # one element differs
    assert not side.same_content(r.inputs[0][2], r.inputs[0][2])  # a pickle: no bytes to tell
    assert not side.same_content(p_out, r.inputs[0][2])


def test_same_content_from_the_index_crc_where_the_raw_file_is_gone(tmp_path):
    a = values(2, 3)
    b = a + 1
    side, calls = _side(tmp_path, {"p-aten.tanh.default": ([a], [b]), "q-aten.neg.default": ([a], [a])})
    p, q = calls["p-aten.tanh.default"], calls["q-aten.neg.default"]
    gone = q.output(0)

    def stored(crc) -> TensorSummary:
        summary = Summary(numel=6, min=0.0, max=1.25, crc32=crc)
        return TensorSummary(IO.OUTPUT, 0, None, TensorKind.TENSOR, "float32", (2, 3), summary)

    gone.path.unlink()  # tcmp watch --drop-raw deleted it: only its summary is left
    crc_a = zlib.crc32(a.tobytes())
    side = FxSide(side.calls, {gone.path: stored(crc_a)})
    assert side.same_content(gone, p.inputs[0][2]) and side.same_content(p.inputs[0][2], gone)
    assert not side.same_content(gone, p.output(0))
    assert not FxSide(side.calls, {gone.path: stored(None)}).same_content(gone, p.inputs[0][2])  # no CRC: unknown


def test_claim_copy_takes_the_input_copy_holding_the_producers_tensor(tmp_path):
    """`r + tanh(x)` with r and tanh(x) of one shape: the copy of tanh's output is INPUT.1 by content."""
    x, r = values(2, 3), values(2, 3, start=-7)
    t = np.tanh(x)
    side, calls = _side(tmp_path, {TANH: ([x], [t]), "add-aten.add.Tensor": ([r, t], [r + t])})
    add, produced = calls["add-aten.add.Tensor"], calls[TANH].output(0)
    side.claim_copy(add, produced)
    assert [(i, j) for i, j, _ in side.unclaimed_inputs(add)] == [(0, None)]
    assert side.claimed(add, (1, None)) and side.copies == {add.inputs[1][2].path: produced.path}

    fresh, calls = _side(tmp_path / "again", {TANH: ([x], [t]), "add-aten.add.Tensor": ([r, t + 1], [r + t + 1])})
    add = calls["add-aten.add.Tensor"]
    fresh.claim_copy(add, calls[TANH].output(0))  # two fit by shape, neither holds the tensor: none is taken
    assert fresh.unclaimed_inputs(add) == list(add.inputs) and not fresh.copies


def test_claim_copy_by_shape_when_one_input_fits(tmp_path):
    """One input of the producer's shape: taken without reading the bytes (an FX value may differ from GE's); an
    input of another shape never."""
    x, w = values(2, 3), values(3, 4)
    t = np.tanh(x)
    side, calls = _side(tmp_path, {TANH: ([x], [t]), "mm-aten.mm.default": ([t + 1, w], [(t + 1) @ w])})
    mm, produced = calls["mm-aten.mm.default"], calls[TANH].output(0)
    side.claim_copy(mm, produced)
    assert side.claimed(mm, (0, None)) and not side.claimed(mm, (1, None))
    assert side.copies == {mm.inputs[0][2].path: produced.path}
    other = calls[TANH]
    side.claim_copy(other, mm.inputs[1][2])  # (3, 4): no input of tanh has it
    assert side.unclaimed_inputs(other) == list(other.inputs)
