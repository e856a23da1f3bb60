"""Where a compare's results go, wherever its units ran: per rank, the counts, worst rows and first divergences
kept while the rows stream past into that rank's report files (report.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Optional

from tcmp.compare.collect.binding import Binding
from tcmp.compare.execute.units import UnitResult
from tcmp.compare.judge.metrics import Mode
from tcmp.compare.judge.ranking import worst as worst_rows
from tcmp.compare.judge.rows import Row
from tcmp.compare.records import Unmatched
from tcmp.compare.report.outcome import UNREADABLE_KEPT, CompareResult, Counts, Divergence, RankResult, UnmatchedBatch
from tcmp.compare.report.writers import ReportFile, ReportSet
from tcmp.schemas.dump_tree import in_rank_directory


class RankAccumulator:
    """What is kept of a rank while its rows stream past: counts, the worst rows, divergences."""

    def __init__(self, rank: Optional[int], writer, keep_rows: bool) -> None:
        self.rank, self.writer, self.keep_rows = rank, writer, keep_rows
        self.counts = Counts()
        self.worst: list[Row] = []
        self.divergences: dict[int, Divergence] = {}
        self.target_ops = self.ops_in_rows = 0
        self.rows: list[Row] = []
        self.unmatched: list[Unmatched] = []
        self.unreadable: list[Unmatched] = []

    def add_unmatched(self, batch: UnmatchedBatch) -> None:
        self.counts = self.counts.plus(batch.counts)
        if self.writer is not None:
            self.writer.add_unmatched(batch.csv_text)
        self.unmatched.extend(batch.items)
        self.unreadable.extend(batch.unreadable[: UNREADABLE_KEPT - len(self.unreadable)])

    def add_unit(self, result: UnitResult) -> None:
        self.counts = self.counts.plus(result.counts)
        self.worst = list(worst_rows([*self.worst, *result.worst]))
        if self.writer is not None:
            self.writer.add_rows(result.table)
        self.rows.extend(result.rows)
        self.add_unmatched(result.unmatched)
        self.target_ops += result.target_ops
        self.ops_in_rows += result.ops_in_rows
        d = result.divergence
        if d is not None and (d.token not in self.divergences or d.timestamp < self.divergences[d.token].timestamp):
            self.divergences[d.token] = d

    def result(self) -> RankResult:
        return RankResult(
            rank=self.rank,
            counts=self.counts,
            divergences=tuple(self.divergences[t] for t in sorted(self.divergences)),
            worst=tuple(self.worst),
            target_ops=self.target_ops,
            ops_in_rows=self.ops_in_rows,
            rows=tuple(self.rows),
            unmatched=tuple(self.unmatched),
            unreadable=tuple(self.unreadable),
        )


class ResultStream:
    """The accumulators of a compare's ranks and, with `output_dir`, their report files (see report.ReportSet:
    nothing is renamed into place before `finish`)."""

    def __init__(
        self,
        ranks: tuple[Optional[int], ...],
        output_dir: Optional[Path],
        mode: Mode,
        formats: Sequence[type[ReportFile]],
        keep_rows: bool,
        bindings: Sequence[Binding] = (),
    ) -> None:
        """`formats`: the report files to write (`writers.chosen_formats`); `bindings`: whose graphs the HTML pages
        draw (report.ReportSet)."""
        self.ranks, self.keep_rows = ranks, keep_rows
        # `_rank{R}` names a rank its dump names; one rank of a dump without rank directories (its device) none
        rank_in_names = (
            len(ranks) > 1 or not bindings or any(in_rank_directory(d.path) for b in bindings for d in b.target_dirs)
        )
        self.reports = ReportSet(output_dir, mode, formats, bindings, rank_in_names) if output_dir is not None else None
        self.accumulators: dict[Optional[int], RankAccumulator] = {}
        try:
            for rank in ranks:
                writer = self.reports.writer(rank) if self.reports is not None else None
                self.accumulators[rank] = RankAccumulator(rank, writer, keep_rows)
        except BaseException:
            self.abort()
            raise

    def accumulator(self, rank: Optional[int]) -> RankAccumulator:
        """The rank's; for what belongs to no rank compared, the first rank's."""
        return self.accumulators[rank if rank in self.accumulators else self.ranks[0]]

    def add_unmatched(self, rank: Optional[int], batch: UnmatchedBatch) -> None:
        self.accumulator(rank).add_unmatched(batch)

    def add_unit(self, rank: Optional[int], result: UnitResult) -> None:
        self.accumulators[rank].add_unit(result)

    def discard(self, rank: Optional[int]) -> None:
        """A rank that cannot be finished (its node lost): no result, and its files are removed."""
        self.accumulators.pop(rank, None)
        if self.reports is not None:
            self.reports.discard(rank)

    def rank_results(self) -> tuple[RankResult, ...]:
        return tuple(acc.result() for acc in self.accumulators.values())

    def finish(self, result: CompareResult) -> CompareResult:
        """The result with its report files, renamed into place."""
        if self.reports is None:
            return result
        written = self.reports.finish(result)
        return replace(result, ranks=tuple(replace(r, report=written.get(r.rank)) for r in result.ranks))

    def abort(self) -> None:
        if self.reports is not None:
            self.reports.abort()
