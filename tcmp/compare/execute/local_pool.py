"""The local side of the execution seam: a compare's units on this machine, in the main process and `jobs` - 1
forked worker processes, a token split over all of them when there are far fewer tokens than processes."""

from __future__ import annotations

import gc
import math
import multiprocessing
import multiprocessing.queues
import os
import signal
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from tcmp.compare.execute.executor import NotCompared, UnitDone, UnitJob
from tcmp.compare.execute.pairs import Compared, compare_pairs, compare_unit, headers_of, split, unit_result
from tcmp.compare.execute.progress import REPORT_INTERVAL_S, ProgressTracker, init_worker, worker_report
from tcmp.compare.execute.units import Unit, UnitResult, plan_unit
from tcmp.compare.judge.metrics import Mode
from tcmp.compare.judge.verdict import Thresholds
from tcmp.compare.records import FileHeader, Pair
from tcmp.compare.report.outcome import UnmatchedBatch
from tcmp.schemas.host import die_with_parent, one_blas_thread


@dataclass(frozen=True)
class Workers:
    """A compare's helper processes, and the queue their units report their progress on."""

    pool: ProcessPoolExecutor
    progress: multiprocessing.queues.Queue  # of (unit number, part, share of the unit's pairs it compared)


def start_workers(jobs: int) -> Optional[Workers]:
    """The compare's helper processes: `jobs` - 1 of them, since the main process compares units too (a process
    fewer, and its units are not pickled). None for one job.

    Forked while this process still has a single thread (`compare_workers` before the CLI's progress display): they
    start at once and share the pages of the modules it has imported. Where a thread already runs, forking could
    copy a lock held by it, so they are spawned, starting to import before the dumps are collected."""
    if jobs < 2:
        return None
    import threading

    one_blas_thread()  # per process: the processes are the parallelism
    fork = threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if fork else "spawn")
    try:
        progress = context.Queue()
        pool = ProcessPoolExecutor(
            max_workers=jobs - 1, mp_context=context, initializer=_start_worker, initargs=(progress, os.getpid())
        )
    except OSError:  # no semaphores here (a sandbox without /dev/shm): the main process does everything
        return None
    if fork:
        gc.freeze()  # the workers' collector then never walks (and so never copies) the pages they inherit
    try:
        for _ in range(jobs - 1):
            pool.submit(os.getpid)  # starts the workers now instead of at the first unit
    except (OSError, RuntimeError):  # no processes here (sandbox, limits): the main process does everything
        pool.shutdown(wait=False)
        return None
    finally:
        gc.unfreeze()
    return Workers(pool, progress)


