"""Result (PASS/FAIL), "Accuracy Reached or Not" and the highlight colour of a row (docs/decisions.md,
"Verdicts" and "Colours"). Every threshold is a field of `Thresholds`, and a CLI option with the same default;
the rounding-noise rule of tensor mode (`ulp.RULE`) is declared with its k where the metrics read it too."""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from tcmp.compare.judge.metrics import NA, Cell, Mode, StatDiff, StatisticsMetrics, TensorMetrics, is_na
from tcmp.compare.rules.ulp import RULE, StatValues, UlpTolerance


class Result(str, enum.Enum):
    PASS = "PASS"
    FAIL = "FAIL"
    NA = "N/A"  # the row could not be compared: the data the mode needs is missing (reason in Err_message)


class Colour(str, enum.Enum):
    RED = "red"
    YELLOW = "yellow"
    GREEN = "green"


def _limit(default: float, bounds: str, *modes: Mode, option: Optional[str] = None) -> Any:
    """A threshold: what it bounds (the README's tolerance table says it), in which modes, and its CLI option."""
    return field(default=default, metadata={"bounds": bounds, "modes": modes, "option": option})


@dataclass(frozen=True)
class Thresholds:
    """Every tolerance of the verdicts but the rounding-noise rule's (`ulp.RULE`): the console legend, the HTML
    page and the README's tolerance table (`report.legend`) are rendered from these fields."""

    cosine: float = _limit(0.99, "Result PASS needs Cosine >= this", Mode.TENSOR, option="--cosine")
    max_relative_err: float = _limit(
        0.01, "Result PASS needs MaxRelativeErr < this", Mode.TENSOR, option="--max-rel-err"
    )
    # msprobe's legacy "Accuracy Reached" rule
    legacy_cosine: float = _limit(
        0.99, "Accuracy Reached is No when Cosine < this and MaxAbsErr > legacy_max_abs_err", Mode.TENSOR
    )
    legacy_max_abs_err: float = _limit(
        0.001, "Accuracy Reached is No when MaxAbsErr > this and Cosine < legacy_cosine", Mode.TENSOR
    )
    legacy_cosine_floor: float = _limit(0.9, "Accuracy Reached needs Cosine >= this", Mode.TENSOR)
    legacy_max_abs_err_ceiling: float = _limit(1.0, "Accuracy Reached needs MaxAbsErr <= this", Mode.TENSOR)
    # statistics mode
    stats_relative_err: float = _limit(
        0.01,
        "Result PASS needs NormRelativeErr, MaxRelativeErr and MinRelativeErr <= this",
        Mode.STATISTICS,
        option="--stats-rel-err",
    )
    stats_small_fraction: float = _limit(
        1e-3,
        "a bench stat below this x max(|max|, |min|) is judged by its difference, within this x that",
        Mode.STATISTICS,
    )
    stats_accuracy_norm: float = _limit(0.5, "Accuracy Reached needs NormRelativeErr <= this", Mode.STATISTICS)
    # highlight: output error >= this x its inputs' (msprobe's order-of-magnitude rule)
    magnitude_factor: float = _limit(
        10.0,
        "a PASS is yellow when its output error is >= this x its inputs' (msprobe's order-of-magnitude rule)",
        Mode.TENSOR,
        Mode.STATISTICS,
    )


@dataclass(frozen=True)
class Judgement:
    result: Result
    accuracy_reached: bool
    note: Optional[str] = None  # why the verdict is not the plain rule's (for Err_message)


def _lt(cell: Cell, limit: float) -> bool:
    return isinstance(cell, float) and not math.isnan(cell) and cell < limit


def _ge(cell: Cell, limit: float) -> bool:
    return isinstance(cell, float) and not math.isnan(cell) and cell >= limit


def _le(cell: Cell, limit: float) -> bool:
    return isinstance(cell, float) and not math.isnan(cell) and cell <= limit


def judge_tensor(m: TensorMetrics, t: Thresholds) -> Judgement:
    if m.nan_inf_mismatch or m.shape_mismatch:
        return Judgement(Result.FAIL, False)
    if all(c is NA for c in m.cells):  # empty on both sides
        return Judgement(Result.PASS, True)
    if m.cosine is NA:  # single element: judged by its relative error alone
        passed = _lt(m.max_relative_err, t.max_relative_err)
        return _rounding_noise(m, passed, _le(m.max_abs_err, t.legacy_max_abs_err_ceiling))
    passed = _ge(m.cosine, t.cosine) and _lt(m.max_relative_err, t.max_relative_err)
    cosine = m.cosine if isinstance(m.cosine, float) else math.nan
    if math.isnan(cosine):
        cosine = 1.0 if m.both_zero else -math.inf  # a NaN cosine counts as < 0.9 unless both sides are zero
    max_abs = m.max_abs_err if isinstance(m.max_abs_err, float) else math.inf
    reached = (
        not (cosine < t.legacy_cosine and max_abs > t.legacy_max_abs_err)
        and cosine >= t.legacy_cosine_floor
        and max_abs <= t.legacy_max_abs_err_ceiling
    )
    return _rounding_noise(m, passed, reached)


