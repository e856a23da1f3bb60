"""The metric cells of one compared pair, for each data mode (docs/decisions.md, "Metrics"; formulas as
msprobe 26.2.0's, so numbers can be cross-checked with the tool users know).

Cells hold a float, or `NA` when a metric cannot be computed (the reason goes to the row's messages). Rounding is
msprobe's: 12 fixed decimals for Cosine, MaxAbsErr, MaxRelativeErr and the ratios (`fmt`); EucDist and MaxUlpErr
are not rounded. msprobe also rounds Cosine to 6 decimals above 0.9999; tcmp does not (the README says why), and
keeps 1 - Cosine at full precision for the HTML page's chart (`cosine_distance`).

MaxUlpErr is the largest |N - B| in units in the last place of the lower-precision dtype of the two sides, at each
bench element's magnitude (`ulp.RULE`).

Where tcmp deliberately differs from msprobe: nothing is masked (a golden 0 facing an NPU 100 shows as an absolute
error of 100), shapes are compared after dropping size-1 dims and never flattened into each other, int vs float is
compared, and every message is kept.

Tensor mode's sums come from one compiled pass over the pair (`fused_metrics`, `compiled.c`) for float16, bfloat16,
float32 and float64 tensors without NaN/inf; everything else, and every pair where the extension is not built,
takes the numpy path (`Prepared`, `compare_prepared`). Both give the same cells (tests run both).
"""

from __future__ import annotations

import enum
import functools
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Optional, Union

import numpy as np

from tcmp.compare.rules.shapes import squeezed
from tcmp.compare.rules.ulp import RULE, FloatType, UlpTolerance
from tcmp.schemas.dtypes import to_float32
from tcmp.schemas.dump_records import Summary
from tcmp.schemas.narrow_floats import is_bfloat16

if TYPE_CHECKING:  # typing.TypeIs is 3.13+; mypy knows typing_extensions, nothing imports it at run time
    from typing_extensions import TypeIs

try:
    from tcmp.summaries import compiled as c_loops  # the compiled pair loop (compiled.c)
except ImportError:  # installed without a C compiler: numpy computes the same numbers, several times slower
    c_loops = None  # type: ignore[assignment]  # a module or None: mypy has no optional module type


class _NotAvailable:
    """The `N/A` cell: a metric that cannot be computed for this pair (the reason is in Err_message)."""

    _instance: Optional[_NotAvailable] = None

    def __new__(cls) -> _NotAvailable:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NA"

    def __reduce__(self):
        return (_NotAvailable, ())


NA = _NotAvailable()
Cell = Union[float, _NotAvailable]


def is_na(cell: object) -> TypeIs[_NotAvailable]:
    """`cell is NA`, in the form mypy narrows a `Cell` by (it cannot narrow `is` against an instance)."""
    return cell is NA


ONE_THOUSANDTH = 0.001
FIVE_THOUSANDTHS = 0.005
_EPS64 = float(np.finfo(np.float64).eps)
MAX_ULP_EXPONENT = 126  # the compiled loop builds 2^-exponent as a float32


def fmt(value: float) -> float:
    """msprobe's format_value: 12 fixed decimals (so anything below 5e-13 becomes 0.0)."""
    if not math.isfinite(value):
        return value
    return float(f"{value:.12f}")


class Mode(str, enum.Enum):
    TENSOR = "tensor"
    STATISTICS = "statistics"
    MD5 = "md5"


