"""One writer per index (issue 18, item 2) and whether it runs (item 18), against real processes: a second
`tcmp watch` on an index refuses at start, naming the first; `tcmp status` reads meanwhile and says the first
runs; after kill -9 it says at once that it does not (even while the killed process is a zombie, its pid still
taken), and a new daemon starts at once."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from daemon_testlib import index_rows, is_zombie, wait_until, write_fx

from tcmp.schemas.index import default_index_path


def _tcmp(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tcmp", *args], capture_output=True, text=True, timeout=60, cwd=cwd)


def _status(root: Path) -> dict[str, str]:
    result = _tcmp("status", str(root), cwd=root.parent)
    assert result.returncode == 0, result.stderr
    return {line.split("  ", 1)[0]: line.split("  ", 1)[1].strip() for line in result.stdout.splitlines()}


@pytest.mark.slow
def test_a_second_daemon_on_an_index_refuses_and_a_killed_one_frees_it_at_once(root, tmp_path, daemon):
    first = daemon(str(root), "--workers", "1", "--drop-raw")
    assert first.wait_for_log(f"full scan of {root} done"), first.log()
    db = default_index_path(root)
    early = write_fx(root, 0, 1)
    assert wait_until(lambda: str(early) in index_rows(db), timeout=15)

    refusal = f"index {db} is being written by tcmp watch pid {first.pid} on {socket.gethostname()}"
    for once in ((), ("--once",)):
        second = _tcmp("watch", str(root), "--workers", "0", *once, cwd=tmp_path)
        assert second.returncode == 3, (once, second.stderr)
        (line,) = second.stderr.strip().splitlines()  # one line, nothing started
        assert line.startswith(f"error: {refusal}; "), line
    shared_db = _tcmp("watch", str(tmp_path), "--db", str(db), "--once", "--workers", "0", cwd=tmp_path)
    assert shared_db.returncode == 3 and refusal in shared_db.stderr  # the same index through --db

    status = _status(root)  # reads while the daemon writes
    assert status["daemon"].startswith(f"running (pid {first.pid} on {socket.gethostname()}, since ")
    later = write_fx(root, 0, 2)  # the first still serves, alone
    assert wait_until(lambda: str(later) in index_rows(db), timeout=15)
    assert {r.summaries for r in index_rows(db).values()} == {1}

    os.kill(first.pid, signal.SIGKILL)  # not reaped yet: a zombie, its pid still in the process table
    assert wait_until(lambda: is_zombie(first.pid), timeout=10)
    status = _status(root)
    assert status["daemon"].startswith("not running (last seen ") and "did not stop cleanly" in status["daemon"]
    third = daemon(str(root), "--workers", "1", "--drop-raw", log="third.log")  # at once, while the zombie lasts
    assert third.wait_for_log(f"full scan of {root} done"), third.log()
    assert is_zombie(first.pid)
    last = write_fx(root, 0, 3)
    assert wait_until(lambda: str(last) in index_rows(db) and not last.exists(), timeout=15), third.log()
    assert wait_until(lambda: _status(root)["daemon"].startswith(f"running (pid {third.pid} "), timeout=20)
    first.process.wait()
    assert third.stop() == 0
    assert _status(root)["daemon"].startswith("not running (stopped ")
