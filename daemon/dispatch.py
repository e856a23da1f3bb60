"""The dispatcher thread: turns events and scan listings into work for the worker processes, and their results
into index records; keeps the files that are not finished yet and looks at them again with back-off.

Every candidate path goes through the same decision:

1. Already handled? A path that is queued, being examined or waiting for its commit is not taken twice (a later
   event marks it to be looked at again once its commit is through).
2. What is it? Symlinks are never followed (one log line for a link leaving the root); non-dump names are ignored.
3. Already in the index with the same (inode, size, mtime)? Then it is not read again (resume). A summarized file
   whose raw deletion was decided but not done (crash after the commit) is deleted now.
4. Otherwise it is examined by a worker: at once after a close/rename event; after a short delay after a create
   event (the close usually follows); after it has been quiet for `settle` seconds when it was found by a scan or
   a create and its format has no size check of its own (GE binaries, whose writer might preallocate, graph
   text, stats CSVs).

A file that is not complete yet waits in `pending` and is checked again with back-off (0.5 s doubling to 30 s);
one that stays incomplete and unmodified for `incomplete_timeout` is recorded as an error ("truncated forever")
and left alone until it changes.
"""

from __future__ import annotations

import collections
import concurrent.futures
import enum
import heapq
import logging
import math
import os
import queue
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from tcmp.schemas.index import (
    FileKey,
    FileState,
    ForgetRow,
    IndexReader,
    IndexUnusable,
    KnownFile,
    ProblemRow,
    RawFlagRow,
    open_index,
)
from tcmp.schemas.layout import FileKind, classify_name

from .convert import Failed, GraphParsed, NotReady, Skipped, Summarized, Vanished, WorkerPool, WorkResult
from .retention import Deleter, Deletion, RetentionPolicy
from .scan import DirectoryListing, TreeScanner
from .threads import OwnThread
from .writer import IndexWriterThread, RootIndex

log = logging.getLogger(__name__)

CREATED_DELAY_S = 0.5
BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 30.0
BATCH_FILES = 32
BATCH_BYTES = 32 << 20
BACKLOG_LOW = 2000  # pull more directories from a scan when fewer queued files than this are waiting
MAX_WAITING_RECORDS = 50_000  # stop submitting work while this many records wait for a writable index
WORKER_CRASH_LIMIT = 2
# Formats without a size check of their own, and GE binaries (their writer might preallocate): found by a scan or
# a create event, they must be quiet for `settle` seconds before they count as finished.
SETTLE_KINDS = frozenset({FileKind.GE_BINARY, FileKind.GRAPH, FileKind.GE_STATS_CSV, FileKind.GE_MIN_MAX_NPZ})


class Origin(str, enum.Enum):
    CLOSED = "closed"  # close-after-write or rename-into-place: the writer is done with it
    CREATED = "created"  # created (maybe still being written)
    SCAN = "scan"  # found by listing the tree
    RETRY = "retry"  # a pending file's next look


@dataclass(frozen=True)
class FsEvent:
    kind: str  # watch.py's event kinds
    path: str


@dataclass(frozen=True)
class Reconcile:
    full: bool
    root: Optional[str] = None


@dataclass(frozen=True)
class IndexState:
    index: Path
    up: bool


@dataclass(frozen=True)
class RootPresence:
    root: str
    present: bool


@dataclass(frozen=True)
class BatchDone:
    future: concurrent.futures.Future
    paths: tuple[str, ...]
    results: tuple[WorkResult, ...]
    error: Optional[BaseException]
    graph: bool


@dataclass(frozen=True)
class Committed:
    paths: tuple[str, ...]


@dataclass(frozen=True)
class StopDispatch:
    pass


_Message = Union[FsEvent, Reconcile, IndexState, RootPresence, BatchDone, Committed, StopDispatch]


@dataclass(frozen=True)
class DispatchSettings:
    incomplete_timeout: float = 300.0
    settle: float = 2.0
    once: bool = False


