"""The RMS normalization the stand-in's norm kernels share (torch_npu's npu_rms_norm / npu_add_rms_norm family):
float32 arithmetic for 16-bit inputs, `y` in the input dtype, `rstd` in float32 with the normalized dims kept."""

from __future__ import annotations

import torch


def rms_norm(x: torch.Tensor, gamma: torch.Tensor, epsilon: float):
    dims = tuple(range(x.dim() - gamma.dim(), x.dim()))
    x32 = x.float()
    rstd = torch.rsqrt(x32.pow(2).mean(dim=dims, keepdim=True) + epsilon)
    y = (x32 * rstd * gamma.float()).to(x.dtype)
    return y, rstd


def add_rms_norm(x1: torch.Tensor, x2: torch.Tensor, gamma: torch.Tensor, epsilon: float):
    """(y, rstd, x): x = x1 + x2 rounded to x1's dtype (the kernel's `x_out`), then normalized."""
    x = (x1.float() + x2.float()).to(x1.dtype)
    y, rstd = rms_norm(x, gamma, epsilon)
    return y, rstd, x


def rstd_shape(x: torch.Tensor, gamma: torch.Tensor) -> list:
    return list(x.shape[: x.dim() - gamma.dim()]) + [1] * gamma.dim()
