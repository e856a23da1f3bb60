"""Fixtures of the compare tests; the hand-built dump pairs of the matcher's rules live in fx_dumps.py (this
directory is put on sys.path)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fx_dumps import DumpPair


@pytest.fixture
def dumps(tmp_path) -> DumpPair:
    """An empty GE/FX dump pair under the test's directory: add the graph's ops, GE executions and FX calls."""
    return DumpPair(tmp_path)
