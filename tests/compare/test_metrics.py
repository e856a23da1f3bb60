"""Tensor-mode metrics against worked examples of msprobe 26.2.0's compare, with tcmp's cell
vocabulary (docs/decisions.md, "Numbers"). Every expected number is recomputed here from msprobe's formulas, written out
here (float64 cosine/EucDist/MaxAbsErr; relative errors in msprobe's result type with its ε substitution; 12-decimal
rounding), and checked against the value msprobe prints. msprobe rounds a cosine above 0.9999 to 6 decimals
as well; tcmp does not (README, "Numbers"), so its cosine is checked to round to msprobe's printed one.

Every test here runs twice: with the compiled pair loop (tcmp/summaries/compiled.c) and with the numpy path that
stands in
where that extension is not built."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tcmp.compare.judge.metrics import NA, StatDiff, fused_metrics, statistics_metrics, tensor_metrics
from tcmp.compare.judge.verdict import (
    Colour,
    Result,
    Thresholds,
    colour,
    judge_statistics,
    judge_tensor,
    magnitude_jump,
)
from tcmp.schemas.dump_records import Summary

pytestmark = pytest.mark.usefixtures("metrics_engine")  # every test with each engine (conftest)


def spec_metrics(npu, bench):
    """msprobe's tensor-mode formulas, written out independently of tcmp.compare.judge.metrics."""
    n, b = np.asarray(npu), np.asarray(bench)
    # bfloat16 is widened to float32 exactly (its bits are the top half of a float32's), then treated as float32
    n, b = (x.view(np.uint16).astype(np.uint32) << 16 if x.dtype == ml_dtypes.bfloat16 else x for x in (n, b))
    n, b = (x.view(np.float32) if x.dtype == np.uint32 else x for x in (n, b))
    n64, b64 = n.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    cos = float(n64 @ b64 / (np.linalg.norm(n64) * np.linalg.norm(b64)))
    cos = float(f"{cos:.12f}")
    msprobe_cos = round(cos, 6) if cos > 0.9999 else cos
    euc = float(np.linalg.norm(n64 - b64))
    max_abs = float(f"{np.abs(n64 - b64).max():.12f}")
    nr = n.astype(np.float64) if n.dtype.kind in "biu" else n
    br = b.astype(np.float64) if b.dtype.kind in "biu" else b
    rt = np.result_type(nr, br, np.float32)
    nr, br = nr.astype(rt).ravel().copy(), br.astype(rt).ravel().copy()
    eps = np.finfo(rt).eps
    zero = br == 0
    nr[zero] += eps
    br[zero] += eps
    re = np.abs((nr - br) / br)
    return {
        "cosine": cos,
        "msprobe_cosine": msprobe_cos,
        "euc": euc,
        "max_abs": max_abs,
        "max_rel": float(f"{re.max():.12f}"),
        "one": float(f"{(re < 0.001).sum() / re.size:.12f}"),
        "five": float(f"{(re < 0.005).sum() / re.size:.12f}"),
    }


