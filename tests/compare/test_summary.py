"""Tensor summaries, by both engines, against a plain float64 computation (numpy's own nan-aware reductions) and
zlib's CRC-32."""

from __future__ import annotations

import math
import zlib
from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tcmp.summaries.moments import COMPILED, NUMPY
from tcmp.summaries.summarize import CHUNK, summarize

F16_CHUNK = max(NUMPY.float16_chunk, COMPILED.float16_chunk)
# squares are summed in float32: by numpy's BLAS dot over a whole chunk (a few lanes of up to thousands of
# terms: 1.4e-5 relative seen in 3,000 random arrays), or by the compiled loop within blocks of 1024 elements
# (32 SIMD partial sums of ~32 terms: 4.7e-7 seen) and in float64 across blocks; hypothesis hunts for the worst
# The compiled engine takes float16/float32 tensors in one fused pass where the CPU allows (float32 sums in 16 or
# 32 lanes per block of 1024 elements); CHUNKED is the same engine without that pass, as on other CPUs
CHUNKED = replace(COMPILED, name="compiled, chunked", float32_summary=None, float16_summary=None)
L2_TOLERANCE = {NUMPY: 1e-4, COMPILED: 5e-6, CHUNKED: 5e-6}


@pytest.fixture(params=[NUMPY, COMPILED, CHUNKED], ids=lambda engine: engine.name, scope="module")  # hypothesis
def engine(request):
    return request.param


def reference(array: np.ndarray):
    """Independent: widen with numpy/ml_dtypes astype to float64, then numpy's nan-aware reductions."""
    with np.errstate(invalid="ignore"):  # signalling NaN codes among random float32 bits
        values = np.abs(array).astype(np.float64) if array.dtype.kind == "c" else array.astype(np.float64)
    values = values.reshape(-1)
    finite = values[np.isfinite(values)]
    not_nan = values[~np.isnan(values)]
    widened = array.astype(np.float32) if array.dtype.type.__module__.startswith("ml_dtypes") else array
    crc = zlib.crc32(np.ascontiguousarray(widened, dtype=widened.dtype.newbyteorder("<")).tobytes())  # little-endian
    return values, finite, not_nan, crc


def assert_matches(array: np.ndarray, engine) -> None:
    summary = summarize(array, engine=engine)
    values, finite, not_nan, crc = reference(array)
    assert summary.numel == values.size
    assert summary.crc32 == crc
    assert summary.nan_count == int(np.isnan(values).sum())
    assert summary.inf_count == int(np.isinf(values).sum())
    if not_nan.size == 0:
        assert summary.min is None and summary.max is None
        return
    assert summary.min == not_nan.min() and summary.max == not_nan.max()
    if np.isinf(not_nan).any():
        assert math.isinf(summary.l2norm)
        return
    with np.errstate(over="ignore"):
        scale = max(1.0, float(np.abs(finite).sum()))
        if not math.isfinite(scale) or not math.isfinite(float(np.dot(finite, finite))):
            return  # float64 itself overflows: nothing exact to compare against
    assert abs(summary.mean * not_nan.size - not_nan.sum()) <= 1e-5 * scale
    expected_l2 = float(np.sqrt(np.dot(not_nan, not_nan)))
    assert summary.l2norm == pytest.approx(expected_l2, rel=L2_TOLERANCE[engine], abs=1e-30)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn])
def test_floats_across_several_chunks(dtype, engine):
    rng = np.random.default_rng(1)
    chunk = F16_CHUNK if dtype == np.float16 else CHUNK
    assert_matches((rng.standard_normal(chunk * 3 + 17) * 50).astype(dtype), engine)


def test_float16_special_values_in_one_chunk_only(engine):
    x = np.random.default_rng(2).standard_normal(F16_CHUNK * 2).astype(np.float16)
    x[F16_CHUNK + 5] = np.nan
    x[F16_CHUNK + 9] = -np.inf
    x[3] = np.float16(65504)  # largest finite: must not be taken for inf
    x[4] = np.float16(6e-8)  # subnormal
    assert_matches(x, engine)
    summary = summarize(x, engine=engine)
    assert summary.min == -math.inf and summary.max == 65504.0 and summary.mean == -math.inf


def test_float16_every_finite_code_and_single_sign_chunks(engine):
    """min/max are read from the raw codes: check every finite code, and chunks holding one sign only (where the
    smallest-magnitude code decides one end), including -0.0 and subnormals."""
    codes = np.arange(1 << 16, dtype=np.uint16)
    finite = codes[(codes & 0x7C00) != 0x7C00].view(np.float16)
    assert_matches(np.random.default_rng(4).permutation(finite), engine)
    negative = -np.abs(np.random.default_rng(5).standard_normal(F16_CHUNK + 3)).astype(np.float16)
    negative[F16_CHUNK + 1] = np.float16(-6e-8)  # subnormal: the largest value of the all-negative second chunk
    assert_matches(negative, engine)
    assert summarize(negative, engine=engine).max == float(np.float16(-6e-8))
    positive = np.abs(np.random.default_rng(6).standard_normal(F16_CHUNK + 3)).astype(np.float16) + np.float16(1)
    positive[2] = np.float16(-0.0)
    assert_matches(positive, engine)
    assert (
        summarize(positive, engine=engine).min == 0.0
        and summarize(np.array([-0.0, -1.0], np.float16), engine=engine).max == 0.0
    )


