"""The operators of torchair's pattern passes (patterns/add_rms_norm_quant.py, add_rms_norm_dynamic_quant.py,
batch_matmul_transpose.py): torch_npu 2.14's schemas (torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml in
the wheel), fake kernels as its meta registrations give shapes and dtypes (op_plugin/meta/_meta_registrations.py),
and CPU kernels that follow torch_npu's documented formulas (the operator docs in torch_npu/_op_plugin_docs.py):

- npu_quantize: div_mode y = round(x / scales + zero_points), else round(x * scales + zero_points), along `axis`;
- npu_dynamic_quant (per token): scale = rowMax(|x·smooth|) / DTYPE_MAX, y = round(x·smooth / scale);
- npu_add_rms_norm_quant / npu_add_rms_norm_dynamic_quant: x_out = x1 + x2, y = rms_norm(x_out)·gamma (+ beta),
  then the quantization above, one path per scales / smooth_scale given (output_mask chooses for the dynamic one);
- npu_transpose_batchmatmul: y = permute(permute(x1, perm_x1) @ permute(x2, perm_x2), perm_y).

How exact: float32 arithmetic, round half to even, saturation to the int8 range; the normalized `y` is rounded to
the input dtype before it is quantized (as the unfused npu_add_rms_norm + quantize pair computes it). The NPU may
keep `y` in float32 inside the fused kernels, or divide by a scale as a multiplication by its reciprocal, which can
move a quantized value by one step. That is enough here: nothing the harness judges depends on these kernels
agreeing with the NPU. The FX dump holds what they computed, and the GE side is built from those FX values (an
output of a pattern-fused op takes the FX value of the replaced node's output that holds it). Only int8 (and
qint8) outputs, the per-token mode and no group_index are implemented; anything else refuses.
"""

from __future__ import annotations

import torch

from ._norm import add_rms_norm

SCHEMAS = {
    "npu_quantize": (
        "npu_quantize(Tensor self, Tensor scales, Tensor? zero_points, int dtype, int axis=1, bool div_mode=True)"
        " -> Tensor"
    ),
    "npu_dynamic_quant": (
        "npu_dynamic_quant(Tensor input, *, Tensor? smooth_scales=None, Tensor? group_index=None, int? dst_type=None,"
        ' str quant_mode="pertoken", float dst_type_max=0.0) -> (Tensor, Tensor)'
    ),
    "npu_add_rms_norm_quant": (
        "npu_add_rms_norm_quant(Tensor x1, Tensor x2, Tensor gamma, Tensor scales1, Tensor? zero_points1,"
        " Tensor? beta=None, Tensor? scales2=None, Tensor? zero_points2=None, *, int axis=-1, float epsilon=1e-06,"
        " bool div_mode=True, int? dst_type=None) -> (Tensor, Tensor, Tensor)"
    ),
    "npu_add_rms_norm_dynamic_quant": (
        "npu_add_rms_norm_dynamic_quant(Tensor x1, Tensor x2, Tensor gamma, *, Tensor? smooth_scale1=None,"
        " Tensor? smooth_scale2=None, Tensor? beta=None, float epsilon=1e-6, bool[2]? output_mask=None,"
        " int? y_dtype=None) -> (Tensor, Tensor, Tensor, Tensor, Tensor)"
    ),
    "npu_transpose_batchmatmul": (
        "npu_transpose_batchmatmul(Tensor input, Tensor weight, *, Tensor? bias=None, Tensor? scale=None,"
        " int[]? perm_x1=None, int[]? perm_x2=None, int[]? perm_y=None, int? batch_split_factor=1) -> Tensor"
    ),
}

# torch's ScalarType numbers, as torch_npu's `int dtype` arguments take them: int8 and qint8 (both int8 data)
_INT8_CODES = (1, 12)
_INT8_MAX = 127.0


