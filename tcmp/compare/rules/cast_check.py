"""A GE-inserted Cast checked by what it computes: its output against Cast(its input), not against its input.

A value-changing cast (float → int, → bool, a narrowing float, int → a float that cannot hold all its values, a
narrowing int) is checked as output vs the cast applied to the input with CANN's rounding (`cast_rounding`); the
dump cannot tell which rounding ran, so the candidate closest to the output (the first exact one) is the bench and
the row says which. A value-preserving cast (wider float, wider int, int → a float holding all its values, from
bool) keeps the plain self check: its output must equal its input.

With raw tensors the expected output is computed exactly (every mode). From statistics alone (the index after
`watch --drop-raw`, a stats CSV) only what the input's statistics determine is checked: every candidate rounding
is monotone, so min and max of Cast(input) are the rounded min and max of the input, exactly; mean and L2 norm are
only bounded (each element moves by at most one unit of the target's last place, or by less than 1 for an
integer), so the expected mean and L2 norm are the output's own clamped into those bounds — a clean cast shows no
difference, a fault beyond the bound shows by how far. Where saturation, NaN or overflow make the bound
unknown, only min and max are checked, and the row says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from tcmp.compare.rules.cast_rounding import cast_candidates, mismatches, rounding_words
from tcmp.schemas.dump_records import Summary
from tcmp.schemas.narrow_floats import dtype_of_name, float_limits, is_float_name

# The dump dtypes a cast check models, by numpy's names (the bf16 dtype is made only when a bf16 array is cast).
_NUMPY = {
    "DT_BOOL": "bool",
    "DT_INT8": "int8",
    "DT_UINT8": "uint8",
    "DT_INT16": "int16",
    "DT_UINT16": "uint16",
    "DT_INT32": "int32",
    "DT_UINT32": "uint32",
    "DT_INT64": "int64",
    "DT_UINT64": "uint64",
    "DT_FLOAT16": "float16",
    "DT_BF16": "bfloat16",
    "DT_FLOAT": "float32",
    "DT_DOUBLE": "float64",
}


_SHORT = {"DT_FLOAT": "float32", "DT_BF16": "bfloat16", "DT_DOUBLE": "float64"}


def _short(name: str) -> str:
    return _SHORT.get(name, name[3:].lower() if name.startswith("DT_") else name)


def _holds(src: str, dst: str) -> bool:
    """Whether every value of `src` is a value of `dst` (the cast then changes no value); numpy's names."""
    if src == "bool":
        return True
    if dst == "bool":
        return False
    if is_float_name(src):
        if not is_float_name(dst):
            return False
        s, d = float_limits(src), float_limits(dst)
        return d.nmant >= s.nmant and d.maxexp >= s.maxexp and d.minexp <= s.minexp
    info = np.iinfo(src)
    if is_float_name(dst):
        exact = 2 ** (float_limits(dst).nmant + 1)  # every integer up to this is a value of dst
        return -exact <= info.min and info.max <= exact
    target = np.iinfo(dst)
    return target.min <= info.min and info.max <= target.max


@dataclass(frozen=True)
class CastCheck:
    """A GE-inserted cast whose output is compared with Cast(input): the input's and the output's dtype names.
    `preserving`: it changes no value (a wider dtype): compared with its input as is, but for a CRC-32 (md5 mode),
    which is taken of the input in the output's dtype."""

    source: str
    target: str
    preserving: bool = False

    @property
    def label(self) -> str:
        return f"{_short(self.source)} -> {_short(self.target)}"


def cast_check_for(source: Optional[str], target: Optional[str]) -> Optional[CastCheck]:
    """The check for a conversion from dtype `source` to `target` (dump names, `DT_FLOAT16`) that tcmp models,
    value-changing or `preserving`; None for no dtype change, or one it cannot model (fp8, int4, complex): those
    keep the plain self check."""
    src, dst = _NUMPY.get(source or ""), _NUMPY.get(target or "")
    if src is None or dst is None or src == dst:
        return None
    return CastCheck(source or "", target or "", preserving=_holds(src, dst))


@dataclass(frozen=True)
class ExpectedOutput:
    array: np.ndarray
    note: str  # for Err_message: which rounding, and how many elements no documented rounding explains


def expected_output(x: np.ndarray, out: np.ndarray, check: CastCheck) -> ExpectedOutput:
    """Cast(x) under the documented rounding closest to `out` (the first exact one, CANN's kernel choice first)."""
    dst = numpy_dtype(check.target)
    best: Optional[tuple[int, str, np.ndarray]] = None
    for name, candidate in cast_candidates(x, dst):
        wrong = mismatches(out, candidate)
        if best is None or wrong < best[0]:
            best = (wrong, name, candidate)
        if wrong == 0:
            break
    assert best is not None
    wrong, name, candidate = best
    how = rounding_words(name)
    if wrong == 0:
        return ExpectedOutput(candidate, f"self check: output = Cast(input) {check.label} ({how})")
    return ExpectedOutput(
        candidate,
        f"self check: output vs Cast(input) {check.label}: {wrong} of {out.size} elements differ from Cast(input) "
        f"under every rounding CANN documents (compared with the closest: {how})",
    )


# --- statistics only ----------------------------------------------------------------------------------------


