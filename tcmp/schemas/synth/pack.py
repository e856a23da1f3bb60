"""Forward packing for the synthetic dump writer: logical tensor → device layout.

Written from the forward index maps of docs/formats.md, "Device formats" (logical index → device index), with explicit
index arithmetic: logical coordinates from `np.indices`, device coordinates from the formulas, one scatter into
a zero-filled device array (padding is zeros). Deliberately not derived from tcmp.schemas.formats.to_nd, so the
two can check each other. Meant for tests and fixtures; not tuned for speed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from tcmp.schemas.formats import NZ_FORMATS, PLAIN_FORMATS, Format

NI = 16  # rows of a fractal (N0 / Ni) in every GE fractal layout

# Formats whose C0 is part of the format itself; the `c0` argument is ignored for them.
FIXED_C0 = {
    Format.NC1HWC0_C04: 4,
    Format.FRACTAL_NZ_C0_2: 2,
    Format.FRACTAL_NZ_C0_4: 4,
    Format.FRACTAL_NZ_C0_8: 8,
    Format.FRACTAL_NZ_C0_16: 16,
    Format.FRACTAL_NZ_C0_32: 32,
}

# Logical layout assumed for `nd` when `layout` is not given.
DEFAULT_LAYOUT = {
    Format.NC1HWC0: Format.NCHW,
    Format.NC1HWC0_C04: Format.NCHW,
    Format.FRACTAL_Z: Format.NCHW,
    Format.NDC1HWC0: Format.NCDHW,
    Format.FRACTAL_Z_3D: Format.DHWCN,
}


@dataclass(frozen=True)
class PackedTensor:
    device: np.ndarray  # shaped like device_shape
    device_shape: tuple[int, ...]
    original_shape: tuple[int, ...]
    sub_format: int  # FRACTAL_Z groups when grouped, else 0


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class _Axes:
    """One value per conv axis; axes the layout lacks are 0 (as index) or 1 (as size)."""

    n: Any
    c: Any
    h: Any
    w: Any
    d: Any


def _axes(nd: np.ndarray, layout: Format) -> tuple[_Axes, _Axes]:
    """(index, size): broadcastable logical index arrays (sparse np.indices) and sizes, by axis."""
    letters = layout.name.lower()
    if len(letters) != nd.ndim:
        raise ValueError(f"a {nd.ndim}-D tensor cannot be in layout {layout.name}")
    index = dict.fromkeys("nchwd", 0)
    index.update(zip(letters, np.indices(nd.shape, sparse=True)))
    size = dict.fromkeys("nchwd", 1)
    size.update(zip(letters, nd.shape))
    return _Axes(**index), _Axes(**size)


def _scatter(nd: np.ndarray, device_shape: tuple[int, ...], coords: tuple) -> np.ndarray:
    device = np.zeros(device_shape, dtype=nd.dtype)
    device[coords] = nd
    return device


def pack(nd: np.ndarray, fmt: int, c0: int = 16, groups: int = 1, layout: Optional[int] = None) -> PackedTensor:
    """Pack logical `nd` into device format `fmt`.

    layout: logical layout of `nd` for the conv formats (default NCHW for NC1HWC0 and FRACTAL_Z, NCDHW for
    NDC1HWC0, DHWCN for FRACTAL_Z_3D); a 2-D `nd` in FRACTAL_Z is a (K, N) matmul weight. groups > 1 packs a
    grouped FRACTAL_Z. Plain formats are the identity.
    """
    nd = np.asarray(nd)
    fmt = Format(fmt)
    c0 = FIXED_C0.get(fmt, c0)
    if fmt in PLAIN_FORMATS:
        return PackedTensor(nd.copy(), nd.shape, nd.shape, 0)
    if fmt in NZ_FORMATS:
        return _pack_nz(nd, c0)
    src_layout = Format(layout) if layout is not None else DEFAULT_LAYOUT.get(fmt)
    if src_layout is None:  # no default layout: none of the formats below
        raise ValueError(f"pack does not support format {fmt.name}")
    if fmt in (Format.NC1HWC0, Format.NC1HWC0_C04):
        return _pack_nc1hwc0(nd, c0, src_layout)
    if fmt == Format.FRACTAL_Z and nd.ndim == 2:
        return _pack_fractal_z_2d(nd, c0)
    if fmt == Format.FRACTAL_Z and groups > 1:
        return _pack_fractal_z_grouped(nd, c0, groups, src_layout)
    if fmt == Format.FRACTAL_Z:
        return _pack_fractal_z(nd, c0, src_layout)
    if fmt == Format.NDC1HWC0:
        return _pack_ndc1hwc0(nd, c0, src_layout)
    if fmt == Format.FRACTAL_Z_3D:
        return _pack_fractal_z_3d(nd, c0, src_layout)
    raise ValueError(f"pack does not support format {fmt.name}")


def _pack_nz(nd: np.ndarray, c0: int) -> PackedTensor:
    # (*B, N, C) → (*B, C1, N1, 16, C0): (..., n, c) → [..., c//C0, n//16, n%16, c%C0]; 1-D [C] is [1, C].
    logical = nd.reshape(1, nd.shape[0]) if nd.ndim == 1 else nd
    *batch, n_size, c_size = logical.shape
    index: tuple[np.ndarray, ...] = np.indices(logical.shape, sparse=True)
    *b, n, c = index
    device_shape = (*batch, _ceil(c_size, c0), _ceil(n_size, NI), NI, c0)
    coords = (*b, c // c0, n // NI, n % NI, c % c0)
    return PackedTensor(_scatter(logical, device_shape, coords), device_shape, nd.shape, 0)


def _pack_nc1hwc0(nd: np.ndarray, c0: int, layout: Format) -> PackedTensor:
    # (n, c, h, w) → [n, c//C0, h, w, c%C0], device (N, C1, H, W, C0)
    ix, size = _axes(nd, layout)
    device_shape = (size.n, _ceil(size.c, c0), size.h, size.w, c0)
    coords = (ix.n, ix.c // c0, ix.h, ix.w, ix.c % c0)
    return PackedTensor(_scatter(nd, device_shape, coords), device_shape, nd.shape, 0)


def _pack_ndc1hwc0(nd: np.ndarray, c0: int, layout: Format) -> PackedTensor:
    # (n, c, d, h, w) → [n, d, c//C0, h, w, c%C0], device (N, D, C1, H, W, C0)
    ix, size = _axes(nd, layout)
    device_shape = (size.n, size.d, _ceil(size.c, c0), size.h, size.w, c0)
    coords = (ix.n, ix.d, ix.c // c0, ix.h, ix.w, ix.c % c0)
    return PackedTensor(_scatter(nd, device_shape, coords), device_shape, nd.shape, 0)


def _pack_fractal_z(nd: np.ndarray, c0: int, layout: Format) -> PackedTensor:
    # (n, c, h, w) → [(c//C0*H + h)*W + w, n//16, n%16, c%C0], device (C1*H*W, N1, 16, C0)
    ix, size = _axes(nd, layout)
    h_size, w_size = size.h, size.w
    device_shape = (_ceil(size.c, c0) * h_size * w_size, _ceil(size.n, NI), NI, c0)
    row = (ix.c // c0 * h_size + ix.h) * w_size + ix.w
    coords = (row, ix.n // NI, ix.n % NI, ix.c % c0)
    return PackedTensor(_scatter(nd, device_shape, coords), device_shape, nd.shape, 0)


def _pack_fractal_z_2d(nd: np.ndarray, c0: int) -> PackedTensor:
    # (k, n) → [k//C0, n//16, n%16, k%C0], device (ceil(K/C0), ceil(N/16), 16, C0)
    # (GE TransFormatNdToFz, format_transfer_fractal_z_tbe.cc: the 2-D shape is (C, N) = HWCN with H=W=1).
    k_size, n_size = nd.shape
    index: tuple[np.ndarray, ...] = np.indices(nd.shape, sparse=True)
    k, n = index
    device_shape = (_ceil(k_size, c0), _ceil(n_size, NI), NI, c0)
    coords = (k // c0, n // NI, n % NI, k % c0)
    return PackedTensor(_scatter(nd, device_shape, coords), device_shape, nd.shape, 0)


def _pack_fractal_z_grouped(nd: np.ndarray, c0: int, groups: int, layout: Format) -> PackedTensor:
    # GE TransFormatHwcnToFzWithGroups (format_transfer_fractal_z.cc): e groups share one block-diagonal cube.
    ix, size = _axes(nd, layout)
    n_total, cin, h_size, w_size = size.n, size.c, size.h, size.w
    if n_total % groups:
        raise ValueError(f"N={n_total} is not a multiple of groups={groups}")
    cout = n_total // groups
    enlarge = min(math.lcm(math.lcm(cin, c0) // cin, math.lcm(cout, NI) // cout), groups)
    c1 = _ceil(enlarge * cin, c0)
    device_shape = (_ceil(groups, enlarge) * c1 * h_size * w_size, _ceil(enlarge * cout, NI), NI, c0)
    g, n_in_group = ix.n // cout, ix.n % cout
    r = g % enlarge
    ci = r * cin + ix.c
    co = r * cout + n_in_group
    row = (((g // enlarge) * c1 + ci // c0) * h_size + ix.h) * w_size + ix.w
    coords = (row, co // NI, co % NI, ci % c0)
    return PackedTensor(_scatter(nd, device_shape, coords), device_shape, nd.shape, groups)


def _pack_fractal_z_3d(nd: np.ndarray, c0: int, layout: Format) -> PackedTensor:
    # (d, h, w, c, n) → [((d*C1 + c//C0)*H + h)*W + w, n//16, n%16, c%C0], device (D*C1*H*W, N1, 16, C0)
    ix, size = _axes(nd, layout)
    c1 = _ceil(size.c, c0)
    h_size, w_size = size.h, size.w
    device_shape = (size.d * c1 * h_size * w_size, _ceil(size.n, NI), NI, c0)
    row = ((ix.d * c1 + ix.c // c0) * h_size + ix.h) * w_size + ix.w
    coords = (row, ix.n // NI, ix.n % NI, ix.c % c0)
    return PackedTensor(_scatter(nd, device_shape, coords), device_shape, nd.shape, 0)
