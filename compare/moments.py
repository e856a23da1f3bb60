"""The moments of one chunk of a float tensor: (min, max, sum, sum of squares), two ways.

Each engine below turns a 1-D chunk into those four floats (sums to ~1e-6 relative or better); the summaries
accumulate them chunk by chunk. Neither counts NaN or inf: any of them makes the sum or the sum of
squares non-finite (float16 engines check the codes and return a NaN sum, since their bit-level widening would
map inf/NaN codes to large finite numbers), and the caller then takes an exact slow path for that chunk.

- `NUMPY`: numpy's reductions, one pass each (sum, dot, min, max), float16 widened to float32 first with a
  bit-level trick (numpy has no vectorized float16 arithmetic). No compile step and no extra memory: what a
  short-lived command wants (`tcmp compare` summarizes only a small part of what it reads).
- `COMPILED`: one fused loop per chunk, compiled by numba: each element is read once (~13 µs per 256 KiB float32
  chunk instead of ~56 µs), so the daemon, which summarizes everything it sees, runs 2-3 times faster. Costs
  ~0.4 s to import numba, ~2 s to compile once (then cached on disk: next to this file, numba's per-user cache
  or `NUMBA_CACHE_DIR`; in memory where none is writable) and ~110 MB of memory per process. Where numba cannot
  load, it does the numpy engine's work, with a warning.

Both take the extremes from the element *codes* (the bits read as signed and as unsigned integers): IEEE floats
are sign + magnitude, so the largest unsigned code is the most negative value whenever any value has its sign bit
set, the largest signed code is the largest value whenever any is non-negative, and when all share one sign the
smallest magnitude is the other extreme. Integer max/min vectorize; float ones (which must order NaN) do not.
The compiled engine sums in float32 within blocks of `BLOCK` elements (so the loop vectorizes) and in float64
across blocks: a block's error is that of ~32 float32 additions per SIMD lane.
"""

from __future__ import annotations

import logging
import math
import struct
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

log = logging.getLogger(__name__)

Moments = tuple[float, float, float, float]  # min, max, sum, sum of squares

BLOCK = 1024  # elements summed in float32 before the block sum joins the float64 total
# fast-math without nnan/ninf: reassociation lets LLVM vectorize the sums; NaN and inf keep IEEE semantics
_FASTMATH = frozenset({"reassoc", "contract", "nsz", "arcp"})

# float16 -> float32 by bits: sign-extend the code to int32 and shift it left by 13 (sign to bit 31, exponent and
# mantissa to bits 27..13, float32's layout with an exponent 112 too small), clear the sign copies in bits 30..28
# and multiply by 2**112 to rebias; exact for normals and subnormals, wrong for inf/NaN codes (0x7C00 and up)
_F16_SIGN_AND_BODY = np.int32(-0x70000001)  # 0x8FFFFFFF as int32
_F16_REBIAS = np.float32(2.0**112)
_F16_SIGN, _F16_NONFINITE = 0x8000, 0x7C00


def _float32_moments(values):  # pragma: no cover - compiled by numba (COMPILED.float32)
    """(min, max, sum, sum of squares) of a 1-D float32 array of any alignment."""
    signed, unsigned = values.view(np.int32), values.view(np.uint32)
    signed_max, unsigned_max, unsigned_min = np.int32(-(2**31)), np.uint32(0), np.uint32(0xFFFFFFFF)
    total, squares = 0.0, 0.0
    for start in range(0, values.size, BLOCK):
        block_sum, block_squares = np.float32(0.0), np.float32(0.0)
        for k in range(start, min(start + BLOCK, values.size)):
            value = values[k]
            block_sum += value
            block_squares += value * value
            signed_max = max(signed_max, signed[k])
            code = unsigned[k]
            unsigned_max = max(unsigned_max, code)
            unsigned_min = min(unsigned_min, code)
        total += block_sum
        squares += block_squares
    extremes = np.empty(2, np.uint32)  # codes of (min, max)
    extremes[0] = unsigned_max if unsigned_max >= np.uint32(0x80000000) else unsigned_min
    extremes[1] = np.uint32(signed_max) if signed_max >= 0 else unsigned_min
    values_of = extremes.view(np.float32)
    return values_of[0], values_of[1], total, squares


