"""A large graph shaped like the one torchair converts from a decoder-only LLM, for the graph reader's benchmark
and tests: per layer a decomposed rms_norm, q/k/v projections (`MatMulV2` with unfed optional inputs), head
reshapes and transposes fed by `Const` ops that carry their value as a `TensorDef` with raw bytes, attention
(`BatchMatMulV2`, a scale, a mask, `SoftmaxV2` with an `axes` list attribute), the output projection and a gated
MLP. Output descs carry `_fx_tensor_name` where torchair's converter names them (the last op of each FX node's
expansion); inner ops of an expansion carry none.
"""

from __future__ import annotations

import struct
from typing import Optional

from tcmp.schemas.proto import GE_IR_DATA_TYPE
from tcmp.schemas.synth.graph_writer import GraphOpSpec, OutputSpec

__all__ = ["decoder_graph_specs"]

_FP16 = GE_IR_DATA_TYPE.values_by_name["DT_FLOAT16"].number
_FP32 = GE_IR_DATA_TYPE.values_by_name["DT_FLOAT"].number
_INT64 = GE_IR_DATA_TYPE.values_by_name["DT_INT64"].number


class _Builder:
    def __init__(self, batch: int, seq: int, hidden: int, heads: int) -> None:
        self.batch, self.seq, self.hidden, self.heads = batch, seq, hidden, heads
        self.specs: list[GraphOpSpec] = []
        self.counts: dict[str, int] = {}
        self.fx_counts: dict[str, int] = {}

    def _name(self, op_type: str) -> str:
        n = self.counts.get(op_type, 0)
        self.counts[op_type] = n + 1
        return op_type if n == 0 else f"{op_type}_{n}"

    def fx(self, target: str) -> str:
        """A fresh FX node name for `target` (`mm-aten.mm.default`, `mm_1-aten.mm.default`, …)."""
        base = target.split(".")[1]
        n = self.fx_counts.get(base, 0)
        self.fx_counts[base] = n + 1
        return f"{base if n == 0 else f'{base}_{n}'}-{target}.OUTPUT.0"

    def op(
        self,
        op_type: str,
        inputs: tuple[str, ...],
        shape: tuple[int, ...],
        fx: Optional[str] = None,
        dtype: int = _FP16,
        attrs: tuple = (),
    ) -> str:
        name = self._name(op_type)
        self.specs.append(GraphOpSpec(name, op_type, inputs, (OutputSpec(fx, dtype, shape),), attrs=attrs))
        return f"{name}:0"

    def const(self, values: list[int]) -> str:
        data = struct.pack(f"<{len(values)}q", *values)
        value = ("value", data)  # a TensorDef would be `t {…}`; raw bytes in `s` keep the escaping realistic
        return self.op("Const", (), (len(values),), dtype=_INT64, attrs=(value, ("_readable_value", str(values))))