@dataclass(frozen=True)
class TensorMetrics:
    """The cells of a tensor-mode row. The fields with a "column" in their metadata are the table's metric
    columns, in this order, under that name (`TENSOR_CELLS`, `cells`), and `NA` wherever a pair does not compute
    them: a new metric column is its field here and its computation."""

    cosine: Cell = field(default=NA, metadata={"column": "Cosine"})
    euc_dist: Cell = field(default=NA, metadata={"column": "EucDist"})
    max_abs_err: Cell = field(default=NA, metadata={"column": "MaxAbsErr"})
    max_relative_err: Cell = field(default=NA, metadata={"column": "MaxRelativeErr"})
    one_thousandth: Cell = field(default=NA, metadata={"column": "One Thousandth Err Ratio"})
    five_thousandths: Cell = field(default=NA, metadata={"column": "Five Thousandth Err Ratio"})
    # in ulps of `ulp_unit`; NA where the pair has none (ints, float8) or nothing was compared
    max_ulp_err: Cell = field(default=NA, metadata={"column": "MaxUlpErr"})
    messages: tuple[str, ...] = ()
    ulp_unit: Optional[UlpTolerance] = None
    ulp_carried: bool = False  # `ulp_unit` is the precision a widening cast's input carried, narrower than both sides
    nan_inf_mismatch: bool = False  # NaN/inf at different positions (or on one side only)
    shape_mismatch: bool = False
    both_zero: bool = False  # both sides all zero (a NaN-free, trustworthy cosine of 1.0)
    stats: Optional[tuple[BasicStats, BasicStats]] = None  # (NPU, bench) when computed on the way
    cosine_distance: Optional[float] = None  # 1 - Cosine, unrounded (the page's chart); None: Cosine no number

    @property
    def cells(self) -> tuple[Cell, ...]:
        """The metric cells, in the order of `TENSOR_CELLS`."""
        return _metric_cells(self)


_METRIC_FIELDS = tuple(f for f in fields(TensorMetrics) if "column" in f.metadata)
_metric_cells = operator.attrgetter(*(f.name for f in _METRIC_FIELDS))
# The column names of `TensorMetrics.cells`, in that order (the table's tensor-mode metric columns).
TENSOR_CELLS: tuple[str, ...] = tuple(f.metadata["column"] for f in _METRIC_FIELDS)


def _all_na(messages: Sequence[str], *, shape_mismatch: bool = False, nan_inf_mismatch: bool = False) -> TensorMetrics:
    return TensorMetrics(messages=tuple(messages), shape_mismatch=shape_mismatch, nan_inf_mismatch=nan_inf_mismatch)


def _numeric(array: np.ndarray) -> np.ndarray:
    array = to_float32(np.asarray(array))  # bf16/float8 widened exactly
    if array.dtype.kind == "c":
        raise TypeError("complex")
    return array


@functools.lru_cache(maxsize=64)  # asked once per pair, of a handful of dtype pairs
def _relative_type(n: np.dtype, b: np.dtype) -> np.dtype:
    """msprobe's result type for relative errors: ints and bools count as float64, then at least float32."""
    n = np.dtype(np.float64) if n.kind in "biu" else n
    b = np.dtype(np.float64) if b.kind in "biu" else b
    return np.result_type(n, b, np.float32)


@dataclass(frozen=True)
class BasicStats:
    """max, min, mean, L2 norm of one side, computed on the way (the report's NPU/Bench stats columns)."""

    max: float
    min: float
    mean: float
    l2norm: float


def _basic(values: np.ndarray, squares: float) -> BasicStats:
    return BasicStats(float(values.max()), float(values.min()), float(values.sum()) / values.size, math.sqrt(squares))


def _zero_matched_nan_inf(n: np.ndarray, b: np.ndarray, messages: list[str]):
    """NaN/inf at identical positions are zeroed on both sides (msprobe); anywhere else the pair cannot be
    compared. Returns the cleaned arrays, or None."""
    n_bad, b_bad = ~np.isfinite(n), ~np.isfinite(b)
    if not (n_bad.any() or b_bad.any()):
        return n, b
    same = (
        np.array_equal(np.isnan(n), np.isnan(b))
        and np.array_equal(np.isposinf(n), np.isposinf(b))
        and np.array_equal(np.isneginf(n), np.isneginf(b))
    )
    if not same:
        messages.append("The position of inf or nan in NPU and bench Tensor do not match.")
        return None
    return np.where(n_bad, 0, n), np.where(b_bad, 0, b)


class Prepared:
    """One side of a pair, ready to compare: its float64 copy, sum of squares and stats are computed once and
    reused by every pair the tensor takes part in (an FX output is the bench of its op's output and of its
    consumers' inputs)."""

    def __init__(self, array: np.ndarray) -> None:
        self.original_dtype = np.asarray(array).dtype
        self.values = _numeric(array)  # raises TypeError for complex
        self.shape = self.values.shape
        self.flat = self.values.reshape(-1)
        # numpy widens float16 to float64 faster than to float32; float32 copies are taken from this, exactly
        self.f64 = self.flat.astype(np.float64, copy=False)
        with np.errstate(over="ignore", invalid="ignore"):
            self.squares = float(np.dot(self.f64, self.f64)) if self.f64.size else 0.0
        self.finite = math.isfinite(self.squares)
        self.stats = _basic(self.f64, self.squares) if self.finite and self.f64.size else None
        self._as: dict[np.dtype, np.ndarray] = {}
        self._zeros: dict[np.dtype, Optional[np.ndarray]] = {}

    @property
    def nbytes(self) -> int:
        zeros = sum(z.nbytes for z in self._zeros.values() if z is not None)
        copies = sum(a.nbytes for a in self._as.values() if a is not self.flat)
        return self.f64.nbytes + copies + self.values.nbytes + zeros

    def as_type(self, dtype: np.dtype) -> np.ndarray:
        if dtype not in self._as:
            # the values themselves when they already are of that type (float64 -> float32 gives them back exactly)
            self._as[dtype] = self.flat if self.flat.dtype == dtype else self.f64.astype(dtype, copy=False)
        return self._as[dtype]

    def zeros(self, dtype: np.dtype) -> Optional[np.ndarray]:
        """Where `as_type(dtype)` is 0 (None: nowhere); a bench side's mask serves every pair it is in."""
        if dtype not in self._zeros:
            mask = self.as_type(dtype) == 0
            self._zeros[dtype] = mask if mask.any() else None
        return self._zeros[dtype]


@dataclass(frozen=True)
class PairSums:
    """What every tensor-mode cell is made of, from one pass over a pair (the compiled loop) or from numpy."""

    npu_squares: float
    bench_squares: float
    dot: float
    max_abs: float  # max |npu - bench|, in float64
    diff_squares: float
    max_rel: float  # relative errors in msprobe's result type, with its ε substitution where bench == 0
    below_one: int  # relative errors below 0.001 (compared in that type)
    below_five: int
    max_ulps: float  # max |npu - bench| in ulps of the pair's `ulp_unit`; NaN when it has none


def tensor_metrics(npu: np.ndarray, bench: np.ndarray, carried: Optional[FloatType] = None) -> TensorMetrics:
    """Tensor mode: Cosine, EucDist, MaxAbsErr, MaxRelativeErr, One/Five Thousandth(s) Err Ratio, MaxUlpErr
    (`carried`: the narrower dtype whose precision the NPU tensor carries, `ulp.RULE`)."""
    fused = fused_metrics(npu, bench, carried)
    if fused is not None:
        return fused
    try:
        n, b = Prepared(npu), Prepared(bench)
    except TypeError:
        return _all_na(["complex tensors are compared in statistics or md5 mode only."])
    return compare_prepared(n, b, carried)


EMPTY_BOTH = "This is empty data on both sides, nothing to compare."  # msprobe's words: a PASS in every mode


def _mismatch(n_shape, b_shape, size: int, n_dtype: np.dtype, b_dtype: np.dtype, messages: list[str]):
    """The metrics of a pair that cannot be compared (shapes, empty), else None; notes a dtype difference."""
    if squeezed(n_shape) != squeezed(b_shape):
        return _all_na(
            [f"Shape of NPU {list(n_shape)} and bench {list(b_shape)} tensor do not match."], shape_mismatch=True
        )
    if size == 0:
        return _all_na((EMPTY_BOTH,))
    if n_dtype != b_dtype:
        messages.append(f"Dtype of NPU ({n_dtype}) and bench ({b_dtype}) tensor do not match; compared after casting.")
    return None


