"""How far a compare has come, inside its units too. Each unit (one token of one graph) reports the share of its
pairs compared so far: from the main process directly, from the workers through a queue. Counting whole units
only, a compare of one token (the usual one-step dump) would show nothing until it ends."""

from __future__ import annotations

import queue
import time
from typing import Callable, Optional

# How often a unit reports at most: a bar needs no more, and a queue put costs a few µs.
REPORT_INTERVAL_S = 0.2

ProgressCallback = Callable[[float, int], None]  # (units done, with the shares of those under way; units)
UnitReport = Callable[[float], None]  # the share of a unit's pairs compared so far

_worker_queue = None  # in a worker: its pool's progress queue (`init_worker`)


def init_worker(progress_queue) -> None:
    """The pool's initializer: where this worker's units report to. A report still in the queue when the worker
    ends may be dropped (the unit's result says it is done), so ending never waits for the main process to read."""
    global _worker_queue
    progress_queue.cancel_join_thread()
    _worker_queue = progress_queue


def worker_report(unit: int) -> Optional[UnitReport]:
    """How unit number `unit`, compared in this worker, reports; None outside a pool with a queue."""
    channel = _worker_queue
    if channel is None:
        return None
    return _throttled(lambda share: channel.put((unit, share)))


def _throttled(report: UnitReport) -> UnitReport:
    last = -REPORT_INTERVAL_S

    def throttled(share: float) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last >= REPORT_INTERVAL_S:
            last = now
            report(share)

    return throttled


class ProgressTracker:
    """The main process's view: every unit's share done, passed on to `callback` whenever it grows."""

    def __init__(self, units: int, callback: Optional[ProgressCallback], worker_queue=None) -> None:
        self.units, self.callback, self.queue = units, callback, worker_queue
        self.shares: dict[int, float] = {}

    def report_for(self, unit: int) -> UnitReport:
        """How a unit compared in this process reports (taking in the workers' reports as it goes)."""
        return _throttled(lambda share: self._update(((unit, share),)))

    def finished(self, unit: int) -> None:
        self._update(((unit, 1.0),))

    def poll(self) -> None:
        """Take in what the workers have reported (always, callback or not: the queue must not fill up)."""
        self._update(())

    def _update(self, reports) -> None:
        changed = False
        for unit, share in (*reports, *self._received()):
            if share > self.shares.get(unit, 0.0):  # a late report never moves a finished unit back
                self.shares[unit] = share
                changed = True
        if changed and self.callback is not None:
            self.callback(sum(self.shares.values()), self.units)

    def _received(self) -> list[tuple[int, float]]:
        received = []
        while self.queue is not None:
            try:
                received.append(self.queue.get_nowait())
            except queue.Empty:
                break
        return received
