"""`tcmp compare --mode torchair`: collect both dumps, plan a unit per token of each graph and rank, run the units
(executor.py: on the local pool here, on Ray with `--cluster`), and stream their rows into the reports
(accumulate.py), finding where accuracy is first lost."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from tcmp.compare.collect.inputs import CompareInputs, collect
from tcmp.compare.execute.accumulate import ResultStream
from tcmp.compare.execute.executor import UnitExecutor, UnitJob
from tcmp.compare.execute.local_pool import LocalPool, Workers, compare_workers
from tcmp.compare.execute.progress import ProgressCallback, ProgressTracker
from tcmp.compare.execute.units import Unit, out_of_scope, plan_bindings
from tcmp.compare.judge.metrics import Mode, fused_loop_built
from tcmp.compare.records import Role, Unmatched
from tcmp.compare.report.outcome import (
    CompareOptions,
    CompareResult,
    DataMode,
    UnmatchedBatch,
)
from tcmp.compare.report.writers import DEFAULT_FORMATS, ReportFile
from tcmp.schemas.dump_tree import RAW_TENSOR_KINDS, DumpDir


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


def summary_only_dirs(inputs: CompareInputs) -> tuple[int, int]:
    """(directories holding summaries only, directories) over the compared directories of `inputs`."""
    dirs = [d for b in inputs.bindings for d in (*b.target_dirs, *b.golden_dirs)]
    return sum(1 for d in dirs if d.indexed or not d.kinds <= RAW_TENSOR_KINDS), len(dirs)


def compiled_loop_note(mode: Mode) -> tuple[str, ...]:
    if mode is Mode.TENSOR and not fused_loop_built():
        return (
            "compiled pair loop tcmp.summaries.compiled not built (no C compiler at install): numpy metrics, slower",
        )
    return ()


def run_compare(
    options: CompareOptions,
    output_dir: Optional[Path] = None,
    *,
    formats: Sequence[type[ReportFile]] = DEFAULT_FORMATS,
    progress: Optional[ProgressCallback] = None,
    keep_rows: bool = False,
    workers: Optional[Workers] = None,
) -> tuple[CompareResult, CompareInputs]:
    """Run a compare and, with `output_dir`, stream its report files there (`formats`, see tcmp.compare.report.writers).
    With `options.jobs` > 1, on `workers` (`compare_workers`) or on workers of its own.
    `progress(done, units)` is told how many units (tokens of a graph) are done, counting the share of its pairs
    each unit under way has compared.

    Raises CompareError (one line) when it cannot run at all; report files appear only when it completes.
    `keep_rows` keeps every row and unmatched item in the result (for tests and library users; the CLI streams).
    """
    if workers is not None or options.jobs < 2:
        return _run(options, output_dir, formats, progress, keep_rows, workers)
    with compare_workers(options.jobs) as started:
        return _run(options, output_dir, formats, progress, keep_rows, started)


def _run(
    options: CompareOptions,
    output_dir: Optional[Path],
    formats: Sequence[type[ReportFile]],
    progress: Optional[ProgressCallback],
    keep_rows: bool,
    workers: Optional[Workers],
) -> tuple[CompareResult, CompareInputs]:
    inputs = collect_inputs(options)
    mode, reason = resolve_mode(options.mode, *summary_only_dirs(inputs))
    units, orphans_after = plan_bindings(inputs.bindings, inputs)
    stream = ResultStream(inputs.ranks, output_dir, mode, formats, keep_rows, inputs.bindings)
    try:
        add_directory_items(stream, directory_items(inputs), keep_rows)
        tracker = ProgressTracker(len(units), progress, workers.progress if workers is not None else None)
        executor: UnitExecutor[Unit] = LocalPool(workers, options.jobs)
        for number, result in executor.run(units, UnitJob(mode, options.thresholds, keep_rows), tracker):
            unit = units[number]
            stream.add_unit(unit.rank, result)
            stream.add_unmatched(unit.rank, orphans_batch(orphans_after.get(number, ()), inputs, keep_rows))
            del result  # written out: not kept alive while the next unit is compared
        notes = inputs.notes + compiled_loop_note(mode)
        ranks = stream.rank_results()
        result = CompareResult(options, inputs.golden_kind, mode, reason, ranks, notes, inputs.golden_fused)
        result = stream.finish(result)
    except BaseException:
        stream.abort()
        raise
    return result, inputs


def collect_inputs(options: CompareOptions) -> CompareInputs:
    """Both dumps as `options` select them (collect.py), wherever the compare runs."""
    return collect(
        options.target, options.golden, rank=options.rank, target_run=options.target_run,
        golden_run=options.golden_run, fx_token_base=options.fx_token_base, db=options.db, graph=options.graph,
    )  # fmt: skip


def directory_items(inputs: CompareInputs) -> tuple[Unmatched, ...]:
    """What `inputs` list before any unit: unusable directories and files, and the directories no unit compares
    (of those, the golden files as out of scope)."""
    items = list(inputs.unmatched)
    for role, d in inputs.unbound:
        source = inputs.target if role is Role.TARGET else inputs.golden
        items += out_of_scope(role, d, source, "golden file of a rank, run or graph that is not compared")
    return tuple(items)


def add_directory_items(stream: ResultStream, items: Sequence[Unmatched], keep_rows: bool) -> None:
    """`directory_items`, each into its rank's report (of a rank not compared: the first rank's)."""
    for u in items:
        stream.add_unmatched(u.rank, UnmatchedBatch.of([u], keep_rows))


def orphans_batch(orphans: Sequence[DumpDir], inputs: CompareInputs, keep_rows: bool) -> UnmatchedBatch:
    """A binding's golden directories of tokens the target lacks, listed as out of scope."""
    items = [
        item
        for d in orphans
        for item in out_of_scope(Role.GOLDEN, d, inputs.golden, f"token {d.token} missing in the target dump")
    ]
    return UnmatchedBatch.of(items, keep_rows)
