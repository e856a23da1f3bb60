"""When the work queue starts the worker processes: once the dump files waiting would keep the daemon's own thread
summarizing for longer than START_WORKERS_AFTER_S (`watch --once`; a daemon starts them with itself). Until the workers
are up, two batches at a time go to that thread; then as many as the workers take. A pool that records what it
is asked stands in for the processes."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path

import pytest

from tcmp.daemon import work
from tcmp.daemon.index_slots import RootIndex
from tcmp.daemon.work import Origin, Queued, WorkQueue
from tcmp.schemas.dump_tree import FileKind

SPEC = RootIndex("/dumps", Path("/dumps/.tcmp/index.sqlite"))


class RecordingPool:
    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.started = False
        self.up = False
        self.starts = 0
        self.batches: list[tuple[str, ...]] = []

    def start(self) -> None:
        self.starts += 1
        self.started = True

    def submit_files(self, paths, roots=None) -> Future:
        self.batches.append(paths)
        return Future()  # never done: the test looks at what was submitted, not at results

    def submit_graph(self, path, root=None, size=0) -> Future:
        self.batches.append((path,))
        return Future()

    def restart(self) -> None:
        pass


def _queue(pool: RecordingPool, sizes: list[int], kind: FileKind = FileKind.FX_NPY) -> WorkQueue:
    queue = WorkQueue(pool, on_done=lambda done: None, on_crashed=lambda path, item: None)  # type: ignore[arg-type]
    for n, size in enumerate(sizes):
        queue.add(f"/dumps/file{n}", Queued(SPEC, Origin.SCAN, kind, size))
    return queue


def test_many_small_files_never_start_the_workers():
    """Their per-file work stays with the daemon's process whoever reads them: only their bytes count."""
    pool = RecordingPool(2)
    queue = _queue(pool, [4096] * 100_000)  # 410 MB
    queue.submit()
    assert pool.starts == 0
    assert [len(b) for b in pool.batches] == [work.BATCH_FILES] * work.THREAD_BATCHES  # the thread's two batches


def test_graph_texts_never_start_the_workers():
    pool = RecordingPool(2)
    queue = _queue(pool, [1 << 30], FileKind.GRAPH)
    queue.submit()
    assert pool.starts == 0 and pool.batches == [("/dumps/file0",)]


@pytest.mark.parametrize("sizes", [[64 << 20] * 32, [3 << 30]])  # 2.1 GB in 32 files, 3.2 GB in one
def test_more_bytes_than_the_thread_summarizes_in_the_time_starts_the_workers(sizes):
    assert sum(sizes) > work.START_WORKERS_AFTER_S * work.SUMMARIZED_BYTES_PER_S
    pool = RecordingPool(2)
    queue = _queue(pool, sizes)
    queue.submit()
    queue.submit()
    assert pool.starts == 1


def test_fewer_bytes_than_that_do_not():
    pool = RecordingPool(2)
    queue = _queue(pool, [64 << 20] * 28)  # 1.9 GB
    queue.submit()
    assert pool.starts == 0


def test_once_the_workers_are_up_they_take_as_many_batches_as_they_can():
    pool = RecordingPool(3)
    queue = _queue(pool, [100] * 1000)
    queue.submit()
    assert len(pool.batches) == work.THREAD_BATCHES
    pool.up = True
    queue.submit()
    assert len(pool.batches) == 2 * 3  # two batches per worker in flight at most


def test_files_summarized_no_longer_count_towards_the_backlog():
    """What waits is what is queued or in flight: a file whose result is in is no longer counted."""
    quarter = int(work.START_WORKERS_AFTER_S * work.SUMMARIZED_BYTES_PER_S) // 4
    pool = RecordingPool(2)
    queue = _queue(pool, [quarter] * 3)  # 3/4 of the bytes that start the workers
    queue.submit()
    assert pool.starts == 0 and len(queue.in_flight) == work.THREAD_BATCHES  # one file a batch: each is > BATCH_BYTES
    for path in list(queue.in_flight):
        assert queue.take(path) is not None  # summarized by the thread
    for n in (3, 4):
        queue.add(f"/dumps/file{n}", Queued(SPEC, Origin.SCAN, FileKind.FX_NPY, quarter))
    queue.submit()
    assert pool.starts == 0  # 3 quarters waiting (5 added, 2 done)
    queue.add("/dumps/file5", Queued(SPEC, Origin.SCAN, FileKind.FX_NPY, quarter + 1))
    queue.submit()
    assert pool.starts == 1  # just over