def _rounding_noise(m: TensorMetrics, passed: bool, reached: bool) -> Judgement:
    """The plain rule's verdict, but for a row it would FAIL whose every element is within `RULE.k` ulps: PASS,
    with a note saying so (Accuracy Reached stays msprobe's)."""
    if passed:
        return Judgement(Result.PASS, reached)
    if m.ulp_unit is not None and isinstance(m.max_ulp_err, float) and RULE.within(m.max_ulp_err):
        return Judgement(Result.PASS, reached, RULE.message(m.ulp_unit, m.ulp_carried))
    return Judgement(Result.FAIL, reached)


def _stat_within(d: StatDiff, bench: Optional[float], scale: float, t: Thresholds) -> bool:
    """A relative error within the limit; for a bench stat that is tiny against the tensor's range, the absolute
    difference against that range instead."""
    if is_na(d.diff):
        return True  # not known on one side: not judged here (messages say so)
    if isinstance(d.diff, float) and math.isnan(d.diff):
        return False
    if d.diff == 0.0:
        return True
    small = t.stats_small_fraction * scale
    if bench is not None and math.isfinite(bench) and abs(bench) < small:
        return abs(d.diff) <= small
    return _le(d.relative, t.stats_relative_err)


@dataclass(frozen=True)
class StatisticsNoise:
    """What the rounding-noise rule needs of a statistics row: its unit (`ulp.RULE.unit`), whether that is a carried
    precision, both sides' statistics and the element count."""

    unit: UlpTolerance
    carried: bool
    npu: StatValues
    bench: StatValues
    numel: int


def judge_statistics(
    m: StatisticsMetrics, bench_max: Optional[float], bench_min: Optional[float], bench_norm: Optional[float],
    t: Thresholds, noise: Optional[StatisticsNoise] = None,
) -> Judgement:  # fmt: skip
    """The 1 % rule on Max, Min and Norm; a row it would FAIL whose every statistic is within what `RULE.k` ulps per
    element allow (`noise`) is PASS, with a note saying so (Accuracy Reached stays the plain rule's)."""
    finite = [abs(v) for v in (bench_max, bench_min) if v is not None and math.isfinite(v)]
    scale = max(finite) if finite else 0.0
    checks = (
        _stat_within(m.l2norm, bench_norm, scale, t)
        and _stat_within(m.max, bench_max, scale, t)
        and _stat_within(m.min, bench_min, scale, t)
    )
    passed = checks and not m.nan_inf_one_side
    norm = m.l2norm.relative
    reached = not m.nan_inf_one_side and (norm is NA or _le(norm, t.stats_accuracy_norm))
    if passed:
        return Judgement(Result.PASS, reached)
    if (
        noise is not None
        and not m.nan_inf_one_side
        and RULE.statistics_within(noise.unit, noise.npu, noise.bench, noise.numel)
    ):
        return Judgement(Result.PASS, reached, RULE.message(noise.unit, noise.carried))
    return Judgement(Result.FAIL, reached)


def judge_md5(npu_crc: Optional[str], bench_crc: Optional[str]) -> Judgement:
    equal = npu_crc is not None and npu_crc == bench_crc
    return Judgement(Result.PASS if equal else Result.FAIL, equal)


def colour(result: Result, accuracy_reached: bool, nan_inf_one_side: bool, magnitude_jump: bool) -> Colour:
    if nan_inf_one_side or (result is Result.FAIL and not accuracy_reached):
        return Colour.RED
    if result is not Result.PASS or magnitude_jump:
        return Colour.YELLOW
    return Colour.GREEN


def magnitude_jump(output_error: Cell, input_errors: Sequence[Cell], factor: float) -> bool:
    """msprobe's order-of-magnitude rule: the output's error is >= factor x max(|input errors|, 1)."""
    if not isinstance(output_error, float) or not math.isfinite(output_error):
        return False
    known = [abs(e) for e in input_errors if isinstance(e, float) and math.isfinite(e)]
    return bool(known) and abs(output_error) >= factor * max(max(known), 1.0)