def _float16_moments(codes):  # pragma: no cover - compiled by numba (COMPILED.float16)
    """(min, max, sum, sum of squares) of a 1-D float16 array given as its int16 codes, of any alignment; the sum
    is NaN when the codes hold inf or NaN."""
    # the loop is _float32_moments' with a widening step: with the shared part in an inner function numba no
    # longer vectorized it (3.5x slower, measured)
    body_mask, rebias = _F16_SIGN_AND_BODY, _F16_REBIAS  # numba freezes globals as constants
    unsigned = codes.view(np.uint16)
    signed_max, unsigned_max, unsigned_min = np.int16(-(2**15)), np.uint16(0), np.uint16(0xFFFF)
    total, squares = 0.0, 0.0
    for start in range(0, codes.size, BLOCK):
        block_sum, block_squares = np.float32(0.0), np.float32(0.0)
        for k in range(start, min(start + BLOCK, codes.size)):
            code = codes[k]
            signed_max = max(signed_max, code)
            unsigned_code = unsigned[k]
            unsigned_max = max(unsigned_max, unsigned_code)
            unsigned_min = min(unsigned_min, unsigned_code)
            value = np.int32((np.int32(code) << 13) & body_mask).view(np.float32) * rebias
            block_sum += value
            block_squares += value * value
        total += block_sum
        squares += block_squares
    if unsigned_max >= np.uint16(_F16_SIGN | _F16_NONFINITE) or signed_max >= np.int16(_F16_NONFINITE):
        total = np.nan  # inf or NaN codes
    low = np.int16(unsigned_max if unsigned_max >= np.uint16(_F16_SIGN) else unsigned_min)
    high = signed_max if signed_max >= 0 else np.int16(unsigned_min)
    extremes = np.empty(2, np.int32)  # (min, max), widened like the values
    extremes[0] = (np.int32(low) << 13) & body_mask
    extremes[1] = (np.int32(high) << 13) & body_mask
    widened = extremes.view(np.float32) * rebias
    return widened[0], widened[1], total, squares


def _compile(kernel: Callable) -> Callable:
    import numba  # imported on first use: ~0.4 s, which commands that never summarize should not pay

    try:
        return numba.njit(kernel, nogil=True, cache=True, fastmath=set(_FASTMATH))
    except RuntimeError:  # no writable cache directory (a hardened service without NUMBA_CACHE_DIR)
        return numba.njit(kernel, nogil=True, fastmath=set(_FASTMATH))


class _Kernel:
    """A kernel compiled on its first call; where numba cannot compile it (not installed, or built for another
    numpy), the numpy function that computes the same moments, with one warning: slower, but nothing is lost."""

    def __init__(self, python: Callable, fallback: Callable[[np.ndarray], Moments]) -> None:
        self._python = python
        self._fallback = fallback
        self._compiled: Optional[Callable[[np.ndarray], Moments]] = None
        self.__doc__ = python.__doc__

    def __call__(self, chunk: np.ndarray) -> Moments:
        if self._compiled is None:
            return self._first_call(chunk)
        return self._compiled(chunk)

    def _first_call(self, chunk: np.ndarray) -> Moments:
        """Compile (or load from the cache) for this chunk's types while computing its moments."""
        try:
            compiled = _compile(self._python)
            moments = compiled(chunk)
        except Exception as exc:
            log.warning("compiled summary loops unavailable (%s: %s); summarizing with numpy, 2-3x slower",
                        type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")  # fmt: skip
            self._compiled = self._fallback
            return self._fallback(chunk)
        self._compiled = compiled
        return moments


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
    """How chunks are reduced: `float32` takes float32 chunks, `float16` int16 codes of float16 chunks."""

    name: str
    float32: Callable[[np.ndarray], Moments]
    float16: Callable[[np.ndarray], Moments]
    float16_chunk: int  # elements
    reads_unaligned: bool  # at full speed (numpy's loops over unaligned data run at a third of theirs)


# numpy's float16 path is limited by per-call overhead, not memory traffic: bigger chunks (measured: 1.2 GB/s at
# 64K elements, 1.5 GB/s at 256K on x86 with a 512 KiB L2 per core)
NUMPY = Engine("numpy", numpy_moments, _numpy_float16_moments, 1 << 18, reads_unaligned=False)
COMPILED = Engine(
    "compiled",
    _Kernel(_float32_moments, fallback=numpy_moments),
    _Kernel(_float16_moments, fallback=_numpy_float16_moments),
    1 << 17,
    reads_unaligned=True,
)


def warm(engine: Engine) -> None:
    """Compile (or load from the cache) an engine's loops now, rather than on the first chunk."""
    engine.float32(np.zeros(1, np.float32))
    engine.float16(np.zeros(1, np.int16))
