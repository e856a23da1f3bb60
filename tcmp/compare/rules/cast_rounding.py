"""What a CANN Cast computes, in numpy: the candidate outputs of a value-changing cast of an input array, one per
rounding CANN documents for that conversion.

CANN's Cast op (ops-math `math/cast`) has no rounding attribute (`dst_type` only): its kernel picks the rounding
per dtype pair (the castMap of `op_kernel/arch35/cast_struct.h`: CAST_TRUNC for float → int, CAST_RINT for a
narrowing float and for int → float), while AscendC's `Cast` instruction supports CAST_RINT, CAST_ROUND, CAST_FLOOR,
CAST_CEIL, CAST_TRUNC (and CAST_ODD for float → half) on Atlas A2/A3, and a dump records neither the chip's kernel
nor its mode. So every documented rounding is a candidate, CANN's kernel choice first. Out-of-range values
saturate (AscendC's precision-conversion rules: "overflow is saturated by default"); integer narrowing may also
keep the low bits (the arch35 kernel packs the low byte of an int32), so that is a candidate too. A float NaN
becomes 0 in an integer (aclnnCast), and is nonzero (True) as a bool (the kernel compares with 0).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional

import numpy as np

from tcmp.schemas.narrow_floats import FloatLimits, float_limits, is_bfloat16

# rounding name -> the words the row's message uses
TRUNC, RINT, FLOOR, CEIL, ROUND, ODD = "trunc", "rint", "floor", "ceil", "round", "odd"
ROUNDING_WORDS = {
    TRUNC: "round toward zero",
    RINT: "round half to even",
    FLOOR: "round toward -inf",
    CEIL: "round toward +inf",
    ROUND: "round half away from zero",
    ODD: "round to odd",
}
FLOAT_TO_INT = (TRUNC, RINT, FLOOR, CEIL, ROUND)  # CANN's kernel: CAST_TRUNC
NARROW_FLOAT = (RINT, TRUNC, FLOOR, CEIL, ROUND, ODD)  # CANN's kernel: CAST_RINT


def is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or is_bfloat16(dtype)


def float_info(dtype: np.dtype) -> FloatLimits:
    return float_limits(dtype.name)


def _bits_type(dtype: np.dtype) -> np.dtype:
    return np.dtype({2: np.uint16, 4: np.uint32, 8: np.uint64}[dtype.itemsize])


def _as_float64(x: np.ndarray) -> np.ndarray:
    if is_bfloat16(x.dtype):  # bf16 is the top half of a float32: exact
        return (x.view(np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    return x.astype(np.float64)


def _nearest_even(x64: np.ndarray, dst: np.dtype) -> np.ndarray:
    """x (float64) rounded to nearest, ties to even, in `dst`. bfloat16 by hand from float32's bits (round half to
    even on the top 16 bits); float32 → bfloat16 is then exact as long as x64 is a float32 value."""
    with np.errstate(over="ignore", invalid="ignore"):
        if not is_bfloat16(dst):
            return x64.astype(dst)
        u = x64.astype(np.float32).view(np.uint32)
        nan = np.isnan(x64)
        rounded = ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
        rounded[nan] = np.uint16(0x7FC0)
        return rounded.view(dst)


def _step(t: np.ndarray, up: bool) -> np.ndarray:
    """The next representable value of `t` toward +inf (`up`) or -inf, by its sign-magnitude bit pattern."""
    bits = t.view(_bits_type(t.dtype)).copy()
    sign = bits.dtype.type(1) << bits.dtype.type(8 * t.dtype.itemsize - 1)
    negative = (bits & sign) != 0
    zero = (bits & ~sign) == 0
    one = bits.dtype.type(1)
    if up:  # magnitude grows for positives, shrinks for negatives; ±0 → smallest positive
        out = np.where(negative, bits - one, bits + one)
        out = np.where(zero, one, out)
    else:
        out = np.where(negative, bits + one, bits - one)
        out = np.where(zero, sign | one, out)
    return out.astype(bits.dtype).view(t.dtype)


def _narrow_candidates(x64: np.ndarray, dst: np.dtype) -> Iterator[tuple[str, np.ndarray]]:
    """x (float64, each value exact in the source dtype) narrowed to the float `dst`, once per rounding."""
    nearest = _nearest_even(x64, dst)
    back = _as_float64(nearest)
    finite = np.isfinite(x64)
    exact = (back == x64) | ~finite
    if exact.all():
        yield RINT, nearest
        return
    with np.errstate(invalid="ignore"):
        above = back > x64
    lo = np.where(above & ~exact, _step(nearest, up=False), nearest)
    hi = np.where(~above & ~exact, _step(nearest, up=True), nearest)
    lo64, hi64 = _as_float64(lo), _as_float64(hi)
    positive = x64 > 0
    with np.errstate(invalid="ignore", over="ignore"):
        below_gap, above_gap = x64 - lo64, hi64 - x64
    for name in NARROW_FLOAT:
        if name == RINT:
            out = nearest
        elif name == TRUNC:
            out = np.where(positive, lo, hi)
        elif name == FLOOR:
            out = lo
        elif name == CEIL:
            out = hi
        elif name == ROUND:
            tie_away = np.where(positive, hi, lo)
            out = np.where(below_gap < above_gap, lo, np.where(below_gap > above_gap, hi, tie_away))
        else:  # odd: the neighbour whose last bit is 1
            lo_odd = (lo.view(_bits_type(dst)) & 1) == 1
            out = np.where(lo_odd, lo, hi)
        yield name, np.where(exact, nearest, out).astype(dst)


def _to_integers(x64: np.ndarray, rounding: str) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        if rounding == TRUNC:
            return np.trunc(x64)
        if rounding == RINT:
            return np.rint(x64)
        if rounding == FLOOR:
            return np.floor(x64)
        if rounding == CEIL:
            return np.ceil(x64)
        return np.sign(x64) * np.floor(np.abs(x64) + 0.5)


def _saturate(values: np.ndarray, dst: np.dtype) -> np.ndarray:
    info = np.iinfo(dst)
    return np.clip(values, info.min, info.max).astype(dst)


def _wrap(values: np.ndarray, dst: np.dtype) -> Optional[np.ndarray]:
    """The low bits of each (integral) value, as an integer narrowing that keeps them stores it; None when every
    value is in range (then it equals saturation)."""
    info = np.iinfo(dst)
    if values.size == 0 or (values.min() >= info.min and values.max() <= info.max):
        return None
    return values.astype(np.int64).astype(dst)  # numpy's integer cast keeps the low bits


def cast_candidates(x: np.ndarray, dst: np.dtype) -> Iterator[tuple[str, np.ndarray]]:
    """The outputs a CANN Cast of `x` to `dst` may have, as (what it did, array), CANN's kernel choice first.

    `x`: the decoded input (numpy or ml_dtypes). Only the conversions `cast_changes_values` calls value-changing
    come here; their values are exact in float64 (integers beyond 2**53 are not modelled)."""
    src = x.dtype
    if dst == np.bool_:
        yield "x != 0", x != 0 if not is_bfloat16(src) else _as_float64(x) != 0
        return
    if is_float(src):
        x64 = _as_float64(x)
        if is_float(dst):
            yield from _narrow_candidates(x64, dst)
            return
        nan = np.isnan(x64)
        for name in FLOAT_TO_INT:
            integral = np.where(nan, 0.0, _to_integers(x64, name))
            yield name, _saturate(integral, dst)
        return
    wide = x.astype(np.int64) if src.kind in "biu" and src != np.uint64 else x
    if is_float(dst):  # int → float beyond the exact range: rounded (through float32 on some chips' kernels)
        x64 = wide.astype(np.float64)
        yield from _narrow_candidates(x64, dst)
        if dst.itemsize < 4:
            via = x64.astype(np.float32).astype(np.float64)
            for name, out in _narrow_candidates(via, dst):
                yield f"{name} through float32", out
        return
    yield "saturate", _saturate(wide, dst)
    wrapped = _wrap(wide, dst)
    if wrapped is not None:
        yield "low bits kept", wrapped


def mismatches(out: np.ndarray, expected: np.ndarray) -> int:
    """Elements of `out` that differ from `expected` (NaN equals NaN)."""
    if out.shape != expected.shape:
        return out.size
    a, b = (_as_float64(v) if is_float(v.dtype) else v for v in (out, expected))
    same = a == b
    if is_float(out.dtype) and is_float(expected.dtype):
        same |= np.isnan(a) & np.isnan(b)
    return int(out.size - np.count_nonzero(same))


def rounding_words(name: str) -> str:
    """`trunc through float32` -> `round toward zero, through float32`."""
    base, _, rest = name.partition(" ")
    words = ROUNDING_WORDS.get(base)
    return name if words is None else (f"{words}, {rest}" if rest else words)
