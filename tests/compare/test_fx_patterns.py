"""torchair's pattern fusion beyond the plain form (patterns/*.py of torchair 2.14): the view forms, where the
consumer reads a view of the anchor's output and the fused op's outputs hold the consumer's elements in the
anchor's shape, and the replaced nodes' non-tensor arguments. One hand-built dump pair each (fx_dumps.DumpPair)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from fx_dumps import F16, I8, DumpPair, by_design, data, op, out, values

from tcmp.compare.judge.verdict import Result
from tcmp.schemas.dump_records import IO

ANCHOR = "npu_add_rms_norm-npu.npu_add_rms_norm.default"
VIEW, VIEW_1 = "view-aten.view.default", "view_1-aten.view.default"
CAST = "_to_copy-aten._to_copy.default"
QUANT = "npu_dynamic_quant-npu.npu_dynamic_quant.default"
SHAPE = (2, 3, 4)


def _norm_values():
    x1, x2, gamma = values(*SHAPE), values(*SHAPE, start=5.0), values(SHAPE[-1], start=1.0)
    x_out = x1 + x2
    y = (x_out * gamma).astype(np.float16)
    rstd = values(*SHAPE[:-1], 1, start=0.5)
    return (x1, x2, gamma), (y, rstd, x_out)


def _graph_inputs(d: DumpPair) -> tuple[str, ...]:
    d.graph(data("x1", SHAPE), data("x2", SHAPE), data("gamma", SHAPE[-1:]))
    return ("x1:0", "x2:0", "gamma:0")


def test_cast_of_a_view_is_compared_in_the_fused_ops_shape(dumps):
    """add_rms_norm_cast.py's view form: `y.view(-1, h).to(float32)` -> npu_add_rms_norm_cast, whose y_cast has
    y's shape [2, 3, 4] (the graph records none) while the FX cast's output is [6, 4]: the same elements, compared
    in GE's shape, a fault in one token found; the view node went with the fusion, its size list no tensor."""
    inputs, (y, rstd, x_out) = _norm_values()
    viewed = y.reshape(6, 4)
    for step in (0, 1):
        dumps.fx(ANCHOR, list(inputs), [y, rstd, x_out], step=step)
        dumps.fx(VIEW, [y, [-1, 4]], [viewed], step=step)
        dumps.fx(CAST, [viewed], [viewed.astype(np.float32)], step=step)
    fused = "npu_add_rms_norm_cast_default-npu.npu_add_rms_norm_cast.default"
    dumps.graph(
        op("AddRmsNormCast", "AddRmsNormCast", _graph_inputs(dumps), (
            out(f"{fused}.OUTPUT.0", ()), out(f"{fused}.OUTPUT.1", SHAPE, F16),
            out(f"{fused}.OUTPUT.2", (2, 3, 1)), out(f"{fused}.OUTPUT.3", SHAPE),
        )),
    )  # fmt: skip
    faulted = y.astype(np.float32)
    faulted[1] = faulted[0]  # equal to the cast's first rows, not to the rest
    dumps.ge("AddRmsNormCast", "AddRmsNormCast", inputs, [faulted, y, rstd, x_out], step=0)
    dumps.ge("AddRmsNormCast", "AddRmsNormCast", inputs, [y.astype(np.float32), y, rstd, x_out], step=1)
    o = dumps.compare()
    rows = {r.pair.token: r for r in o.rows_of("AddRmsNormCast", IO.OUTPUT, 0)}
    assert rows[0].result is Result.FAIL and rows[1].result is Result.PASS
    for row in rows.values():
        assert row.pair.bench.label.startswith(f"{CAST}.OUTPUT.0.") and row.pair.bench.reshaped
        assert row.bench.shape == (6, 4) and row.npu.shape == SHAPE
        assert any(f"view {VIEW}" in n for n in row.pair.notes)
    for j in (1, 2, 3):
        for row in o.rows_of("AddRmsNormCast", IO.OUTPUT, j):
            assert row.pair.bench.label.startswith(f"{ANCHOR}.OUTPUT.{j - 1}.") and not row.pair.bench.reshaped
            assert row.result is Result.PASS
    assert len(o.rows_of("AddRmsNormCast", IO.OUTPUT, 1)) == 2
    listed = [u for u in o.golden_unmatched() if VIEW in Path(u.path).name]
    assert len(listed) == 6  # input 0, the size list and output 0, per token
    for u in listed:
        replaced = ("pattern fusion", "replaced by npu_add_rms_norm_cast_default")
        by_design(u, *(("list of sizes",) if ".INPUT.1." in Path(u.path).name else replaced))
    assert not o.target_unmatched()


