"""Fixtures of the compare tests; the hand-built dump pairs of the matcher's rules live in fx_dumps.py (this
directory is put on sys.path)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fx_dumps import DumpPair

from tcmp.compare.judge import metrics


@pytest.fixture(params=["compiled", "numpy"])
def metrics_engine(request, monkeypatch) -> str:
    """The tensor metrics' engine: the compiled loop (`c_loops`), then numpy alone."""
    if request.param == "compiled":
        # the dev install builds the extension: a silent fallback would leave the compiled loop untested
        assert metrics.c_loops is not None, "tcmp.summaries.compiled is not built (pip install -e . needs a C compiler)"
    else:
        monkeypatch.setattr(metrics, "c_loops", None)
    return request.param


@pytest.fixture
def dumps(tmp_path) -> DumpPair:
    """An empty GE/FX dump pair under the test's directory: add the graph's ops, GE executions and FX calls."""
    return DumpPair(tmp_path)