# The element types the compiled loop reads (native byte order), by its codes.
_FUSED_KINDS = {
    np.dtype(np.float16): 0,
    np.dtype(np.float32): 2,
    np.dtype(np.float64): 3,
}
_FUSED_BFLOAT16 = 1


def _fused_kind(dtype: np.dtype) -> Optional[int]:
    return _FUSED_BFLOAT16 if is_bfloat16(dtype) else _FUSED_KINDS.get(dtype)


def fused_loop_built() -> bool:
    return c_loops is not None


def _flat_bytes(array: np.ndarray) -> np.ndarray:
    """The array's bytes, contiguous and aligned to its element size, without a copy where they already are."""
    if not (array.flags.c_contiguous and array.flags.aligned):
        array = np.array(array, order="C")  # a fresh array is aligned
    return array.reshape(-1).view(np.uint8)


def fused_metrics(npu: np.ndarray, bench: np.ndarray, carried: Optional[FloatType] = None) -> Optional[TensorMetrics]:
    """`tensor_metrics` from one compiled pass over the pair; None where that loop does not apply (not built,
    other dtypes, NaN/inf: numpy's exact path takes those)."""
    npu, bench = np.asarray(npu), np.asarray(bench)
    nk, bk = _fused_kind(npu.dtype), _fused_kind(bench.dtype)
    if c_loops is None or nk is None or bk is None:
        return None
    messages: list[str] = []
    unmatched = _mismatch(npu.shape, bench.shape, npu.size, npu.dtype, bench.dtype, messages)
    if unmatched is not None:
        return unmatched
    unit = RULE.unit(npu.dtype, bench.dtype, carried)
    ulp_args = () if unit is None else (unit.mantissa_bits, unit.min_exponent)
    n_max, n_min, n_sum, nn, b_max, b_min, b_sum, bb, dot, d_max, d_min, dd, rel, one, five, ulps = c_loops.pair_sums(
        _flat_bytes(npu), nk, _flat_bytes(bench), bk, *ulp_args
    )
    if not (math.isfinite(nn) and math.isfinite(bb)):
        return None
    size = npu.size
    stats = (
        BasicStats(n_max, n_min, n_sum / size, math.sqrt(nn)),
        BasicStats(b_max, b_min, b_sum / size, math.sqrt(bb)),
    )
    sums = PairSums(nn, bb, dot, max(d_max, -d_min), dd, rel, one, five, ulps)
    return _from_sums(sums, size, messages, stats, unit, _carried(npu.dtype, bench.dtype, carried))


def _carried(npu: np.dtype, bench: np.dtype, carried: Optional[FloatType]) -> bool:
    return RULE.carried_unit(RULE.unit(npu, bench), carried) is not None


def compare_prepared(n: Prepared, b: Prepared, carried: Optional[FloatType] = None) -> TensorMetrics:
    """`tensor_metrics` with numpy, on prepared sides (one float64 copy per tensor, BLAS dots, in-place relative
    errors), for what the compiled loop does not take."""
    messages: list[str] = []
    unmatched = _mismatch(n.shape, b.shape, n.flat.size, n.original_dtype, b.original_dtype, messages)
    if unmatched is not None:
        return unmatched
    rt = _relative_type(n.flat.dtype, b.flat.dtype)
    unit = RULE.unit(n.original_dtype, b.original_dtype, carried)
    narrower = _carried(n.original_dtype, b.original_dtype, carried)
    if n.finite and b.finite:
        rel = _relative_errors(n.as_type(rt), b.as_type(rt), b.zeros(rt))
        sums = _numpy_sums(n.f64, b.f64, n.squares, b.squares, rel, unit)
        assert n.stats is not None and b.stats is not None  # both finite, and not empty (`_mismatch` took that)
        return _from_sums(sums, rel.size, messages, (n.stats, b.stats), unit, narrower)
    # NaN/inf somewhere (rare): the slow, exact path
    cleaned = _zero_matched_nan_inf(n.flat, b.flat, messages)
    if cleaned is None:
        return _all_na(messages, nan_inf_mismatch=True)
    n64, b64 = (c.astype(np.float64, copy=False) for c in cleaned)
    b_rt = b64.astype(rt, copy=False)
    rel = _relative_errors(n64.astype(rt, copy=False), b_rt, b_rt == 0)
    sums = _numpy_sums(n64, b64, float(np.dot(n64, n64)), float(np.dot(b64, b64)), rel, unit)
    return _from_sums(sums, rel.size, messages, None, unit, narrower)


