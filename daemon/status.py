"""`tcmp status`: what an index holds and whether its daemon is alive, as label/value lines."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tcmp.schemas.index import DaemonState, IndexStatus, IndexUnusable, find_index, open_index

from .retention import format_size

HEARTBEAT_STALE_S = 60.0  # the daemon writes a heartbeat every 15 s


@dataclass(frozen=True)
class StatusLine:
    label: str
    value: str


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


def daemon_running(daemon: Optional[DaemonState], now_ns: Optional[int] = None) -> bool:
    """A recent heartbeat, no stop recorded, and (on this host) the process still exists."""
    if daemon is None or daemon.stopped_ns is not None:
        return False
    now_ns = time.time_ns() if now_ns is None else now_ns
    if (now_ns - daemon.heartbeat_ns) / 1e9 > HEARTBEAT_STALE_S:
        return False
    if daemon.host == socket.gethostname():
        try:
            os.kill(daemon.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True  # exists, owned by another user (the service account)
    return True


def _ago(ns: int, now_ns: int) -> str:
    seconds = max(0.0, (now_ns - ns) / 1e9)
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


def status_lines(status: IndexStatus, now_ns: Optional[int] = None) -> tuple[StatusLine, ...]:
    now_ns = time.time_ns() if now_ns is None else now_ns
    daemon = status.daemon
    if daemon_running(daemon, now_ns):
        assert daemon is not None
        state = (
            f"running (pid {daemon.pid} on {daemon.host}, since {_ago(daemon.started_ns, now_ns)}; "
            f"{daemon.queued + daemon.in_flight} queued, {daemon.pending} waiting to be complete)"
        )
    elif daemon is not None:
        last = daemon.stopped_ns or daemon.heartbeat_ns
        state = f"not running (last seen {_ago(last, now_ns)}, pid {daemon.pid} on {daemon.host})"
    else:
        state = "never ran on this index"
    lines = [
        StatusLine("index", str(status.path) + (" (read-only snapshot)" if status.immutable else "")),
        StatusLine("daemon", state),
        StatusLine("files indexed", f"{status.summarized} ({status.tensors} tensors) and {status.graphs} graph files"),
        StatusLine("pending", f"{status.incomplete} files not complete yet"),
        StatusLine("failed", f"{status.failed} files"),
        StatusLine("bytes read", format_size(status.bytes_read)),
        StatusLine("bytes freed", format_size(status.bytes_freed) + " (raw files deleted after their summary)"),
        StatusLine(
            "rate",
            f"{status.files_last_minute / 60:.1f} files/s, "
            f"{format_size(status.bytes_last_minute // 60)}/s (last minute)",
        ),
        StatusLine("last commit", _ago(status.last_commit_ns, now_ns) if status.last_commit_ns else "never"),
    ]
    lines += [StatusLine("error", f"{p.path}: {p.error}") for p in status.recent_errors]
    return tuple(lines)