def _int8_code(code, what: str) -> None:
    if code is not None and code not in _INT8_CODES:
        raise NotImplementedError(f"{what}: the stand-in quantizes to int8 only (dtype code {code})")


def _saturate_int8(values: torch.Tensor) -> torch.Tensor:
    return torch.round(values).clamp(-128.0, 127.0).to(torch.int8)


def _along(t: torch.Tensor, axis: int, ndim: int) -> torch.Tensor:
    """A 1-D per-channel tensor shaped to broadcast along `axis` of an ndim-D tensor."""
    axis = axis % ndim
    return t.float().reshape([-1 if d == axis else 1 for d in range(ndim)])


def quantize(x, scales, zero_points, axis: int, div_mode: bool) -> torch.Tensor:
    x32 = x.float()
    s = _along(scales, axis, x.dim()) if scales.dim() == 1 else scales.float()
    q = x32 / s if div_mode else x32 * s
    if zero_points is not None:
        q = q + (_along(zero_points, axis, x.dim()) if zero_points.dim() == 1 else zero_points.float())
    return _saturate_int8(q)


def dynamic_quant(x, smooth_scales=None):
    """Per-token symmetric int8: (y, scale) with scale of shape x.shape[:-1]."""
    x32 = x.float()
    if smooth_scales is not None:
        x32 = x32 * smooth_scales.float()
    scale = x32.abs().amax(dim=-1) / _INT8_MAX
    return _saturate_int8(x32 / scale.unsqueeze(-1)), scale


def _normed(x1, x2, gamma, beta, epsilon):
    y, _rstd, x = add_rms_norm(x1, x2, gamma, epsilon)
    if beta is not None:
        y = (y.float() + beta.float()).to(x1.dtype)
    return y, x


# --- CPU kernels ------------------------------------------------------------------------------------------------


def _quantize_cpu(x, scales, zero_points, dtype, axis=1, div_mode=True):
    _int8_code(dtype, "npu_quantize")
    return quantize(x, scales, zero_points, axis, div_mode)


def _dynamic_quant_cpu(x, *, smooth_scales=None, group_index=None, dst_type=None, quant_mode="pertoken",
                       dst_type_max=0.0):  # fmt: skip
    _int8_code(dst_type, "npu_dynamic_quant")
    if group_index is not None or quant_mode != "pertoken" or dst_type_max != 0.0:
        raise NotImplementedError("npu_dynamic_quant: the stand-in computes per-token quantization without groups")
    return dynamic_quant(x, smooth_scales)


def _add_rms_norm_quant_cpu(x1, x2, gamma, scales1, zero_points1, beta=None, scales2=None, zero_points2=None, *,
                            axis=-1, epsilon=1e-6, div_mode=True, dst_type=None):  # fmt: skip
    _int8_code(dst_type, "npu_add_rms_norm_quant")
    y, x = _normed(x1, x2, gamma, beta, epsilon)
    y1 = quantize(y, scales1, zero_points1, -1, div_mode)
    y2 = quantize(y, scales2, zero_points2, -1, div_mode) if scales2 is not None else torch.zeros_like(y1)
    return y1, y2, x


def _add_rms_norm_dynamic_quant_cpu(x1, x2, gamma, *, smooth_scale1=None, smooth_scale2=None, beta=None,
                                    epsilon=1e-6, output_mask=None, y_dtype=None):  # fmt: skip
    _int8_code(y_dtype, "npu_add_rms_norm_dynamic_quant")
    if output_mask is None:
        first, second = True, smooth_scale1 is not None and smooth_scale2 is not None
    else:
        first, second = bool(output_mask[0]), bool(output_mask[1])
    y, x = _normed(x1, x2, gamma, beta, epsilon)
    empty_y, empty_scale = torch.empty(0, dtype=torch.int8), torch.empty(0, dtype=torch.float32)
    y1, scale1 = dynamic_quant(y, smooth_scale1) if first else (empty_y, empty_scale)
    y2, scale2 = dynamic_quant(y, smooth_scale2) if second else (empty_y.clone(), empty_scale.clone())
    return y1, y2, x, scale1, scale2


