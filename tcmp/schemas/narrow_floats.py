"""bfloat16 and the float8 types as numpy dtypes, from ml_dtypes, imported only when a tensor of such a type is met.

Importing ml_dtypes costs a process 1.2-1.5 s with ml_dtypes 0.7.0 (0.15-0.2 s with 0.5/0.6), more than the
rest of tcmp's start-up; a dump of float16/float32 tensors, a compare from the index and the watcher's start-up
never need it. So nothing else in tcmp imports ml_dtypes: it asks here, and tells these types apart by numpy's
name (`is_float_name`, `float_limits`, `dtype_of_name`) wherever a name is all it has.

An array can only hold one of these dtypes once ml_dtypes is imported, so `is_narrow_float` and `is_bfloat16` answer
without importing it.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

# numpy's names of the ml_dtypes types tcmp decodes into (`np.dtype(ml_dtypes.bfloat16).name`).
BFLOAT16 = "bfloat16"
FLOAT8_E5M2 = "float8_e5m2"
FLOAT8_E4M3FN = "float8_e4m3fn"
NAMES = frozenset({BFLOAT16, FLOAT8_E5M2, FLOAT8_E4M3FN})


@functools.cache
def dtype_named(name: str) -> np.dtype:
    """The ml_dtypes dtype of one of `NAMES` (imports ml_dtypes on the first call)."""
    if name not in NAMES:
        raise KeyError(name)
    import ml_dtypes

    return np.dtype(getattr(ml_dtypes, name))


def bfloat16() -> np.dtype:
    return dtype_named(BFLOAT16)


def _imported() -> bool:
    return "ml_dtypes" in sys.modules


def is_narrow_float(dtype: np.dtype) -> bool:
    """Whether `dtype` is one of ml_dtypes' float types (bfloat16, float8_*), without importing ml_dtypes."""
    return _imported() and dtype.type.__module__.startswith("ml_dtypes")


def is_bfloat16(dtype: np.dtype) -> bool:
    return _imported() and dtype == bfloat16()


@dataclass(frozen=True)
class FloatLimits:
    """What `np.finfo` tells of a float type, the part tcmp's cast rules read."""

    nmant: int  # stored significand bits
    maxexp: int  # the smallest power of two that overflows
    minexp: int  # the smallest normal exponent
    max: float
    smallest_subnormal: float


# float32's exponent, 7 stored significand bits: known without ml_dtypes (a test checks it against ml_dtypes.finfo)
_BFLOAT16_LIMITS = FloatLimits(7, 128, -126, float.fromhex("0x1.fep127"), 2.0**-133)


def is_float_name(name: str) -> bool:
    """Whether numpy's name `name` ("float16", "bfloat16", "int8") is a floating-point type."""
    return name in NAMES or np.dtype(name).kind == "f"


@functools.cache
def float_limits(name: str) -> FloatLimits:
    """The limits of the float type numpy calls `name` (only a float8 type imports ml_dtypes)."""
    if name == BFLOAT16:
        return _BFLOAT16_LIMITS
    info: Any  # numpy's finfo or ml_dtypes': no common type
    if name in NAMES:
        import ml_dtypes

        info = ml_dtypes.finfo(dtype_named(name))
    else:
        info = np.finfo(np.dtype(name))
    return FloatLimits(int(info.nmant), int(info.maxexp), int(info.minexp), float(info.max),
                       float(info.smallest_subnormal))  # fmt: skip


def dtype_of_name(name: str) -> np.dtype:
    """The dtype numpy (or, for one of `NAMES`, ml_dtypes) calls `name`: "float16", "bfloat16"."""
    return dtype_named(name) if name in NAMES else np.dtype(name)
