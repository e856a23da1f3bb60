"""CPU implementations of the `npu::` operators the catalogue uses, under torch_npu's names and schemas.

Each computes what the NPU kernel computes (float32 accumulation for 16-bit inputs, outputs in the input dtype,
`rstd` in float32); each has a fake (meta) implementation so dynamo and AOT can trace it.
"""

from __future__ import annotations

import torch

_LIB = torch.library.Library("npu", "DEF")

_SCHEMAS = {
    "npu_rms_norm": "npu_rms_norm(Tensor self, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor)",
    "npu_add_rms_norm": (
        "npu_add_rms_norm(Tensor x1, Tensor x2, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor, Tensor)"
    ),
    "npu_add_rms_norm_cast": (
        "npu_add_rms_norm_cast(Tensor x1, Tensor x2, Tensor gamma, float epsilon=1e-06)"
        " -> (Tensor, Tensor, Tensor, Tensor)"
    ),
    "_npu_dtype_cast": "_npu_dtype_cast(Tensor self, ScalarType dtype) -> Tensor",
    "npu_dtype_cast": "npu_dtype_cast(Tensor self, ScalarType dtype) -> Tensor",
    # torch_npu's schema has ~30 more optional quantisation/paging arguments after `atten_mask`; the catalogue
    # passes none of them, and torchair's converter gives each the same default.
    "npu_fused_infer_attention_score": (
        "npu_fused_infer_attention_score(Tensor query, Tensor key, Tensor value, *, Tensor? pse_shift=None,"
        " Tensor? atten_mask=None, int num_heads=1, float scale=1.0, int pre_tokens=2147483647,"
        ' int next_tokens=2147483647, str input_layout="BSH", int num_key_value_heads=0, int sparse_mode=0,'
        " int inner_precise=0, int block_size=0, int antiquant_mode=0, bool softmax_lse_flag=False,"
        " int key_antiquant_mode=0, int value_antiquant_mode=0) -> (Tensor, Tensor)"
    ),
}
# Operators torchair's pattern passes trace when they register (patterns/add_rms_norm_quant.py,
# add_rms_norm_dynamic_quant.py, batch_matmul_transpose.py): the patterns need their schemas and fake
# implementations; no catalogue model calls them, so their CPU kernels refuse.
_PATTERN_ONLY_SCHEMAS = {
    "npu_quantize": (
        "npu_quantize(Tensor self, Tensor scales, Tensor? zero_points, ScalarType dtype, int axis=1,"
        " bool div_mode=True) -> Tensor"
    ),
    "npu_dynamic_quant": (
        "npu_dynamic_quant(Tensor input, *, Tensor? smooth_scales=None, Tensor? group_index=None,"
        " ScalarType? dst_type=None) -> (Tensor, Tensor)"
    ),
    "npu_add_rms_norm_quant": (
        "npu_add_rms_norm_quant(Tensor x1, Tensor x2, Tensor gamma, Tensor scales1, Tensor? zero_points1=None,"
        " Tensor? scales2=None, Tensor? zero_points2=None, int axis=-1, float epsilon=1e-06, bool div_mode=True)"
        " -> (Tensor, Tensor, Tensor)"
    ),
    "npu_add_rms_norm_dynamic_quant": (
        "npu_add_rms_norm_dynamic_quant(Tensor x1, Tensor x2, Tensor gamma, *, Tensor? smooth_scale1=None,"
        " Tensor? smooth_scale2=None, Tensor? beta=None, float epsilon=1e-06, bool[2]? output_mask=None,"
        " int? y_dtype=None) -> (Tensor, Tensor, Tensor, Tensor, Tensor)"
    ),
    "npu_transpose_batchmatmul": (
        "npu_transpose_batchmatmul(Tensor input, Tensor weight, *, Tensor? bias=None, Tensor? scale=None,"
        " int[]? perm_x1=None, int[]? perm_x2=None, int[]? perm_y=None, int? batch_split_factor=1) -> Tensor"
    ),
}
for _schema in (*_SCHEMAS.values(), *_PATTERN_ONLY_SCHEMAS.values()):
    _LIB.define(_schema)


def _rms_norm(x: torch.Tensor, gamma: torch.Tensor, epsilon: float):
    dims = tuple(range(x.dim() - gamma.dim(), x.dim()))
    x32 = x.float()
    rstd = torch.rsqrt(x32.pow(2).mean(dim=dims, keepdim=True) + epsilon)
    y = (x32 * rstd * gamma.float()).to(x.dtype)
    return y, rstd


def _rstd_shape(x: torch.Tensor, gamma: torch.Tensor) -> list:
    return list(x.shape[: x.dim() - gamma.dim()]) + [1] * gamma.dim()


def _rms_norm_cpu(x, gamma, epsilon=1e-6):
    return _rms_norm(x, gamma, epsilon)


def _rms_norm_fake(x, gamma, epsilon=1e-6):
    return torch.empty_like(x), x.new_empty(_rstd_shape(x, gamma), dtype=torch.float32)


def _add_rms_norm_cpu(x1, x2, gamma, epsilon=1e-6):
    x = (x1.float() + x2.float()).to(x1.dtype)
    y, rstd = _rms_norm(x, gamma, epsilon)
    return y, rstd, x


def _add_rms_norm_fake(x1, x2, gamma, epsilon=1e-6):
    return torch.empty_like(x1), x1.new_empty(_rstd_shape(x1, gamma), dtype=torch.float32), torch.empty_like(x1)


def _add_rms_norm_cast_cpu(x1, x2, gamma, epsilon=1e-6):
    y, rstd, x = _add_rms_norm_cpu(x1, x2, gamma, epsilon)
    return y.float(), y, rstd, x