def _numpy_sums(
    n64: np.ndarray, b64: np.ndarray, nn: float, bb: float, rel: np.ndarray, unit: Optional[UlpTolerance]
) -> PairSums:
    diff = n64 - b64
    dot, max_abs, diff_squares = float(np.dot(n64, b64)), max(float(diff.max()), -float(diff.min())), float(
        np.dot(diff, diff))  # fmt: skip
    return PairSums(
        nn, bb, dot, max_abs, diff_squares, float(rel.max()), int(np.count_nonzero(rel < ONE_THOUSANDTH)),
        int(np.count_nonzero(rel < FIVE_THOUSANDTHS)), math.nan if unit is None else _max_ulps(diff, b64, unit),
    )  # fmt: skip


def _max_ulps(diff: np.ndarray, b64: np.ndarray, unit: UlpTolerance) -> float:
    """max |diff| / ulp(b), the ulp of `unit` at each bench element: 2^(max(floor(log2|b|), min_exponent) -
    mantissa_bits), its exponent read from b's float64 bits (b's own dtype widens to float64 exactly). As in the
    compiled loop, exponents above 126 count as 126 (|b| >= 2^127: more ulps, never fewer). `diff` is overwritten;
    one integer array is made."""
    exponent = np.ascontiguousarray(b64).view(np.int64) >> 52  # sign and exponent bits
    np.bitwise_and(exponent, 0x7FF, out=exponent)
    np.subtract(exponent, 1023, out=exponent)  # floor(log2|b|); zero and subnormals fall below the floor
    np.clip(exponent, unit.min_exponent, MAX_ULP_EXPONENT, out=exponent)
    np.subtract(unit.mantissa_bits, exponent, out=exponent)
    np.abs(diff, out=diff)
    np.ldexp(diff, exponent, out=diff)  # a power of two: exact
    return float(diff.max())


def _from_sums(
    s: PairSums, size: int, messages: list[str], stats: Optional[tuple[BasicStats, BasicStats]],
    unit: Optional[UlpTolerance], carried: bool = False,
) -> TensorMetrics:  # fmt: skip
    max_abs, max_rel = fmt(s.max_abs), fmt(s.max_rel)
    ulps: Cell = NA if unit is None else s.max_ulps
    if size == 1:
        messages.append("Single element: Cosine, EucDist and the error ratios are not computed.")
        return TensorMetrics(
            max_abs_err=max_abs, max_relative_err=max_rel, max_ulp_err=ulps, messages=tuple(messages), ulp_unit=unit,
            ulp_carried=carried, stats=stats,
        )  # fmt: skip
    one, five = fmt(s.below_one / size), fmt(s.below_five / size)
    cosine, distance, both_zero = _cosine(s.dot, s.npu_squares, s.bench_squares, messages)
    euc = math.sqrt(s.diff_squares)
    return TensorMetrics(
        cosine=cosine, euc_dist=euc, max_abs_err=max_abs, max_relative_err=max_rel, one_thousandth=one,
        five_thousandths=five, max_ulp_err=ulps, messages=tuple(messages), ulp_unit=unit, ulp_carried=carried,
        both_zero=both_zero, stats=stats, cosine_distance=distance,
    )  # fmt: skip