def _round_scalars(
    values: tuple[float, float], check: CastCheck, out: Summary
) -> tuple[tuple[float, float], str, bool]:
    """(min, max) of Cast(input): the input's rounded; the candidate that gives the output's (True), else CANN's
    kernel choice (False)."""
    src, dst = numpy_dtype(check.source), numpy_dtype(check.target)
    x = np.asarray(values, dtype=np.float64).astype(src)
    first: Optional[tuple[float, float]] = None
    first_name = ""
    for name, candidate in cast_candidates(x, dst):
        low, high = (float(v) for v in np.asarray(candidate, dtype=np.float64))
        if first is None:
            first, first_name = (low, high), name
        if (low, high) == (out.min, out.max):
            return (low, high), name, True
    assert first is not None
    return first, first_name, False


def _element_bound(check: CastCheck, x_abs_l2: float, count: int) -> tuple[float, float]:
    """(bound on |mean difference|, bound on |L2 difference|) between Cast(x) and x, for `count` elements."""
    src, dst = _NUMPY[check.source], _NUMPY[check.target]
    if not is_float_name(dst):  # to an integer, in range: each element moves by less than 1
        return 1.0, math.sqrt(count)
    info = float_limits(dst)
    relative = 2.0**-info.nmant * (1.0 if is_float_name(src) else 2.0)  # int → 16-bit float may round twice
    tiny = float(info.smallest_subnormal)
    return relative * x_abs_l2 / math.sqrt(count) + tiny, relative * x_abs_l2 + tiny * math.sqrt(count)


def _clamp(value: Optional[float], low: float, high: float) -> Optional[float]:
    if value is None or math.isnan(value):
        return value
    return min(max(value, low), high)


def _bool_summary(inp: Summary, out: Summary, count: int) -> tuple[Summary, str]:
    assert inp.min is not None and inp.max is not None  # expected_summary returned before where they are not
    some_nonzero = bool(inp.nan_count) or (inp.min, inp.max) != (0.0, 0.0)
    all_nonzero = inp.min > 0 or inp.max < 0
    high = 1.0 if some_nonzero else 0.0
    low = 1.0 if all_nonzero else (0.0 if (out.min not in (0.0, 1.0)) else out.min)
    mean = _clamp(out.mean, low, high)
    l2 = _clamp(out.l2norm, math.sqrt(count * low), math.sqrt(count * high))
    note = (
        "self check: output vs Cast(input) to bool, from statistics: min and max follow from the input's; mean and "
        "L2 norm only lie between them (shown as the output's, clamped there)"
    )
    return Summary(inp.numel, low, high, mean, l2, 0, 0), note


def expected_summary(inp: Summary, out: Summary, check: CastCheck) -> tuple[Optional[Summary], str]:
    """What the statistics of Cast(input) can be known to be, from the input's (None: nothing can: min/max
    missing), and the row's note saying what was checked."""
    if inp.min is None or inp.max is None or out.min is None or out.max is None:
        return None, f"self check: output vs Cast(input) {check.label}: the input's statistics hold no min/max"
    count = (inp.numel or 0) - (inp.nan_count or 0)
    if check.target == "DT_BOOL":
        return _bool_summary(inp, out, max(count, 1))
    (low, high), name, matched = _round_scalars((inp.min, inp.max), check, out)
    dst = _NUMPY[check.target]
    how = rounding_words(name)
    if not matched:
        how = f"no documented rounding gives the output's; shown: {how}"
    if is_float_name(dst):
        limit = float_limits(dst).max
        changed_range = max(abs(inp.min), abs(inp.max)) > limit  # overflow: inf, or saturated
        nan_count, inf_count = inp.nan_count, (out.inf_count if changed_range else inp.inf_count)
    else:
        info = np.iinfo(dst)
        changed_range = inp.min < info.min or inp.max > info.max or not math.isfinite(inp.min + inp.max)
        nan_count, inf_count = 0, 0
    unbounded = changed_range or bool(inp.nan_count and not is_float_name(dst)) or count <= 0 or inp.l2norm is None
    if unbounded or inp.mean is None:
        mean, l2 = out.mean, out.l2norm
        what = "mean and L2 norm not checkable from statistics (saturation, overflow or NaN change them unboundedly)"
    else:
        assert inp.l2norm is not None  # (unbounded where it is)
        mean_bound, l2_bound = _element_bound(check, inp.l2norm, count)
        mean = _clamp(out.mean, inp.mean - mean_bound, inp.mean + mean_bound)
        l2 = _clamp(out.l2norm, max(0.0, inp.l2norm - l2_bound), inp.l2norm + l2_bound)
        what = (
            f"mean and L2 norm only bounded (within {mean_bound:.3g} and {l2_bound:.3g} of the input's: shown as the "
            "output's, clamped into those bounds)"
        )
    note = (
        f"self check: output vs Cast(input) {check.label}, from statistics: min and max are Cast(input)'s ({how}); "
        f"{what}"
    )
    return Summary(inp.numel, low, high, mean, l2, nan_count, inf_count), note


def numpy_dtype(name: str) -> np.dtype:
    """The numpy (or ml_dtypes) dtype of a dump dtype name that a `CastCheck` names."""
    return dtype_of_name(_NUMPY[name])


def is_float_dtype_named(name: Optional[str]) -> Optional[bool]:
    """Whether a dump dtype name a `CastCheck` models is a float type; None for one it does not model."""
    numpy_name = _NUMPY.get(name or "")
    return None if numpy_name is None else is_float_name(numpy_name)
