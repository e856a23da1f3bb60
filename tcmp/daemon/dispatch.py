"""The dispatcher thread: turns events and scan listings into work for the worker processes, and their results
into index records; keeps the files that are not finished yet and looks at them again with back-off.

Every candidate path goes through the same decision:

1. Already handled? A path that is queued, being examined or waiting for its commit is not taken twice (a later
   event marks it to be looked at again once its commit is through).
2. What is it? Symlinks are never followed, on the way from the root either (under_root.py; one log line for a link
   leaving the root); non-dump names are ignored; a path past PATH_MAX or a name that is not UTF-8 is recorded as
   skipped.
3. Already in the index with the same (inode, size, mtime)? Then it is not read again (resume). A summarized file
   whose raw deletion was decided but not done (crash after the commit) is deleted now.
4. Otherwise it is examined by a worker: at once after a close/rename event; after a short delay after a create
   event (the close usually follows); after it has been quiet for `settle` seconds when it was found by a scan, a
   create or an attribute change and its format has no size check of its own (GE binaries, whose writer might
   preallocate, graph text, stats CSVs).

An attribute change (IN_ATTRIB) makes a known file a candidate again at once: copy tools set the source's mtime
after writing the content, so a file summarized in between is no longer the file summarized (its raw file is
kept) and would otherwise wait for the next reconcile scan.

A file that is not complete yet waits in `pending` (pending.py) and is checked again with back-off (0.5 s doubling
to 30 s); one that stays incomplete and unchanged for `incomplete_timeout`, by tcmp's own clock, is recorded as an
error ("cut short") and left alone until it changes. A file that changed while a worker read it is not incomplete:
it is read again once it is quiet, however old its mtime, and never given up for that.
"""

from __future__ import annotations

import collections
import logging
import os
import queue
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tcmp.daemon.examine import Failed, GraphParsed, NotReady, Skipped, Summarized, Vanished, WorkerPool, WorkResult
from tcmp.daemon.inbox import Committed, FsEvent, IndexState, Message, Reconcile, RootPresence, StopDispatch
from tcmp.daemon.index_slots import RootIndex
from tcmp.daemon.pending import BACKOFF_FIRST_S, BACKOFF_MAX_S, Pending, PendingFiles, given_up_reason
from tcmp.daemon.retention import Deleter, Deletion, RetentionPolicy
from tcmp.daemon.roots import WatchedRoot, WatchedRoots
from tcmp.daemon.scan import DirectoryListing
from tcmp.daemon.threads import OwnThread
from tcmp.daemon.work import BatchDone, Origin, Queued, WorkQueue
from tcmp.daemon.writer_thread import IndexWriterThread
from tcmp.schemas.dump_tree import FileKind, classify_name
from tcmp.schemas.index import FileKey, FileState, ForgetRow, IndexRecord, KnownFile, ProblemRow, RawFlagRow
from tcmp.schemas.under_root import PATH_MAX, LeftTheRoot, lstat_under, path_too_long

log = logging.getLogger(__name__)

CREATED_DELAY_S = 0.5
BACKLOG_LOW = 2000  # pull more directories from a scan when fewer queued files than this are waiting
MAX_WAITING_RECORDS = 50_000  # stop submitting work while this many records wait for a writable index
# Formats without a size check of their own, and GE binaries (their writer might preallocate): found by a scan, a
# create or an attribute change, they must be quiet for `settle` seconds before they count as finished.
SETTLE_KINDS = frozenset({FileKind.GE_BINARY, FileKind.GRAPH, FileKind.GE_STATS_CSV, FileKind.GE_MIN_MAX_NPZ})
_TELLING = (Origin.CLOSED, Origin.ATTRIB, Origin.RETRY, Origin.CREATED, Origin.SCAN)  # most telling first
_EVENT_ORIGINS = {"closed": Origin.CLOSED, "moved": Origin.CLOSED, "created": Origin.CREATED, "attrib": Origin.ATTRIB}


@dataclass(frozen=True)
class DispatchSettings:
    incomplete_timeout: float = 300.0
    settle: float = 2.0
    once: bool = False


@dataclass
class DispatchCounters:
    """What this run did (the index keeps the totals)."""

    summarized: int = 0
    failed: int = 0
    given_up: int = 0


