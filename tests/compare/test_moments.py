"""Both moment engines against numpy's float64 reductions, at the compiled loop's block boundaries and for one-sign
chunks, and the compiled engine's fallback when the C extension is not built."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tcmp.compare import moments
from tcmp.compare.moments import BLOCK, COMPILED, NUMPY

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
        "import logging, sys; sys.modules['tcmp.compare._fused'] = None; logging.basicConfig()\n"
        "import numpy as np\n"
        "from tcmp.compare.moments import COMPILED, NUMPY, warm\n"
        "warm(COMPILED); warm(NUMPY)\n"
        "values = np.array([2, -1, 5], np.float32)\n"
        "assert COMPILED.float32(values) == NUMPY.float32(values) == (-1.0, 5.0, 6.0, 30.0)\n"
        "codes = values.astype(np.float16).view(np.int16)\n"
        "assert COMPILED.float16(codes) == NUMPY.float16(codes)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert [line for line in result.stderr.splitlines() if "summarizing with numpy" in line] == [
        "WARNING:tcmp.compare.moments:compiled summary loops not built (tcmp.compare._fused: no C compiler at "
        "install); summarizing with numpy, 2-3x slower"
    ]


def test_compiled_engine_is_built_and_reads_unaligned_chunks():
    assert moments._fused is not None, "tcmp.compare._fused is not built (pip install -e . needs a C compiler)"
    source = Path(moments.__file__).with_name("_fused.c")
    # the build is optional: a failed rebuild after an edit leaves the previous module in place, untested
    assert Path(moments._fused.__file__).stat().st_mtime >= source.stat().st_mtime, "stale: run pip install -e ."
    values = _values(3 * BLOCK + 5, "mixed", np.float32)
    unaligned = np.frombuffer(b"\0" + values.tobytes(), np.float32, offset=1)
    assert not unaligned.flags.aligned and COMPILED.float32(unaligned) == COMPILED.float32(values)
    codes = values.astype(np.float16).view(np.int16)
    odd = np.frombuffer(b"\0" + codes.tobytes(), np.int16, offset=1)
    assert COMPILED.float16(odd) == COMPILED.float16(codes)