def test_float16_at_an_unaligned_address_as_in_ge_payloads(engine):
    values = (np.random.default_rng(7).standard_normal(F16_CHUNK + 5) * 100).astype(np.float16)
    values[9] = np.nan
    raw = b"\0" + values.tobytes()
    unaligned = np.frombuffer(raw, dtype=np.float16, offset=1)
    assert not unaligned.flags.aligned
    assert_matches(unaligned, engine)
    assert repr(summarize(unaligned, engine=engine)) == repr(summarize(values, engine=engine))


def test_integers_bools_complex_and_empty(engine):
    assert_matches(np.arange(-50, 1000, dtype=np.int64).reshape(5, -1)[:, :3].copy(), engine)
    assert_matches(np.array([2**40, -(2**40), 7], dtype=np.int64), engine)
    assert_matches(np.array([True, False, True]), engine)
    assert_matches(np.array([3 + 4j, -1j], dtype=np.complex64), engine)
    empty = summarize(np.zeros((3, 0), np.float16), engine=engine)
    assert empty.numel == 0 and empty.min is None and empty.crc32 == zlib.crc32(b"")


def test_bf16_and_its_float32_upcast_hash_the_same(engine):
    x = np.random.default_rng(3).standard_normal(1000).astype(ml_dtypes.bfloat16)
    assert summarize(x, engine=engine).crc32 == summarize(x.astype(np.float32), engine=engine).crc32
    assert summarize(x, engine=engine).crc32 != summarize(x.astype(np.float16), engine=engine).crc32


def test_all_nan(engine):
    summary = summarize(np.full(10, np.nan, np.float32), engine=engine)
    assert summary.nan_count == 10 and summary.min is None and summary.mean is None


@settings(max_examples=200, deadline=None)
@given(
    array=hnp.arrays(
        dtype=st.sampled_from([np.float16, np.float32, np.float64]),
        shape=hnp.array_shapes(min_dims=0, max_dims=3, max_side=40),
        elements={"allow_nan": True, "allow_infinity": True},
    )
)
def test_property_any_float_array(array, engine):
    assert_matches(array, engine)


def test_float32_random_bit_patterns_and_single_sign_chunks(engine):
    """min/max of float32 come from the codes too: random bit patterns cover every exponent (and some NaN/inf),
    and the single-sign chunks make the smallest-magnitude code decide one end."""
    codes = np.random.default_rng(8).integers(0, 1 << 32, CHUNK * 2 + 7, dtype=np.uint64).astype(np.uint32)
    assert_matches(codes.view(np.float32), engine)
    finite_codes = codes[(codes & 0x7F800000) != 0x7F800000]
    assert_matches(finite_codes.view(np.float32), engine)
    negative = -np.abs(np.random.default_rng(9).standard_normal(CHUNK + 3)).astype(np.float32)
    negative[CHUNK + 1] = np.float32(-1e-45)  # subnormal: the largest value of the all-negative second chunk
    assert summarize(negative, engine=engine).max == float(np.float32(-1e-45))
    positive = np.abs(np.random.default_rng(10).standard_normal(CHUNK + 3)).astype(np.float32) + np.float32(1)
    positive[CHUNK + 2] = np.float32(-0.0)
    assert (
        summarize(positive, engine=engine).min == 0.0
        and summarize(np.array([-0.0, -1.0], np.float32), engine=engine).max == 0.0
    )


def test_float32_at_an_unaligned_address_as_in_ge_payloads(engine):
    values = (np.random.default_rng(11).standard_normal(CHUNK + 5) * 100).astype(np.float32)
    values[CHUNK + 2] = np.inf
    raw = b"\0" * 3 + values.tobytes()
    unaligned = np.frombuffer(raw, dtype=np.float32, offset=3)
    assert not unaligned.flags.aligned
    assert_matches(unaligned, engine)
    assert repr(summarize(unaligned, engine=engine)) == repr(summarize(values, engine=engine))


def test_float32_tiny_and_huge_values(engine):
    """Squares of values under ~1e-19 underflow in float32 and squares over ~1.8e19 overflow: both chunks are
    summed again in float64, so the norm stays exact."""
    tiny = np.random.default_rng(12).standard_normal(5000).astype(np.float32) * np.float32(1e-25)
    huge = np.random.default_rng(13).standard_normal(5000).astype(np.float32) * np.float32(1e30)
    for values in (tiny, huge):
        assert_matches(values, engine)
        expected = math.sqrt(float(np.dot(values.astype(np.float64), values.astype(np.float64))))
        assert summarize(values, engine=engine).l2norm == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("dtype", ["f2", "f4", "f8", "i4"])
def test_big_endian_arrays_summarize_as_their_values(dtype, engine):
    values = (np.random.default_rng(14).standard_normal(CHUNK + 9) * 100).astype("<" + dtype)
    big = values.astype(">" + dtype)
    assert repr(summarize(big, engine=engine)) == repr(summarize(values, engine=engine))
    assert_matches(big, engine)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, ml_dtypes.bfloat16, np.int32])
def test_strided_and_fortran_ordered_views_summarize_as_their_values(dtype, engine):
    values = (np.random.default_rng(15).standard_normal(2 * CHUNK + 6) * 100).astype(dtype)
    strided = values[::2]
    assert not strided.flags.c_contiguous
    assert repr(summarize(strided, engine=engine)) == repr(summarize(strided.copy(), engine=engine))
    fortran = np.asfortranarray(values[: 6 * 1000].reshape(6, 1000))
    assert repr(summarize(fortran, engine=engine)) == repr(summarize(np.ascontiguousarray(fortran), engine=engine))
    assert_matches(strided, engine)
