"""Keeping each index writable, for the writer thread: one slot per index file (its writer, its lock, the records
waiting for it), opening it under its lock, and what an index that cannot be written does: its records wait in
memory while it is retried with back-off, it is complained about now and then, and the daemon gives up on it when
it is damaged or read-only for too long. Nothing is deleted meanwhile: deletions follow commits.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from tcmp.daemon.index_trust import IndexRefused, WatchRefused, prepare_index
from tcmp.daemon.lock import IndexBusy, IndexLock
from tcmp.daemon.retention import RawBudget, RetentionPolicy
from tcmp.schemas.index import (
    GraphRow,
    IndexDamaged,
    IndexLocked,
    IndexReadOnly,
    IndexRecord,
    IndexUnusable,
    IndexWriter,
    SummaryRow,
    unusable_because,
)

log = logging.getLogger("tcmp.daemon.writer_thread")  # the writer thread's log, as before the split

RETRY_FIRST_S = 1.0
RETRY_MAX_S = 30.0
REOPEN_S = 30.0
COMPLAIN_EVERY_S = 60.0
READ_ONLY_MAX_RECORDS = 10_000  # records kept in memory for an index that cannot be written, before giving up


@dataclass(frozen=True)
class RootIndex:
    """Which index a watched root writes to (several roots may share one `--db`)."""

    root: str
    index: Path


@dataclass(frozen=True)
class IndexProblem:
    """An index that cannot be opened for writing, and why."""

    index: Path
    roots: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class Write:
    index: Path
    root: str
    record: IndexRecord
    retention_decided: bool = False  # raw_deleted of a SummaryRow is final (set before a first commit attempt)
    reported: bool = True  # handed over by the dispatcher, which hears when it is committed (not: the writer's own)


class IndexSlot:
    """One index file and what waits for it."""

    def __init__(self, path: Path, roots: tuple[str, ...]) -> None:
        self.path = path
        self.roots = roots
        self.writer: Optional[IndexWriter] = None
        self.lock: Optional[IndexLock] = None
        self.open_error: Optional[str] = None  # why it could not be opened, while it cannot
        self.waiting: list[Write] = []
        self.uncommitted_since = 0.0  # arrival of the oldest record not committed yet (0: none)
        self.retry_at = 0.0
        self.failures = 0
        self.last_complaint = -COMPLAIN_EVERY_S
        self.last_write = time.monotonic()
        self.checkpointed = True
        self.budgets: dict[str, RawBudget] = {}
        self.read_only_since = 0.0  # when it was found read-only (0: it is not)
        self.read_only_reason = ""


def _record_path(record: IndexRecord) -> str:
    return str(record.file.path if isinstance(record, (SummaryRow, GraphRow)) else record.path)


def reported_paths(batch: list[Write]) -> tuple[str, ...]:
    return tuple(_record_path(w.record) for w in batch if w.reported)


class IndexAvailability:
    """The writer thread's half that keeps its indexes open: taking their locks, opening them, and handling an
    index that cannot be opened or written. Mixed into `IndexWriterThread`, which sets these attributes."""

    _slots: dict[Path, IndexSlot]
    _lock: threading.Lock
    _once: bool
    _gave_up: Optional[str]
    _read_only_limit_s: float
    _policy: RetentionPolicy
    _on_index: Callable[[Path, bool], None]
    _on_committed: Callable[[tuple[str, ...]], None]

    def take_locks(self) -> None:
        """Before the thread starts: take every index's lock that can be taken. IndexBusy (nothing kept) when
        another daemon writes one of them; a lock file that cannot be created yet is tried again with its index."""
        try:
            for slot in self._slots.values():
                try:
                    slot.lock = IndexLock.acquire(slot.path, roots=slot.roots)
                    prepare_index(slot.path)
                except OSError:
                    continue
                self._warn_unlocked(slot)
        except WatchRefused:
            self._release_locks()
            raise

    @staticmethod
    def _warn_unlocked(slot: IndexSlot) -> None:
        if slot.lock is not None and not slot.lock.enforced:
            log.warning("the file system of %s cannot lock files: a second tcmp watch on it would not be refused",
                        slot.path)  # fmt: skip

    def _release_locks(self) -> None:
        for slot in self._slots.values():
            if slot.lock is not None:
                slot.lock.release()
                slot.lock = None

    def _open(self, slot: IndexSlot) -> None:
        import sqlite3

        try:
            if slot.lock is None:
                slot.lock = IndexLock.acquire(slot.path, roots=slot.roots)
                self._warn_unlocked(slot)
            identity = prepare_index(slot.path)  # right before SQLite opens it by name
            slot.writer = IndexWriter(slot.path, durable=self._policy.drop_raw)
            if prepare_index(slot.path) != identity:
                raise IndexRefused(f"{slot.path} was replaced while it was opened: refused")
            try:
                for root in slot.roots:
                    slot.writer.add_root(Path(root))
                    slot.budgets[root] = RawBudget(self._policy, slot.writer.kept_raw_bytes(Path(root)))
            except sqlite3.Error as exc:  # locked by another process, read-only: the first write says so
                raise unusable_because(slot.path, exc) from exc
        except (IndexUnusable, WatchRefused, OSError) as exc:
            if slot.writer is not None:
                slot.writer.close()
            slot.writer = None  # the lock stays: this daemon is the index's writer, retrying
            self._open_failed(slot, exc)
            return
        slot.failures = 0
        slot.read_only_since = 0.0
        with self._lock:
            slot.open_error = None
        log.info("index %s open for %s", slot.path, ", ".join(slot.roots))
        self._on_index(slot.path, True)

    def _open_failed(self, slot: IndexSlot, exc: Exception) -> None:
        if not self._once and isinstance(exc, (IndexLocked, IndexReadOnly, IndexDamaged)):
            self._index_down(slot, exc)
            self._on_index(slot.path, False)
            return
        if isinstance(exc, IndexBusy):
            reason = f"it is being written by {exc.holder.describe()}"
        elif isinstance(exc, IndexRefused):
            reason = str(exc)
        elif isinstance(exc, OSError):  # from the lock, taken first: creating .tcmp/ or the lock file in it
            reason = f"{exc.strerror or exc}" + (f" ({exc.filename})" if exc.filename else "")
        else:
            reason = str(exc).replace(f"{slot.path}: ", "", 1)
        with self._lock:
            slot.open_error = reason
        now = time.monotonic()
        slot.retry_at = now + REOPEN_S
        slot.failures += 1
        if self._once:  # the daemon reports it once, when the pass is over
            log.debug("cannot open the index %s for writing: %s", slot.path, reason)
        elif slot.failures == 1 or now - slot.last_complaint >= 10 * COMPLAIN_EVERY_S:
            slot.last_complaint = now
            log.error(
                "cannot open the index %s for writing: %s; files under %s are not indexed until it can be "
                "written (retrying every %.0f s)",
                slot.path, reason, ", ".join(slot.roots), REOPEN_S,
            )  # fmt: skip
        self._on_index(slot.path, False)

    def _index_down(self, slot: IndexSlot, exc: IndexUnusable) -> None:
        """An index that is locked (waited for, with back-off), read-only (waited for up to a bound, then given up)
        or damaged (given up at once). Nothing is deleted meanwhile: deletions follow commits."""
        reason = str(exc).replace(f"{slot.path}: ", "", 1)
        with self._lock:
            slot.open_error = reason
        now = time.monotonic()
        if isinstance(exc, IndexDamaged):
            with self._lock:
                self._gave_up = self._gave_up or (
                    f"index {slot.path} is {reason}: refused; {len(slot.waiting)} records not committed, no raw "
                    "file deleted; move it aside to start a new one"
                )
            return
        slot.failures += 1
        delay = min(RETRY_FIRST_S * 2 ** (slot.failures - 1), RETRY_MAX_S)
        slot.retry_at = now + delay
        if isinstance(exc, IndexReadOnly) and not slot.read_only_since:
            slot.read_only_since = now - (self._read_only_limit_s if self._once else 0.0)  # one pass: no waiting
            slot.read_only_reason = reason
        if slot.failures == 1 or now - slot.last_complaint >= 10 * COMPLAIN_EVERY_S:
            slot.last_complaint = now
            what = "is locked by another process" if isinstance(exc, IndexLocked) else "cannot be written"
            bound = (
                f"; given up after {self._read_only_limit_s:.0f} s or {READ_ONLY_MAX_RECORDS:,} records"
                if isinstance(exc, IndexReadOnly) else ""
            )  # fmt: skip
            log.warning(
                "index %s %s (%s); %d records wait in memory, files under %s wait, no raw file is deleted "
                "meanwhile; retrying with back-off%s",
                slot.path, what, reason, len(slot.waiting), ", ".join(slot.roots), bound,
            )  # fmt: skip

    def _give_up_read_only(self) -> None:
        now = time.monotonic()
        for slot in self._slots.values():
            if not slot.read_only_since or self._gave_up is not None:
                continue
            waited = now - slot.read_only_since
            if waited >= self._read_only_limit_s or len(slot.waiting) >= READ_ONLY_MAX_RECORDS:
                with self._lock:
                    self._gave_up = (
                        f"index {slot.path} cannot be written ({slot.read_only_reason}) for {waited:.0f} s; "
                        f"{len(slot.waiting)} records not committed, no raw file deleted"
                    )

    def _close_inside(self, root: str) -> None:
        for slot in self._slots.values():
            inside = str(slot.path).startswith(root.rstrip("/") + "/")
            if slot.writer is not None and (inside or not slot.path.exists()):
                slot.writer.close()
                slot.writer = None
                if slot.lock is not None:
                    slot.lock.release()
                    slot.lock = None
                slot.retry_at = time.monotonic() + 1.0
                with self._lock:
                    dropped, slot.waiting = slot.waiting, []
                    slot.uncommitted_since = 0.0
                log.warning("index %s went away with %s; %d uncommitted records dropped", slot.path, root, len(dropped))
                self._on_committed(reported_paths(dropped))  # nothing waits for them now
                self._on_index(slot.path, False)

    def _commit_failed(self, slot: IndexSlot, batch: list[Write], exc: Exception) -> None:
        import sqlite3

        with self._lock:
            slot.waiting = batch + slot.waiting
        if isinstance(exc, sqlite3.Error) and not isinstance(exc, (sqlite3.IntegrityError, sqlite3.OperationalError)):
            exc = unusable_because(slot.path, exc)  # a garbled page
        elif isinstance(exc, sqlite3.OperationalError) and ("readonly" in str(exc) or "read-only" in str(exc)):
            exc = unusable_because(slot.path, exc)
        if isinstance(exc, (IndexReadOnly, IndexDamaged)):  # reopened (and checked) before the next attempt
            slot.writer.close()  # type: ignore[union-attr]
            slot.writer = None
            slot.failures = 0
            self._index_down(slot, exc)
            self._on_index(slot.path, False)
            return
        if isinstance(exc, sqlite3.Error) and not isinstance(exc, sqlite3.IntegrityError):
            slot.failures += 1
            delay = min(RETRY_FIRST_S * 2 ** (slot.failures - 1), RETRY_MAX_S)
            slot.retry_at = time.monotonic() + delay
            text = str(exc)
            if "locked" in text or "busy" in text:
                what = "is locked by another process"
            elif "readonly" in text or "read-only" in text:
                what = "has become read-only"
            else:
                what = "cannot be written"
            now = time.monotonic()
            if now - slot.last_complaint >= COMPLAIN_EVERY_S or slot.failures == 1:
                slot.last_complaint = now
                log.warning(
                    "index %s %s (%s); %d records wait in memory, no raw file is deleted meanwhile; retrying in "
                    "%.0f s",
                    slot.path, what, text, len(slot.waiting), delay,
                )  # fmt: skip
            return
        # not a condition of the database (or a constraint the batch breaks, which it would break again): a bug.
        # Drop the batch so it cannot wedge the writer; the files are found again by the next start-up scan, and
        # no raw file was deleted for them.
        log.exception("writing %d records to %s failed; dropped", len(batch), slot.path)
        with self._lock:
            slot.waiting = slot.waiting[len(batch) :]
            slot.uncommitted_since = time.monotonic() if slot.waiting else 0.0
        self._on_committed(reported_paths(batch))
