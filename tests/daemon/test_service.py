"""The service life cycle as systemd sees it: sd_notify datagrams on $NOTIFY_SOCKET (READY, STATUS, WATCHDOG only
while healthy, STOPPING) and a clean exit 0 on SIGTERM/SIGINT."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from daemon_testlib import index_rows, wait_until, write_fx

from tcmp.schemas.index import default_index_path


class NotifySocket:
    """What systemd's end of the notify socket receives, with arrival times."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.2)
        self.messages: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._receive, daemon=True)
        self._thread.start()

    def _receive(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            self.messages.append((time.monotonic(), data.decode()))

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()

    def with_state(self, state: str) -> list[tuple[float, str]]:
        return [(t, m) for t, m in self.messages if state in m.split("\n")]


def _env(sock: NotifySocket, watchdog_usec: int) -> dict[str, str]:
    env = os.environ.copy()
    env.update(NOTIFY_SOCKET=str(sock.path), WATCHDOG_USEC=str(watchdog_usec))
    env.pop("WATCHDOG_PID", None)
    return env


def test_ready_status_watchdog_stopping_and_a_clean_sigterm(root, tmp_path, daemon):
    sock = NotifySocket(tmp_path / "notify.sock")
    try:
        d = daemon(str(root), "--workers", "1", env=_env(sock, 1_000_000))
        assert wait_until(lambda: len(sock.with_state("WATCHDOG=1")) >= 3, timeout=20), sock.messages
        first = sock.messages[0][1].split("\n")
        assert first[0] == "READY=1" and first[1].startswith("STATUS=0 files summarized")
        pings = [t for t, _ in sock.with_state("WATCHDOG=1")]
        assert all(0.3 <= b - a <= 1.0 for a, b in zip(pings, pings[1:])), pings  # every WatchdogSec/2
        paths = [write_fx(root, 0, n) for n in range(3)]
        db = default_index_path(root)
        assert wait_until(lambda: len(index_rows(db)) == 3, timeout=15)
        assert wait_until(lambda: any("STATUS=3 files summarized" in m for _, m in sock.messages), timeout=10)
        assert d.stop(signal.SIGTERM) == 0
        assert sock.with_state("STOPPING=1") and sock.messages[-1][1].startswith("STOPPING=1")
        assert "stopped: 3 files summarized" in d.log()
        assert all(r.state == "summarized" for r in index_rows(db).values()) and all(p.exists() for p in paths)
    finally:
        sock.close()
    d = daemon(str(root), "--workers", "1", log="second.log")  # SIGINT (Ctrl-C) drains and exits 0 as well
    assert d.wait_for_log(f"full scan of {root} done")
    assert d.wait_for_log("workers ready (1) after"), d.log()  # the worker has loaded the summary loops
    assert d.stop(signal.SIGINT) == 0


@pytest.mark.slow
def test_no_watchdog_pings_while_commits_are_stuck(root, tmp_path, daemon):
    """An index locked for longer than the stall limit: the daemon stops pinging (systemd would restart it),
    says why, and pings again once the commit went through."""
    sock = NotifySocket(tmp_path / "notify.sock")
    try:
        d = daemon(str(root), "--workers", "1", "--stall-limit", "1", env=_env(sock, 600_000))
        assert d.wait_for_log(f"full scan of {root} done")
        db = default_index_path(root)
        blocker = sqlite3.connect(db, timeout=1)
        blocker.execute("BEGIN EXCLUSIVE")
        try:
            write_fx(root, 0, 1)
            assert d.wait_for_log("unhealthy, not pinging the systemd watchdog: records have waited", timeout=15)
            stalled_at = time.monotonic()
            time.sleep(2.0)
            assert not [t for t, _ in sock.with_state("WATCHDOG=1") if t > stalled_at + 0.1]
        finally:
            blocker.rollback()
            blocker.close()
        assert wait_until(lambda: len(index_rows(db)) == 1, timeout=20)
        resumed = time.monotonic()
        assert wait_until(lambda: any(t > resumed for t, _ in sock.with_state("WATCHDOG=1")), timeout=10)
        assert d.stop() == 0
    finally:
        sock.close()