def _relative_errors(n: np.ndarray, b: np.ndarray, zero: Optional[np.ndarray]) -> np.ndarray:
    """|N - B| / |B| in the arrays' (common) type, with msprobe's ε substitution where B == 0 (`zero`, None for
    nowhere): ε of that type added to both sides."""
    rt = n.dtype
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        rel = np.subtract(n, b)
        np.divide(rel, b, out=rel)
        np.abs(rel, out=rel)
        if zero is not None and zero.any():
            eps = np.finfo(rt).eps
            shifted = n[zero] + eps
            rel[zero] = np.abs((shifted - eps) / eps)
    return rel


def _cosine(dot: float, nn: float, bb: float, messages: list[str]) -> tuple[Cell, Optional[float], bool]:
    """(Cosine cell, 1 - Cosine unrounded, both sides all zero)."""
    n_norm, b_norm = math.sqrt(nn), math.sqrt(bb)
    if n_norm <= _EPS64 and b_norm <= _EPS64:
        return 1.0, 0.0, True
    if n_norm <= _EPS64:
        messages.append("Cannot compare by Cosine Similarity, All the data is Zero in npu dump data.")
        return math.nan, None, False
    if b_norm <= _EPS64:
        messages.append("Cannot compare by Cosine Similarity, All the data is Zero in Bench dump data.")
        return math.nan, None, False
    value = dot / (n_norm * b_norm)
    if math.isnan(value):
        messages.append("Cannot compare by Cosine Similarity, the dump data has NaN.")
        return math.nan, None, False
    return fmt(value), 1.0 - value, False


# --- statistics mode -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StatDiff:
    diff: Cell  # n - b
    relative: Cell  # |n - b| / |b| as a fraction (the xlsx shows it as a percentage); inf when b = 0 != n


@dataclass(frozen=True)
class StatisticsMetrics:
    max: StatDiff
    min: StatDiff
    mean: StatDiff
    l2norm: StatDiff
    messages: tuple[str, ...]
    nan_inf_one_side: bool

    @property
    def diffs(self) -> tuple[StatDiff, ...]:
        return (self.max, self.min, self.mean, self.l2norm)


def _stat_diff(n: Optional[float], b: Optional[float]) -> StatDiff:
    if n is None or b is None:
        return StatDiff(NA, NA)
    if math.isnan(n) or math.isnan(b):
        return StatDiff(math.nan, math.nan)
    if n == b:  # includes inf == inf
        return StatDiff(0.0, 0.0)
    diff = n - b
    if math.isinf(b) or math.isinf(n):
        return StatDiff(diff, math.inf)
    return StatDiff(diff, math.inf if b == 0 else abs(diff) / abs(b))


def _has_special(summary: Summary) -> Optional[bool]:
    """NaN or inf in the tensor; None when the summary cannot tell. A count a source does not carry (a stats CSV
    without the inf columns) is read from min/max, which show infinities."""
    values = [v for v in (summary.min, summary.max) if v is not None]
    if summary.nan_count or summary.inf_count or any(not math.isfinite(v) for v in values):
        return True
    if summary.nan_count is None and summary.inf_count is None:
        return False if values else None
    return False if summary.inf_count is not None or len(values) == 2 else None


def statistics_metrics(npu: Summary, bench: Summary) -> StatisticsMetrics:
    messages: list[str] = []
    n_special, b_special = _has_special(npu), _has_special(bench)
    one_side = n_special is not None and b_special is not None and n_special != b_special
    if one_side:
        side = "NPU" if n_special else "bench"
        messages.append(f"NaN/inf in the {side} tensor only.")
    if npu.l2norm is None or bench.l2norm is None:
        messages.append("No L2 norm on one side (its summary-only source does not carry one).")
    return StatisticsMetrics(
        max=_stat_diff(npu.max, bench.max),
        min=_stat_diff(npu.min, bench.min),
        mean=_stat_diff(npu.mean, bench.mean),
        l2norm=_stat_diff(npu.l2norm, bench.l2norm),
        messages=tuple(messages),
        nan_inf_one_side=one_side,
    )


def crc_hex(crc: Optional[int]) -> Optional[str]:
    return None if crc is None else f"{crc & 0xFFFFFFFF:08x}"