def decoder_graph_specs(
    layers: int, batch: int = 1, seq: int = 128, hidden: int = 4096, heads: int = 32
) -> list[GraphOpSpec]:
    """The graph of `layers` decoder layers (~40 GE ops each)."""
    b = _Builder(batch, seq, hidden, heads)
    tokens = (batch, seq, hidden)
    head_shape = (batch, heads, seq, hidden // heads)
    x = b.op("Data", (), tokens, fx="arg0_1-placeholder.OUTPUT.0", attrs=(("index", 0),))
    mask = b.op("Data", (), (batch, 1, seq, seq), fx="arg1_1-placeholder.OUTPUT.0", attrs=(("index", 1),))
    for layer in range(layers):
        weights = [
            b.op("Data", (), (hidden, hidden), fx=f"arg{2 + 6 * layer + i}_1-placeholder.OUTPUT.0",
                 attrs=(("index", 2 + 6 * layer + i),))
            for i in range(6)
        ]  # fmt: skip
        h = _rms_norm(b, x, tokens)
        projected = []
        for w in weights[:3]:
            flat = b.op(
                "Reshape", (h, b.const([batch * seq, hidden])), (batch * seq, hidden), fx=b.fx("aten.view.default")
            )
            mm = b.op("MatMulV2", (flat, w, "", ""), (batch * seq, hidden), fx=b.fx("aten.mm.default"),
                      attrs=(("transpose_x1", False), ("transpose_x2", True), ("offset_x", 0)))  # fmt: skip
            view = b.op("Reshape", (mm, b.const(list(head_shape))), head_shape, fx=b.fx("aten.view.default"))
            projected.append(
                b.op("Transpose", (view, b.const([0, 2, 1, 3])), head_shape, fx=b.fx("aten.permute.default"))
            )
        q, k, v = projected
        scores = b.op("BatchMatMulV2", (q, k, "", ""), (batch, heads, seq, seq), fx=b.fx("aten.bmm.default"),
                      attrs=(("adj_x1", False), ("adj_x2", True)))  # fmt: skip
        scaled = b.op("Mul", (scores, b.const([1])), (batch, heads, seq, seq), fx=b.fx("aten.mul.Tensor"))
        masked = b.op("Add", (scaled, mask), (batch, heads, seq, seq), fx=b.fx("aten.add.Tensor"))
        cast = b.op("Cast", (masked,), (batch, heads, seq, seq), dtype=_FP32, attrs=(("dst_type", _FP32),))
        soft = b.op("SoftmaxV2", (cast,), (batch, heads, seq, seq), dtype=_FP32, attrs=(("axes", [-1]),))
        probs = b.op("Cast", (soft,), (batch, heads, seq, seq), fx=b.fx("aten._softmax.default"),
                     attrs=(("dst_type", _FP16),))  # fmt: skip
        context = b.op("BatchMatMulV2", (probs, v, "", ""), head_shape, fx=b.fx("aten.bmm.default"))
        back = b.op("Transpose", (context, b.const([0, 2, 1, 3])), head_shape, fx=b.fx("aten.permute.default"))
        merged = b.op(
            "Reshape", (back, b.const([batch * seq, hidden])), (batch * seq, hidden), fx=b.fx("aten.view.default")
        )
        out = b.op("MatMulV2", (merged, weights[3], "", ""), (batch * seq, hidden), fx=b.fx("aten.mm.default"))
        out = b.op("Reshape", (out, b.const(list(tokens))), tokens, fx=b.fx("aten.view.default"))
        x = b.op("Add", (x, out), tokens, fx=b.fx("aten.add.Tensor"))
        h = _rms_norm(b, x, tokens)
        gate = b.op("MatMulV2", (h, weights[4], "", ""), tokens, fx=b.fx("aten.mm.default"))
        up = b.op("MatMulV2", (h, weights[5], "", ""), tokens, fx=b.fx("aten.mm.default"))
        act = b.op("Swish", (gate,), tokens, fx=b.fx("aten.silu.default"), attrs=(("scale", 1.0),))
        x = b.op(
            "Add", (x, b.op("Mul", (act, up), tokens, fx=b.fx("aten.mul.Tensor"))), tokens, fx=b.fx("aten.add.Tensor")
        )
    b.op("NetOutput", (x,), tokens)
    return b.specs


def _rms_norm(b: _Builder, x: str, shape: tuple[int, ...]) -> str:
    """torchair's decomposition of rms_norm: only its last op carries the FX node's name."""
    up = b.op("Cast", (x,), shape, dtype=_FP32, attrs=(("dst_type", _FP32),))
    square = b.op("Pow", (up, b.const([2])), shape, dtype=_FP32)
    mean = b.op("ReduceMean", (square, b.const([-1])), (*shape[:-1], 1), dtype=_FP32, attrs=(("keep_dims", True),
                ("noop_with_empty_axes", True)))  # fmt: skip
    eps = b.op("Add", (mean, b.const([0])), (*shape[:-1], 1), dtype=_FP32)
    rstd = b.op("Rsqrt", (eps,), (*shape[:-1], 1), dtype=_FP32)
    normed = b.op("Mul", (up, rstd), shape, dtype=_FP32)
    down = b.op("Cast", (normed,), shape, attrs=(("dst_type", _FP16),))
    return b.op("Mul", (down, b.const([1])), shape, fx=b.fx("aten.mul.Tensor"))
