"""A numpy interpreter for the GE op types the catalogue's graphs contain: what a fault-free GE computes.

Each op type is one function from its input arrays (and its attributes) to its output arrays; semantics follow
the op's REG_OP definition in torchair's `auto_generated_ge_raw_ops.py` and the converter that emits it. Floating
point work is done in float32 (what the NPU kernels accumulate in) and every output is rounded to the dtype the
graph declares for it. An op type not in `_OPS` stops the harness with its name: a silently wrong value here
would make every compare result meaningless.

`walk` runs a whole graph in torchair's op order; its `settle` hook lets the GE dump writer replace an op's
computed outputs (by the FX values of the same tensors) before its consumers read them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Callable, Optional

import ml_dtypes
import numpy as np

from .ge_graph import GeGraph, GeOp

GE_TO_NUMPY = {
    1: np.float32,
    2: np.float16,
    3: np.int8,
    4: np.uint8,
    5: np.int16,
    6: np.uint16,
    7: np.int32,
    8: np.int64,
    9: np.uint32,
    10: np.uint64,
    11: np.bool_,
    12: np.float64,
    27: ml_dtypes.bfloat16,
}


# Op attributes holding a dtype (Cast's dst_type) use GE's C++ `ge::DataType` numbers, not the graph proto's
# (torchair/ge/_ge_graph.py: class DataType); C++ number -> proto number.
GE_CPP_TO_PROTO_DTYPE = {0: 1, 1: 2, 2: 3, 3: 7, 4: 4, 6: 5, 7: 6, 8: 9, 9: 8, 10: 10, 11: 12, 12: 11, 27: 27}


class UnknownGeOp(RuntimeError):
    """The graph holds an op type the interpreter does not implement."""


def numpy_dtype(ge_dtype: int):
    try:
        return GE_TO_NUMPY[ge_dtype]
    except KeyError:
        raise UnknownGeOp(f"GE data type {ge_dtype} has no numpy counterpart in the harness") from None


def cast(values: np.ndarray, ge_dtype: int) -> np.ndarray:
    """`values` rounded to a GE dtype (round to nearest even, as GE's Cast does)."""
    target = numpy_dtype(ge_dtype)
    values = np.asarray(values)
    if np.issubdtype(np.dtype(target), np.integer) and values.dtype.kind == "f":
        values = np.trunc(values)
    return values.astype(target)


# ---------------------------------------------------------------------------------------------------------------
# Attributes


def _attr(op: GeOp, key: str, default=None):
    if key not in op.attrs:
        return default
    value = op.attrs[key]
    which = value.WhichOneof("value")
    if which == "list":
        lst = value.list
        for field in ("i", "f", "b", "s"):
            items = list(getattr(lst, field))
            if items:
                return items
        return []
    if which == "t":
        return value.t
    return getattr(value, which)


def const_value(op: GeOp) -> np.ndarray:
    tensor = op.attrs["value"].t
    dtype = numpy_dtype(int(tensor.desc.dtype))
    shape = tuple(tensor.desc.shape.dim)
    return np.frombuffer(tensor.data, dtype=dtype).reshape(shape).copy()


def _f32(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(np.float32)


def _axes(values: np.ndarray, rank: int) -> tuple[int, ...]:
    return tuple(int(a) % rank for a in np.atleast_1d(values))


# ---------------------------------------------------------------------------------------------------------------
# Op types. Each: (op, inputs) -> list of outputs (any float dtype; `walk` casts to the declared dtypes).


def _elementwise(fn):
    def run(op, x):
        return [fn(*[_f32(a) if a.dtype.kind == "f" or a.dtype == ml_dtypes.bfloat16 else a for a in x])]

    return run


def _matmul_v2(op, x):
    a, b = _f32(x[0]), _f32(x[1])
    if _attr(op, "transpose_x1", False):
        a = a.T
    if _attr(op, "transpose_x2", False):
        b = b.T
    y = a @ b
    if len(x) > 2 and x[2] is not None:
        y = y + _f32(x[2])
    return [y]


def _batch_matmul(op, x):
    a, b = _f32(x[0]), _f32(x[1])
    if _attr(op, "adj_x1", False):
        a = np.swapaxes(a, -1, -2)
    if _attr(op, "adj_x2", False):
        b = np.swapaxes(b, -1, -2)
    y = np.matmul(a, b)
    if len(x) > 2 and x[2] is not None:
        y = y + _f32(x[2])
    return [y]


def _softmax(op, x):
    v = _f32(x[0])
    axes = _axes(_attr(op, "axes", [-1]), v.ndim)
    shifted = v - v.max(axis=axes, keepdims=True)
    e = np.exp(shifted)
    return [e / e.sum(axis=axes, keepdims=True)]


def _masked_fill(op, x):
    v, mask, value = x
    return [
        np.where(np.broadcast_to(mask.astype(bool), np.broadcast_shapes(v.shape, mask.shape)), _f32(value), _f32(v))
    ]


def _reshape(op, x):
    shape = [int(d) for d in x[1]]
    return [x[0].reshape(shape)]


def _transpose(op, x):
    return [np.transpose(x[0], [int(p) for p in x[1]])]


def _cast(op, x):
    return [cast(x[0], GE_CPP_TO_PROTO_DTYPE[int(_attr(op, "dst_type"))])]


def _reduce(fn):
    def run(op, x):
        v = x[0]
        axes = _axes(x[1], v.ndim) if len(x) > 1 and x[1].size else tuple(range(v.ndim))
        return [
            fn(
                _f32(v) if v.dtype.kind == "f" or v.dtype == ml_dtypes.bfloat16 else v,
                axis=axes,
                keepdims=bool(_attr(op, "keep_dims", False)),
            )
        ]

    return run


def _rms_norm(x32: np.ndarray, gamma: np.ndarray, epsilon: float):
    dims = tuple(range(x32.ndim - gamma.ndim, x32.ndim))
    rstd = 1.0 / np.sqrt(np.mean(x32 * x32, axis=dims, keepdims=True) + np.float32(epsilon))
    return (x32 * rstd * _f32(gamma)).astype(np.float32), rstd.astype(np.float32)


def _rms_norm_op(op, x):
    y, rstd = _rms_norm(_f32(x[0]), x[1], float(_attr(op, "epsilon", 1e-6)))
    return [y, rstd]


def _add_rms_norm_cast(op, x):
    # x = x1 + x2 is rounded to the input dtype before the norm, as the kernel writes it out (output `x`)
    added = (_f32(x[0]) + _f32(x[1])).astype(x[0].dtype)
    y, rstd = _rms_norm(_f32(added), x[2], float(_attr(op, "epsilon", 1e-6)))
    y_low = y.astype(x[0].dtype)
    return [_f32(y_low), y_low, rstd, added]


def _add_rms_norm(op, x):
    added = (_f32(x[0]) + _f32(x[1])).astype(x[0].dtype)
    y, rstd = _rms_norm(_f32(added), x[2], float(_attr(op, "epsilon", 1e-6)))
    return [y, rstd, added]


def _int8(values: np.ndarray) -> np.ndarray:
    """Quantized values: round half to even, saturated to int8 (as the stand-in's torch_npu kernels do)."""
    return np.clip(np.rint(values), -128, 127).astype(np.int8)


def _per_token_quant(y32: np.ndarray, smooth: Optional[np.ndarray]):
    """DynamicQuant's per-token symmetric int8: scale = rowMax(|y·smooth|) / 127, q = round(y·smooth / scale)."""
    if smooth is not None:
        y32 = y32 * _f32(smooth)
    scale = (np.abs(y32).max(axis=-1) / np.float32(127.0)).astype(np.float32)
    return _int8(y32 / scale[..., None]), scale


def _optional(x, i: int):
    return x[i] if i < len(x) else None


def _dynamic_quant(op, x):
    if _optional(x, 2) is not None:
        raise UnknownGeOp(f"{op.name}: DynamicQuant is interpreted without group_index only")
    return list(_per_token_quant(_f32(x[0]), _optional(x, 1)))


def _add_rms_norm_dynamic_quant(op, x):
    """y1, y2, x, scale1, scale2: the normed y (rounded to the input dtype) quantized per token, one path per
    output_mask entry; an output the mask switches off is a [1] tensor of zeros (torch_npu's docs)."""
    added = (_f32(x[0]) + _f32(x[1])).astype(x[0].dtype)
    y, _rstd = _rms_norm(_f32(added), x[2], float(_attr(op, "epsilon", 1e-6)))
    beta = _optional(x, 5)
    if beta is not None:
        y = y + _f32(beta)
    y32 = _f32(y.astype(x[0].dtype))
    smooth1, smooth2 = _optional(x, 3), _optional(x, 4)
    mask = [bool(b) for b in _attr(op, "output_mask", [])] or [True, smooth1 is not None and smooth2 is not None]
    off = (np.zeros([1], dtype=np.int8), np.zeros([1], dtype=np.float32))
    y1, scale1 = _per_token_quant(y32, smooth1) if mask[0] else off
    y2, scale2 = _per_token_quant(y32, smooth2) if mask[1] else off
    return [y1, y2, added, scale1, scale2]


def _quantize(op, x):
    """Quantize (npu_quantize, div_mode): round(x / scales + zero_points), scales and zero_points already shaped to
    broadcast along `axis` by the converter's Unsqueeze."""
    if _attr(op, "dtype", b"torch.qint8") not in (b"torch.qint8", "torch.qint8"):
        raise UnknownGeOp(f"{op.name}: Quantize is interpreted for dtype torch.qint8 only")
    q = _f32(x[0]) / _f32(x[1])
    zero_points = _optional(x, 2)
    if zero_points is not None:
        q = q + _f32(zero_points)
    return [_int8(q)]


def _transpose_batch_matmul(op, x):
    """y = permute(permute(x1, perm_x1) @ permute(x2, perm_x2), perm_y)."""
    if _optional(x, 2) is not None or _optional(x, 3) is not None or int(_attr(op, "batch_split_factor", 1)) != 1:
        raise UnknownGeOp(f"{op.name}: TransposeBatchMatMul is interpreted without bias, scale or batch split")
    a = np.transpose(_f32(x[0]), [int(p) for p in _attr(op, "perm_x1", [0, 1, 2])])
    b = np.transpose(_f32(x[1]), [int(p) for p in _attr(op, "perm_x2", [0, 1, 2])])
    return [np.transpose(np.matmul(a, b), [int(p) for p in _attr(op, "perm_y", [1, 0, 2])])]


def _split_v(op, x):
    v, sizes, dim = x[0], [int(s) for s in x[1]], int(np.asarray(x[2]).reshape(-1)[0]) % x[0].ndim
    if -1 in sizes:
        sizes[sizes.index(-1)] = v.shape[dim] - (sum(sizes) + 1)
    return list(np.split(v, np.cumsum(sizes)[:-1], axis=dim))


def _arg_max_with_value(op, x):
    v = _f32(x[0])
    dim = int(_attr(op, "dimension")) % v.ndim
    keep = bool(_attr(op, "keep_dims", False))
    return [np.argmax(v, axis=dim, keepdims=keep).astype(np.int32), np.max(v, axis=dim, keepdims=keep)]


def _strided_slice_v2(op, x):
    v = x[0]
    begin, end = np.atleast_1d(x[1]), np.atleast_1d(x[2])
    axes = np.atleast_1d(x[3]) if len(x) > 3 and x[3] is not None else np.arange(len(begin))
    strides = np.atleast_1d(x[4]) if len(x) > 4 and x[4] is not None else np.ones(len(begin), dtype=np.int64)
    index = [slice(None)] * v.ndim
    for b, e, a, s in zip(begin, end, axes, strides):
        index[int(a) % v.ndim] = slice(int(b), int(e), int(s))
    return [v[tuple(index)]]


def _broadcast_to(op, x):
    return [np.broadcast_to(x[0], [int(d) for d in x[1]]).copy()]


def _gelu(op, x):
    v = _f32(x[0])
    approximate = _attr(op, "approximate", b"none")
    if approximate in (b"tanh", "tanh") or op.type == "Gelu":
        # GE's Gelu is the tanh approximation; GeluV2 follows `approximate`
        inner = np.float32(np.sqrt(2.0 / np.pi)) * (v + np.float32(0.044715) * v**3)
        return [np.float32(0.5) * v * (np.float32(1.0) + np.tanh(inner))]
    from math import erf

    return [(0.5 * v * (1.0 + np.vectorize(erf)(v / np.sqrt(2.0)))).astype(np.float32)]


def _fused_infer_attention_score(op, x):
    """BSH layout, one key/value tensor in each list, boolean mask (True = masked out), sparse_mode 0."""
    layout = _attr(op, "input_layout", b"BSH")
    if layout not in (b"BSH", "BSH") or int(_attr(op, "sparse_mode", 0)) != 0:
        raise UnknownGeOp(f"{op.name}: FusedInferAttentionScore is interpreted for BSH, sparse_mode 0 only")
    query, key, value = _f32(x[0]), _f32(x[1]), _f32(x[2])
    mask = x[4] if len(x) > 4 else None
    heads = int(_attr(op, "num_heads"))
    scale = np.float32(_attr(op, "scale", 1.0))
    b, s_q, h = query.shape
    d = h // heads
    q = query.reshape(b, s_q, heads, d).transpose(0, 2, 1, 3)
    k = key.reshape(b, key.shape[1], heads, d).transpose(0, 2, 1, 3)
    v = value.reshape(b, value.shape[1], heads, d).transpose(0, 2, 1, 3)
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    if mask is not None:
        scores = np.where(np.broadcast_to(mask.astype(bool), scores.shape), np.float32(-np.inf), scores)
    (probs,) = _softmax_last(scores)
    out = np.matmul(probs, v).transpose(0, 2, 1, 3).reshape(b, s_q, h)
    return [out, np.zeros(1, dtype=np.float32)]


def _softmax_last(v):
    e = np.exp(v - v.max(axis=-1, keepdims=True))
    return [e / e.sum(axis=-1, keepdims=True)]


def _index(op, x):
    """aten.index: `indexed_sizes` marks which leading dims are indexed; the rest of the inputs are the indices."""
    v, indexed = x[0], [int(m) for m in x[1]]
    indices = iter(x[3:])
    key = tuple(next(indices).astype(np.int64) if m else slice(None) for m in indexed)
    return [v[key]]


def _identity(op, x):
    return [x[0]]


def _expand_dims(op, x):
    return [np.expand_dims(x[0], int(np.asarray(x[1]).reshape(-1)[0]))]


def _unsqueeze(op, x):
    out = x[0]
    for axis in sorted(int(a) for a in _attr(op, "axes", [])):
        out = np.expand_dims(out, axis)
    return [out]


def _squeeze(op, x):
    axes = _attr(op, "axis", [])
    return [np.squeeze(x[0], axis=tuple(int(a) for a in axes) if axes else None)]


def _fill(op, x):
    return [np.full([int(d) for d in x[0]], x[1])]


def _shape(op, x):
    return [np.asarray(x[0].shape, dtype=np.int64)]


def _gather(op, x):
    if int(_attr(op, "batch_dims", 0)) != 0:
        raise UnknownGeOp(f"{op.name}: Gather is interpreted for batch_dims 0 only")
    return [np.take(x[0], x[1].astype(np.int64), axis=0)]


def _index_by_tensor(op, x):
    """x[..., idx, ...]: `indices_mask` marks the indexed dims, which take the index tensors in order."""
    indices = iter(x[1:])
    key = tuple(next(indices).astype(np.int64) if m else slice(None) for m in _attr(op, "indices_mask"))
    return [x[0][key]]


def _muls(op, x):
    return [_f32(x[0]) * np.float32(_attr(op, "value"))]


def _pack(op, x):
    return [np.stack(x, axis=int(_attr(op, "axis", 0)))]


def _concat_v2(op, x):
    return [np.concatenate(x[:-1], axis=int(np.asarray(x[-1]).reshape(-1)[0]))]


def _sigmoid(v):
    return np.float32(1.0) / (np.float32(1.0) + np.exp(-v))


_OPS: dict[str, Callable[[GeOp, Sequence[np.ndarray]], list]] = {
    "Add": _elementwise(np.add),
    "AddV2": _elementwise(np.add),
    "Sub": _elementwise(np.subtract),
    "Mul": _elementwise(np.multiply),
    "RealDiv": _elementwise(np.divide),
    "Div": _elementwise(np.divide),
    "Maximum": _elementwise(np.maximum),
    "Minimum": _elementwise(np.minimum),
    "Pow": _elementwise(np.power),
    "Sqrt": _elementwise(np.sqrt),
    "Rsqrt": _elementwise(lambda v: np.float32(1.0) / np.sqrt(v)),
    "Exp": _elementwise(np.exp),
    "Tanh": _elementwise(np.tanh),
    "Relu": _elementwise(lambda v: np.maximum(v, np.zeros((), v.dtype))),
    "Sigmoid": _elementwise(_sigmoid),
    "Abs": _elementwise(np.abs),
    "Neg": _elementwise(np.negative),
    "Square": _elementwise(np.square),
    "Greater": _elementwise(np.greater),
    "Less": _elementwise(np.less),
    "Equal": _elementwise(np.equal),
    "LogicalNot": _elementwise(np.logical_not),
    "MatMulV2": _matmul_v2,
    "MatMul": _matmul_v2,
    "BatchMatMul": _batch_matmul,
    "BatchMatMulV2": _batch_matmul,
    "SoftmaxV2": _softmax,
    "MaskedFill": _masked_fill,
    "Reshape": _reshape,
    "Transpose": _transpose,
    "Cast": _cast,
    "ReduceMean": _reduce(np.mean),
    "ReduceSum": _reduce(np.sum),
    "ReduceMax": _reduce(np.max),
    "RmsNorm": _rms_norm_op,
    "AddRmsNorm": _add_rms_norm,
    "AddRmsNormCast": _add_rms_norm_cast,
    "DynamicQuant": _dynamic_quant,
    "AddRmsNormDynamicQuant": _add_rms_norm_dynamic_quant,
    "Quantize": _quantize,
    "TransposeBatchMatMul": _transpose_batch_matmul,
    "SplitV": _split_v,
    "ArgMaxWithValue": _arg_max_with_value,
    "StridedSliceV2": _strided_slice_v2,
    "BroadcastTo": _broadcast_to,
    "Gelu": _gelu,
    "GeluV2": _gelu,
    "FusedInferAttentionScore": _fused_infer_attention_score,
    "Index": _index,
    "Identity": _identity,
    "TensorMove": _identity,
    "ExpandDims": _expand_dims,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Fill": _fill,
    "Shape": _shape,
    "Gather": _gather,
    "IndexByTensor": _index_by_tensor,
    "Muls": _muls,
    "Pack": _pack,
    "ConcatV2": _concat_v2,
}


def evaluate(op: GeOp, inputs: Sequence[Optional[np.ndarray]]) -> list[np.ndarray]:
    """The outputs a fault-free GE computes for one op, each in the dtype the graph declares."""
    try:
        fn = _OPS[op.type]
    except KeyError:
        raise UnknownGeOp(f"GE op type {op.type} (op {op.name}) is not interpreted by the harness") from None
    outputs = fn(op, list(inputs))
    if len(outputs) != len(op.output_descs):
        raise UnknownGeOp(
            f"{op.name} ({op.type}): interpreted {len(outputs)} outputs, the graph declares {len(op.output_descs)}"
        )
    dtypes = output_dtypes(op, inputs)
    for desc, dtype in zip(op.output_descs, dtypes):
        if desc.fx_name is not None and desc.dtype != dtype:  # declared from the FX meta: must agree
            raise UnknownGeOp(f"{op.name} ({op.type}): inferred output dtype {dtype}, torchair declares {desc.dtype}")
    return [cast(out, dtype) for out, dtype in zip(outputs, dtypes)]


NUMPY_TO_GE = {np.dtype(v): k for k, v in GE_TO_NUMPY.items()}
_FLOAT_RANK = {27: 1, 2: 1, 1: 2, 12: 3}  # bf16, fp16 < fp32 < fp64
_BOOL = 11
_ELEMENTWISE_BINARY = {"Add", "AddV2", "Sub", "Mul", "RealDiv", "Div", "Maximum", "Minimum", "Pow"}
_COMPARISON = {"Greater", "Less", "Equal", "LogicalNot"}
_FIXED_OUTPUTS = {  # outputs whose dtype the REG_OP fixes; None = the dtype of input 0
    "ArgMaxWithValue": (7, None),
    "RmsNorm": (None, 1),
    "AddRmsNorm": (None, 1, None),
    "AddRmsNormCast": (1, None, 1, None),
    "FusedInferAttentionScore": (None, 1),
    "DynamicQuant": (3, 1),  # int8 (the only dst_type interpreted), float32 scale
    "AddRmsNormDynamicQuant": (3, 3, None, 1, 1),
    "Quantize": (3,),
}


def _promote(dtypes: list) -> int:
    floats = [d for d in dtypes if d in _FLOAT_RANK]
    if floats:
        return max(floats, key=lambda d: _FLOAT_RANK[d])
    non_bool = [d for d in dtypes if d != _BOOL]
    return non_bool[0] if non_bool else _BOOL


def output_dtypes(op: GeOp, inputs: Sequence[Optional[np.ndarray]]) -> list[int]:
    """The dtypes GE infers for an op's outputs. torchair declares dtypes only on the tensors a converter returns
    (from the FX meta) and leaves DT_FLOAT on the rest, so the inner ops' dtypes are inferred here, per REG_OP."""
    first = NUMPY_TO_GE[np.dtype(inputs[0].dtype)] if inputs and inputs[0] is not None else None
    n = len(op.output_descs)
    if op.type == "Cast":
        return [GE_CPP_TO_PROTO_DTYPE[int(_attr(op, "dst_type"))]]
    if op.type == "Shape":
        return [GE_CPP_TO_PROTO_DTYPE[int(_attr(op, "dtype", 3))]]
    if op.type in _COMPARISON:
        return [_BOOL] * n
    if op.type in _ELEMENTWISE_BINARY:
        return [_promote([NUMPY_TO_GE[np.dtype(a.dtype)] for a in inputs if a is not None])]
    if op.type in _FIXED_OUTPUTS:
        return [first if d is None else d for d in _FIXED_OUTPUTS[op.type]]
    return [first] * n


Settle = Callable[[GeOp, list], list]


def walk(graph: GeGraph, graph_inputs: Sequence[np.ndarray], settle: Optional[Settle] = None) -> dict:
    """Every op's outputs, keyed (op name, output index). `graph_inputs[i]` feeds the Data op of index i;
    `settle(op, outputs)` may replace what an op computed before its consumers read it."""
    values: dict[tuple[str, int], np.ndarray] = {}
    for op in graph.ops:
        inputs = [None if edge is None else values[(edge.producer, edge.index)] for edge in op.inputs]
        if op.type in ("Data", "RefData"):
            index = int(_attr(op, "index"))
            outputs = [cast(graph_inputs[index], op.output_descs[0].dtype)]
        elif op.type in ("Const", "Constant"):
            outputs = [const_value(op)]
        elif op.type == "NetOutput":
            outputs = list(inputs)
        else:
            outputs = evaluate(op, inputs)
        if settle is not None and op.dumped:
            outputs = settle(op, outputs)
        for index, value in enumerate(outputs):
            values[(op.name, index)] = value
    return values


def net_outputs(graph: GeGraph, values: dict) -> list[np.ndarray]:
    out = [op for op in graph.ops if op.type == "NetOutput"]
    if len(out) != 1:
        raise ValueError(f"graph {graph.name} has {len(out)} NetOutput ops")
    return [values[(edge.producer, edge.index)] for edge in out[0].inputs if edge is not None]