# (npu, bench, msprobe's printed cells: Cosine, EucDist, MaxAbsErr, MaxRelativeErr, 1‰, 5‰)
WORKED = [
    (np.float32([1, 2, 3, 4]), np.float32([1, 2, 3, 4]), (1.0, 0.0, 0.0, 0.0, 1.0, 1.0)),
    (np.float32([1, 2.0005, 3, 4.01]), np.float32([1, 2, 3, 4]),
     (0.999999, 0.010012718983912159, 0.010000228882, 0.00250005722, 0.75, 1.0)),
    (np.float32([0, 1e-7, 1, 2]), np.float32([0, 0, 1, 2.001]),
     (1.0, 0.0009999275257523157, 0.000999927521, 0.838860750198, 0.75, 0.75)),
    (np.float64([0, 1e-7, 1, 2]), np.float64([0, 0, 1, 2.001]),
     (1.0, 0.0010000000049998898, 0.001, 450359962.7370496, 0.75, 0.75)),
    (np.float32([5, 1]), np.float32([0, 1]), (0.196116135138, 5.0, 5.0, 41943040.0, 0.5, 0.5)),
    (np.float16([1e-4, 0.5, 0]), np.float16([0, 0.5, 0]),
     (1.0, 0.00010001659393310547, 0.000100016594, 839.0, 0.666666666667, 0.666666666667)),
    (np.int64([1, 2, 3]), np.int64([1, 2, 4]), (0.991460133984, 1.0, 1.0, 0.25, 0.666666666667, 0.666666666667)),
    (np.int64([1, 2, 3]), np.int64([0, 2, 3]),
     (0.963624111659, 1.0, 1.0, 4503599627370496.0, 0.666666666667, 0.666666666667)),
    (np.array([True, False, True]), np.array([True, True, True]),
     (0.816496580928, 1.0, 1.0, 1.0, 0.666666666667, 0.666666666667)),
    (np.float64([1, -2, 3]), np.float64([-1, 2, -3]), (-1.0, 7.483314773547883, 6.0, 2.0, 0.0, 0.0)),
    (np.float64([1, 0]), np.float64([1, 0.0142]), (0.999899195244, 0.0142, 0.0142, 1.0, 0.5, 0.5)),
    (np.float64([1, 0]), np.float64([1, 0.001]), (1.0, 0.001, 0.001, 1.0, 0.5, 0.5)),
    (np.float64([1.001, 2]), np.float64([1, 2]), (1.0, 0.0009999999999998899, 0.001, 0.001, 1.0, 1.0)),
]  # fmt: skip


@pytest.mark.parametrize(("npu", "bench", "printed"), WORKED)
def test_worked_examples(npu, bench, printed):
    expected = spec_metrics(npu, bench)
    # the independent recomputation reproduces what msprobe prints ...
    assert (expected["msprobe_cosine"], expected["max_abs"], expected["max_rel"]) == pytest.approx(
        (printed[0], printed[2], printed[3]), rel=1e-12
    )
    assert expected["euc"] == pytest.approx(printed[1], rel=1e-12, abs=1e-15)
    # ... and tcmp computes the same cells
    m = tensor_metrics(npu, bench)
    got = (m.cosine, m.euc_dist, m.max_abs_err, m.max_relative_err, m.one_thousandth, m.five_thousandths)
    want = tuple(expected[k] for k in ("cosine", "euc", "max_abs", "max_rel", "one", "five"))
    assert got == pytest.approx(want, rel=1e-12, abs=1e-15)
    msprobe_got = (round(m.cosine, 6) if m.cosine > 0.9999 else m.cosine, *got[1:])  # how msprobe would print it
    assert msprobe_got == pytest.approx(printed, rel=1e-9, abs=1e-12)


def test_fp16_vs_fp32_is_compared_with_a_message():
    npu, bench = np.float16([0.1, 0.2, 0.3]), np.float32([0.1, 0.2, 0.3])
    m = tensor_metrics(npu, bench)
    assert m.cosine == pytest.approx(spec_metrics(npu, bench)["cosine"], rel=1e-12) and m.cosine < 1.0
    assert m.max_abs_err == pytest.approx(4.8831105e-05, rel=1e-6)
    assert m.max_relative_err == pytest.approx(0.000244155526, rel=1e-8)
    assert any("Dtype of NPU" in msg for msg in m.messages)


def test_int_vs_float_is_compared_not_unmatched():
    m = tensor_metrics(np.int32([1, 2, 3]), np.float32([1, 2, 3]))
    assert m.cosine == 1.0 and m.max_abs_err == 0.0 and any("Dtype" in x for x in m.messages)