def _add_rms_norm_cast_fake(x1, x2, gamma, epsilon=1e-6):
    y, rstd, x = _add_rms_norm_fake(x1, x2, gamma, epsilon)
    return torch.empty_like(x1, dtype=torch.float32), y, rstd, x


def _dtype_cast(x, dtype):
    return x.to(dtype)


def _attention_bsh(query, key, value, atten_mask, num_heads, scale):
    """BSH layout, one key/value head group per query head, `atten_mask` True = masked out (sparse_mode 0)."""
    b, s_q, h = query.shape
    s_kv = key.shape[1]
    d = h // num_heads
    q = query.float().reshape(b, s_q, num_heads, d).transpose(1, 2)
    k = key.float().reshape(b, s_kv, num_heads, d).transpose(1, 2)
    v = value.float().reshape(b, s_kv, num_heads, d).transpose(1, 2)
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    if atten_mask is not None:
        scores = scores.masked_fill(atten_mask.bool(), float("-inf"))
    out = torch.matmul(torch.softmax(scores, dim=-1), v)
    return out.transpose(1, 2).reshape(b, s_q, h).to(query.dtype)


def _fused_infer_attention_score_cpu(
    query,
    key,
    value,
    *,
    pse_shift=None,
    atten_mask=None,
    num_heads=1,
    scale=1.0,
    input_layout="BSH",
    softmax_lse_flag=False,
    **unused,
):
    if input_layout != "BSH" or pse_shift is not None or softmax_lse_flag:
        raise NotImplementedError("the stand-in computes BSH attention without pse_shift or softmax_lse only")
    return _attention_bsh(query, key, value, atten_mask, num_heads, scale), torch.zeros(1, dtype=torch.float32)


def _fused_infer_attention_score_fake(query, key, value, **unused):
    return torch.empty_like(query), query.new_empty([1], dtype=torch.float32)


_IMPLS = {
    "npu_rms_norm": (_rms_norm_cpu, _rms_norm_fake),
    "npu_add_rms_norm": (_add_rms_norm_cpu, _add_rms_norm_fake),
    "npu_add_rms_norm_cast": (_add_rms_norm_cast_cpu, _add_rms_norm_cast_fake),
    "_npu_dtype_cast": (_dtype_cast, lambda x, dtype: torch.empty_like(x, dtype=dtype)),
    "npu_dtype_cast": (_dtype_cast, lambda x, dtype: torch.empty_like(x, dtype=dtype)),
    "npu_fused_infer_attention_score": (_fused_infer_attention_score_cpu, _fused_infer_attention_score_fake),
}


def _quantize_fake(x, scales, zero_points, dtype, axis=1, div_mode=True):
    return torch.empty_like(x, dtype=dtype)


def _dynamic_quant_fake(x, *, smooth_scales=None, group_index=None, dst_type=None):
    return torch.empty_like(x, dtype=torch.int8), x.new_empty(x.shape[:-1], dtype=torch.float32)


def _add_rms_norm_quant_fake(
    x1, x2, gamma, scales1, zero_points1=None, scales2=None, zero_points2=None, axis=-1, epsilon=1e-6, div_mode=True
):
    return torch.empty_like(x1, dtype=torch.int8), torch.empty_like(x1, dtype=torch.int8), torch.empty_like(x1)


def _add_rms_norm_dynamic_quant_fake(
    x1, x2, gamma, *, smooth_scale1=None, smooth_scale2=None, beta=None, epsilon=1e-6, output_mask=None, y_dtype=None
):
    y = torch.empty_like(x1, dtype=torch.int8)
    scale = x1.new_empty(x1.shape[:-1], dtype=torch.float32)
    return y, torch.empty_like(y), torch.empty_like(x1), scale, torch.empty_like(scale)


def _transpose_batchmatmul_fake(
    x1, x2, *, bias=None, scale=None, perm_x1=None, perm_x2=None, perm_y=None, batch_split_factor=1
):
    a = x1.permute(perm_x1 or [0, 1, 2])
    b = x2.permute(perm_x2 or [0, 1, 2])
    return x1.new_empty((a.shape[0], a.shape[1], b.shape[2])).permute(perm_y or [1, 0, 2]).contiguous()


def _refuse(name):
    def kernel(*args, **kwargs):
        raise NotImplementedError(f"npu::{name} only serves torchair's pattern registration in the stand-in")

    return kernel


_PATTERN_ONLY_FAKES = {
    "npu_quantize": _quantize_fake,
    "npu_dynamic_quant": _dynamic_quant_fake,
    "npu_add_rms_norm_quant": _add_rms_norm_quant_fake,
    "npu_add_rms_norm_dynamic_quant": _add_rms_norm_dynamic_quant_fake,
    "npu_transpose_batchmatmul": _transpose_batchmatmul_fake,
}
_IMPLS.update({name: (_refuse(name), fake) for name, fake in _PATTERN_ONLY_FAKES.items()})

for _name, (_cpu, _fake) in _IMPLS.items():
    _LIB.impl(_name, _cpu, "CPU")
    torch.library.register_fake(f"npu::{_name}", _fake, lib=_LIB)


def npu_rms_norm(x, gamma, epsilon=1e-6):
    return torch.ops.npu.npu_rms_norm(x, gamma, epsilon)


def npu_add_rms_norm(x1, x2, gamma, epsilon=1e-6):
    return torch.ops.npu.npu_add_rms_norm(x1, x2, gamma, epsilon)


def npu_dtype_cast(x, dtype):
    return torch.ops.npu.npu_dtype_cast(x, dtype)


def npu_fused_infer_attention_score(query, key, value, **kwargs):
    return torch.ops.npu.npu_fused_infer_attention_score(query, key, value, **kwargs)
