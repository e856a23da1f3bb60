"""One writer per index: a lock beside the index file (`index.sqlite.lock`), held for the daemon's life.

Two daemons on one index summarize everything twice and collide on their commit numbers; SQLite's own locking
only takes turns between their transactions. So `tcmp watch` takes an exclusive flock(2) on `<index>.lock`
before it opens the index, and holds it until it exits: the kernel drops it when the process ends, however it
ends (kill -9 included), so a restart never meets a stale lock. The file names its holder (pid and host) for the
message a second daemon gives, and for `tcmp status`, and the roots it watches (one watcher per tree, trees.py).
The directory and the lock file are created and checked as index_trust.py says (ours, never group/world-writable).

`tcmp status` tells a live daemon from a dead one (or a zombie, or a reused pid) by trying a *shared* lock for
an instant: that fails only while a daemon holds the exclusive one. A daemon starting in that instant retries
for a moment before it concludes that another daemon holds the index.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import fcntl
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tcmp.daemon.index_trust import WatchRefused, open_index_directory, open_own_file

ACQUIRE_PATIENCE_S = 1.0  # a status probe holds its shared lock for microseconds
_RETRY_S = 0.02
_CANNOT_LOCK = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS})


def lock_path(index: Path) -> Path:
    return index.with_name(index.name + ".lock")


@dataclass(frozen=True)
class LockHolder:
    """Who holds an index's lock, as its lock file says (None where the file does not say yet), and the roots it
    watches (one a line after the first; none from an older tcmp)."""

    pid: Optional[int]
    host: Optional[str]
    roots: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.pid is None:
            return "another tcmp watch"
        return f"tcmp watch pid {self.pid}" + (f" on {self.host}" if self.host else "")


class IndexBusy(WatchRefused):
    """Another `tcmp watch` holds the index's lock: it is that index's writer."""

    def __init__(self, index: Path, holder: LockHolder) -> None:
        super().__init__(f"index {index} is being written by {holder.describe()}")
        self.index = index
        self.holder = holder

    def line(self) -> str:
        return f"{self}; one writer per index: stop it first, or give this one another --db"


def _read_holder(fd: int) -> LockHolder:
    try:
        lines = os.pread(fd, 1 << 16, 0).decode("utf-8", errors="surrogateescape").split("\n")
    except OSError:
        return LockHolder(None, None)
    text = lines[0].split()
    pid = int(text[0]) if text and text[0].isdigit() else None
    roots = tuple(line for line in lines[1:] if line.startswith("/"))
    return LockHolder(pid, text[1] if pid is not None and len(text) > 1 else None, roots)


class IndexLock:
    """The exclusive lock on one index (see the module docstring). `acquire` raises IndexBusy when another
    daemon holds it, OSError when the lock file cannot be created (the index then cannot be written either)."""

    def __init__(self, index: Path, fd: int, enforced: bool = True) -> None:
        self.index = index
        self._fd: Optional[int] = fd
        self.enforced = enforced  # False: the file system cannot lock (NFS without a lock manager)

    @classmethod
    def acquire(cls, index: Path, patience: float = ACQUIRE_PATIENCE_S, roots: tuple[str, ...] = ()) -> IndexLock:
        """`roots`: the roots this daemon watches, recorded for a watcher of a nested or containing root. Raises
        IndexRefused (index_trust.py) when the index's directory or the lock file is not ours."""
        directory_fd = open_index_directory(index)  # never its parents: a deleted root stays deleted
        try:
            fd = open_own_file(directory_fd, lock_path(index), "the index lock")  # 0644, whatever the umask
        finally:
            os.close(directory_fd)
        deadline = time.monotonic() + patience
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise IndexBusy(index, _read_holder(fd)) from None
                    time.sleep(_RETRY_S)
                except OSError as exc:
                    if exc.errno not in _CANNOT_LOCK:
                        raise
                    os.close(fd)
                    return cls(index, -1, enforced=False)
            os.ftruncate(fd, 0)
            holder = f"{os.getpid()} {socket.gethostname()}\n" + "".join(f"{root}\n" for root in roots)
            os.pwrite(fd, holder.encode("utf-8", errors="surrogateescape"), 0)
        except BaseException:
            os.close(fd)
            raise
        return cls(index, fd)

    def release(self) -> None:
        """Closing the file drops the lock. The file stays: unlinking it would let a daemon that opened it just
        before lock a file nobody else can find."""
        fd, self._fd = self._fd, None
        if fd is not None and fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)


class LockState(str, enum.Enum):
    HELD = "held"  # a daemon runs on this index now
    FREE = "free"  # none does
    UNKNOWN = "unknown"  # no lock file (an older tcmp, or never run), or it cannot be opened or locked here


def probe(index: Path) -> tuple[LockState, Optional[LockHolder]]:
    """Is a daemon writing `index` right now? Never blocks, never creates anything."""
    try:
        fd = os.open(lock_path(index), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return LockState.UNKNOWN, None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return LockState.HELD, _read_holder(fd)
        except OSError:  # e.g. ENOLCK: a network file system without a lock manager
            return LockState.UNKNOWN, None
        return LockState.FREE, None  # closing the file below drops the shared lock at once
    finally:
        os.close(fd)
