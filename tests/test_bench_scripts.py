"""The benchmarks are not run by the suite (they take minutes and print ratios, not verdicts), but each must still
start: `--help` imports everything a script needs, so a module moved under it (as `tcmp.usable_cpus` did to
`tcmp.schemas.host`) fails here rather than on the day someone measures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
MODULES = sorted(p.stem for p in BENCH.glob("*.py"))
SCRIPTS = [m for m in MODULES if m.startswith("bench_")]


def test_every_benchmark_is_found():
    assert {"bench_compare", "bench_graph", "bench_html", "bench_cluster", "bench_msprobe"} <= set(SCRIPTS)


@pytest.mark.parametrize("module", MODULES)
def test_each_bench_module_imports(module):
    code = f"import sys; sys.path.insert(0, {str(BENCH)!r}); import {module}"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("script", SCRIPTS)
def test_each_benchmark_starts(script):
    done = subprocess.run([sys.executable, str(BENCH / f"{script}.py"), "--help"], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout
