"""Where a compare's units run: one small interface. The local process pool (local_pool.py) is one side of it, Ray
(`--cluster`, cluster/) the other; the driver (driver.py) that streams the units' rows into the reports is the
same for both, and uses nothing of an executor but what `UnitExecutor` declares."""

from __future__ import annotations

import multiprocessing.queues
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Optional, Protocol, TypeVar, runtime_checkable

from tcmp.compare.execute.progress import ProgressTracker
from tcmp.compare.execute.units import UnitResult
from tcmp.compare.judge.metrics import Mode
from tcmp.compare.judge.verdict import Thresholds
from tcmp.compare.report.outcome import UnmatchedBatch


@dataclass(frozen=True)
class UnitJob:
    """How every unit of one compare is compared."""

    mode: Mode
    thresholds: Thresholds
    keep_rows: bool = False


@dataclass(frozen=True)
class UnitDone:
    """A unit's result, and the unmatched items its rank's report lists right after it (the golden tokens the
    target lacks, after a binding's last unit), made where the unit was planned."""

    result: UnitResult
    after: UnmatchedBatch


@dataclass(frozen=True)
class NotCompared:
    """A rank (None: what belongs to no rank) a compare could not do, and why (on a cluster: naming the nodes)."""

    rank: Optional[int]
    why: str


class RankedUnit(Protocol):
    """What the driver reads of a unit: the rank whose report its rows go to."""

    @property
    def rank(self) -> Optional[int]: ...


UnitT = TypeVar("UnitT", contravariant=True)


@runtime_checkable
class UnitExecutor(Protocol[UnitT]):
    """Runs units (a `units.Unit`, or what stands for one where it is planned elsewhere) and hands back their
    results: everything the driver uses of an executor."""

    @property
    def progress_queue(self) -> Optional[multiprocessing.queues.Queue]:
        """Where units compared in other processes report how far they are (`ProgressTracker`); None where they
        report nothing before they are done."""
        ...

    def run(self, units: Sequence[UnitT], job: UnitJob, tracker: ProgressTracker) -> Iterator[tuple[int, UnitDone]]:
        """(unit number, its result) of every unit once, in unit order within each rank (ranks may interleave),
        telling `tracker` how far each unit has come and when it is finished. A unit that cannot run ends the
        iteration with its exception, unless the executor says otherwise (`unfinished`)."""
        ...

    @property
    def unfinished(self) -> tuple[NotCompared, ...]:
        """After `run`: the ranks it could not finish (their units no longer handed out), in the order found; the
        driver writes no report for them."""
        ...
