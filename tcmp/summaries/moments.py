"""The moments of one chunk of a float tensor: (min, max, sum, sum of squares), two ways.

Each engine below turns a 1-D chunk into those four floats (sums to ~1e-6 relative or better); the summaries
accumulate them chunk by chunk. Neither counts NaN or inf: any of them makes the sum or the sum of
squares non-finite (float16 engines check the codes and return a NaN sum, since their bit-level widening would
map inf/NaN codes to large finite numbers), and the caller then takes an exact slow path for that chunk.

- `NUMPY`: numpy's reductions, one pass each (sum, dot, min, max), float16 widened to float32 first with a
  bit-level trick (numpy has no vectorized float16 arithmetic).
- `COMPILED`: one fused loop per chunk in C (`compiled.c`, the optional extension built at install): each element is
  read once (~12 µs per 256 KiB float32 chunk instead of ~56 µs), so the daemon, which summarizes everything it
  sees, runs 2-3 times faster. Its float32 sums are taken within blocks of `BLOCK` elements (so the loop
  vectorizes) and in float64 across blocks: a block's error is that of ~32 float32 additions per SIMD lane. Where
  the extension is not built, it is the numpy engine (`warm` says so).

Both take the extremes from the element *codes* (the bits read as signed and as unsigned integers): IEEE floats
are sign + magnitude, so the largest unsigned code is the most negative value whenever any value has its sign bit
set, the largest signed code is the largest value whenever any is non-negative, and when all share one sign the
smallest magnitude is the other extreme. Integer max/min vectorize; float ones (which must order NaN) do not.
"""

from __future__ import annotations

import logging
import math
import struct
from dataclasses import dataclass, replace
from typing import Callable, Optional

import numpy as np

try:
    from tcmp.summaries import compiled as c_loops
except ImportError:  # installed without a C compiler
    c_loops = None  # type: ignore[assignment]  # a module or None: mypy has no optional module type

log = logging.getLogger(__name__)

Moments = tuple[float, float, float, float]  # min, max, sum, sum of squares
MomentsAndCrc = tuple[float, float, float, float, int]

BLOCK = 1024  # elements the compiled loop sums in float32 before the block sum joins the float64 total (compiled.c)

# float16 -> float32 by bits: sign-extend the code to int32 and shift it left by 13 (sign to bit 31, exponent and
# mantissa to bits 27..13, float32's layout with an exponent 112 too small), clear the sign copies in bits 30..28
# and multiply by 2**112 to rebias; exact for normals and subnormals, wrong for inf/NaN codes (0x7C00 and up)
_F16_SIGN_AND_BODY = np.int32(-0x70000001)  # 0x8FFFFFFF as int32
_F16_REBIAS = np.float32(2.0**112)
_F16_SIGN, _F16_NONFINITE = 0x8000, 0x7C00


# ---------------------------------------------------------------------------------------------------------------
# numpy

_HALF, _HALF_CODE = struct.Struct("<e"), struct.Struct("<H")
_NO_MOMENTS = (math.nan, math.nan, math.nan, math.nan)


def numpy_moments(values: np.ndarray) -> Moments:
    """The moments of a float32 or float64 chunk by numpy (sum, dot, min, max: one pass each)."""
    total, squares = float(values.sum()), float(np.dot(values, values))
    if not (math.isfinite(total) and math.isfinite(squares)):
        return math.nan, math.nan, total, squares
    return float(values.min()), float(values.max()), total, squares


def _half(code: int) -> float:
    return _HALF.unpack(_HALF_CODE.pack(code))[0]


def _numpy_float16_moments(codes: np.ndarray) -> Moments:
    unsigned = codes.view(np.uint16)
    top_unsigned, top_signed = int(unsigned.max()), int(codes.max())
    if top_unsigned >= _F16_SIGN | _F16_NONFINITE or top_signed >= _F16_NONFINITE:
        return _NO_MOMENTS
    has_negative, has_non_negative = top_unsigned >= _F16_SIGN, top_signed >= 0
    smallest_magnitude = 0 if has_negative and has_non_negative else int(unsigned.min())
    low = top_unsigned if has_negative else smallest_magnitude
    high = top_signed if has_non_negative else smallest_magnitude
    # the bit-level widening, in three vectorized passes
    bits = np.left_shift(codes, 13, dtype=np.int32)
    np.bitwise_and(bits, _F16_SIGN_AND_BODY, out=bits)
    values = bits.view(np.float32)
    np.multiply(values, _F16_REBIAS, out=values)
    return _half(low), _half(high), float(values.sum()), float(np.dot(values, values))


# ---------------------------------------------------------------------------------------------------------------
# the engines


@dataclass(frozen=True)
class Engine:
    """How chunks are reduced: `float32` takes float32 chunks, `float16` int16 codes of float16 chunks; where they
    exist, `float32_summary` and `float16_summary` take a whole tensor (float16 as codes) and return its moments
    and its CRC-32, found in one pass."""

    name: str
    float32: Callable[[np.ndarray], Moments]
    float16: Callable[[np.ndarray], Moments]
    float16_chunk: int  # elements
    reads_unaligned: bool  # at full speed (numpy's loops over unaligned data run at a third of theirs)
    float32_summary: Optional[Callable[[np.ndarray], MomentsAndCrc]] = None
    float16_summary: Optional[Callable[[np.ndarray], MomentsAndCrc]] = None


# numpy's float16 path is limited by per-call overhead, not memory traffic: bigger chunks (measured: 1.2 GB/s at
# 64K elements, 1.5 GB/s at 256K on x86 with a 512 KiB L2 per core)
NUMPY = Engine("numpy", numpy_moments, _numpy_float16_moments, 1 << 18, reads_unaligned=False)
# the fused loops need AVX2, F16C and PCLMULQDQ (checked when the extension loads); elsewhere tensors take the
# chunked path, the CRC-32 by isal chunk by chunk
COMPILED = (
    Engine(
        "compiled",
        c_loops.float32_moments,
        c_loops.float16_moments,
        1 << 17,
        reads_unaligned=True,
        float32_summary=c_loops.float32_summary if c_loops.fused_summary_supported else None,
        float16_summary=c_loops.float16_summary if c_loops.fused_summary_supported else None,
    )
    if c_loops is not None
    else replace(NUMPY, name="compiled (not built: numpy)")
)


def warm(engine: Engine) -> None:
    """Run an engine's loops once (a daemon worker does at start), and say when the compiled one is numpy's."""
    if engine is COMPILED and c_loops is None:
        log.warning("compiled summary loops not built (tcmp.summaries.compiled: no C compiler at install); "
                    "summarizing with numpy, 2-3x slower")  # fmt: skip
    engine.float32(np.zeros(1, np.float32))
    engine.float16(np.zeros(1, np.int16))