def test_dynamic_quant_of_a_flattened_norm(dumps):
    """add_rms_norm_dynamic_quant.py's second form: `npu_dynamic_quant(y.flatten(0, 1))`, `scale.view(-1, 1)` ->
    npu_add_rms_norm_dynamic_quant (yOut, _, xOut, scale1Out, _) in y's shape: yOut is the quant's output 0 and
    scale1Out its output 1 ([6] for GE's [2, 3]); the outputs the fusion made from nothing are listed by design;
    both views are replaced nodes."""
    inputs, (y, rstd, x_out) = _norm_values()
    flat = y.reshape(6, 4)
    scale = (np.abs(flat.astype(np.float32)).max(axis=1) / 127).astype(np.float32)
    q = np.round(flat.astype(np.float32) / scale[:, None]).astype(np.int8)
    dumps.fx(ANCHOR, list(inputs), [y, rstd, x_out])
    dumps.fx(VIEW, [y, [6, 4]], [flat])
    dumps.fx(QUANT, [flat], [q, scale])
    dumps.fx(VIEW_1, [scale, [-1, 1]], [scale.reshape(6, 1)])
    fused = "npu_add_rms_norm_dynamic_quant_default-npu.npu_add_rms_norm_dynamic_quant.default"
    dumps.graph(
        op("AddRmsNormDynamicQuant", "AddRmsNormDynamicQuant", _graph_inputs(dumps), tuple(
            out(f"{fused}.OUTPUT.{j}", shape, dtype)
            for j, shape, dtype in ((0, SHAPE, I8), (1, SHAPE, I8), (2, SHAPE, F16), (3, (2, 3), F16), (4, (2, 3), F16))
        )),
    )  # fmt: skip
    zeros = np.zeros((2, 3), np.float32)
    ge_outputs = [q.reshape(SHAPE), np.zeros(SHAPE, np.int8), x_out, scale.reshape(2, 3), zeros]
    dumps.ge("AddRmsNormDynamicQuant", "AddRmsNormDynamicQuant", inputs, ge_outputs)
    o = dumps.compare()
    for j, stem in ((0, f"{QUANT}.OUTPUT.0"), (3, f"{QUANT}.OUTPUT.1")):
        row = o.row("AddRmsNormDynamicQuant", IO.OUTPUT, j)
        assert row.pair.bench.label.startswith(f"{stem}.") and row.pair.bench.reshaped and row.result is Result.PASS
    row = o.row("AddRmsNormDynamicQuant", IO.OUTPUT, 2)
    assert row.pair.bench.label.startswith(f"{ANCHOR}.OUTPUT.2.") and row.result is Result.PASS
    for j in (1, 4):
        by_design(o.one_unmatched("AddRmsNormDynamicQuant", IO.OUTPUT, j), "no such output")
    for stem in (f"{VIEW}.OUTPUT.0", f"{VIEW_1}.OUTPUT.0", f"{QUANT}.INPUT.0", f"{ANCHOR}.OUTPUT.0"):
        by_design(o.golden(stem), "pattern fusion", "replaced by npu_add_rms_norm_dynamic_quant_default")
    by_design(o.golden(f"{VIEW_1}.INPUT.1"), "list of sizes")


def test_replaced_nodes_scalar_arguments_are_arguments(dumps):
    """batch_matmul_transpose.py: `bmm(x, w).transpose(0, 1)` -> npu_transpose_batchmatmul. The transpose's dims
    are scalars the FX dumper saved, no tensors of the fusion; its tensor input is the replaced bmm's output."""
    x, w = values(2, 3, 4), values(2, 4, 5, start=1.0)
    b = np.matmul(x, w)
    bt = np.ascontiguousarray(b.transpose(1, 0, 2))
    dumps.fx("bmm-aten.bmm.default", [x, w], [b])
    dumps.fx("transpose-aten.transpose.int", [b, 0, 1], [bt])
    fused = "npu_transpose_batchmatmul_default-npu.npu_transpose_batchmatmul.default"
    dumps.graph(
        data("x", (2, 3, 4)),
        data("w", (2, 4, 5)),
        op("TransposeBatchMatMul", "TransposeBatchMatMul", ("x:0", "w:0"), (out(f"{fused}.OUTPUT.0", (3, 2, 5)),)),
    )
    dumps.ge("TransposeBatchMatMul", "TransposeBatchMatMul", [x, w], [bt])
    o = dumps.compare()
    row = o.row("TransposeBatchMatMul", IO.OUTPUT, 0)
    assert row.pair.bench.label.startswith("transpose-aten.transpose.int.OUTPUT.0.") and row.result is Result.PASS
    for k, stem in enumerate(("bmm-aten.bmm.default.INPUT.0", "bmm-aten.bmm.default.INPUT.1")):
        assert o.label("TransposeBatchMatMul", IO.INPUT, k).startswith(f"{stem}.")
    for k in (1, 2):
        by_design(o.golden(f"transpose-aten.transpose.int.INPUT.{k}"), "scalar argument")
    for stem in ("transpose-aten.transpose.int.INPUT.0", "bmm-aten.bmm.default.OUTPUT.0"):
        by_design(o.golden(stem), "pattern fusion", "replaced by npu_transpose_batchmatmul_default")
    assert not o.target_unmatched()
