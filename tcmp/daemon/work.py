"""The dispatcher's work queue: files waiting for a worker, in batches, and the batches the workers run.

Files a writer just finished (close/rename and attribute events, retries) go before the files a scan found, so a
big start-up scan does not delay the live dump. Small files travel in batches (one round trip to a worker for
many), graph files one at a time. Until the worker processes are up, the batches go to the daemon's own thread,
two at a time; with `--once` the workers start only when the files waiting are more than that thread finishes
before they would be up. A worker that dies takes its batch with it: the batch's
files are examined again one by one, and a file that takes a worker down twice is given up (`on_crashed`).
"""

from __future__ import annotations

import collections
import concurrent.futures
import enum
import logging
import time
from dataclasses import dataclass
from typing import Callable, Optional

from tcmp.daemon.examine import WorkerPool, WorkResult
from tcmp.daemon.index_slots import RootIndex
from tcmp.schemas.dump_tree import FileKind

log = logging.getLogger(__name__)

BATCH_FILES = 32
BATCH_BYTES = 32 << 20
WORKER_CRASH_LIMIT = 2
THREAD_BATCHES = 2  # in the daemon's thread (before the workers are up): one running, the next one ready

# The worker processes are started (WorkerPool.start) once the dump files waiting would keep the daemon's own
# thread summarizing for longer than this: below it, the thread is done about when the workers would be up (2-6 s
# for two of them on a loaded 2-core machine, most of it imports). Only the bytes count: the per-file work (~1 ms
# of placing and reading a header, then the index record) stays with the daemon's process either way, the
# result's round trip to a worker costing about what a worker saves it (6,084 small files, 24 MB: 1.5x as long
# with workers started at once). At ~1 GB/s in the thread (GE 1.3, FX 0.9, page cache warm), 785 MB took 1.1x as
# long with the workers as without, 3.7 GB 0.7x (`watch --once --workers 2` against `--workers 0`).
START_WORKERS_AFTER_S = 2.0
SUMMARIZED_BYTES_PER_S = 1e9


class Origin(str, enum.Enum):
    CLOSED = "closed"  # close-after-write or rename-into-place: the writer is done with it
    ATTRIB = "attrib"  # its metadata changed (a copy tool setting the mtime after the content, chmod)
    CREATED = "created"  # created (maybe still being written)
    SCAN = "scan"  # found by listing the tree
    RETRY = "retry"  # a pending file's next look


@dataclass
class Queued:
    spec: RootIndex
    origin: Origin
    kind: FileKind
    size: int


@dataclass(frozen=True)
class BatchDone:
    future: concurrent.futures.Future
    paths: tuple[str, ...]
    results: tuple[WorkResult, ...]
    error: Optional[BaseException]
    graph: bool


