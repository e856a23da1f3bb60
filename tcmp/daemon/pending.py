"""Files the dispatcher looks at again later: those that must settle first (just created, or quiet for too short
a time) and those that are not complete yet, with their timers.

How long a file has stayed unchanged is measured by tcmp's own clock: from when tcmp first saw it as it is now
(same inode, size and mtime), never from its mtime. Copy tools (`cp -a`, `shutil.copytree`, `tar x`) write the
content first and set the source's old mtime afterwards; judged by its mtime, such a file would look unchanged for
hours the moment it arrived.
"""

from __future__ import annotations

import heapq
import math
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Optional

from tcmp.daemon.index_slots import RootIndex
from tcmp.schemas.dump_tree import FileKind
from tcmp.schemas.index import FileKey

BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 30.0
# What a reader says of a short file while it may still grow; no longer true once it is given up.
_STILL_GROWING = re.compile(r"(?::\s*still being written(?:, or cut short)?|\s*\(yet\))$")


@dataclass
class Pending:
    spec: RootIndex
    kind: FileKind
    key: Optional[FileKey]
    reason: str
    due: float
    settling: bool = False  # waits for quiet or for its close event, not for missing bytes
    attempts: int = 0
    recorded: bool = False  # an 'incomplete' row was written for it
    truncated: bool = False  # shorter than its header promises (not: waits for its mapping.csv row)
    unchanged_since: float = field(default_factory=time.monotonic)  # when tcmp first saw it with `key`


class PendingFiles:
    """Owned by the dispatcher thread; `settling` and `incomplete` may be read from any thread."""

    def __init__(self) -> None:
        self._entries: dict[str, Pending] = {}
        self._timers: list[tuple[float, str]] = []
        self.settling = 0
        self.incomplete = 0

    def __contains__(self, path: str) -> bool:
        return path in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, path: str) -> Optional[Pending]:
        return self._entries.get(path)

    def put(self, path: str, entry: Pending) -> None:
        self.pop(path)
        self._entries[path] = entry
        self._count(entry, 1)

    def pop(self, path: str) -> Optional[Pending]:
        entry = self._entries.pop(path, None)
        if entry is not None:
            self._count(entry, -1)
        return entry

    def _count(self, entry: Pending, sign: int) -> None:
        if entry.settling:
            self.settling += sign
        else:
            self.incomplete += sign

    def look_later(
        self, path: str, spec: RootIndex, kind: FileKind, key: Optional[FileKey], why: str, delay: float
    ) -> Pending:
        """Decide again after `delay` (the file may be fine already; it only has to settle or to be closed). An
        'incomplete' row written for it earlier is remembered (it is dropped if the file vanishes)."""
        earlier = self._entries.get(path)
        entry = Pending(spec, kind, key, why, due=time.monotonic() + delay, settling=True)
        entry.recorded = earlier is not None and earlier.recorded
        self.put(path, entry)
        self.arm(path, entry)
        return entry

    def arm(self, path: str, entry: Pending, delay: Optional[float] = None) -> None:
        if delay is not None:
            entry.due = time.monotonic() + delay
        heapq.heappush(self._timers, (entry.due, path))

    def backoff(self, path: str, entry: Pending) -> None:
        entry.attempts += 1
        self.arm(path, entry, min(BACKOFF_FIRST_S * 2**entry.attempts, BACKOFF_MAX_S))

    def suspend(self, entry: Pending) -> None:
        """No timer while the file is examined; its result reschedules it."""
        entry.due = math.inf

    def seen(self, entry: Pending, key: FileKey) -> None:
        """Looked at the file again: a new (inode, size, mtime) restarts its clock and its back-off."""
        if entry.key != key:
            entry.key = key
            entry.attempts = 0
            entry.unchanged_since = time.monotonic()

    @staticmethod
    def unchanged_for(entry: Pending) -> float:
        return time.monotonic() - entry.unchanged_since

    def next_due_in(self) -> Optional[float]:
        return max(0.0, self._timers[0][0] - time.monotonic()) if self._timers else None

    def due(self) -> Iterator[tuple[str, Pending]]:
        """The entries whose timer ran out (stale timers of replaced or removed entries are skipped)."""
        now = time.monotonic()
        while self._timers and self._timers[0][0] <= now:
            _, path = heapq.heappop(self._timers)
            entry = self._entries.get(path)
            if entry is not None and entry.due <= now:
                yield path, entry


def given_up_reason(entry: Pending, timeout: float) -> str:
    """The error recorded for a file that stayed incomplete and unchanged for `timeout` seconds."""
    waited = f"{timeout:.3g} s" if timeout < 120 else f"{timeout / 60:.3g} min"
    what = "cut short" if entry.truncated else "gave up waiting"
    return f"{what}: {_STILL_GROWING.sub('', entry.reason)} (unchanged for {waited})"