class Dispatcher(OwnThread):
    """Owns the decision of what to examine when (see the module docstring); one thread, fed through an inbox."""

    def __init__(
        self,
        roots: tuple[RootIndex, ...],
        pool: WorkerPool,
        writer: IndexWriterThread,
        deleter: Deleter,
        policy: RetentionPolicy,
        settings: DispatchSettings,
    ) -> None:
        self._thread = threading.Thread(target=self._main, name="tcmp-dispatch", daemon=True)
        self._inbox: queue.SimpleQueue[Message] = queue.SimpleQueue()
        self._roots = WatchedRoots(roots)
        self._pool = pool
        self._writer = writer
        self._deleter = deleter
        self._policy = policy
        self._settings = settings
        self._work = WorkQueue(pool, on_done=self._inbox.put, on_crashed=self._crashed)
        self._pending = PendingFiles()
        # records handed to the writer and not committed yet, per path: while any waits, the index does not say
        # what this dispatcher knows, so the path is not looked up and examined again (an event marks it dirty)
        self._awaiting_commit: collections.Counter[str] = collections.Counter()
        self._dirty: set[str] = set()
        self._rereads: collections.Counter[str] = collections.Counter()  # changed while read, in a row
        self._incomplete: set[str] = set()  # recorded as incomplete and not resolved since
        self._skipped: set[str] = set()  # recorded as skipped this run (_why_skipped)
        self._stopping = False
        self.counters = DispatchCounters()
        self.finished = threading.Event()  # once mode: everything found has been examined

    # -- API (any thread)

    def on_fs_event(self, kind: str, path: str) -> None:
        self._inbox.put(FsEvent(kind, path))

    def request_reconcile(self, full: bool = False, root: Optional[str] = None) -> None:
        self._inbox.put(Reconcile(full, root))

    def on_index(self, index: Path, up: bool) -> None:
        self._inbox.put(IndexState(index, up))

    def on_committed(self, paths: tuple[str, ...]) -> None:
        self._inbox.put(Committed(paths))

    def root_presence(self, root: str, present: bool) -> None:
        self._inbox.put(RootPresence(root, present))

    def stop(self) -> None:
        """Finish the examinations under way (their results go to the writer), then end."""
        self._inbox.put(StopDispatch())

    @property
    def queued(self) -> int:
        """Files found and still to be read: queued, or waiting to settle (or for their close event)."""
        return len(self._work.queued) + self._pending.settling

    @property
    def in_flight(self) -> int:
        return len(self._work.in_flight)

    @property
    def pending(self) -> int:
        """Files not complete yet, waited for."""
        return self._pending.incomplete

    @property
    def incomplete(self) -> int:
        """Files recorded as incomplete and neither finished nor given up since."""
        return len(self._incomplete)

    def oldest_batch_s(self) -> float:
        return self._work.oldest_batch_s()

    # -- the thread

    def _main(self) -> None:
        try:
            self._pool.claim_thread()  # this thread submits all work and starts the workers (see WorkerPool)
            if not self._settings.once:  # a daemon's workers start with it; one pass's only for a backlog (work.py)
                self._pool.start()
            self._run()
        except Exception:
            log.exception("the dispatcher failed")
            raise
        finally:
            self._pool.shutdown()  # from this thread, which started the workers (see WorkerPool)
            self._roots.close()
            self.finished.set()

    def _run(self) -> None:
        while True:
            try:
                message = self._inbox.get(timeout=self._timeout())
            except queue.Empty:
                message = None
            events: list[tuple[str, Origin]] = []
            while message is not None:
                self._handle(message, events)
                if len(events) >= 1000:
                    break
                try:
                    message = self._inbox.get_nowait()
                except queue.Empty:
                    message = None
            if events:
                self._consider(events)
            if self._stopping:
                if not self._work.batches:
                    return
                continue
            self._run_timers()
            self._roots.advance(lambda: len(self._work.queued) < BACKLOG_LOW, self._take_listing)
            if self._writer.waiting() <= MAX_WAITING_RECORDS:  # else the index cannot keep up (or be written)
                self._work.submit()
            if self._settings.once and self._idle_for_once():
                return

    def _timeout(self) -> float:
        if self._stopping:
            return 0.5
        if self._roots.scanning and len(self._work.queued) < BACKLOG_LOW:
            return 0.0
        due = self._pending.next_due_in()
        return 5.0 if due is None else min(due, 5.0)

    def _handle(self, message: Message, events: list[tuple[str, Origin]]) -> None:
        if isinstance(message, FsEvent):
            if message.kind == "dir":
                self._roots.request_scan(None, full=False)
            elif not self._stopping:
                events.append((message.path, _EVENT_ORIGINS[message.kind]))
        elif isinstance(message, BatchDone):
            for result in self._work.batch_done(message):
                self._result(result)
        elif isinstance(message, Committed):
            self._committed(message.paths, events)
        elif isinstance(message, Reconcile):
            self._roots.request_scan(message.root, message.full)
        elif isinstance(message, IndexState):
            self._roots.index_state(message.index, message.up)
        elif isinstance(message, RootPresence):
            self._roots.presence(message.root, message.present)
        elif isinstance(message, StopDispatch):
            self._stopping = True

    def _take_listing(self, root: WatchedRoot, listing: DirectoryListing) -> None:
        items = [(entry.path, Origin.SCAN) for entry in self._roots.files_of(root, listing)]
        if items:
            self._consider(items)

    # -- deciding

    def _consider(self, items: list[tuple[str, Origin]]) -> None:
        """Decide for each (path, origin); the index is asked once per batch."""
        fresh: list[tuple[str, Origin, WatchedRoot, FileKind, os.stat_result]] = []
        for path, origin in _once_each(items):
            root = self._roots.root_of(path)
            if root is None or "/.tcmp/" in path[len(root.spec.root) :]:
                continue
            kind = classify_name(os.path.basename(path))
            if kind is None:
                continue
            if path in self._work.in_flight or path in self._awaiting_commit:
                if origin is not Origin.SCAN:
                    self._dirty.add(path)
                continue
            if path in self._work.queued:
                self._work.hurry(path, origin)
                continue
            skipped = _why_skipped(path)
            if skipped is not None:
                self._skip(path, root, skipped)
                continue
            if origin is Origin.CREATED:
                self._created(path, root, kind)
                continue
            try:
                st = lstat_under(root.spec.root, path)
            except LeftTheRoot as exc:
                self._roots.left_the_root(exc, root)
                self._vanished(path)
                continue
            except FileNotFoundError:
                self._vanished(path)
                continue
            except OSError as exc:
                log.warning("cannot stat %s: %s", path, exc.strerror or exc)
                continue
            if stat.S_ISLNK(st.st_mode):
                self._roots.symlink(path, root)
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            fresh.append((path, origin, root, kind, st))
        known = self._roots.known([f[0] for f in fresh], [f[2] for f in fresh])
        for path, origin, root, kind, st in fresh:
            self._decide(path, origin, root, kind, st, known.get(path))

    def _decide(
        self, path: str, origin: Origin, root: WatchedRoot, kind: FileKind, st: os.stat_result, known: KnownFile | None
    ) -> None:
        key = FileKey.of(st)
        if known is not None and known.key == key:
            if known.state is FileState.SUMMARIZED:
                self._resolved(path)
                if known.raw_deleted:
                    self._leftover_deletion(path, root.spec, key)
                return
            if known.state is FileState.ERROR or self._settings.once:
                return  # recorded; looked at again only when it changes (once: not waited for)
            # incomplete when an earlier run looked at it: examine it once more, then wait with back-off
        pending = self._pending.get(path)
        if pending is not None and not pending.settling and pending.key == key and origin is not Origin.CLOSED:
            return  # incomplete and unchanged: its back-off timer looks again
        if origin is not Origin.CLOSED and kind in SETTLE_KINDS:
            # quiet since the last change of any kind: ctime, which no copy tool can set back as it does the mtime
            quiet_for = time.time() - max(st.st_mtime, st.st_ctime)
            if quiet_for < self._settings.settle:
                delay = self._settings.settle - quiet_for + 0.01
                self._pending.look_later(path, root.spec, kind, key, "settling", delay)
                return
        self._enqueue(path, origin, root.spec, kind, st.st_size)

    def _created(self, path: str, root: WatchedRoot, kind: FileKind) -> None:
        """A create event: look in CREATED_DELAY_S, unless its close event (the usual case) comes first. No stat,
        no index lookup now: most created files are handled by their close event, which cancels this."""
        if path not in self._pending:
            self._pending.look_later(path, root.spec, kind, None, "just created", CREATED_DELAY_S)

    def _skip(self, path: str, root: WatchedRoot, reason: str) -> None:
        """A name the index or the compare cannot use (see _why_skipped): recorded as skipped, once per run, and
        counted as failed. A name that is not UTF-8 is recorded under its escaped form (SQLite stores UTF-8)."""
        if path in self._skipped:
            return
        self._skipped.add(path)
        self.counters.failed += 1
        shown = os.fsencode(path).decode("utf-8", "backslashreplace")
        log.warning("%s: %s", shown if len(shown) < 300 else shown[:300] + "…", reason)
        self._put(root.spec, shown, ProblemRow(Path(shown), FileState.ERROR, reason))

    def _enqueue(self, path: str, origin: Origin, spec: RootIndex, kind: FileKind, size: int) -> None:
        entry = self._pending.get(path)
        if entry is not None:
            if entry.settling:
                self._pending.pop(path)  # its look-later timer is moot now
            else:
                self._pending.suspend(entry)  # no timer while it is examined: the result reschedules it
        self._work.add(path, Queued(spec, origin, kind, size))

    def _leftover_deletion(self, path: str, spec: RootIndex, key: FileKey) -> None:
        if self._policy.drop_raw:
            self._deleter.put(Deletion(path, spec.root, spec.index, key, seq=None))
        else:
            self._put(spec, path, RawFlagRow(Path(path), deleted=False, key=key))

    def _resolved(self, path: str) -> Optional[Pending]:
        """Finished one way or another: nothing waits for it any more."""
        self._rereads.pop(path, None)
        self._incomplete.discard(path)
        return self._pending.pop(path)

    def _vanished(self, path: str) -> None:
        entry = self._resolved(path)
        if entry is not None and entry.recorded:
            self._put(entry.spec, path, ForgetRow(Path(path)))

    # -- pending files

    def _run_timers(self) -> None:
        settled: list[tuple[str, Origin]] = []
        for path, entry in self._pending.due():
            if path in self._work.queued or path in self._work.in_flight:
                continue  # being examined anyway
            if path in self._awaiting_commit:
                self._dirty.add(path)  # looked at once its records are committed
                continue
            if entry.settling:
                self._pending.pop(path)
                settled.append((path, Origin.RETRY))
            else:
                self._recheck(path, entry)
        if settled:
            self._consider(settled)

    def _recheck(self, path: str, entry: Pending) -> None:
        """A file that was not complete: examine it again if it changed; give up if it stayed as it was."""
        try:
            st = lstat_under(entry.spec.root, path)
        except LeftTheRoot as exc:  # a directory on its way became a symlink: the file is no longer in the tree
            log.warning("%s (it would leave the watched root %s)", exc, entry.spec.root)
            self._vanished(path)
            return
        except FileNotFoundError:
            self._vanished(path)
            return
        except OSError:
            self._pending.backoff(path, entry)
            return
        if FileKey.of(st) != entry.key:
            self._enqueue(path, Origin.RETRY, entry.spec, entry.kind, st.st_size)
        else:
            self._give_up_or_backoff(path, entry)

    def _give_up_or_backoff(self, path: str, entry: Pending) -> None:
        """A file still incomplete: unchanged (by tcmp's clock) for the incomplete timeout, it was cut short."""
        if self._pending.unchanged_for(entry) >= self._settings.incomplete_timeout:
            self._give_up(path, entry)
        else:
            self._pending.backoff(path, entry)

    def _give_up(self, path: str, entry: Pending) -> None:
        self._resolved(path)
        self.counters.given_up += 1
        reason = given_up_reason(entry, self._settings.incomplete_timeout)
        log.warning("%s: %s; recorded as an error, looked at again only if it changes", path, reason)
        self._put(entry.spec, path, ProblemRow(Path(path), FileState.ERROR, reason, entry.key))

    # -- results

    def _result(self, result: WorkResult) -> None:
        path = result.path
        item = self._work.take(path)
        if item is None:
            return
        if isinstance(result, (Summarized, GraphParsed)):
            self.counters.summarized += 1
            self._resolved(path)
            self._record(path, item, result.row)
        elif isinstance(result, Failed):
            self.counters.failed += 1
            self._resolved(path)
            log.warning("%s: %s; recorded as an error, looked at again only if it changes", path, result.error)
            self._record(path, item, ProblemRow(Path(path), FileState.ERROR, result.error, result.key, result.located))
        elif isinstance(result, NotReady):
            self._not_ready(path, item, result)
        elif isinstance(result, Vanished):
            self._vanished(path)
        elif isinstance(result, Skipped):
            self._resolved(path)
            log.log(logging.WARNING if result.left_the_root else logging.DEBUG, "%s skipped: %s", path, result.reason)
        self._recheck_dirty(path)

    def _crashed(self, path: str, item: Queued) -> None:
        """It took a worker down twice (work.py)."""
        self.counters.failed += 1
        self._resolved(path)
        self._record(path, item, ProblemRow(Path(path), FileState.ERROR, "a worker process died reading it"))

    def _record(self, path: str, item: Queued, record: IndexRecord) -> None:
        self._put(item.spec, path, record)

    def _put(self, spec: RootIndex, path: str, record: IndexRecord) -> None:
        self._awaiting_commit[path] += 1
        self._writer.put(spec.index, spec.root, record)

    def _not_ready(self, path: str, item: Queued, result: NotReady) -> None:
        if result.changed and not self._settings.once:
            self._reread_later(path, item, result)
            return
        entry = self._pending.get(path)
        if entry is None or entry.settling:
            recorded = entry is not None and entry.recorded
            entry = Pending(item.spec, item.kind, result.key, result.reason, due=time.monotonic(), recorded=recorded)
            self._pending.put(path, entry)
        self._pending.seen(entry, result.key)
        entry.reason, entry.truncated = result.reason, result.truncated
        if not entry.recorded:
            entry.recorded = True
            self._incomplete.add(path)
            row = ProblemRow(Path(path), FileState.INCOMPLETE, result.reason, result.key, result.located)
            self._put(item.spec, path, row)
        if self._settings.once:
            self._pending.pop(path)  # once: recorded as incomplete, not waited for
            return
        self._give_up_or_backoff(path, entry)

    def _reread_later(self, path: str, item: Queued, result: NotReady) -> None:
        """It changed while it was read: its writer (or a copy tool setting its mtime) was not done with it. Read
        again once it is quiet, with back-off while it keeps changing; never given up for that."""
        self._rereads[path] += 1
        delay = min(BACKOFF_FIRST_S * 2 ** (self._rereads[path] - 1), BACKOFF_MAX_S)
        self._pending.look_later(path, item.spec, item.kind, result.key, result.reason, delay)

    def _committed(self, paths: tuple[str, ...], events: list[tuple[str, Origin]]) -> None:
        for path in paths:  # once per record: an 'incomplete' row's commit says nothing of the summary after it
            self._awaiting_commit[path] -= 1
            if self._awaiting_commit[path] > 0:
                continue
            del self._awaiting_commit[path]
            if path in self._dirty:
                self._dirty.discard(path)
                events.append((path, Origin.CLOSED))

    def _recheck_dirty(self, path: str) -> None:
        if path in self._dirty and path not in self._awaiting_commit:
            self._dirty.discard(path)
            self._consider([(path, Origin.CLOSED)])

    def _idle_for_once(self) -> bool:
        work = self._work.queued or self._work.in_flight or self._work.batches
        return not (self._roots.scanning or work or len(self._pending) or self._roots.waiting_for_an_index)


def _why_skipped(path: str) -> Optional[str]:
    """Why a path is not read at all: past PATH_MAX no tool opens it by its path (the compare reads raw files by
    path); a name that is not UTF-8 cannot be stored as the index's key."""
    if path_too_long(path):
        return f"skipped: path too long ({len(os.fsencode(path))} bytes; the system's limit is {PATH_MAX - 1})"
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return "skipped: the name is not valid UTF-8"
    return None


def _once_each(items: list[tuple[str, Origin]]) -> list[tuple[str, Origin]]:
    """Each path once, in first-seen order, with its most telling origin (a close and an attribute change of one
    file often arrive together)."""
    best: dict[str, Origin] = {}
    for path, origin in items:
        if path not in best or _TELLING.index(origin) < _TELLING.index(best[path]):
            best[path] = origin
    return list(best.items())
