"""`tcmp status` and the daemon's own output (issue 18, items 18 and 19): whether the daemon runs is the lock's to
say (or, without one, a live pid's, not a zombie's); counts that agree and are worded for one or many; a rate
over the time since the start when that is under a minute; log lines with their time; `--once` prints its
summary once."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from daemon_testlib import fx_path, is_zombie, npy_bytes, wait_until, write_fx

from tcmp.daemon.lock import IndexLock, LockState
from tcmp.daemon.status import daemon_running, status_lines, watch_status
from tcmp.schemas.dump_records import IO, FileSummary, Summary, TensorKind, TensorSummary
from tcmp.schemas.dump_tree import locate
from tcmp.schemas.index import (
    DaemonState,
    FileKey,
    FileState,
    IndexWriter,
    ProblemRow,
    SummaryRow,
    default_index_path,
    open_index,
)

TIMESTAMPED = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} (DEBUG|INFO|WARNING|ERROR) tcmp\.")


def _state(pid: int, started_s_ago: float, **counts: int) -> DaemonState:
    now = time.time_ns()
    return DaemonState(pid, socket.gethostname(), now - int(started_s_ago * 1e9), now, None, ("/x",),
                       counts.get("queued", 0), counts.get("in_flight", 0), counts.get("pending", 0))  # fmt: skip


def _lines(watch) -> dict[str, str]:
    return {line.label: line.value for line in status_lines(watch)}


def test_a_zombie_with_a_fresh_heartbeat_is_not_running_where_no_lock_tells():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        assert wait_until(lambda: is_zombie(child.pid), timeout=10)  # exited, not reaped: its pid still answers
        assert not daemon_running(_state(child.pid, 5), LockState.UNKNOWN)
    finally:
        child.wait()
    assert daemon_running(_state(os.getpid(), 5), LockState.UNKNOWN)  # a live pid with a fresh heartbeat
    assert not daemon_running(_state(os.getpid(), 5), LockState.FREE)  # the lock outranks the heartbeat
    assert daemon_running(None, LockState.HELD)  # held by a daemon that has not written its heartbeat yet


def _summary_row(path: Path) -> SummaryRow:
    summary = Summary(8, 0.0, 7.0, 3.5, 11.8, 0, 0, 1)
    tensor = TensorSummary(IO.OUTPUT, 0, None, TensorKind.TENSOR, "DT_FLOAT", (8,), summary)
    return SummaryRow(locate(path, mapping={}), _key(path), FileSummary(path, "op", None, (tensor,)))


def _key(path: Path) -> FileKey:
    return FileKey.of(os.stat(path))


def test_one_file_is_one_file_and_the_daemon_line_does_not_count_what_pending_counts(root):
    summarized = write_fx(root, 0, 1)
    short = fx_path(root, 0, 2)
    short.write_bytes(npy_bytes(np.zeros(8, np.float32))[:-3])
    broken = fx_path(root, 0, 3)
    broken.write_bytes(b"junk")
    db = default_index_path(root)
    with IndexWriter(db) as writer:
        writer.write([_summary_row(summarized), ProblemRow(short, FileState.INCOMPLETE, "short", _key(short)),
                      ProblemRow(broken, FileState.ERROR, "corrupt", _key(broken))])  # fmt: skip
        writer.write_daemon_state(_state(os.getpid(), 300, queued=1, pending=1))  # a file settling, in memory
    lock = IndexLock.acquire(db)  # as the daemon holds it
    try:
        lines = _lines(watch_status(db))
    finally:
        lock.release()
    assert lines["files indexed"] == "1 (1 tensor) and 0 graph files"
    assert lines["pending"] == "1 file not complete yet" and lines["failed"] == "1 file"
    assert lines["daemon"].startswith(f"running (pid {os.getpid()} on {socket.gethostname()}, since 5 min ago; ")
    assert lines["daemon"].endswith(": 1 file queued)")  # what it has still to read; "pending" counts the rest
    assert "complete" not in lines["daemon"]
    assert _lines(watch_status(db))["daemon"].startswith("not running (last seen ")  # lock released: not running


def test_the_rate_is_averaged_over_the_time_since_the_start_when_that_is_under_a_minute(root):
    paths = [write_fx(root, 0, n) for n in range(130)]
    db = default_index_path(root)
    with IndexWriter(db) as writer:
        writer.write([_summary_row(p) for p in paths])
        writer.write_daemon_state(_state(os.getpid(), 13))
    lock = IndexLock.acquire(db)
    try:
        rate = _lines(watch_status(db))["rate"]
    finally:
        lock.release()
    files_per_s = float(rate.split(" files/s")[0])
    assert 9.5 <= files_per_s <= 10.0 and rate.endswith("(since the daemon started, 13 s ago)"), rate
    with open_index(db) as reader:  # stopped: the last minute, as it was
        assert reader.status().files_last_minute == 130
    assert _lines(watch_status(db))["rate"].startswith("2.2 files/s")  # 130 / 60 once it is not running


def test_log_lines_carry_their_time_except_into_the_journal(root, tmp_path, daemon):
    d = daemon(str(root), "--workers", "0")
    assert d.wait_for_log(f"full scan of {root} done"), d.log()
    assert d.stop() == 0
    lines = d.log().splitlines()
    assert len(lines) >= 4 and all(TIMESTAMPED.match(line) for line in lines), lines

    journal = tmp_path / "journal.log"  # what systemd's JOURNAL_STREAM names: the daemon's stderr is the journal
    journal.touch()
    st = os.stat(journal)
    env = {**os.environ, "JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}
    j = daemon(str(root), "--workers", "0", env=env, log="journal.log")
    assert j.wait_for_log(f"full scan of {root} done"), j.log()
    assert j.stop() == 0
    assert all(line.startswith(("INFO ", "DEBUG ")) for line in j.log().splitlines()), j.log()


def test_once_prints_its_summary_once(root, tmp_path):
    write_fx(root, 0, 1)
    result = subprocess.run([sys.executable, "-m", "tcmp", "watch", str(root), "--once", "--workers", "0"],
                            capture_output=True, text=True, timeout=60, cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    summaries = [line for line in result.stderr.splitlines() if "summarized" in line and "deleted" in line]
    assert summaries == ["1 file summarized, 0 failed, 0 incomplete, 0 raw files deleted (0 B)"], result.stderr
