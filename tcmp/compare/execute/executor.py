"""Where a compare's units run: one small interface. The local process pool (local_pool.py) is one side of it, Ray
(`--cluster`, cluster/) the other; the driver that plans the units and writes the reports is the same for both."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from tcmp.compare.execute.progress import ProgressTracker
from tcmp.compare.execute.units import UnitResult
from tcmp.compare.judge.metrics import Mode
from tcmp.compare.judge.verdict import Thresholds

UnitT = TypeVar("UnitT", contravariant=True)


@dataclass(frozen=True)
class UnitJob:
    """How every unit of one compare is compared."""

    mode: Mode
    thresholds: Thresholds
    keep_rows: bool = False


class UnitExecutor(Protocol[UnitT]):
    """Runs units (a `units.Unit`, or what stands for one where it is planned elsewhere) and hands back their
    results."""

    def run(self, units: Sequence[UnitT], job: UnitJob, tracker: ProgressTracker) -> Iterator[tuple[int, UnitResult]]:
        """(unit number, result) of every unit once, in unit order within each rank (ranks may interleave), telling
        `tracker` how far each unit has come and when it is finished. A unit that cannot run ends the iteration
        with its exception, unless the executor says otherwise."""
        ...
