"""`tcmp status`: what an index holds and whether its daemon is alive, as label/value lines.

Whether a daemon runs is told by the index's lock (lock.py), which only a live `tcmp watch` holds: a heartbeat
stays fresh for a while after a kill -9, and a killed process's pid lives on as a zombie until its parent reaps
it. Only where the lock cannot be probed (an index from an older tcmp, a file system without locks) does the
heartbeat decide, with the pid checked on this host.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tcmp.daemon.lock import LockHolder, LockState, probe
from tcmp.daemon.retention import format_size
from tcmp.daemon.wording import counted
from tcmp.schemas.index import DaemonState, IndexStatus, IndexUnusable, find_index, open_index, unusable_because

HEARTBEAT_STALE_S = 60.0  # the daemon writes a heartbeat every 15 s
RATE_WINDOW_S = 60.0


@dataclass(frozen=True)
class StatusLine:
    label: str
    value: str


@dataclass(frozen=True)
class WatchStatus:
    """An index's counts and its daemon, as `tcmp status` reports them."""

    index: IndexStatus
    running: bool
    holder: Optional[LockHolder]  # the lock's holder, when the lock says a daemon runs
    rate_files: int  # committed in the last `rate_window_s` seconds
    rate_bytes: int
    rate_window_s: float  # a minute, or the time since the daemon started if that is shorter


def locate_index(directory: Optional[Path], db: Optional[Path]) -> Path:
    """The index to report on: `--db`, else the one of the watched root containing `directory` (or the cwd)."""
    if db is not None:
        if not db.is_file():
            raise IndexUnusable(f"{db}: no such index file")
        return db
    start = directory if directory is not None else Path.cwd()
    found = find_index(start)
    if found is None:
        raise IndexUnusable(f"no .tcmp/index.sqlite in {start} or its parents (is `tcmp watch` running on it?)")
    return found


def read_status(index: Path) -> IndexStatus:
    with open_index(index) as reader:
        return reader.status()


def watch_status(index: Path, now_ns: Optional[int] = None) -> WatchStatus:
    """The index's counters and the daemon's state. IndexUnusable (IndexDamaged for a garbled page met by a
    query) when there is no usable index."""
    try:
        return _watch_status(index, now_ns)
    except sqlite3.DatabaseError as exc:
        raise unusable_because(index, exc) from exc


def _watch_status(index: Path, now_ns: Optional[int]) -> WatchStatus:
    now_ns = time.time_ns() if now_ns is None else now_ns
    with open_index(index) as reader:
        status = reader.status()
        lock, holder = probe(status.path)
        running = daemon_running(status.daemon, lock, now_ns)
        window = RATE_WINDOW_S
        daemon = status.daemon
        if running and daemon is not None and daemon.stopped_ns is None and _is_holder(daemon, holder):
            window = min(RATE_WINDOW_S, max(1.0, (now_ns - daemon.started_ns) / 1e9))
        files, size = reader.committed_since(now_ns - int(window * 1e9))
    return WatchStatus(status, running, holder if lock is LockState.HELD else None, files, size, window)


def _is_holder(daemon: DaemonState, holder: Optional[LockHolder]) -> bool:
    """The heartbeat is the lock holder's (not an earlier daemon's, before the holder's first heartbeat)."""
    return holder is None or holder.pid is None or (holder.pid == daemon.pid and holder.host in (None, daemon.host))


def daemon_running(daemon: Optional[DaemonState], lock: LockState, now_ns: Optional[int] = None) -> bool:
    """The lock, where it can be probed; else a recent heartbeat, no stop recorded, and (on this host) a live
    process that is not a zombie."""
    if lock is not LockState.UNKNOWN:
        return lock is LockState.HELD
    if daemon is None or daemon.stopped_ns is not None:
        return False
    now_ns = time.time_ns() if now_ns is None else now_ns
    if (now_ns - daemon.heartbeat_ns) / 1e9 > HEARTBEAT_STALE_S:
        return False
    return daemon.host != socket.gethostname() or _process_alive(daemon.pid)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by another user (the service account)
    try:  # a killed process stays a zombie until its parent reaps it
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def _ago(ns: int, now_ns: int) -> str:
    seconds = max(0.0, (now_ns - ns) / 1e9)
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


def daemon_line(watch: WatchStatus, now_ns: int) -> str:
    daemon, holder = watch.index.daemon, watch.holder
    if watch.running:
        if daemon is not None and daemon.stopped_ns is None and _is_holder(daemon, holder):
            return (
                f"running (pid {daemon.pid} on {daemon.host}, since {_ago(daemon.started_ns, now_ns)}; at its "
                f"heartbeat {_ago(daemon.heartbeat_ns, now_ns)}: {counted(daemon.queued + daemon.in_flight, 'file')} "
                "queued)"
            )
        return f"running ({holder.describe() if holder else 'tcmp watch'}, starting)"
    if daemon is None:
        return "never ran on this index"
    if daemon.stopped_ns is not None:
        return f"not running (stopped {_ago(daemon.stopped_ns, now_ns)}, pid {daemon.pid} on {daemon.host})"
    return (
        f"not running (last seen {_ago(daemon.heartbeat_ns, now_ns)}, pid {daemon.pid} on {daemon.host}; it did not "
        "stop cleanly: the next start finds what it left undone)"
    )


def status_lines(watch: WatchStatus, now_ns: Optional[int] = None) -> tuple[StatusLine, ...]:
    now_ns = time.time_ns() if now_ns is None else now_ns
    status = watch.index
    window = watch.rate_window_s
    over = "last minute" if window >= RATE_WINDOW_S else f"since the daemon started, {window:.0f} s ago"
    lines = [
        StatusLine("index", str(status.path) + (" (read-only snapshot)" if status.immutable else "")),
        StatusLine("daemon", daemon_line(watch, now_ns)),
        StatusLine(
            "files indexed",
            f"{status.summarized} ({counted(status.tensors, 'tensor')}) and {counted(status.graphs, 'graph file')}",
        ),
        StatusLine("pending", f"{counted(status.incomplete, 'file')} not complete yet"),
        StatusLine(
            "failed",
            counted(status.failed, "file")
            + (f" ({status.skipped} skipped: path too long or name unreadable)" if status.skipped else ""),
        ),
        StatusLine("bytes read", format_size(status.bytes_read)),
        StatusLine("bytes freed", format_size(status.bytes_freed) + " (raw files deleted after their summary)"),
        StatusLine(
            "rate",
            f"{watch.rate_files / window:.1f} files/s, {format_size(int(watch.rate_bytes / window))}/s ({over})",
        ),
        StatusLine("last commit", _ago(status.last_commit_ns, now_ns) if status.last_commit_ns else "never"),
    ]
    lines += [StatusLine("error", f"{p.path}: {p.error}") for p in status.recent_errors]
    return tuple(lines)