class WorkQueue:
    """Owned by the dispatcher thread (not thread-safe), except the counts, which any thread may read."""

    def __init__(
        self,
        pool: WorkerPool,
        on_done: Callable[[BatchDone], None],
        on_crashed: Callable[[str, Queued], None],
    ) -> None:
        self._pool = pool
        self._on_done = on_done  # called from the executor's thread: must only hand the message over
        self._on_crashed = on_crashed
        self._fresh: collections.deque[str] = collections.deque()
        self._backlog: collections.deque[str] = collections.deque()
        self._graph_queue: collections.deque[str] = collections.deque()
        self.queued: dict[str, Queued] = {}
        self.in_flight: dict[str, Queued] = {}
        self._batches: dict[concurrent.futures.Future, float] = {}
        self._graph_in_flight = False
        self._crashes: collections.Counter[str] = collections.Counter()
        self._isolate: set[str] = set()
        # the bytes of the dump files (not graphs) in `queued` and `in_flight`, kept as they come and go: summing
        # them at every submit would cost a pass over a directory's whole listing per batch
        self._waiting_dump_bytes = 0
        self.max_batches = max(2, 2 * max(pool.workers, 1))

    @property
    def batches(self) -> int:
        return len(self._batches)

    def oldest_batch_s(self) -> float:
        started = list(self._batches.values())
        return time.monotonic() - min(started) if started else 0.0

    def _count(self, item: Optional[Queued], sign: int) -> None:
        if item is not None and item.kind is not FileKind.GRAPH:
            self._waiting_dump_bytes += sign * item.size

    def add(self, path: str, item: Queued) -> None:
        self._count(self.queued.get(path), -1)
        self.queued[path] = item
        self._count(item, +1)
        if item.kind is FileKind.GRAPH:
            self._graph_queue.append(path)
        else:
            (self._backlog if item.origin is Origin.SCAN else self._fresh).append(path)

    def hurry(self, path: str, origin: Origin) -> None:
        """A file found by a scan, announced by an event too: it jumps the backlog (its backlog entry is skipped)."""
        item = self.queued[path]
        if item.origin is Origin.SCAN and origin in (Origin.CLOSED, Origin.ATTRIB):
            item.origin = origin
            if item.kind is not FileKind.GRAPH:
                self._fresh.append(path)

    def take(self, path: str) -> Optional[Queued]:
        """The file's result is in: it is no longer in flight."""
        self._isolate.discard(path)
        self._crashes.pop(path, None)
        item = self.in_flight.pop(path, None)
        self._count(item, -1)
        return item

    # -- submitting

    def submit(self) -> None:
        if not self._pool.started and self._backlog_s() > START_WORKERS_AFTER_S:
            self._pool.start()
        if self._graph_queue and not self._graph_in_flight:
            path = self._graph_queue.popleft()
            item = self.queued.pop(path, None)
            if item is not None:
                self._submit_graph(path, item)
        limit = self.max_batches if self._pool.up else THREAD_BATCHES
        while len(self._batches) < limit and (self._fresh or self._backlog):
            batch: list[str] = []
            size = 0
            while (self._fresh or self._backlog) and len(batch) < BATCH_FILES and size < BATCH_BYTES:
                path = (self._fresh or self._backlog).popleft()
                item = self.queued.pop(path, None)
                if item is None:
                    continue  # taken already through the other queue
                self.in_flight[path] = item
                batch.append(path)
                size += item.size
                if path in self._isolate:
                    break
            if batch:
                self._submit_files(tuple(batch))

    def _backlog_s(self) -> float:
        """How long the daemon's own thread would summarize the dump files waiting (queued or in flight). Graph
        texts are not the workers' (WorkerPool)."""
        return self._waiting_dump_bytes / SUMMARIZED_BYTES_PER_S

    def _submit_files(self, paths: tuple[str, ...]) -> None:
        try:
            future = self._pool.submit_files(paths, tuple(self.in_flight[p].spec.root for p in paths))
        except (RuntimeError, concurrent.futures.BrokenExecutor) as exc:
            self._pool_broken(paths, exc)
            return
        self._track(future, paths, graph=False)

    def _submit_graph(self, path: str, item: Queued) -> None:
        self.in_flight[path] = item
        self._graph_in_flight = True
        try:
            future = self._pool.submit_graph(path, item.spec.root, item.size)
        except (RuntimeError, concurrent.futures.BrokenExecutor) as exc:
            self._graph_in_flight = False
            self._pool_broken((path,), exc)
            return
        self._track(future, (path,), graph=True)

    def _track(self, future: concurrent.futures.Future, paths: tuple[str, ...], graph: bool) -> None:
        self._batches[future] = time.monotonic()

        def done(f: concurrent.futures.Future) -> None:
            error = f.exception()
            self._on_done(BatchDone(f, paths, () if error else f.result(), error, graph))

        future.add_done_callback(done)

    # -- results

    def batch_done(self, message: BatchDone) -> tuple[WorkResult, ...]:
        """The batch's results, in order (none when its worker died: its files are queued again)."""
        self._batches.pop(message.future, None)
        if message.graph:
            self._graph_in_flight = False
        if message.error is not None:
            self._pool_broken(message.paths, message.error)
            return ()
        return message.results

    def _pool_broken(self, paths: tuple[str, ...], error: BaseException) -> None:
        """A worker died (killed, out of memory, a crash in native code)."""
        log.error("a worker process died while examining %d file(s): %s", len(paths), error)
        self._pool.restart()
        for path in paths:
            item = self.in_flight.pop(path, None)
            if item is None:
                continue
            self._crashes[path] += 1
            if self._crashes[path] >= WORKER_CRASH_LIMIT:
                self._crashes.pop(path)
                self._isolate.discard(path)
                self._count(item, -1)
                self._on_crashed(path, item)
                continue
            self._isolate.add(path)
            self.queued[path] = item
            (self._graph_queue if item.kind is FileKind.GRAPH else self._fresh).appendleft(path)
