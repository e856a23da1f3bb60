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
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Optional

import ml_dtypes
import numpy as np


@dataclass(frozen=True)
class UlpTolerance:
    """The unit in the last place of one dtype."""

    name: str  # as messages say it: "bf16"
    dtype: np.dtype
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

    def unit(self, npu: np.dtype, bench: np.dtype) -> Optional[UlpTolerance]:
        """The dtype whose ulps a pair's MaxUlpErr counts: the lower-precision one of the two sides. float64 on
        one side defers to the other; any other dtype outside the table (ints, bool, float8) gives None."""
        return _unit(self, np.dtype(npu), np.dtype(bench))

    def within(self, max_ulp_err: float) -> bool:
        return max_ulp_err <= self.k

    def message(self, unit: UlpTolerance) -> str:
        return f"within {self.k} ulp of {unit.name}"

    def text(self) -> str:
        """The rule in one sentence: the console legend, the page and the README say exactly this."""
        steps = ", ".join(f"{t.name}: {t.relative_step}" for t in self.table)
        example = self.message(min(self.table, key=lambda t: t.mantissa_bits))
        return (
            f"Rounding noise (tensor mode): a row whose every element differs from the bench by at most {self.k} "
            f"units in the last place (ulp) of the lower-precision dtype of the two sides ({steps} of the bench "
            f"element's power of two) is PASS whatever MaxRelativeErr says, its Err_message saying so "
            f'("{example}", or of that dtype); MaxUlpErr is the largest difference in those ulps.'
        )


@functools.lru_cache(maxsize=64)  # asked once per pair, of a handful of dtype pairs
def _unit(rule: UlpRule, npu: np.dtype, bench: np.dtype) -> Optional[UlpTolerance]:
    known = {t.dtype: t for t in rule.table}
    found = []
    for dtype in (npu, bench):
        if dtype in known:
            found.append(known[dtype])
        elif dtype != np.float64:
            return None
    return min(found, key=lambda t: t.mantissa_bits) if found else None


RULE = UlpRule(
    k=2,
    table=(
        UlpTolerance("fp16", np.dtype(np.float16), 10, -14),
        UlpTolerance("bf16", np.dtype(ml_dtypes.bfloat16), 7, -126),
        UlpTolerance("fp32", np.dtype(np.float32), 23, -126),
    ),
)
