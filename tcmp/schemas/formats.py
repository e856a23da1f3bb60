"""GE tensor formats and the conversion of a dumped device layout back to the logical (ND) tensor.

See docs/formats.md, "Device formats" (format numbers, rebuilding ND, the index math per layout).
Principles:

* Plain layouts (ND, NCHW, NHWC, HWCN, …) are only reshaped, never transposed or cropped: the dump's format
  field is not a reliable hint of the logical layout, and the peer corrupts NHWC/HWCN by transposing them.
* Blocked layouts are undone by the converter `CONVERTERS` names for their format (the arithmetic is in
  `device_layouts`); every other format is returned flat with a `layout_unconverted: ` flag.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType

import numpy as np

from tcmp.schemas.device_layouts import (
    Converter,
    NdTensor,
    Shape,
    flagged,
    from_fractal_z,
    from_fractal_z_3d,
    from_nc1hwc0,
    from_ndc1hwc0,
    from_nz,
)


class Format(enum.IntEnum):
    """OutputFormat of dump_task.proto plus the ge::Format primaries 50–54 that can also appear."""

    NCHW = 0
    NHWC = 1
    ND = 2
    NC1HWC0 = 3
    FRACTAL_Z = 4
    NC1C0HWPAD = 5
    NHWC1C0 = 6
    FSR_NCHW = 7
    FRACTAL_DECONV = 8
    C1HWNC0 = 9
    FRACTAL_DECONV_TRANSPOSE = 10
    FRACTAL_DECONV_SP_STRIDE_TRANS = 11
    NC1HWC0_C04 = 12
    FRACTAL_Z_C04 = 13
    CHWN = 14
    FRACTAL_DECONV_SP_STRIDE8_TRANS = 15
    HWCN = 16
    NC1KHKWHWC0 = 17
    BN_WEIGHT = 18
    FILTER_HWCK = 19
    HASHTABLE_LOOKUP_LOOKUPS = 20
    HASHTABLE_LOOKUP_KEYS = 21
    HASHTABLE_LOOKUP_VALUE = 22
    HASHTABLE_LOOKUP_OUTPUT = 23
    HASHTABLE_LOOKUP_HITS = 24
    C1HWNCoC0 = 25
    MD = 26
    NDHWC = 27
    FRACTAL_ZZ = 28
    FRACTAL_NZ = 29
    NCDHW = 30
    DHWCN = 31  # spelled "DHWCH" in the adump/GE protos
    NDC1HWC0 = 32
    FRACTAL_Z_3D = 33
    CN = 34
    NC = 35
    DHWNC = 36
    FRACTAL_Z_3D_TRANSPOSE = 37
    FRACTAL_ZN_LSTM = 38
    FRACTAL_Z_G = 39
    RESERVED = 40
    ALL = 41
    NULL = 42
    ND_RNN_BIAS = 43
    FRACTAL_ZN_RNN = 44
    NYUV = 45
    NYUV_A = 46
    NCL = 47
    FRACTAL_Z_WINO = 48
    C1HWC0 = 49
    FRACTAL_NZ_C0_16 = 50
    FRACTAL_NZ_C0_32 = 51
    FRACTAL_NZ_C0_2 = 52
    FRACTAL_NZ_C0_4 = 53
    FRACTAL_NZ_C0_8 = 54
    MAX = 255


def format_name(code: int) -> str:
    """Enum name without the FORMAT_ prefix (GE's FormatToSerialString style); unknown → FORMAT_UNKNOWN(n)."""
    try:
        return Format(code).name
    except ValueError:
        return f"FORMAT_UNKNOWN({code})"


# Layouts whose bytes are the logical tensor in row-major order: reshape only.
PLAIN_FORMATS = frozenset(
    {
        Format.NCHW,
        Format.NHWC,
        Format.ND,
        Format.HWCN,
        Format.CHWN,
        Format.FILTER_HWCK,
        Format.NDHWC,
        Format.NCDHW,
        Format.DHWCN,
        Format.DHWNC,
        Format.CN,
        Format.NC,
        Format.NCL,
    }
)

# The device formats to_nd can undo, each with its converter (`device_layouts`); every other format is flagged.
CONVERTERS: Mapping[Format, Converter] = MappingProxyType(
    {
        Format.NC1HWC0: from_nc1hwc0,
        Format.NC1HWC0_C04: from_nc1hwc0,
        Format.FRACTAL_Z: from_fractal_z,
        Format.NDC1HWC0: from_ndc1hwc0,
        Format.FRACTAL_Z_3D: from_fractal_z_3d,
        Format.FRACTAL_NZ: from_nz,
        Format.FRACTAL_NZ_C0_2: from_nz,
        Format.FRACTAL_NZ_C0_4: from_nz,
        Format.FRACTAL_NZ_C0_8: from_nz,
        Format.FRACTAL_NZ_C0_16: from_nz,
        Format.FRACTAL_NZ_C0_32: from_nz,
    }
)
CONVERTIBLE_FORMATS = frozenset(CONVERTERS)
NZ_FORMATS = frozenset(f for f, convert in CONVERTERS.items() if convert is from_nz)


def split_composite_format(code: int) -> tuple[int, int]:
    """(primary, sub_format) of an in-memory GE format int; dump fields are already primary."""
    return code & 0xFF, (code & 0xFFFF00) >> 8


# ---------------------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------------------


def to_nd(
    flat: np.ndarray,
    fmt: int,
    sub_format: int,
    device_shape: Sequence[int],
    original_shape: Sequence[int],
) -> NdTensor:
    """Undo the device layout of a decoded dump payload (docs/formats.md, "Device formats").

    flat: decoded payload, prod(device_shape) elements (any dtype, incl. ml_dtypes). fmt: the dump's format
    (a composite ge::Format int is split into primary and sub-format). sub_format: groups for FRACTAL_Z.
    Plain layouts are reshaped to original_shape (else device_shape); device layouts are converted to the
    original shape exactly; anything else is returned flat with a `layout_unconverted: ` flag.
    """
    flat = np.asarray(flat).reshape(-1)
    # the usual tensor, told apart cheaply (this runs once per tensor of a dump): what the checks below would let
    # through to `_plain` unchanged
    if (
        fmt in PLAIN_FORMATS
        and min(device_shape, default=0) > 0
        and min(original_shape, default=0) > 0
        and flat.size == math.prod(original_shape)
        and math.prod(device_shape) <= _MAX_ELEMENTS
    ):
        return NdTensor(flat.reshape(original_shape), False, None)
    device = tuple(int(s) for s in device_shape)
    original = tuple(int(s) for s in original_shape)
    if fmt > 0xFF:
        fmt, composite_sub = split_composite_format(fmt)
        sub_format = sub_format or composite_sub
    if any(s < 0 for s in device + original):
        return flagged(flat, f"negative dim in device shape {device} or original shape {original}")
    if any(math.prod(d for d in shape if d) > _MAX_ELEMENTS for shape in (device, original)):
        # numpy cannot even describe such a shape (garbage dims next to a zero dim in a header)
        return flagged(flat, f"device shape {device} or original shape {original} is beyond any real tensor")

    if fmt in PLAIN_FORMATS:
        return _plain(flat, fmt, device, original)
    if fmt not in CONVERTERS:
        return flagged(flat, f"no ND conversion for format {format_name(fmt)}")
    if flat.size != math.prod(device):
        return flagged(flat, f"{flat.size} elements but device shape {device} holds {math.prod(device)}")
    if not original:
        return flagged(flat, f"{format_name(fmt)} tensor has no original shape")
    if flat.size == 0:
        if math.prod(original) == 0:
            return NdTensor(flat.reshape(original), True, None)
        return flagged(flat, f"empty {format_name(fmt)} payload for original shape {original}")

    return CONVERTERS[Format(fmt)](flat, format_name(fmt), device, original, sub_format)


_MAX_ELEMENTS = 2**48


def _plain(flat: np.ndarray, fmt: int, device: Shape, original: Shape) -> NdTensor:
    """Reshape only: the bytes already are the tensor in row-major order."""
    if flat.size == math.prod(original):  # prod(()) == 1: a scalar original
        return NdTensor(flat.reshape(original), False, None)
    if flat.size == math.prod(device):
        return NdTensor(flat.reshape(device), False, None)
    return flagged(
        flat, f"{format_name(fmt)}: {flat.size} elements fit neither original {original} nor device {device}"
    )
