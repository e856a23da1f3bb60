"""Both moment engines against numpy's float64 reductions, at the compiled loop's block boundaries and for one-sign
chunks, and the compiled engine's fallback when the C extension is not built."""

from __future__ import annotations

import math
import platform
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from tcmp.summaries import moments
from tcmp.summaries.moments import BLOCK, COMPILED, NUMPY

SIZES = [1, 7, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK + 17]


def _values(size: int, sign: str, dtype) -> np.ndarray:
    values = np.random.default_rng(size).standard_normal(size) * 40
    if sign == "positive":
        values = np.abs(values)
    elif sign == "negative":
        values = -np.abs(values)
    return values.astype(dtype)


@pytest.fixture(params=[NUMPY, COMPILED], ids=lambda engine: engine.name)
def engine(request):
    return request.param


def _moments(values: np.ndarray, engine) -> tuple[float, float, float, float]:
    if values.dtype == np.float16:
        return engine.float16(values.view(np.int16))
    return engine.float32(values)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("sign", ["mixed", "positive", "negative"])
@pytest.mark.parametrize("size", SIZES)
def test_moments_match_float64_reductions(dtype, sign, size, engine):
    values = _values(size, sign, dtype)
    low, high, total, squares = _moments(values, engine)
    exact = values.astype(np.float64)
    assert (low, high) == (exact.min(), exact.max())
    assert abs(total - exact.sum()) <= 1e-6 * np.abs(exact).sum()
    assert squares == pytest.approx(np.dot(exact, exact), rel=2e-6 if engine is COMPILED else 1e-4)


def test_float16_inf_and_nan_codes_give_a_nan_sum(engine):
    for special in (np.inf, -np.inf, np.nan):
        values = _values(100, "mixed", np.float16)
        values[37] = special
        assert np.isnan(_moments(values, engine)[2])
    assert not np.isnan(_moments(np.array([65504, -65504], np.float16), engine)[2])  # the largest finite values


def test_zero_signs(engine):
    assert _moments(np.array([-0.0, 3.0], np.float32), engine)[:2] == (-0.0, 3.0)
    low, high, _, _ = _moments(np.array([0.0, -0.0], np.float16), engine)
    assert (low, high) == (0.0, 0.0) and np.signbit(low) and not np.signbit(high)


def test_without_the_extension_the_compiled_engine_is_numpy_and_says_so():
    """Installed without a C compiler: the daemon keeps summarizing, with numpy, and says so once at warm-up."""
    code = (
        "import logging, sys; sys.modules['tcmp.summaries.compiled'] = None; logging.basicConfig()\n"
        "import numpy as np\n"
        "from tcmp.summaries.moments import COMPILED, NUMPY, warm\n"
        "warm(COMPILED); warm(NUMPY)\n"
        "values = np.array([2, -1, 5], np.float32)\n"
        "assert COMPILED.float32(values) == NUMPY.float32(values) == (-1.0, 5.0, 6.0, 30.0)\n"
        "codes = values.astype(np.float16).view(np.int16)\n"
        "assert COMPILED.float16(codes) == NUMPY.float16(codes)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert [line for line in result.stderr.splitlines() if "summarizing with numpy" in line] == [
        "WARNING:tcmp.summaries.moments:compiled summary loops not built (tcmp.summaries.compiled: no C compiler at "
        "install); summarizing with numpy, 2-3x slower"
    ]


def test_compiled_engine_is_built_and_reads_unaligned_chunks():
    assert moments.c_loops is not None, "tcmp.summaries.compiled is not built (pip install -e . needs a C compiler)"
    source = Path(moments.__file__).with_name("compiled.c")
    # the build is optional: a failed rebuild after an edit leaves the previous module in place, untested
    assert Path(moments.c_loops.__file__).stat().st_mtime >= source.stat().st_mtime, "stale: run pip install -e ."
    values = _values(3 * BLOCK + 5, "mixed", np.float32)
    unaligned = np.frombuffer(b"\0" + values.tobytes(), np.float32, offset=1)
    assert not unaligned.flags.aligned and COMPILED.float32(unaligned) == COMPILED.float32(values)
    codes = values.astype(np.float16).view(np.int16)
    odd = np.frombuffer(b"\0" + codes.tobytes(), np.int16, offset=1)
    assert COMPILED.float16(odd) == COMPILED.float16(codes)


def _cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def test_fused_summaries_are_used_exactly_where_the_cpu_has_avx2_f16c_and_pclmulqdq():
    expected = platform.machine() in ("x86_64", "AMD64") and {"avx2", "f16c", "pclmulqdq"} <= _cpu_flags()
    assert bool(moments.c_loops.fused_summary_supported) == expected
    assert (COMPILED.float32_summary is not None) == (COMPILED.float16_summary is not None) == expected


fused = pytest.mark.skipif(
    moments.c_loops is None or not moments.c_loops.fused_summary_supported,
    reason="needs AVX2, F16C and PCLMULQDQ",
)


def _fused_summary(values: np.ndarray):
    if values.dtype == np.float16:
        return COMPILED.float16_summary(values.view(np.int16))
    return COMPILED.float32_summary(values)


@fused
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("offset", [0, 1, 2, 3])
def test_fused_summary_crc_is_zlibs_at_every_length_and_alignment(offset, dtype):
    """Every tail length after the 64-byte blocks, the moment blocks' boundaries, and random bit patterns (NaN
    codes included: the CRC is over bytes)."""
    rng = np.random.default_rng(offset)
    itemsize = np.dtype(dtype).itemsize
    for length in [*range(80), BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK + 15, 2 * BLOCK + 16, 5 * BLOCK + 3]:
        raw = rng.integers(0, 256, offset + itemsize * length, dtype=np.uint8).tobytes()
        values = np.frombuffer(raw, dtype, count=length, offset=offset)
        assert _fused_summary(values)[4] == zlib.crc32(raw[offset:]), length


@fused
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("sign", ["mixed", "positive", "negative"])
@pytest.mark.parametrize("size", [*SIZES, 4 * BLOCK + 16, 20 * BLOCK + 1])
def test_fused_summary_moments(size, sign, dtype):
    values = _values(size, sign, dtype)
    low, high, total, squares, _ = _fused_summary(values)
    wide = values.astype(np.float64)
    assert (low, high) == (wide.min(), wide.max())
    assert total == pytest.approx(wide.sum(), rel=1e-6, abs=1e-6 * np.abs(wide).sum())
    assert squares == pytest.approx(np.dot(wide, wide), rel=1e-6)


@fused
def test_fused_float16_summary_widens_every_finite_code_exactly():
    codes = np.arange(1 << 16, dtype=np.uint16)
    finite = codes[(codes & 0x7C00) != 0x7C00].view(np.float16)
    for values in (finite, finite[finite > 0], finite[finite < 0]):
        low, high, total, squares, _ = _fused_summary(values)
        wide = values.astype(np.float64)
        assert (low, high) == (wide.min(), wide.max())
        assert squares == pytest.approx(np.dot(wide, wide), rel=1e-6)
        assert abs(total - wide.sum()) <= 1e-6 * np.abs(wide).sum()


@fused
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_fused_summary_sums_are_non_finite_with_nan_or_inf(dtype):
    for position in (5, BLOCK + 5, 3 * BLOCK - 1):  # in the 64-byte blocks and in the tail
        for special in (np.nan, np.inf, -np.inf):
            values = _values(3 * BLOCK, "mixed", dtype)
            values[position] = special
            _, _, total, squares, _ = _fused_summary(values)
            assert not (math.isfinite(total) and math.isfinite(squares)), (position, special)