@dataclass
class _Root:
    spec: RootIndex
    scanner: TreeScanner
    present: bool = True
    indexed: bool = False  # its index is open
    index_failed: bool = False  # its index could not be opened (once mode does not wait for it)
    scan: Optional[Iterator[DirectoryListing]] = None
    scan_full: bool = False
    rescan: Optional[bool] = None  # a scan requested while one runs: full (True) or incremental (False)


@dataclass
class _Queued:
    root: _Root
    origin: Origin
    kind: FileKind
    size: int


@dataclass
class _Pending:
    """A file that is not finished yet (or must settle first)."""

    root: _Root
    kind: FileKind
    key: Optional[FileKey]
    reason: str
    due: float
    attempts: int = 0
    recorded: bool = False  # an 'incomplete' row was written for it
    settling: bool = False  # waits for quiet, not for missing bytes
    truncated: bool = False  # shorter than its header promises (not: waits for its mapping.csv row)


@dataclass
class DispatchCounters:
    """What this run did (the index keeps the totals)."""

    summarized: int = 0
    failed: int = 0
    incomplete: int = 0
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
        self._inbox: queue.SimpleQueue[_Message] = queue.SimpleQueue()
        self._roots = {r.root: _Root(r, TreeScanner(r.root)) for r in roots}
        self._roots_longest_first = sorted(self._roots.values(), key=lambda r: -len(r.spec.root))
        self._pool = pool
        self._writer = writer
        self._deleter = deleter
        self._policy = policy
        self._settings = settings
        self._readers: dict[Path, IndexReader] = {}
        self._fresh: collections.deque[str] = collections.deque()
        self._backlog: collections.deque[str] = collections.deque()
        self._graph_queue: collections.deque[str] = collections.deque()
        self._queued: dict[str, _Queued] = {}
        self._in_flight: dict[str, _Queued] = {}
        self._batches: dict[concurrent.futures.Future, float] = {}
        self._graph_in_flight = False
        self._awaiting_commit: set[str] = set()
        self._dirty: set[str] = set()
        self._pending: dict[str, _Pending] = {}
        self._timers: list[tuple[float, str]] = []
        self._crashes: collections.Counter[str] = collections.Counter()
        self._isolate: set[str] = set()
        self._symlinks_reported: set[str] = set()
        self._stopping = False
        self.counters = DispatchCounters()
        self.finished = threading.Event()  # once mode: everything found has been examined
        self.max_batches = max(2, 2 * max(pool.workers, 1))

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
        return len(self._queued)

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    @property
    def pending(self) -> int:
        return len(self._pending)

    def oldest_batch_s(self) -> float:
        started = list(self._batches.values())
        return time.monotonic() - min(started) if started else 0.0

    # -- the thread

    def _main(self) -> None:
        try:
            self._pool.warm_up()  # from this thread: the one that submits all work (see WorkerPool)
            self._run()
        except Exception:
            log.exception("the dispatcher failed")
            raise
        finally:
            for reader in self._readers.values():
                reader.close()
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
                if not self._batches:
                    return
                continue
            self._run_timers()
            self._advance_scans()
            self._submit()
            if self._settings.once and self._idle_for_once():
                return

    def _timeout(self) -> float:
        if self._stopping:
            return 0.5
        if any(r.scan is not None for r in self._roots.values()) and len(self._queued) < BACKLOG_LOW:
            return 0.0
        if self._timers:
            return max(0.0, min(self._timers[0][0] - time.monotonic(), 5.0))
        return 5.0

    def _handle(self, message: _Message, events: list[tuple[str, Origin]]) -> None:
        if isinstance(message, FsEvent):
            if message.kind == "dir":
                self._request_scan(None, full=False)
            elif not self._stopping:
                origin = Origin.CREATED if message.kind == "created" else Origin.CLOSED
                events.append((message.path, origin))
        elif isinstance(message, BatchDone):
            self._batch_done(message)
        elif isinstance(message, Committed):
            self._committed(message.paths, events)
        elif isinstance(message, Reconcile):
            self._request_scan(message.root, message.full)
        elif isinstance(message, IndexState):
            self._index_state(message)
        elif isinstance(message, RootPresence):
            self._root_presence(message)
        elif isinstance(message, StopDispatch):
            self._stopping = True

    # -- roots and their indexes

    def _root_of(self, path: str) -> Optional[_Root]:
        for root in self._roots_longest_first:
            if path.startswith(root.spec.root + "/"):
                return root if root.present and root.indexed else None
        return None

    def _index_state(self, message: IndexState) -> None:
        affected = [r for r in self._roots.values() if r.spec.index == message.index]
        if message.up:
            if message.index not in self._readers:
                try:
                    self._readers[message.index] = open_index(message.index)
                except IndexUnusable as exc:
                    log.error("cannot read the index %s: %s", message.index, exc)
                    return
            for root in affected:
                root.index_failed = False
                if not root.indexed:
                    root.indexed = True
                    self._request_scan(root.spec.root, full=True)
        else:
            reader = self._readers.pop(message.index, None)
            if reader is not None:
                reader.close()
            for root in affected:
                root.indexed = False
                root.index_failed = True
                root.scan = None

    def _root_presence(self, message: RootPresence) -> None:
        root = self._roots.get(message.root)
        if root is None or root.present == message.present:
            return
        root.present = message.present
        if not message.present:
            root.scan = None
            root.scanner.forget()
        elif root.indexed:
            self._request_scan(root.spec.root, full=True)

    # -- scans

    def _request_scan(self, root_path: Optional[str], full: bool) -> None:
        targets = [self._roots[root_path]] if root_path in self._roots else list(self._roots.values())
        for root in targets:
            if not (root.present and root.indexed):
                continue
            if root.scan is None:
                root.scan, root.scan_full = root.scanner.scan(full=full), full
            else:
                root.rescan = bool(root.rescan) or full

    def _advance_scans(self) -> None:
        deadline = time.monotonic() + 0.05
        for root in self._roots.values():
            while root.scan is not None and len(self._queued) < BACKLOG_LOW and time.monotonic() < deadline:
                listing = next(root.scan, None)
                if listing is None:
                    self._scan_done(root)
                    break
                self._consider_listing(root, listing)

    def _scan_done(self, root: _Root) -> None:
        level = logging.INFO if root.scan_full else logging.DEBUG
        kind = "full scan" if root.scan_full else "reconcile"
        log.log(level, "%s of %s done (%d directories)", kind, root.spec.root, root.scanner.directories)
        root.scan = None
        if root.rescan is not None:
            root.scan, root.scan_full, root.rescan = root.scanner.scan(full=root.rescan), root.rescan, None

    def _consider_listing(self, root: _Root, listing: DirectoryListing) -> None:
        items: list[tuple[str, Origin]] = []
        for entry in listing.files:
            if entry.symlink:
                self._symlink(entry.path, root)
            else:
                items.append((entry.path, Origin.SCAN))
        if items:
            self._consider(items)

    def _symlink(self, path: str, root: _Root) -> None:
        if path in self._symlinks_reported:
            return
        self._symlinks_reported.add(path)
        target = os.path.realpath(path)
        if not target.startswith(root.spec.root + "/"):
            log.warning("%s is a symlink to %s, outside the watched root %s: not followed", path, target,
                        root.spec.root)  # fmt: skip
        else:
            log.info("%s is a symlink (to %s): not followed, the target is indexed under its own path", path, target)

    # -- deciding

    def _consider(self, items: list[tuple[str, Origin]]) -> None:
        """Decide for each (path, origin); the index is asked once per batch."""
        fresh: list[tuple[str, Origin, _Root, FileKind, os.stat_result]] = []
        for path, origin in items:
            root = self._root_of(path)
            if root is None or "/.tcmp/" in path[len(root.spec.root) :]:
                continue
            kind = classify_name(os.path.basename(path))
            if kind is None:
                continue
            if path in self._in_flight or path in self._awaiting_commit:
                if origin is not Origin.SCAN:
                    self._dirty.add(path)
                continue
            if path in self._queued:
                if origin is Origin.CLOSED and self._queued[path].origin is Origin.SCAN:
                    self._queued[path].origin = origin
                    self._fresh.append(path)  # jump the backlog (its backlog entry is skipped later)
                continue
            if origin is Origin.CREATED:
                self._created(path, root, kind)
                continue
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                self._vanished(path)
                continue
            except OSError as exc:
                log.warning("cannot stat %s: %s", path, exc.strerror or exc)
                continue
            if stat.S_ISLNK(st.st_mode):
                self._symlink(path, root)
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            fresh.append((path, origin, root, kind, st))
        known = self._known([f[0] for f in fresh], [f[2] for f in fresh])
        for path, origin, root, kind, st in fresh:
            self._decide(path, origin, root, kind, st, known.get(path))

    def _known(self, paths: list[str], roots: list[_Root]) -> dict[str, KnownFile]:
        by_index: dict[Path, list[str]] = collections.defaultdict(list)
        for path, root in zip(paths, roots):
            by_index[root.spec.index].append(path)
        found: dict[str, KnownFile] = {}
        for index, group in by_index.items():
            reader = self._readers.get(index)
            if reader is None:
                continue
            try:
                found.update((k.path, k) for k in reader.lookup(group))
            except Exception as exc:  # a locked or vanished index: examine, the upsert is idempotent
                log.debug("index lookup in %s failed: %s", index, exc)
        return found

    def _decide(
        self, path: str, origin: Origin, root: _Root, kind: FileKind, st: os.stat_result, known: Optional[KnownFile]
    ) -> None:
        key = FileKey.of(st)
        pending = self._pending.get(path)
        if known is not None and known.key == key:
            if known.state is FileState.SUMMARIZED:
                self._pending.pop(path, None)
                if known.raw_deleted:
                    self._leftover_deletion(path, root, key)
                return
            if known.state is FileState.ERROR or self._settings.once:
                return  # recorded; looked at again only when it changes (once: not waited for)
            if pending is not None and origin is not Origin.CLOSED:
                return  # incomplete, and its back-off timer is running
            # incomplete when an earlier run looked at it: examine it once more, then wait with back-off
        if origin is not Origin.CLOSED and kind in SETTLE_KINDS:
            quiet_for = time.time() - st.st_mtime
            if quiet_for < self._settings.settle:
                self._look_later(path, root, kind, key, "settling", self._settings.settle - quiet_for + 0.01)
                return
        self._enqueue(path, origin, root, kind, st.st_size)

    def _created(self, path: str, root: _Root, kind: FileKind) -> None:
        """A create event: look in CREATED_DELAY_S, unless its close event (the usual case) comes first. No stat,
        no index lookup now: most created files are handled by their close event, which cancels this."""
        if path not in self._pending:
            self._look_later(path, root, kind, None, "just created", CREATED_DELAY_S)

    def _look_later(
        self, path: str, root: _Root, kind: FileKind, key: Optional[FileKey], why: str, delay: float
    ) -> None:
        """Decide again after `delay` (the file may be fine already; it only has to settle or to be closed)."""
        entry = _Pending(root, kind, key, why, due=time.monotonic() + delay, settling=True)
        self._pending[path] = entry
        self._arm(path, entry)

    def _arm(self, path: str, entry: _Pending, delay: Optional[float] = None) -> None:
        if delay is not None:
            entry.due = time.monotonic() + delay
        heapq.heappush(self._timers, (entry.due, path))

    def _enqueue(self, path: str, origin: Origin, root: _Root, kind: FileKind, size: int) -> None:
        entry = self._pending.get(path)
        if entry is not None and entry.settling:
            del self._pending[path]  # its look-later timer is moot now
        self._queued[path] = _Queued(root, origin, kind, size)
        if kind is FileKind.GRAPH:
            self._graph_queue.append(path)
        else:
            (self._backlog if origin is Origin.SCAN else self._fresh).append(path)

    def _leftover_deletion(self, path: str, root: _Root, key: FileKey) -> None:
        if self._policy.drop_raw:
            self._deleter.put(Deletion(path, root.spec.root, root.spec.index, key, seq=None))
        else:
            self._writer.put(root.spec.index, root.spec.root, RawFlagRow(Path(path), deleted=False))

    def _vanished(self, path: str) -> None:
        entry = self._pending.pop(path, None)
        if entry is not None and entry.recorded:
            self._writer.put(entry.root.spec.index, entry.root.spec.root, ForgetRow(Path(path)))

    # -- pending files

    def _run_timers(self) -> None:
        now = time.monotonic()
        settled: list[tuple[str, Origin]] = []
        while self._timers and self._timers[0][0] <= now:
            _, path = heapq.heappop(self._timers)
            entry = self._pending.get(path)
            if entry is None or entry.due > now or path in self._queued or path in self._in_flight:
                continue  # stale timer, or the file is being examined anyway
            if entry.settling:
                del self._pending[path]
                settled.append((path, Origin.RETRY))
            else:
                self._recheck(path, entry)
        if settled:
            self._consider(settled)

    def _recheck(self, path: str, entry: _Pending) -> None:
        """A file that was not complete: examine it again if it changed; give up if it stayed as it was."""
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            self._vanished(path)
            return
        except OSError:
            self._backoff(path, entry)
            return
        if FileKey.of(st) != entry.key:
            entry.due = math.inf  # no timer while it is examined; the result reschedules it
            self._enqueue(path, Origin.RETRY, entry.root, entry.kind, st.st_size)
        else:
            self._give_up_or_backoff(path, entry, st.st_mtime)

    def _give_up_or_backoff(self, path: str, entry: _Pending, mtime: float) -> None:
        """A file still incomplete: unchanged for the incomplete timeout, it was cut short; else wait more."""
        if time.time() - mtime >= self._settings.incomplete_timeout:
            self._give_up(path, entry)
        else:
            self._backoff(path, entry)

    def _backoff(self, path: str, entry: _Pending) -> None:
        entry.attempts += 1
        self._arm(path, entry, min(BACKOFF_FIRST_S * 2**entry.attempts, BACKOFF_MAX_S))

    def _give_up(self, path: str, entry: _Pending) -> None:
        del self._pending[path]
        self.counters.given_up += 1
        timeout = self._settings.incomplete_timeout
        waited = f"{timeout:.3g} s" if timeout < 120 else f"{timeout / 60:.3g} min"
        what = "truncated forever" if entry.truncated else "gave up waiting"
        reason = f"{what}: {entry.reason} (unchanged for {waited})"
        log.warning("%s: %s; recorded as an error, looked at again only if it changes", path, reason)
        row = ProblemRow(Path(path), FileState.ERROR, reason, entry.key)
        self._writer.put(entry.root.spec.index, entry.root.spec.root, row)

    # -- working

    def _submit(self) -> None:
        if self._writer.waiting() > MAX_WAITING_RECORDS:
            return  # the index cannot keep up (or cannot be written): do not pile up more
        if self._graph_queue and not self._graph_in_flight:
            path = self._graph_queue.popleft()
            item = self._queued.pop(path, None)
            if item is not None:
                self._submit_graph(path, item)
        while len(self._batches) < self.max_batches and (self._fresh or self._backlog):
            batch: list[str] = []
            size = 0
            while (self._fresh or self._backlog) and len(batch) < BATCH_FILES and size < BATCH_BYTES:
                path = (self._fresh or self._backlog).popleft()
                item = self._queued.pop(path, None)
                if item is None:
                    continue  # taken already through the other queue
                self._in_flight[path] = item
                batch.append(path)
                size += item.size
                if path in self._isolate:
                    break
            if batch:
                self._submit_files(tuple(batch))

    def _submit_files(self, paths: tuple[str, ...]) -> None:
        try:
            future = self._pool.submit_files(paths)
        except (RuntimeError, concurrent.futures.BrokenExecutor) as exc:
            self._pool_broken(paths, exc)
            return
        self._track(future, paths, graph=False)

    def _submit_graph(self, path: str, item: _Queued) -> None:
        self._in_flight[path] = item
        self._graph_in_flight = True
        try:
            future = self._pool.submit_graph(path)
        except (RuntimeError, concurrent.futures.BrokenExecutor) as exc:
            self._graph_in_flight = False
            self._pool_broken((path,), exc)
            return
        self._track(future, (path,), graph=True)

    def _track(self, future: concurrent.futures.Future, paths: tuple[str, ...], graph: bool) -> None:
        self._batches[future] = time.monotonic()

        def done(f: concurrent.futures.Future) -> None:
            error = f.exception()
            self._inbox.put(BatchDone(f, paths, () if error else f.result(), error, graph))

        future.add_done_callback(done)

    def _batch_done(self, message: BatchDone) -> None:
        self._batches.pop(message.future, None)
        if message.graph:
            self._graph_in_flight = False
        if message.error is not None:
            self._pool_broken(message.paths, message.error)
            return
        for result in message.results:
            self._result(result)

    def _pool_broken(self, paths: tuple[str, ...], error: BaseException) -> None:
        """A worker died (killed, out of memory, a crash in native code). Its files are examined again one by one;
        a file that takes a worker down twice is recorded as an error."""
        log.error("a worker process died while examining %d file(s): %s", len(paths), error)
        self._pool.restart()
        for path in paths:
            item = self._in_flight.pop(path, None)
            if item is None:
                continue
            self._crashes[path] += 1
            if self._crashes[path] >= WORKER_CRASH_LIMIT:
                self._record(path, item, ProblemRow(Path(path), FileState.ERROR, "a worker process died reading it"))
                continue
            self._isolate.add(path)
            self._queued[path] = item
            (self._graph_queue if item.kind is FileKind.GRAPH else self._fresh).appendleft(path)

    def _result(self, result: WorkResult) -> None:
        path = result.path
        item = self._in_flight.pop(path, None)
        self._isolate.discard(path)
        self._crashes.pop(path, None)
        if item is None:
            return
        if isinstance(result, (Summarized, GraphParsed)):
            self.counters.summarized += 1
            self._pending.pop(path, None)
            self._record(path, item, result.row)
        elif isinstance(result, Failed):
            self.counters.failed += 1
            self._pending.pop(path, None)
            log.warning("%s: %s; recorded as an error, looked at again only if it changes", path, result.error)
            self._record(path, item, ProblemRow(Path(path), FileState.ERROR, result.error, result.key, result.located))
        elif isinstance(result, NotReady):
            self._not_ready(path, item, result)
        elif isinstance(result, Vanished):
            self._vanished(path)
        elif isinstance(result, Skipped):
            log.debug("%s skipped: %s", path, result.reason)
        self._recheck_dirty(path)

    def _record(self, path: str, item: _Queued, record) -> None:
        self._awaiting_commit.add(path)
        self._writer.put(item.root.spec.index, item.root.spec.root, record)

    def _not_ready(self, path: str, item: _Queued, result: NotReady) -> None:
        entry = self._pending.get(path)
        if entry is None:
            entry = _Pending(item.root, item.kind, result.key, result.reason, due=time.monotonic())
        if entry.key != result.key:
            entry.attempts = 0
        entry.key, entry.reason, entry.settling, entry.truncated = result.key, result.reason, False, result.truncated
        self._pending[path] = entry
        if not entry.recorded:
            entry.recorded = True
            self.counters.incomplete += 1
            row = ProblemRow(Path(path), FileState.INCOMPLETE, result.reason, result.key, result.located)
            self._writer.put(item.root.spec.index, item.root.spec.root, row)
        if self._settings.once:
            del self._pending[path]  # once: recorded as incomplete, not waited for
            return
        try:
            mtime = os.lstat(path).st_mtime
        except OSError:
            mtime = time.time()
        self._give_up_or_backoff(path, entry, mtime)

    def _committed(self, paths: tuple[str, ...], events: list[tuple[str, Origin]]) -> None:
        for path in paths:
            self._awaiting_commit.discard(path)
            if path in self._dirty:
                self._dirty.discard(path)
                events.append((path, Origin.CLOSED))

    def _recheck_dirty(self, path: str) -> None:
        if path in self._dirty and path not in self._awaiting_commit:
            self._dirty.discard(path)
            self._consider([(path, Origin.CLOSED)])

    def _idle_for_once(self) -> bool:
        scanning = any(r.scan is not None for r in self._roots.values())
        waiting_roots = any(r.present and not r.indexed and not r.index_failed for r in self._roots.values())
        return not (scanning or self._queued or self._in_flight or self._pending or self._batches or waiting_roots)