def test_matched_nan_and_inf_are_zeroed_on_both_sides():
    m = tensor_metrics(np.float32([1, np.nan, 3]), np.float32([1, np.nan, 3.003]))
    zeroed = spec_metrics(np.float32([1, 0, 3]), np.float32([1, 0, 3.003]))
    assert m.cosine == pytest.approx(zeroed["cosine"], rel=1e-12)
    assert m.max_relative_err == pytest.approx(0.000999007956, rel=1e-9)
    assert m.euc_dist == pytest.approx(0.003000020980834961, rel=1e-12)
    m = tensor_metrics(np.float32([1, np.inf, -np.inf]), np.float32([1.1, np.inf, -np.inf]))
    assert m.max_relative_err == pytest.approx(0.09090910852, rel=1e-9) and m.one_thousandth == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    ("npu", "bench"),
    [([1, np.nan, 3], [1, 2, 3]), ([1, np.inf, 3], [1, np.nan, 3]), ([1, np.inf], [1, -np.inf]), ([np.nan], [1.0])],
)
def test_nan_inf_at_different_positions(npu, bench):
    m = tensor_metrics(np.float32(npu), np.float32(bench))
    assert m.nan_inf_mismatch and all(c is NA for c in m.cells)
    assert "position of inf or nan" in m.messages[-1]
    assert judge_tensor(m, Thresholds()).result is Result.FAIL


@pytest.mark.parametrize(("npu", "bench"), [(np.zeros(2), np.zeros(3)), (np.zeros((2, 3)), np.zeros((3, 2)))])
def test_shape_unmatched_keeps_the_row_with_na_cells(npu, bench):
    m = tensor_metrics(npu, bench)
    assert m.shape_mismatch and all(c is NA for c in m.cells) and "Shape" in m.messages[0]
    assert judge_tensor(m, Thresholds()).result is Result.FAIL


def test_size_one_dims_are_ignored_in_the_shape_check():
    m = tensor_metrics(np.ones((1, 4, 1)), np.ones(4))
    assert not m.shape_mismatch and m.cosine == 1.0


def test_empty_both_sides_passes_with_a_message():
    m = tensor_metrics(np.zeros((0, 3)), np.zeros((0, 3)))
    assert all(c is NA for c in m.cells) and "empty" in m.messages[0]
    assert judge_tensor(m, Thresholds()).result is Result.PASS


def test_all_zero_sides():
    both = tensor_metrics(np.zeros(4), np.zeros(4))
    assert (both.cosine, both.max_abs_err, both.one_thousandth) == (1.0, 0.0, 1.0)
    assert judge_tensor(both, Thresholds()).accuracy_reached
    npu_zero = tensor_metrics(np.zeros(2, np.float32), np.ones(2, np.float32))
    assert math.isnan(npu_zero.cosine) and npu_zero.euc_dist == pytest.approx(math.sqrt(2))
    assert "Zero in npu" in npu_zero.messages[0]
    bench_zero = tensor_metrics(np.ones(2, np.float32), np.zeros(2, np.float32))
    assert bench_zero.max_relative_err == pytest.approx(8388608.0) and "Zero in Bench" in bench_zero.messages[0]
    # a NaN cosine counts as < 0.9: accuracy not reached
    assert not judge_tensor(npu_zero, Thresholds()).accuracy_reached


def test_single_element_is_judged_by_relative_error():
    m = tensor_metrics(np.float32([2.0]), np.float32([2.5]))
    assert m.cosine is NA and m.euc_dist is NA and m.max_abs_err == 0.5
    assert m.max_relative_err == pytest.approx(0.20000000298, rel=1e-9)
    assert judge_tensor(m, Thresholds()).result is Result.FAIL
    same = tensor_metrics(np.float32(3.0), np.float32([3.0]))
    assert judge_tensor(same, Thresholds()).result is Result.PASS


def test_tensor_judgement_rules():
    t = Thresholds()
    ok = tensor_metrics(np.float32([1, 2.0005, 3, 4.01]), np.float32([1, 2, 3, 4]))  # cos 0.999999, rel 0.0025
    assert judge_tensor(ok, t).result is Result.PASS and judge_tensor(ok, t).accuracy_reached
    off = tensor_metrics(np.float64([1.05, 2.1, 3.15]), np.float64([1, 2, 3]))  # 5 % everywhere, cos 1
    j = judge_tensor(off, t)
    assert j.result is Result.FAIL and j.accuracy_reached  # suspicious: yellow
    assert colour(j.result, j.accuracy_reached, False, False) is Colour.YELLOW
    neg = tensor_metrics(np.float64([1, -2, 3]), np.float64([-1, 2, -3]))
    j = judge_tensor(neg, t)
    assert j.result is Result.FAIL and not j.accuracy_reached
    assert colour(j.result, j.accuracy_reached, False, False) is Colour.RED


