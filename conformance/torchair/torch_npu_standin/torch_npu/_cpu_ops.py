"""CPU implementations of the `npu::` operators the catalogue uses, under torch_npu's names and schemas
(the quantization and batch-matmul operators of torchair's pattern passes are in `_quant_ops`).

Each computes what the NPU kernel computes (float32 accumulation for 16-bit inputs, outputs in the input dtype,
`rstd` in float32); each has a fake (meta) implementation so dynamo and AOT can trace it.
"""

from __future__ import annotations

import torch

from . import _quant_ops
from ._norm import add_rms_norm, rms_norm, rstd_shape

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
# what torchair's aclgraph path replaces the op with (`acl_graph.py` `_REPLACE_FUNC_MAP`: a workspace sized
# once, then the out= form), with the same reduced argument list and torch_npu's `workspace`/out arguments
_FIA_ARGS = _SCHEMAS["npu_fused_infer_attention_score"].split("(", 1)[1].rsplit(") ->", 1)[0]
_SCHEMAS["_npu_fused_infer_attention_score_get_max_workspace"] = (
    f"_npu_fused_infer_attention_score_get_max_workspace({_FIA_ARGS}) -> Tensor"
)
_SCHEMAS["npu_fused_infer_attention_score.out"] = (
    # torchair passes the two outputs as `out=[attention_out, softmax_lse]` (acl_graph.construct_and_add_output)
    f"npu_fused_infer_attention_score.out({_FIA_ARGS}, Tensor? workspace=None, Tensor(a!)[] out) -> (Tensor, Tensor)"
)
for _schema in (*_SCHEMAS.values(), *_quant_ops.SCHEMAS.values()):
    _LIB.define(_schema)


def _rms_norm_cpu(x, gamma, epsilon=1e-6):
    return rms_norm(x, gamma, epsilon)


def _rms_norm_fake(x, gamma, epsilon=1e-6):
    return torch.empty_like(x), x.new_empty(rstd_shape(x, gamma), dtype=torch.float32)


def _add_rms_norm_cpu(x1, x2, gamma, epsilon=1e-6):
    return add_rms_norm(x1, x2, gamma, epsilon)


def _add_rms_norm_fake(x1, x2, gamma, epsilon=1e-6):
    return torch.empty_like(x1), x1.new_empty(rstd_shape(x1, gamma), dtype=torch.float32), torch.empty_like(x1)


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


def _fused_infer_attention_score_out_cpu(query, key, value, *, workspace=None, out, **kw):
    attention_out, softmax_lse = out
    result, lse = _fused_infer_attention_score_cpu(query, key, value, **kw)
    attention_out.copy_(result)
    softmax_lse.copy_(lse)
    return attention_out, softmax_lse


def _fused_infer_attention_score_out_fake(query, key, value, *, workspace=None, out, **kw):
    return out[0], out[1]


def _workspace(query, key, value, **unused):
    return query.new_empty([1], dtype=torch.uint8)


_IMPLS = {
    "npu_rms_norm": (_rms_norm_cpu, _rms_norm_fake),
    "npu_add_rms_norm": (_add_rms_norm_cpu, _add_rms_norm_fake),
    "npu_add_rms_norm_cast": (_add_rms_norm_cast_cpu, _add_rms_norm_cast_fake),
    "_npu_dtype_cast": (_dtype_cast, lambda x, dtype: torch.empty_like(x, dtype=dtype)),
    "npu_dtype_cast": (_dtype_cast, lambda x, dtype: torch.empty_like(x, dtype=dtype)),
    "npu_fused_infer_attention_score": (_fused_infer_attention_score_cpu, _fused_infer_attention_score_fake),
    "npu_fused_infer_attention_score.out": (
        _fused_infer_attention_score_out_cpu,
        _fused_infer_attention_score_out_fake,
    ),
    "_npu_fused_infer_attention_score_get_max_workspace": (_workspace, _workspace),
}


_IMPLS.update(_quant_ops.IMPLS)

for _name, (_cpu, _fake) in _IMPLS.items():
    _LIB.impl(_name, _cpu, "CPU")
    torch.library.register_fake(f"npu::{_name}", _fake, lib=_LIB)