def _transpose_batchmatmul_cpu(x1, x2, *, bias=None, scale=None, perm_x1=None, perm_x2=None, perm_y=None,
                               batch_split_factor=1):  # fmt: skip
    if bias is not None or scale is not None or batch_split_factor != 1:
        raise NotImplementedError("npu_transpose_batchmatmul: the stand-in has no bias, scale or batch split")
    a = x1.float().permute(list(perm_x1 or [0, 1, 2]))
    b = x2.float().permute(list(perm_x2 or [0, 1, 2]))
    return torch.bmm(a, b).permute(list(perm_y or [1, 0, 2])).contiguous().to(x1.dtype)


# --- fake kernels (torch_npu's meta registrations, for the int8 outputs above) ----------------------------------


def _quantize_fake(x, scales, zero_points, dtype, axis=1, div_mode=True):
    return torch.empty_like(x, dtype=torch.int8)


def _dynamic_quant_fake(x, *, smooth_scales=None, group_index=None, dst_type=None, quant_mode="pertoken",
                        dst_type_max=0.0):  # fmt: skip
    return torch.empty_like(x, dtype=torch.int8), x.new_empty(x.shape[:-1], dtype=torch.float32)


def _add_rms_norm_quant_fake(x1, x2, gamma, scales1, zero_points1, beta=None, scales2=None, zero_points2=None, *,
                             axis=-1, epsilon=1e-6, div_mode=True, dst_type=None):  # fmt: skip
    return torch.empty_like(x1, dtype=torch.int8), torch.empty_like(x1, dtype=torch.int8), torch.empty_like(x1)


def _add_rms_norm_dynamic_quant_fake(x1, x2, gamma, *, smooth_scale1=None, smooth_scale2=None, beta=None,
                                     epsilon=1e-6, output_mask=None, y_dtype=None):  # fmt: skip
    if output_mask is None:
        first, second = True, smooth_scale1 is not None and smooth_scale2 is not None
    else:
        first, second = bool(output_mask[0]), bool(output_mask[1])
    y_shape, scale_shape = list(x1.shape), list(x1.shape[:-1])
    return (
        x1.new_empty(y_shape if first else [0], dtype=torch.int8),
        x1.new_empty(y_shape if second else [0], dtype=torch.int8),
        torch.empty_like(x1),
        x1.new_empty(scale_shape if first else [0], dtype=torch.float32),
        x1.new_empty(scale_shape if second else [0], dtype=torch.float32),
    )


def _transpose_batchmatmul_fake(x1, x2, *, bias=None, scale=None, perm_x1=None, perm_x2=None, perm_y=None,
                                batch_split_factor=1):  # fmt: skip
    perm_x1, perm_x2 = list(perm_x1 or [0, 1, 2]), list(perm_x2 or [0, 1, 2])
    m, batch, n = x1.size(perm_x1.index(1)), x1.size(perm_x1.index(0)), x2.size(perm_x2.index(2))
    return x1.new_empty((m, batch, n))


IMPLS = {
    "npu_quantize": (_quantize_cpu, _quantize_fake),
    "npu_dynamic_quant": (_dynamic_quant_cpu, _dynamic_quant_fake),
    "npu_add_rms_norm_quant": (_add_rms_norm_quant_cpu, _add_rms_norm_quant_fake),
    "npu_add_rms_norm_dynamic_quant": (_add_rms_norm_dynamic_quant_cpu, _add_rms_norm_dynamic_quant_fake),
    "npu_transpose_batchmatmul": (_transpose_batchmatmul_cpu, _transpose_batchmatmul_fake),
}

__all__ = ["IMPLS", "SCHEMAS", "dynamic_quant", "quantize"]