def test_statistics_diffs_and_judgement():
    bench = Summary(numel=4, min=-1.0, max=2.0, mean=0.5, l2norm=3.0)
    npu = Summary(numel=4, min=-1.0, max=2.1, mean=0.5, l2norm=3.0)
    m = statistics_metrics(npu, bench)
    assert m.max.diff == pytest.approx(0.1) and m.max.relative == pytest.approx(0.05)
    assert m.min == StatDiff(0.0, 0.0)
    j = judge_statistics(m, bench.max, bench.min, bench.l2norm, Thresholds())
    assert j.result is Result.FAIL and j.accuracy_reached  # 5 % off the max, norm unchanged
    same = statistics_metrics(bench, bench)
    assert judge_statistics(same, 2.0, -1.0, 3.0, Thresholds()).result is Result.PASS


def test_statistics_small_bench_stat_is_judged_absolutely():
    bench = Summary(numel=4, min=1e-9, max=100.0, mean=1.0, l2norm=150.0)
    npu = Summary(numel=4, min=3e-9, max=100.0, mean=1.0, l2norm=150.0)  # min 200 % off, but 2e-9 of a 100 range
    m = statistics_metrics(npu, bench)
    assert m.min.relative == pytest.approx(2.0)
    assert judge_statistics(m, 100.0, 1e-9, 150.0, Thresholds()).result is Result.PASS


def test_statistics_zero_bench_and_nan_one_side():
    m = statistics_metrics(Summary(2, 0.0, 5.0, 1.0, 5.0, 0, 0), Summary(2, 0.0, 0.0, 0.0, 0.0, 0, 0))
    assert m.max.relative == math.inf
    m = statistics_metrics(Summary(2, 0.0, 5.0, 1.0, 5.0, 1, 0), Summary(2, 0.0, 5.0, 1.0, 5.0, 0, 0))
    assert m.nan_inf_one_side and "NPU tensor only" in m.messages[0]
    j = judge_statistics(m, 5.0, 0.0, 5.0, Thresholds())
    assert j.result is Result.FAIL and not j.accuracy_reached
    assert colour(j.result, j.accuracy_reached, True, False) is Colour.RED


def test_nan_inf_one_side_from_a_stats_csv_without_its_inf_columns():
    """An adump selection of Max, Min and Nan: no inf counts, so an infinity shows in max or min only."""
    bench = Summary(4, -1.0, 2.0, None, None, 0, 0)
    m = statistics_metrics(Summary(4, -1.0, math.inf, None, None, 0, None), bench)
    assert m.nan_inf_one_side and "NPU tensor only" in m.messages[0]
    assert not statistics_metrics(Summary(4, -1.0, 2.0, None, None, 0, None), bench).nan_inf_one_side
    assert "No L2 norm on one side" in m.messages[-1]


def test_magnitude_rule():
    assert magnitude_jump(20.0, [1.5, 0.2], 10.0)
    assert not magnitude_jump(9.0, [0.5], 10.0)  # |in| < 1 counts as 1
    assert not magnitude_jump(20.0, [NA], 10.0)
    assert colour(Result.PASS, True, False, True) is Colour.YELLOW
    assert colour(Result.PASS, True, False, False) is Colour.GREEN


_DTYPES = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64, np.int8, np.uint8, np.int16, np.int32, np.int64]


