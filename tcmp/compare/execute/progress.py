"""How far a compare has come, inside its units too. Each unit (one token of one graph), or each part of a unit
that was split over the processes, reports the share of its pairs compared so far: from the main process directly,
from the workers through a queue. Counting whole units only, a compare of one token (the usual one-step dump)
would show nothing until it ends."""

from __future__ import annotations

import queue
import time
from typing import Callable, Optional

# How often a unit reports at most: a bar needs no more, and a queue put costs a few µs.
REPORT_INTERVAL_S = 0.2

ProgressCallback = Callable[[float, int], None]  # (units done, with the shares of those under way; units)
UnitReport = Callable[[float], None]  # the share of a unit's (or a part's) pairs compared so far

_worker_queue = None  # in a worker: its pool's progress queue (`init_worker`)


def init_worker(progress_queue) -> None:
    """The pool's initializer: where this worker's units report to. A report still in the queue when the worker
    ends may be dropped (the unit's result says it is done), so ending never waits for the main process to read."""
    global _worker_queue
    progress_queue.cancel_join_thread()
    _worker_queue = progress_queue


def worker_report(unit: int, part: int = 0, weight: float = 1.0) -> Optional[UnitReport]:
    """How part `part` of unit number `unit` (`weight`: its share of the unit's pairs), compared in this worker,
    reports; None outside a pool with a queue."""
    channel = _worker_queue
    if channel is None:
        return None
    return _throttled(lambda share: channel.put((unit, part, share * weight)))


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
    """The main process's view: how much of every unit is done, passed on to `callback` whenever it grows."""

    def __init__(self, units: int, callback: Optional[ProgressCallback], worker_queue=None) -> None:
        self.units, self.callback, self.queue = units, callback, worker_queue
        self.parts: dict[int, dict[int, float]] = {}  # unit under way -> part -> share of the unit that part did
        self.finished_units: set[int] = set()

    @property
    def done(self) -> float:
        return len(self.finished_units) + sum(sum(parts.values()) for parts in self.parts.values())

    def report_for(self, unit: int, part: int = 0, weight: float = 1.0) -> UnitReport:
        """How a unit (or part of one) compared in this process reports; it takes in the workers' reports too."""
        return _throttled(lambda share: self._update(((unit, part, share * weight),)))

    def finished(self, unit: int) -> None:
        if unit not in self.finished_units:
            self.finished_units.add(unit)
            self.parts.pop(unit, None)
            self._update((), changed=True)

    def poll(self) -> None:
        """Take in what the workers have reported (always, callback or not: the queue must not fill up)."""
        self._update(())

    def _update(self, reports, changed: bool = False) -> None:
        for unit, part, share in (*reports, *self._received()):
            if unit in self.finished_units:
                continue  # a late report: the unit is done
            parts = self.parts.setdefault(unit, {})
            if share > parts.get(part, 0.0):  # nor does a late report move a part back
                parts[part] = share
                changed = True
        if changed and self.callback is not None:
            self.callback(self.done, self.units)

    def _received(self) -> list[tuple[int, int, float]]:
        received = []
        while self.queue is not None:
            try:
                received.append(self.queue.get_nowait())
            except queue.Empty:
                break
        return received
