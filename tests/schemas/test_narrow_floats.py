"""ml_dtypes is imported only when a bf16/float8 tensor is met: a process that reads, summarizes and compares other
dtypes never pays for it, and the name-based answers equal ml_dtypes' own."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from tcmp.schemas import narrow_floats


def _in_fresh_process(code: str) -> dict:
    """Run `code` in a new interpreter; it prints one JSON object, returned with whether ml_dtypes got imported."""
    wrapped = (
        textwrap.dedent(code)
        + "\nimport sys as _s, json as _j\nprint(_j.dumps({**RESULT, 'ml_dtypes': 'ml_dtypes' in _s.modules}))\n"
    )
    done = subprocess.run([sys.executable, "-c", wrapped], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("name", sorted(narrow_floats.NAMES | {"float16", "float32", "float64"}))
def test_float_limits_equal_the_libraries_finfo(name):
    dtype = np.dtype(getattr(ml_dtypes, name)) if name in narrow_floats.NAMES else np.dtype(name)
    info = ml_dtypes.finfo(dtype) if name in narrow_floats.NAMES else np.finfo(dtype)
    limits = narrow_floats.float_limits(name)
    assert (limits.nmant, limits.maxexp, limits.minexp) == (info.nmant, info.maxexp, info.minexp)
    assert limits.max == float(info.max)
    assert limits.smallest_subnormal == float(info.smallest_subnormal)


def test_names_tell_the_types_apart():
    for name in narrow_floats.NAMES:
        dtype = np.dtype(getattr(ml_dtypes, name))
        assert dtype.name == name
        assert narrow_floats.dtype_of_name(name) == dtype
        assert narrow_floats.is_narrow_float(dtype) and narrow_floats.is_float_name(name)
    assert narrow_floats.is_bfloat16(np.dtype(ml_dtypes.bfloat16))
    assert not narrow_floats.is_bfloat16(np.dtype(np.float16)) and not narrow_floats.is_bfloat16(np.dtype(np.uint16))
    assert not narrow_floats.is_narrow_float(np.dtype(np.float32))
    assert not narrow_floats.is_float_name("int8") and narrow_floats.is_float_name("float16")


def test_float16_work_never_imports_ml_dtypes():
    result = _in_fresh_process(
        """
        import numpy as np
        from tcmp.schemas.dtypes import DataType, decode_payload, to_float32
        from tcmp.summaries.summarize import summarize
        from tcmp.compare.judge.metrics import tensor_metrics
        from tcmp.compare.rules.cast_check import cast_check_for
        from tcmp.compare.rules.ulp import RULE, float_type_named
        import tcmp.cli.commands, tcmp.daemon.service

        values = np.array([1.0, -2.5, 3.25, 0.0], dtype=np.float16)
        decoded = decode_payload(values.tobytes(), DataType.DT_FLOAT16, 4).array
        metrics = tensor_metrics(decoded, values.astype(np.float32) * 1.001)
        RESULT = {
            "same": bool((to_float32(decoded) == values).all()),
            "max": summarize(decoded).max,
            "cosine": metrics.cosine,
            # bf16 known by name alone: a cast's kind and a row's ulp unit
            "to_bf16": cast_check_for("DT_FLOAT", "DT_BF16").preserving,
            "from_bf16": cast_check_for("DT_BF16", "DT_FLOAT").preserving,
            "unit": RULE.unit(float_type_named("DT_BF16"), float_type_named("float32")).name,
        }
        """
    )
    assert result == {
        "same": True, "max": 3.25, "cosine": pytest.approx(1.0), "to_bf16": False, "from_bf16": True, "unit": "bf16",
        "ml_dtypes": False,
    }  # fmt: skip


def test_a_bf16_tensor_imports_it_when_met_and_decodes_exactly():
    bits = np.array([0x3F80, 0xC020, 0x7FC0, 0x0001], dtype=np.uint16)  # 1.0, -2.5, NaN, the smallest subnormal
    widened = (bits.astype(np.uint32) << 16).view(np.float32)  # bf16 is the top half of a float32
    result = _in_fresh_process(
        f"""
        import sys
        import numpy as np
        from tcmp.schemas.dtypes import DataType, decode_payload, to_float32
        before = "ml_dtypes" in sys.modules
        decoded = decode_payload(np.array({bits.tolist()}, dtype=np.uint16).tobytes(), DataType.DT_BF16, 4).array
        RESULT = {{"before": before, "dtype": str(decoded.dtype), "bits": to_float32(decoded).view(np.uint32).tolist()}}
        """
    )
    assert result == {"before": False, "dtype": "bfloat16", "bits": widened.view(np.uint32).tolist(), "ml_dtypes": True}


def test_only_narrow_floats_imports_ml_dtypes():
    """Outside the synthetic writer (tests and the demo), every use goes through `narrow_floats`, which imports it
    when a tensor needs it."""
    package = Path(narrow_floats.__file__).parent.parent
    importers = {
        path.relative_to(package).as_posix()
        for path in package.rglob("*.py")
        if re.search(r"^\s*(import ml_dtypes|from ml_dtypes)", path.read_text(), re.MULTILINE)
    }
    assert {p for p in importers if not p.startswith("schemas/synth/")} == {"schemas/narrow_floats.py"}
