"""The one thread that writes the index(es): batches records into transactions, decides raw deletions before
each commit and hands them to the deleter after it, and survives an index that is locked, read-only or gone.

Batching is group commit: the first record waits at most `linger` seconds for company, then everything queued
goes into one transaction. An idle daemon commits each file within milliseconds; a busy one commits hundreds of
files per transaction because records pile up while the previous commit runs.

An index that cannot be written (locked by another process, read-only, disk full, deleted with its root) keeps
its records in memory and is retried with back-off (`index_slots`, the thread's half that keeps indexes open);
nothing is deleted meanwhile (deletions follow commits), and the daemon goes on serving the other roots. The
dispatcher stops feeding work when too much waits.

Each index is written by one daemon only: its lock (lock.py) is taken before the index is opened and held until
the index is closed. `take_locks` takes them at start, so that a second daemon refuses to start at all.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Union

from tcmp.daemon.index_slots import IndexAvailability, IndexProblem, IndexSlot, RootIndex, Write, reported_paths
from tcmp.daemon.retention import Deleter, Deletion, DeletionFailed, RetentionPolicy
from tcmp.daemon.threads import OwnThread
from tcmp.schemas.index import CommitResult, DaemonState, IndexRecord, RawFlagRow, SummaryRow

log = logging.getLogger(__name__)

LINGER_S = 0.02
MAX_BATCH = 2000
CHECKPOINT_IDLE_S = 30.0


@dataclass(frozen=True)
class Heartbeat:
    state: DaemonState


@dataclass(frozen=True)
class RootGone:
    """A watched root disappeared: close the index if it lived inside it (it is reopened, new, if the root
    comes back)."""

    root: str


@dataclass(frozen=True)
class _Stop:
    pass


_Message = Union[Write, Heartbeat, DeletionFailed, RootGone, _Stop]


class IndexWriterThread(OwnThread, IndexAvailability):
    """Writes for every index; reports index availability (`on_index`) and, once per record handed over, the
    record's path when the writer is done with it (`on_committed`: committed, or dropped with a vanished index)."""

    def __init__(
        self,
        roots: tuple[RootIndex, ...],
        policy: RetentionPolicy,
        deleter: Deleter,
        *,
        on_index: Callable[[Path, bool], None],
        on_committed: Callable[[tuple[str, ...]], None],
        linger: float = LINGER_S,
        once: bool = False,
        read_only_limit_s: float = 300.0,
    ) -> None:
        self._thread = threading.Thread(target=self._run, name="tcmp-writer", daemon=True)
        self._inbox: queue.SimpleQueue[_Message] = queue.SimpleQueue()
        self._policy = policy
        self._deleter = deleter
        self._on_index = on_index
        self._on_committed = on_committed
        self._linger = linger
        self._once = once  # one pass: an index that cannot be opened is not retried
        self._read_only_limit_s = read_only_limit_s  # how long records wait for a read-only index
        self._gave_up: Optional[str] = None  # why the daemon must stop: an index refused (damaged) or read-only
        paths = sorted({r.index for r in roots})
        self._slots = {p: IndexSlot(p, tuple(r.root for r in roots if r.index == p)) for p in paths}
        self._stopping = False
        self._heartbeat: Optional[DaemonState] = None
        self._lock = threading.Lock()
        self.committed_files = 0
        self.committed_bytes = 0

    # -- API for other threads

    def put(self, index: Path, root: str, record: IndexRecord) -> None:
        self._inbox.put(Write(index, root, record))

    def heartbeat(self, state: DaemonState) -> None:
        self._inbox.put(Heartbeat(state))

    def deletion_failed(self, failure: DeletionFailed) -> None:
        self._inbox.put(failure)

    def root_gone(self, root: str) -> None:
        self._inbox.put(RootGone(root))

    def stop(self) -> None:
        """Commit everything handed over so far (retrying a little), then end."""
        self._inbox.put(_Stop())

    def open_errors(self) -> tuple[IndexProblem, ...]:
        """The indexes that could not be opened for writing (so far), with the reason."""
        with self._lock:
            return tuple(
                IndexProblem(s.path, s.roots, s.open_error) for s in self._slots.values() if s.open_error is not None
            )

    def gave_up(self) -> Optional[str]:
        """Why an index will not be written by this daemon (damaged, or read-only for too long): the daemon stops.
        None while every index is written, or waited for."""
        with self._lock:
            return self._gave_up

    def waiting(self) -> int:
        with self._lock:
            return sum(len(s.waiting) for s in self._slots.values())

    def oldest_wait_s(self) -> float:
        """How long the oldest uncommitted record has waited (0: nothing waits)."""
        with self._lock:
            since = [s.uncommitted_since for s in self._slots.values() if s.uncommitted_since]
        return time.monotonic() - min(since) if since else 0.0

    # -- the thread

    def _run(self) -> None:
        try:
            self._loop()
        except Exception:
            log.exception("the index writer failed")
            raise

    def _loop(self) -> None:
        for slot in self._slots.values():
            self._open(slot)
        while True:
            message = self._next_message()
            if message is not None:
                self._take(message)
                deadline = time.monotonic() + self._linger
                while not self._stopping and self.waiting() < MAX_BATCH:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    try:
                        self._take(self._inbox.get(timeout=remaining))
                    except queue.Empty:
                        break
                self._drain_nonblocking()
            self._commit_due()
            self._give_up_read_only()
            if self._stopping:
                self._finish()
                return
            self._idle_chores()

    def _next_message(self) -> Optional[_Message]:
        timeout = self._time_to_next_retry()
        try:
            return self._inbox.get(timeout=timeout)
        except queue.Empty:
            return None

    def _time_to_next_retry(self) -> float:
        now = time.monotonic()
        due = [s.retry_at - now for s in self._slots.values() if s.waiting or s.writer is None]
        return max(0.05, min([*due, 5.0]))

    def _drain_nonblocking(self) -> None:
        while self.waiting() < MAX_BATCH * 4:
            try:
                self._take(self._inbox.get_nowait())
            except queue.Empty:
                return

    def _take(self, message: _Message) -> None:
        if isinstance(message, Write):
            slot = self._slots.get(message.index)
            if slot is None:
                log.error("record for an unknown index %s dropped", message.index)
                return
            with self._lock:
                if not slot.uncommitted_since:
                    slot.uncommitted_since = time.monotonic()
                slot.waiting.append(message)
        elif isinstance(message, Heartbeat):
            self._heartbeat = message.state
        elif isinstance(message, DeletionFailed):
            d = message.deletion
            self._take(Write(d.index, d.root, RawFlagRow(Path(d.path), deleted=False, key=d.key), reported=False))
        elif isinstance(message, RootGone):
            self._close_inside(message.root)
        elif isinstance(message, _Stop):
            self._stopping = True

    # -- committing

    def _commit_due(self) -> None:
        now = time.monotonic()
        for slot in self._slots.values():
            if slot.writer is None:
                if now >= slot.retry_at:
                    self._open(slot)
                if slot.writer is None:
                    continue
            if slot.waiting and (now >= slot.retry_at or self._stopping):
                self._commit(slot)

    def _commit(self, slot: IndexSlot) -> None:
        started = time.monotonic()
        with self._lock:
            batch, slot.waiting = slot.waiting, []
        batch = [self._with_retention(slot, w) for w in batch]  # decided once: a retried batch keeps its decisions
        try:
            result = slot.writer.write([w.record for w in batch])  # type: ignore[union-attr]
        except Exception as exc:
            self._commit_failed(slot, batch, exc)
            return
        slot.failures = 0
        slot.retry_at = 0.0
        with self._lock:
            slot.uncommitted_since = started if slot.waiting else 0.0  # later arrivals came after `started`
        slot.last_write = time.monotonic()
        slot.checkpointed = False
        self._after_commit(slot, batch, result)

    def _with_retention(self, slot: IndexSlot, write: Write) -> Write:
        """Decide, before the commit and in commit order, whether the file's raw data goes (raw_deleted=True)."""
        record = write.record
        if write.retention_decided or not isinstance(record, SummaryRow):
            return write
        budget = slot.budgets.get(write.root)
        delete = budget is not None and budget.should_delete(record.file, record.summary.op_name, record.key.size)
        decided = dataclasses.replace(record, raw_deleted=True) if delete else record
        return dataclasses.replace(write, record=decided, retention_decided=True)

    def _after_commit(self, slot: IndexSlot, batch: list[Write], result: CommitResult) -> None:
        with self._lock:
            self.committed_files += result.files
            self.committed_bytes += result.bytes
        for write in batch:  # deletions only now: their summaries are committed
            record = write.record
            if isinstance(record, SummaryRow) and record.raw_deleted:
                self._deleter.put(Deletion(str(record.file.path), write.root, slot.path, record.key, result.seq))
        if result.raw_deleted:
            log.debug("commit %d of %s: %d files, %d raw files to delete", result.seq, slot.path, result.files,
                      result.raw_deleted)  # fmt: skip
        self._on_committed(reported_paths(batch))

    # -- housekeeping

    def _idle_chores(self) -> None:
        now = time.monotonic()
        state, self._heartbeat = self._heartbeat, None
        for slot in self._slots.values():
            if slot.writer is None:
                continue
            try:
                if state is not None:
                    slot.writer.write_daemon_state(state)
                if not slot.checkpointed and not slot.waiting and now - slot.last_write >= CHECKPOINT_IDLE_S:
                    slot.writer.prune_commits()
                    slot.writer.checkpoint()
                    slot.checkpointed = True
            except Exception as exc:  # locked or read-only: the next commit attempt reports it
                log.debug("housekeeping on %s skipped: %s", slot.path, exc)

    def _finish(self) -> None:
        deadline = time.monotonic() + 20.0
        while any(s.waiting and s.writer is not None for s in self._slots.values()) and time.monotonic() < deadline:
            for slot in self._slots.values():
                if slot.waiting and slot.writer is not None:
                    self._commit(slot)
            if any(s.waiting for s in self._slots.values()):
                time.sleep(0.2)
        lost = self.waiting()
        if lost and self._gave_up is None:  # else the reason the daemon stops says it
            log.error("%d records could not be committed before stopping; their files are examined again next start",
                      lost)  # fmt: skip
        self._idle_chores()
        for slot in self._slots.values():
            if slot.writer is not None:
                with contextlib.suppress(Exception):
                    slot.writer.checkpoint()
                slot.writer.close()
                slot.writer = None
        self._release_locks()
