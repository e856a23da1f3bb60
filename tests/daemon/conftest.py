"""Fixtures of the daemon tests; the helpers live in daemon_testlib.py (this directory is put on sys.path)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from daemon_testlib import DaemonProcess


@pytest.fixture
def daemon(tmp_path):
    """Factory: start a `tcmp watch` process; every one started is killed at the end of the test."""
    started: list[DaemonProcess] = []

    def start(*args: str, env: Optional[dict[str, str]] = None, prefix: tuple = (), log: str = "daemon.log"):
        process = DaemonProcess(list(args), tmp_path / log, env=env, prefix=prefix)
        started.append(process)
        return process

    yield start
    for process in started:
        process.cleanup()


@pytest.fixture
def root(tmp_path) -> Path:
    directory = tmp_path / "dumps"
    directory.mkdir()
    return Path(os.path.realpath(directory))
