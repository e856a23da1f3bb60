"""Undoing a blocked device layout: the index arithmetic of each device format `formats.CONVERTERS` names.

Blocked layouts (NC1HWC0, FRACTAL_NZ, FRACTAL_Z, NDC1HWC0, FRACTAL_Z_3D) are undone with C0 and Ni read from the
device shape (the dump drops GE's C0 bits), after checking that every device dim equals what the original shape
implies. Anything that does not fit is returned flat with a `layout_unconverted: ` flag.

One copy: the device buffer is viewed (reshape + transpose), padding is sliced off the view, and the logical
tensor is written once into a fresh C-contiguous array. The logical C axis is split over two device axes (C1, C0)
that cannot be merged in a view, so the write goes block-wise (at most three numpy assignments, or a few per group
for grouped FRACTAL_Z) instead of through an intermediate padded copy. When C0 is the last axis (FRACTAL_NZ), big
whole-block copies run tile by tile on two threads (`block_copy`).

Every converter takes (flat, name, device shape, original shape, sub-format): `flat` is 1-D with prod(device)
elements, `name` the format's name for the flag's words.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from tcmp.schemas.block_copy import copy_split_axis

UNCONVERTED_PREFIX = "layout_unconverted: "

Shape = tuple[int, ...]


@dataclass(frozen=True)
class NdTensor:
    """Result of to_nd. `flag` is None on success, else starts with UNCONVERTED_PREFIX and says why; a flagged
    array is the decoded payload kept flat (1-D). `converted` is True when a device layout was undone."""

    array: np.ndarray
    converted: bool
    flag: Optional[str]


def flagged(flat: np.ndarray, why: str) -> NdTensor:
    return NdTensor(flat, False, UNCONVERTED_PREFIX + why)


Converter = Callable[[np.ndarray, str, Shape, Shape, int], NdTensor]


# ---------------------------------------------------------------------------------------------------------
# Logical layouts and device geometries
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Dims:
    """Logical axis sizes of a conv-style tensor; axes a layout does not have are 1. `b` is the flattened
    batch of an NZ tensor (*B, N, C)."""

    n: int = 1
    c: int = 1
    h: int = 1
    w: int = 1
    d: int = 1
    b: int = 1

    def get(self, letter: str) -> int:
        return int(getattr(self, letter.lower()))


def _dims_from(layout: str, shape: Sequence[int]) -> _Dims:
    return _Dims(**{letter.lower(): int(size) for letter, size in zip(layout, shape)})


def _shape_in(layout: str, dims: _Dims) -> tuple[int, ...]:
    return tuple(dims.get(letter) for letter in layout)


@dataclass(frozen=True)
class _Geometry:
    """A device layout expressed as a view: the device data reshaped to `view_shape` has one axis per token in
    `view_axes`. "C1"/"C0" are the split C axis; "N" may be padded (N1*Ni merged; the two are adjacent and
    contiguous in every fractal layout, so merging them is a free reshape)."""

    device_shape: tuple[int, ...]
    view_axes: tuple[str, ...]
    view_shape: tuple[int, ...]


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _geometry_nc1hwc0(dims: _Dims, c0: int, ni: int) -> _Geometry:
    c1 = _ceil(dims.c, c0)
    shape = (dims.n, c1, dims.h, dims.w, c0)
    return _Geometry(shape, ("N", "C1", "H", "W", "C0"), shape)


def _geometry_ndc1hwc0(dims: _Dims, c0: int, ni: int) -> _Geometry:
    c1 = _ceil(dims.c, c0)
    shape = (dims.n, dims.d, c1, dims.h, dims.w, c0)
    return _Geometry(shape, ("N", "D", "C1", "H", "W", "C0"), shape)


def _geometry_fractal_z(dims: _Dims, c0: int, ni: int) -> _Geometry:
    # (C1*H*W, N1, Ni, C0): element (n, c, h, w) at [(c//C0*H + h)*W + w, n//Ni, n%Ni, c%C0]
    c1, n1 = _ceil(dims.c, c0), _ceil(dims.n, ni)
    return _Geometry(
        (c1 * dims.h * dims.w, n1, ni, c0),
        ("C1", "H", "W", "N", "C0"),
        (c1, dims.h, dims.w, n1 * ni, c0),
    )


def _geometry_fractal_z_3d(dims: _Dims, c0: int, ni: int) -> _Geometry:
    # (D*C1*H*W, N1, Ni, C0): element at [((d*C1 + c//C0)*H + h)*W + w, n//Ni, n%Ni, c%C0]
    c1, n1 = _ceil(dims.c, c0), _ceil(dims.n, ni)
    return _Geometry(
        (dims.d * c1 * dims.h * dims.w, n1, ni, c0),
        ("D", "C1", "H", "W", "N", "C0"),
        (dims.d, c1, dims.h, dims.w, n1 * ni, c0),
    )


def _geometry_fractal_z_2d(dims: _Dims, c0: int, ni: int) -> _Geometry:
    # 2-D matmul weight (K, N), K being GE's "C": element (k, n) at [k//C0, n//Ni, n%Ni, k%C0]
    # (GE TransFormatNdToFz in base/formats/format_transfers/format_transfer_fractal_z_tbe.cc).
    c1, n1 = _ceil(dims.c, c0), _ceil(dims.n, ni)
    return _Geometry((c1, n1, ni, c0), ("C1", "N", "C0"), (c1, n1 * ni, c0))


def _geometry_nz(dims: _Dims, c0: int, ni: int) -> _Geometry:
    # Logical (B, N, C) with B = prod of the batch dims: element at [b, c//C0, n//Ni, n%Ni, c%C0].
    c1, n1 = _ceil(dims.c, c0), _ceil(dims.n, ni)
    return _Geometry((dims.b, c1, n1, ni, c0), ("B", "C1", "N", "C0"), (dims.b, c1, n1 * ni, c0))


# ---------------------------------------------------------------------------------------------------------
# The single-copy gather
# ---------------------------------------------------------------------------------------------------------


def _permutation(view_axes: Sequence[str], letters: Sequence[str]) -> tuple[int, ...]:
    """Axes of the device view in logical order, with C expanded to (C1, C0)."""
    perm: list[int] = []
    for letter in letters:
        if letter == "C":
            perm += [view_axes.index("C1"), view_axes.index("C0")]
        else:
            perm.append(view_axes.index(letter))
    return tuple(perm)


def _gather(flat: np.ndarray, geometry: _Geometry, layout: str, dims: _Dims) -> np.ndarray:
    """Logical tensor in `layout` order (full rank), written once from the device view."""
    view = flat.reshape(geometry.view_shape).transpose(_permutation(geometry.view_axes, layout))
    c_axis = layout.index("C")
    crop: list[slice] = []
    for position, letter in enumerate(layout):
        crop.append(slice(None) if letter == "C" else slice(0, dims.get(letter)))
        if position == c_axis:
            crop.append(slice(None))  # the C0 axis
    out = np.empty(_shape_in(layout, dims), dtype=flat.dtype)
    copy_split_axis(out, view[tuple(crop)], c_axis, 0, geometry.view_shape[geometry.view_axes.index("C0")])
    return out


# ---------------------------------------------------------------------------------------------------------
# Matching an original shape against a device shape
# ---------------------------------------------------------------------------------------------------------


def _squeezed(shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(s) for s in shape if s != 1)


def _expanded_dims(layout: str, known: _Dims, original: tuple[int, ...]) -> Optional[_Dims]:
    """Full-rank dims for an original of lower rank than `layout`.

    GE expands such tensors by inserting 1-dims without reordering the axes (transformer ExpandDimension only
    accepts reshape types in the format's axis order), so the original must equal the full-rank shape with
    its 1-dims dropped. Every dim but C is known from the device shape; C follows from the element count.
    """
    others = math.prod(known.get(letter) for letter in layout if letter != "C")
    total = math.prod(original)
    if others == 0 or total % others:
        return None
    dims = _Dims(**{letter.lower(): known.get(letter) for letter in layout if letter != "C"}, c=total // others)
    if _squeezed(_shape_in(layout, dims)) != _squeezed(original):
        return None
    return dims


@dataclass(frozen=True)
class _Match:
    layout: str
    dims: _Dims
    geometry: _Geometry


def _match_layouts(
    layouts: Sequence[str],
    geometry_of: Callable[[_Dims, int, int], _Geometry],
    device: Shape,
    original: Shape,
    known_from_device: Optional[_Dims],
) -> Optional[_Match]:
    """First layout (in preference order) under which `original` produces exactly `device`."""
    c0, ni = device[-1], (device[-2] if len(device) >= 2 else 0)
    dims: Optional[_Dims]
    for layout in layouts:
        if len(original) == len(layout):
            dims = _dims_from(layout, original)
        elif len(original) < len(layout) and known_from_device is not None:
            dims = _expanded_dims(layout, known_from_device, original)
            if dims is None:
                continue
        else:
            continue
        geometry = geometry_of(dims, c0, ni)
        if geometry.device_shape == device:
            return _Match(layout, dims, geometry)
    return None


def _mismatch(name: str, device: Shape, original: Shape, tried: str) -> str:
    return f"{name} device shape {device} does not fit original shape {original} as {tried}"


# ---------------------------------------------------------------------------------------------------------
# Per-format conversions. Each returns NdTensor; `flat` is 1-D with prod(device) elements.
# ---------------------------------------------------------------------------------------------------------


def from_nc1hwc0(flat: np.ndarray, name: str, device: Shape, original: Shape, sub_format: int) -> NdTensor:
    # NCHW preferred over NHWC when both fit (torchair graphs come from PyTorch, whose conv tensors are NCHW).
    if len(device) != 5:
        return flagged(flat, f"{name} device shape {device} is not 5-D")
    known = _Dims(n=device[0], h=device[2], w=device[3])
    match = _match_layouts(("NCHW", "NHWC"), _geometry_nc1hwc0, device, original, known)
    if match is None:
        return flagged(flat, _mismatch(name, device, original, "NCHW or NHWC"))
    return _converted(_gather(flat, match.geometry, match.layout, match.dims), original)


def from_ndc1hwc0(flat: np.ndarray, name: str, device: Shape, original: Shape, sub_format: int) -> NdTensor:
    if len(device) != 6:
        return flagged(flat, f"{name} device shape {device} is not 6-D")
    known = _Dims(n=device[0], d=device[1], h=device[3], w=device[4])
    match = _match_layouts(("NCDHW", "NDHWC"), _geometry_ndc1hwc0, device, original, known)
    if match is None:
        return flagged(flat, _mismatch(name, device, original, "NCDHW or NDHWC"))
    return _converted(_gather(flat, match.geometry, match.layout, match.dims), original)


def from_fractal_z_3d(flat: np.ndarray, name: str, device: Shape, original: Shape, sub_format: int) -> NdTensor:
    # Tie-break: NCDHW (PyTorch Conv3d weight) before DHWCN (GE's transfer source layout).
    if len(device) != 4:
        return flagged(flat, f"{name} device shape {device} is not 4-D")
    if sub_format > 1:
        return flagged(flat, f"grouped FRACTAL_Z_3D (groups={sub_format}) is not supported")
    match = _match_layouts(("NCDHW", "DHWCN"), _geometry_fractal_z_3d, device, original, None)
    if match is None:
        return flagged(flat, _mismatch(name, device, original, "NCDHW or DHWCN"))
    return _converted(_gather(flat, match.geometry, match.layout, match.dims), original)


def from_fractal_z(flat: np.ndarray, name: str, device: Shape, original: Shape, sub_format: int) -> NdTensor:
    if len(device) != 4:
        return flagged(flat, f"{name} device shape {device} is not 4-D")
    if len(original) == 2:
        # GE ignores groups for 2-D FRACTAL_Z (TransferShapeUtils::GetFractalZShape(c0, origin_shape, shape)).
        match = _match_layouts(("CN",), _geometry_fractal_z_2d, device, original, None)
        if match is None:
            return flagged(flat, _mismatch(name, device, original, "2-D (K, N) matmul weight"))
        return _converted(_gather(flat, match.geometry, match.layout, match.dims), original)
    if len(original) != 4:
        return flagged(flat, f"FRACTAL_Z needs a 2-D or 4-D original shape, got {original}")
    layouts = ("NCHW", "HWCN", "NHWC")  # NCHW first: PyTorch conv weights
    groups = sub_format
    if groups > 1:
        return _from_fractal_z_grouped(flat, name, device, original, layouts, groups)
    match = _match_layouts(layouts, _geometry_fractal_z, device, original, None)
    if match is None:
        return flagged(flat, _mismatch(name, device, original, "NCHW, HWCN or NHWC"))
    return _converted(_gather(flat, match.geometry, match.layout, match.dims), original)


@dataclass(frozen=True)
class _GroupedFz:
    """Device geometry of a grouped FRACTAL_Z weight (GE "FzWithGroups").

    GE packs `e` neighbouring groups into one block-diagonal cube so that cin*e and cout*e fill C0/Ni better:
    e = min(lcm(lcm(cin, C0)/cin, lcm(cout, 16)/cout), groups). Device (g_dim*C1*H*W, N1, 16, C0) with
    C1 = ceil(e*cin/C0), N1 = ceil(e*cout/16), g_dim = ceil(groups/e). Weight element (n, c, h, w) of group
    g = n // cout, n' = n % cout, with r = g % e, ci = r*cin + c, co = r*cout + n', sits at
    [((g//e)*C1 + ci//C0)*H*W + h*W + w, co//16, co%16, ci%C0].

    Source: hicann/ge base/formats/format_transfers/format_transfer_fractal_z.cc, TransFormatHwcnToFzWithGroups
    (data) and TransShapeToFzWithGroups (shape); graph_metadef/third_party/transformer/src/
    transfer_shape_utils.cc, GetFractalZShape(format_index, c0, group, ...) and GetAsisEnlargeValue (same
    shape). to_nd implements the inverse of that index map.
    """

    groups: int
    cin: int
    cout: int
    enlarge: int
    c1: int
    n1: int
    g_dim: int
    device_shape: tuple[int, ...]


def _grouped_fractal_z_geometry(
    n: int, cin: int, h: int, w: int, groups: int, c0: int, ni: int
) -> Optional[_GroupedFz]:
    """_GroupedFz for a weight with n = groups*cout output channels, or None if n is not a multiple."""
    if groups < 1 or n % groups or cin <= 0 or n <= 0:
        return None
    cout = n // groups
    enlarge = min(math.lcm(math.lcm(cin, c0) // cin, math.lcm(cout, ni) // cout), groups)
    c1 = _ceil(enlarge * cin, c0)
    n1 = _ceil(enlarge * cout, ni)
    g_dim = _ceil(groups, enlarge)
    return _GroupedFz(groups, cin, cout, enlarge, c1, n1, g_dim, (g_dim * c1 * h * w, n1, ni, c0))


def _from_fractal_z_grouped(
    flat: np.ndarray, name: str, device: Shape, original: Shape, layouts: Sequence[str], groups: int
) -> NdTensor:
    c0, ni = device[3], device[2]
    for layout in layouts:
        dims = _dims_from(layout, original)
        if dims.n < groups:
            # GE then falls back to the ungrouped shape (GetFractalZShape: group > 1 && n >= group).
            geometry = _geometry_fractal_z(dims, c0, ni)
            if geometry.device_shape == device:
                return _converted(_gather(flat, geometry, layout, dims), original)
            continue
        grouped = _grouped_fractal_z_geometry(dims.n, dims.c, dims.h, dims.w, groups, c0, ni)
        if grouped is not None and grouped.device_shape == device:
            return _converted(_gather_grouped(flat, grouped, layout, dims, c0, ni), original)
    return flagged(flat, _mismatch(name, device, original, f"grouped (groups={groups}) NCHW, HWCN or NHWC"))


def _gather_grouped(flat: np.ndarray, grouped: _GroupedFz, layout: str, dims: _Dims, c0: int, ni: int) -> np.ndarray:
    """Inverse of the grouped map: for each r in [0, e), groups r, r+e, r+2e, … read the r-th diagonal block."""
    view = flat.reshape(grouped.g_dim, grouped.c1, dims.h, dims.w, grouped.n1 * ni, c0)
    view_axes = ("G", "C1", "H", "W", "N", "C0")
    out = np.empty(_shape_in(layout, dims), dtype=flat.dtype)
    # Logical axes with N split into (G, n-in-group); a reshape of the fresh contiguous `out` is a view.
    grouped_letters = layout.replace("N", "GN")
    grouped_shape = tuple(
        grouped.groups if letter == "G" else (grouped.cout if letter == "N" else dims.get(letter))
        for letter in grouped_letters
    )
    out_grouped = out.reshape(grouped_shape)
    g_axis = grouped_letters.index("G")
    c_axis = grouped_letters.index("C")
    perm = _permutation(view_axes, grouped_letters)
    for r in range(grouped.enlarge):
        members = len(range(r, grouped.groups, grouped.enlarge))  # r < e <= groups, so >= 1
        block = view[:, :, :, :, r * grouped.cout : (r + 1) * grouped.cout, :][:members]
        dst_index = [slice(None)] * len(grouped_letters)
        dst_index[g_axis] = slice(r, None, grouped.enlarge)
        copy_split_axis(out_grouped[tuple(dst_index)], block.transpose(perm), c_axis, r * grouped.cin, c0)
    return out


def from_nz(flat: np.ndarray, name: str, device: Shape, original: Shape, sub_format: int) -> NdTensor:
    if len(device) < 4:
        return flagged(flat, f"{name} device shape {device} has fewer than 4 dims")
    c0, ni = device[-1], device[-2]
    batch = math.prod(device[:-4])
    if len(original) == 1:
        return _from_nz_1d(flat, name, device, original, batch)
    dims = _Dims(b=math.prod(original[:-2]), n=original[-2], c=original[-1])
    geometry = _geometry_nz(dims, c0, ni)
    if batch != dims.b or geometry.device_shape[1:] != device[-4:]:
        return flagged(flat, _mismatch(name, device, original, f"(*B, N, C) with C0={c0}, Ni={ni}"))
    return _converted(_gather(flat, geometry, "BNC", dims), original)


def _from_nz_1d(flat: np.ndarray, name: str, device: Shape, original: Shape, batch: int) -> NdTensor:
    """A 1-D [L] is [1, L] in the spec and in GE's host transfer (TransShapeToFracNz: device (C1, 1, 16, C0)),
    but GE's shape inference (TransferShapeUtils::GetNzShapeByAxisValue) makes it [L, 1]: device
    (1, ceil(L/16), 16, C0). The device shape tells them apart unless both are (1, 1, Ni, C0); then the
    reading whose padding is all zeros wins (if both are, they give the same values)."""
    c0, ni = device[-1], device[-2]
    length = original[0]
    row = _Dims(n=1, c=length)
    column = _Dims(n=length, c=1)
    fits = [dims for dims in (row, column) if batch == 1 and _geometry_nz(dims, c0, ni).device_shape[1:] == device[-4:]]
    if not fits:
        return flagged(flat, _mismatch(name, device, original, f"[1, L] or [L, 1] with C0={c0}, Ni={ni}"))
    if len(fits) == 2:
        cube = flat.reshape(ni, c0)
        nonzero_total = np.count_nonzero(cube)
        if nonzero_total == np.count_nonzero(cube[0, :length]):
            fits = [row]
        elif nonzero_total == np.count_nonzero(cube[:length, 0]):
            fits = [column]
        else:
            return flagged(flat, f"1-D {name} {original} is ambiguous: padding is not zero")
    dims = fits[0]
    return _converted(_gather(flat, _geometry_nz(dims, c0, ni), "BNC", dims), original)


def _converted(logical: np.ndarray, original: Shape) -> NdTensor:
    return NdTensor(logical.reshape(original), True, None)