def _start_worker(progress: multiprocessing.queues.Queue, parent: int) -> None:
    """A worker ends with the compare that started it: a compare killed with -9 leaves no process behind. Ctrl-C
    (SIGINT to the terminal's whole process group) is the compare's to handle: a worker interrupted inside the
    pool's queues could leave them locked and the compare waiting on it forever; the compare stops its workers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent)
    init_worker(progress)


@contextmanager
def compare_workers(jobs: int) -> Iterator[Optional[Workers]]:
    """The worker processes of a compare with `jobs` jobs (None for one), for `run_compare(workers=...)`; enter it
    before starting any thread."""
    workers = start_workers(jobs)
    try:
        yield workers
    except BaseException:  # Ctrl-C or an error: no report follows, so nothing the workers still do is waited for
        if workers is not None:
            _stop(workers.pool)
        raise
    finally:
        if workers is not None:
            workers.pool.shutdown(wait=True, cancel_futures=True)


def _stop(pool: ProcessPoolExecutor) -> None:
    """Terminate the pool's worker processes: waiting for their units (or for the progress queue, which nobody
    reads any more, to take their last reports) could take as long as the compare itself, or forever."""
    processes = getattr(pool, "_processes", None) or {}  # concurrent.futures' own table: pid -> Process
    for process in list(processes.values()):
        process.terminate()


def compare_unit_in_worker(number: int, unit: Unit, mode: Mode, thresholds: Thresholds, keep_rows: bool):
    return compare_unit(unit, mode, thresholds, keep_rows, worker_report(number))


def _compare_part_in_worker(
    number: int, part: int, weight: float, pairs: tuple[Pair, ...], headers: Mapping[Path, FileHeader], mode: Mode,
    thresholds: Thresholds, keep_rows: bool,
) -> Compared:  # fmt: skip
    return compare_pairs(pairs, headers, mode, thresholds, keep_rows, worker_report(number, part, weight))


# The share of a token's time spent planning it (listing, headers, matching): serial when the token is split over
# the processes. bench_compare --tokens 1 --jobs 1: 1.5 s of 4.3 s.
PLAN_SHARE = 0.35


def split_tokens(units: int, processes: int) -> bool:
    """Whether splitting each token over the processes ends sooner than a token per process: `units` tokens one
    after another, each planned in one process and compared in `processes` parts, against ceil(units / processes)
    rounds of whole tokens. True for one token on 2 or more processes, 2 tokens on 8; false for 3 tokens on 8."""
    if processes < 2:
        return False
    return units * (PLAN_SHARE + (1 - PLAN_SHARE) / processes) < math.ceil(units / processes)


class LocalPool:
    """The units in this process and, given `workers`, in them too (`jobs` processes in all). `listed_after(n)`:
    the unmatched items the report lists after unit number `n` (made here, where the units were planned)."""

    def __init__(self, workers: Optional[Workers], jobs: int, listed_after: Callable[[int], UnmatchedBatch]) -> None:
        self.workers, self.jobs, self.listed_after = workers, jobs, listed_after

    @property
    def progress_queue(self) -> Optional[multiprocessing.queues.Queue]:
        return self.workers.progress if self.workers is not None else None

    @property
    def unfinished(self) -> tuple[NotCompared, ...]:
        return ()  # a unit that cannot run here ends the compare with its exception

    def run(self, units: Sequence[Unit], job: UnitJob, tracker: ProgressTracker) -> Iterator[tuple[int, UnitDone]]:
        for number, result in self._results(units, job, tracker):
            yield number, UnitDone(result, self.listed_after(number))
            del result

    def _results(
        self, units: Sequence[Unit], job: UnitJob, tracker: ProgressTracker
    ) -> Iterator[tuple[int, UnitResult]]:
        """Unit results in unit order. With workers, each keeps one unit in hand and the main process takes the
        next unit nobody has; results wait (a few units at most) until those before them are out. With far fewer
        units than processes, each unit in turn is split over all of them (`_compare_split`)."""
        workers = self.workers
        if workers is None or split_tokens(len(units), self.jobs):
            for number, unit in enumerate(units):
                if workers is None:
                    report = tracker.report_for(number)
                    result = compare_unit(unit, job.mode, job.thresholds, job.keep_rows, report)
                else:  # few tokens: each over all the processes
                    result = self._compare_split(number, unit, job, workers, tracker)
                tracker.finished(number)
                yield number, result
            return
        pool, helpers = workers.pool, max(1, self.jobs - 1)
        futures: dict[int, Future] = {}
        done: dict[int, UnitResult] = {}
        taken = 0  # units handed out, to a worker or to the main process
        for emit in range(len(units)):
            while emit not in done:
                while sum(not f.done() for f in futures.values()) < helpers and taken < len(units):
                    futures[taken] = pool.submit(
                        compare_unit_in_worker, taken, units[taken], job.mode, job.thresholds, job.keep_rows
                    )
                    taken += 1
                if emit in futures and (futures[emit].done() or taken == len(units) or taken - emit > helpers):
                    done[emit] = _result(futures.pop(emit), tracker)
                    tracker.finished(emit)
                else:  # every worker busy: the main process compares the next unit itself
                    report = tracker.report_for(taken)
                    done[taken] = compare_unit(units[taken], job.mode, job.thresholds, job.keep_rows, report)
                    tracker.finished(taken)
                    taken += 1
            yield emit, done.pop(emit)

    def _compare_split(
        self, number: int, unit: Unit, job: UnitJob, workers: Workers, tracker: ProgressTracker
    ) -> UnitResult:
        """One token over every process, for compares with fewer tokens than processes: planned here, its pairs
        compared in parts of whole ops, the first here and the others in the workers."""
        plan = plan_unit(unit, job.keep_rows)
        if isinstance(plan, UnitResult):
            return plan
        if not plan.pairs:
            return unit_result(unit, plan, [])
        parts = split(plan.pairs, max(1, self.jobs))
        weights = [len(part) / len(plan.pairs) for part in parts]
        futures = []
        for k, part in enumerate(parts[1:], start=1):
            headers = headers_of(part, plan.headers)
            args = (number, k, weights[k], part, headers, job.mode, job.thresholds, job.keep_rows)
            futures.append(workers.pool.submit(_compare_part_in_worker, *args))
        report = tracker.report_for(number, 0, weights[0])
        mine = compare_pairs(parts[0], plan.headers, job.mode, job.thresholds, job.keep_rows, report)
        return unit_result(unit, plan, [mine, *(_result(f, tracker) for f in futures)])


def _result(future: Future, tracker: ProgressTracker):
    """A worker's result (a unit's, or a part's of a split unit), taking in the workers' progress reports while it
    is awaited."""
    while True:
        try:
            return future.result(timeout=REPORT_INTERVAL_S)
        except FutureTimeout:
            tracker.poll()