@settings(max_examples=150, deadline=None)
@given(
    dtype=st.sampled_from(_DTYPES),
    bench_dtype=st.one_of(st.none(), st.sampled_from(_DTYPES)),  # None: the same as the NPU's
    size=st.integers(min_value=2, max_value=5000),  # past the compiled loop's 2,048-element blocks
    scale=st.sampled_from([1e-6, 1.0, 10.0, 1e4]),  # fp16 subnormals to near its max (65504)
    zeros=st.floats(min_value=0.0, max_value=0.5),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_property_fast_metrics_equal_the_spec_formulas(dtype, bench_dtype, size, scale, zeros, seed):
    rng = np.random.default_rng(seed)
    bench = np.clip(rng.standard_normal(size), -6, 6) * scale
    npu = bench * (1 + rng.uniform(-0.02, 0.02, size))
    bench[rng.random(size) < zeros] = 0
    npu[rng.random(size) < zeros / 2] = 0
    npu, bench = npu.astype(dtype), bench.astype(bench_dtype or dtype)
    if not np.any(npu) or not np.any(bench):
        return  # the all-zero cases are worked examples above
    expected = spec_metrics(npu, bench)
    m = tensor_metrics(npu, bench)
    got = (m.cosine, m.euc_dist, m.max_abs_err, m.max_relative_err, m.one_thousandth, m.five_thousandths)
    want = tuple(expected[k] for k in ("cosine", "euc", "max_abs", "max_rel", "one", "five"))
    # cells are rounded to 12 decimals: where a sum's last bit (another summation order) straddles a rounding
    # boundary, the 12th decimal differs by one
    assert got == pytest.approx(want, rel=1e-12, abs=2e-12)
    n_stats, b_stats = m.stats
    n64, b64 = npu.astype(np.float64), bench.astype(np.float64)  # ml_dtypes widens bfloat16 exactly
    assert (n_stats.max, n_stats.min) == (float(n64.max()), float(n64.min()))
    assert n_stats.mean == pytest.approx(float(n64.mean()), rel=1e-12, abs=1e-300)
    assert b_stats.l2norm == pytest.approx(float(np.linalg.norm(b64)), rel=1e-12)


def test_every_float16_and_bfloat16_value_is_widened_exactly(metrics_engine):
    """Each finite 16-bit pattern (subnormals, ±0, the largest values) against numpy's exact float32 widening:
    any difference would show in MaxAbsErr."""
    for dtype in (np.float16, ml_dtypes.bfloat16):
        values = np.arange(1 << 16, dtype=np.uint16).view(dtype)
        values = values[np.isfinite(values.astype(np.float32))]
        widened = values.astype(np.float32)
        m = tensor_metrics(values, widened)
        if metrics_engine == "compiled":  # and not numpy's path, which takes over wherever the loop sees a NaN or inf
            assert fused_metrics(values, widened) == m
        assert m.max_abs_err == 0.0 and m.euc_dist == 0.0
        assert m.stats[0].max == float(widened.max()) and m.stats[0].min == float(widened.min())


def test_compiled_loop_takes_unaligned_and_strided_arrays(metrics_engine):
    rng = np.random.default_rng(7)
    bench = rng.standard_normal(3000).astype(np.float32)
    npu = (bench * 1.002).astype(np.float32)
    expected = tensor_metrics(npu.copy(), bench.copy())
    unaligned = np.frombuffer(b"\0" + npu.tobytes(), dtype=np.float32, offset=1)  # as a GE payload may sit
    assert not unaligned.flags.aligned
    strided = np.repeat(bench, 2)[::2]
    assert tensor_metrics(unaligned, strided) == expected


def test_compiled_loop_leaves_nan_inf_and_other_dtypes_to_numpy(metrics_engine):
    if metrics_engine == "numpy":
        assert fused_metrics(np.float32([1, 2]), np.float32([1, 2])) is None  # not built: numpy everywhere
        return
    assert fused_metrics(np.float32([1, np.nan]), np.float32([1, np.nan])) is None
    assert fused_metrics(np.float64([1e200, 1]), np.float64([1e200, 1])) is None  # squares overflow float64
    assert fused_metrics(np.int32([1, 2]), np.int32([1, 2])) is None
    assert fused_metrics(np.float32([1, 2]).astype(">f4"), np.float32([1, 2])) is None
    assert fused_metrics(np.float16([1, 2]), np.float16([1, 2])) is not None
