"""The one driver of a compare, local or on a cluster: a planned compare's units run on a `UnitExecutor`, their
rows streamed into the report files as they come (accumulate.py), a rank the executor could not finish left
without any. Where the dumps were collected and the units planned (here: run.py; by the nodes: cluster/) is the
caller's business."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, TypeVar

from tcmp.compare.collect.binding import Binding, GoldenKind
from tcmp.compare.execute.accumulate import ResultStream
from tcmp.compare.execute.executor import NotCompared, RankedUnit, UnitExecutor, UnitJob
from tcmp.compare.execute.progress import ProgressCallback, ProgressTracker
from tcmp.compare.judge.metrics import Mode, fused_loop_built
from tcmp.compare.records import Unmatched
from tcmp.compare.report.outcome import CompareOptions, CompareResult, DataMode, UnmatchedBatch
from tcmp.compare.report.writers import ReportFile
from tcmp.schemas.dump_records import Side


@dataclass(frozen=True)
class PlannedCompare:
    """What the driver needs of a compare besides its units, wherever its dumps were collected."""

    ranks: tuple[Optional[int], ...]  # that get reports, in report order
    golden_kind: GoldenKind
    golden_fused: bool
    notes: tuple[str, ...]
    directory_items: tuple[Unmatched, ...]  # listed before any unit (`run.directory_items`)
    bindings: tuple[Binding, ...]  # whose graphs the HTML pages draw
    summary_only_dirs: int  # of `dirs` compared directories, those holding summaries only (data mode `auto`)
    dirs: int


@dataclass(frozen=True)
class Driven:
    """A compare the driver ran: its result (of the ranks finished), the ranks not finished, and the time stamp
    in its report files' names (None without an output directory)."""

    result: CompareResult
    unfinished: tuple[NotCompared, ...]
    report_stamp: Optional[str]


def resolve_mode(mode: DataMode, summary_only: int, dirs: int) -> tuple[Mode, str]:
    """`auto` is decided from the directories: tensor mode when every compared file holds raw tensors
    (`summary_only` of the `dirs` compared directories hold summaries only)."""
    if mode is not DataMode.AUTO:
        return Mode(mode.value), f"--data-mode {mode.value}"
    if summary_only == 0:
        return Mode.TENSOR, "auto: every compared file holds raw tensors"
    return Mode.STATISTICS, (
        f"auto: {summary_only} of {dirs} dump directories hold files with summaries only (stats CSV, min/max "
        "files or the tcmp index)"
    )


def compiled_loop_note(mode: Mode) -> tuple[str, ...]:
    if mode is Mode.TENSOR and not fused_loop_built():
        return (
            "compiled pair loop tcmp.summaries.compiled not built (no C compiler at install): numpy metrics, slower",
        )
    return ()


def add_directory_items(stream: ResultStream, items: Sequence[Unmatched], keep_rows: bool) -> None:
    """Directory items, each into its rank's report (of a rank not compared: the first rank's)."""
    for u in items:
        stream.add_unmatched(u.rank, UnmatchedBatch.of([u], keep_rows))


U = TypeVar("U", bound=RankedUnit)


def drive(
    planned: PlannedCompare,
    units: Sequence[U],
    executor: UnitExecutor[U],
    options: CompareOptions,
    output_dir: Optional[Path],
    *,
    formats: Sequence[type[ReportFile]],
    progress: Optional[ProgressCallback],
    keep_rows: bool,
) -> Driven:
    """Run `units` on `executor` and stream their rows into the reports (with `output_dir`: files there, renamed
    into place only when the compare completes; removed when it raises)."""
    mode, reason = resolve_mode(options.mode, planned.summary_only_dirs, planned.dirs)
    stream = ResultStream(planned.ranks, output_dir, mode, formats, keep_rows, planned.bindings)
    try:
        add_directory_items(stream, planned.directory_items, keep_rows)
        tracker = ProgressTracker(len(units), progress, executor.progress_queue)
        for number, done in executor.run(units, UnitJob(mode, options.thresholds, keep_rows), tracker):
            rank = units[number].rank
            stream.add_unit(rank, done.result)
            stream.add_unmatched(rank, done.after)
            del done  # written out: not kept alive while the next unit is compared
        unfinished = executor.unfinished
        for lost in unfinished:
            stream.discard(lost.rank)
        notes = planned.notes + compiled_loop_note(mode)
        aclgraph = any(d.side is Side.ACL for b in planned.bindings for d in b.target_dirs)
        result = CompareResult(options, planned.golden_kind, mode, reason, stream.rank_results(), notes,
                               planned.golden_fused, aclgraph)  # fmt: skip
        result = stream.finish(result)
    except BaseException:
        stream.abort()
        raise
    return Driven(result, unfinished, stream.reports.stamp if stream.reports is not None else None)
