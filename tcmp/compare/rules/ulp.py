"""Rounding noise is not an error: the one declaration of the rule, its k and the unit it counts in, read by the
metrics (MaxUlpErr), the verdict, the console legend, the HTML page and the README (a test checks the README's
sentence is `RULE.text()`).

A unit in the last place (ulp) is msprobe's, as its API precision standard computes it: at a bench element b, one
ulp of a dtype with `mantissa_bits` stored significand bits is 2^(floor(log2|b|) - mantissa_bits), the exponent
never below the dtype's smallest normal one (`min_exponent`), so subnormals keep their fixed step. Where b is 0
msprobe takes the exponent 0 (an ulp of 1.0, which would let an NPU 0.004 against a golden 0 pass in bf16); tcmp
takes the subnormal floor there as well, the step the dtype really has at 0.

The unit is that of the lower-precision dtype of the two sides: a bf16 GE tensor against the float32 file the FX
dumper writes for it is counted in bf16 steps, since the GE side could not hold anything finer. Sides that are not
floating point, or floats the table does not know (float8, float64 on both sides), get no MaxUlpErr.

A tensor carries no more precision than it was computed in: the output of a value-preserving widening cast (fp16 →
fp32, GE-inserted or not, transitively through such casts and TransData), and every input it feeds, holds fp16
values in fp32 and its rounding in fp16 steps; the graph tells (`carried`). The unit is then the narrowest of the
two sides' dtypes and the one carried.

Statistics mode sees no elements, but the rule bounds the statistics: if every element moved by at most k ulps,
max and min move by at most k ulps of their own magnitude, the mean by at most k ulps of max(|max|, |min|), and the
L2 norm by at most k·2^-m of itself (plus k subnormal steps per element, for elements at or near 0).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Optional, Union

import numpy as np

# A float type as a dtype or as numpy's name of it ("bfloat16"): the names let a compare from the index, which holds
# no arrays, judge bf16 rows without importing ml_dtypes (tcmp.schemas.narrow_floats).
FloatType = Union[np.dtype, str]


@functools.lru_cache(maxsize=64)  # asked twice per pair, of a handful of dtypes: numpy's `dtype.name` is slow
def _name(dtype: FloatType) -> str:
    return dtype if isinstance(dtype, str) else np.dtype(dtype).name


@dataclass(frozen=True)
class UlpTolerance:
    """The unit in the last place of one dtype."""

    name: str  # as messages say it: "bf16"
    dtype_name: str  # numpy's: "bfloat16"
    mantissa_bits: int  # stored significand bits: one ulp is 2^-mantissa_bits of the element's power of two
    min_exponent: int  # the smallest normal exponent: below it (subnormals, 0) the ulp stays 2^(this - mantissa_bits)

    @property
    def relative_step(self) -> str:
        return f"2^-{self.mantissa_bits}"


@dataclass(frozen=True)
class UlpRule:
    """A tensor-mode row whose every element differs by at most `k` ulps is not FAIL, whatever MaxRelativeErr says."""

    k: int
    table: tuple[UlpTolerance, ...]

    def unit(self, npu: FloatType, bench: FloatType, carried: Optional[FloatType] = None) -> Optional[UlpTolerance]:
        """The dtype whose ulps a pair's MaxUlpErr counts: the lower-precision one of the two sides, or the
        precision the target tensor carries (`carried`, a value-preserving cast's input dtype) where that is
        narrower. float64 on one side defers to the other; any other dtype outside the table (ints, bool, float8)
        gives None."""
        unit = _unit(self, _name(npu), _name(bench))
        narrower = self.carried_unit(unit, carried)
        return unit if narrower is None else narrower

    def carried_unit(self, unit: Optional[UlpTolerance], carried: Optional[FloatType]) -> Optional[UlpTolerance]:
        """The carried dtype's tolerance where it is narrower than `unit` (a float pair's), else None."""
        if unit is None or carried is None:
            return None
        found = next((t for t in self.table if t.dtype_name == _name(carried)), None)
        return found if found is not None and found.mantissa_bits < unit.mantissa_bits else None

    def within(self, max_ulp_err: float) -> bool:
        return max_ulp_err <= self.k

    def message(self, unit: UlpTolerance, carried: bool = False) -> str:
        how = ", the precision its Cast input carried" if carried else ""
        return f"within {self.k} ulp of {unit.name}{how}"

    def ulp_at(self, unit: UlpTolerance, value: float) -> float:
        """One ulp of `unit` at `value`: 2^(max(floor(log2|value|), min_exponent) - mantissa_bits)."""
        exponent = math.frexp(abs(value))[1] - 1 if value != 0 and math.isfinite(value) else unit.min_exponent
        return math.ldexp(1.0, max(exponent, unit.min_exponent) - unit.mantissa_bits)

    def statistics_within(self, unit: UlpTolerance, npu: StatValues, bench: StatValues, numel: int) -> bool:
        """Whether every statistic differs by no more than `k` ulps per element can explain (module docstring);
        a statistic missing on a side is not judged, a NaN/inf one is no rounding."""

        def close(n: Optional[float], b: Optional[float], step: float) -> bool:
            if n is None or b is None:
                return True
            return math.isfinite(n) and math.isfinite(b) and abs(n - b) <= self.k * step

        def ulp_of_larger(n: Optional[float], b: Optional[float]) -> float:
            return self.ulp_at(unit, max((abs(v) for v in (n, b) if v is not None and math.isfinite(v)), default=0))

        extremes = [abs(v) for v in (npu.max, npu.min, bench.max, bench.min) if v is not None and math.isfinite(v)]
        mean_step = self.ulp_at(unit, max(extremes, default=0.0))
        norms = [v for v in (npu.l2norm, bench.l2norm) if v is not None and math.isfinite(v)]
        floor = math.ldexp(1.0, unit.min_exponent - unit.mantissa_bits)  # an element at or near 0
        norm_step = math.ldexp(max(norms, default=0.0), -unit.mantissa_bits) + floor * math.sqrt(max(numel, 0))
        return (
            close(npu.max, bench.max, ulp_of_larger(npu.max, bench.max))
            and close(npu.min, bench.min, ulp_of_larger(npu.min, bench.min))
            and close(npu.mean, bench.mean, mean_step)
            and close(npu.l2norm, bench.l2norm, norm_step)
        )

    def text(self) -> str:
        """The rule in one sentence: the console legend, the page and the README say exactly this."""
        steps = ", ".join(f"{t.name}: {t.relative_step}" for t in self.table)
        example = self.message(min(self.table, key=lambda t: t.mantissa_bits))
        return (
            f"Rounding noise: in tensor mode a row whose every element differs from the bench by at most {self.k} "
            f"units in the last place (ulp) of the lower-precision dtype of the two sides ({steps} of the bench "
            f"element's power of two) is PASS whatever MaxRelativeErr says, its Err_message saying so "
            f'("{example}", or of that dtype); MaxUlpErr is the largest difference in those ulps. A tensor that '
            f"a value-preserving widening cast made (fp16 -> fp32, through such casts and TransData), and each input "
            f"it feeds, is counted in ulps of that cast's input dtype, the precision it carries. In statistics mode "
            f"a row is PASS when each statistic differs by no more than {self.k} ulps per element allow: max and min "
            f"{self.k} ulps of their own magnitude, mean {self.k} ulps of max(|max|, |min|), L2 norm {self.k} x "
            f"2^-m of itself (m: the significand bits above)."
        )


@dataclass(frozen=True)
class StatValues:
    """The statistics of one side that the rule bounds (None: the source does not carry it)."""

    max: Optional[float]
    min: Optional[float]
    mean: Optional[float]
    l2norm: Optional[float]


_NAMED = {
    "DT_FLOAT16": "float16",
    "float16": "float16",
    "DT_BF16": "bfloat16",
    "bfloat16": "bfloat16",
    "DT_FLOAT": "float32",
    "float32": "float32",
    "DT_DOUBLE": "float64",
    "float64": "float64",
}


def float_type_named(name: Optional[str]) -> Optional[str]:
    """numpy's name of the float dtype a dump names (GE "DT_FLOAT16" or FX "float16"); None for any other."""
    return _NAMED.get(name or "")


@functools.lru_cache(maxsize=64)  # asked once per pair, of a handful of dtype pairs
def _unit(rule: UlpRule, npu: str, bench: str) -> Optional[UlpTolerance]:
    known = {t.dtype_name: t for t in rule.table}
    found = []
    for dtype in (npu, bench):
        if dtype in known:
            found.append(known[dtype])
        elif dtype != "float64":
            return None
    return min(found, key=lambda t: t.mantissa_bits) if found else None


RULE = UlpRule(
    k=2,
    table=(
        UlpTolerance("fp16", "float16", 10, -14),
        UlpTolerance("bf16", "bfloat16", 7, -126),
        UlpTolerance("fp32", "float32", 23, -126),
    ),
)
