"""`tcmp compare --mode torchair`: collect both dumps, plan a unit per token of each graph and rank, and run the
units on the local pool through the driver (driver.py, which `--cluster` runs on Ray), which streams their rows
into the reports, finding where accuracy is first lost."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from tcmp.compare.collect.inputs import CompareInputs, collect
from tcmp.compare.execute.driver import PlannedCompare, drive
from tcmp.compare.execute.local_pool import LocalPool, Workers, compare_workers
from tcmp.compare.execute.progress import ProgressCallback
from tcmp.compare.execute.units import out_of_scope, plan_bindings
from tcmp.compare.records import Role, Unmatched
from tcmp.compare.report.outcome import CompareOptions, CompareResult, UnmatchedBatch
from tcmp.compare.report.writers import DEFAULT_FORMATS, ReportFile
from tcmp.schemas.dump_outline import DumpDir
from tcmp.schemas.dump_tree import RAW_TENSOR_KINDS
from tcmp.schemas.host import fewer_collections


def summary_only_dirs(inputs: CompareInputs) -> tuple[int, int]:
    """(directories holding summaries only, directories) over the compared directories of `inputs`."""
    dirs = [d for b in inputs.bindings for d in (*b.target_dirs, *b.golden_dirs)]
    return sum(1 for d in dirs if d.indexed or not d.kinds <= RAW_TENSOR_KINDS), len(dirs)


def run_compare(
    options: CompareOptions,
    output_dir: Optional[Path] = None,
    *,
    formats: Sequence[type[ReportFile]] = DEFAULT_FORMATS,
    progress: Optional[ProgressCallback] = None,
    keep_rows: bool = False,
    workers: Optional[Workers] = None,
) -> tuple[CompareResult, CompareInputs]:
    """Run a compare and, with `output_dir`, stream its report files there (`formats`, see
    tcmp.compare.report.writers). With `options.jobs` > 1, on `workers` (`compare_workers`) or on workers of its own.
    `progress(done, units)` is told how many units (tokens of a graph) are done, counting the share of its pairs
    each unit under way has compared.

    Raises CompareError (one line) when it cannot run at all; report files appear only when it completes.
    `keep_rows` keeps every row and unmatched item in the result (for tests and library users; the CLI streams).
    """
    with fewer_collections():
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
    units, orphans_after = plan_bindings(inputs.bindings, inputs)
    planned = PlannedCompare(inputs.ranks, inputs.golden_kind, inputs.golden_fused, inputs.notes,
                             directory_items(inputs), inputs.bindings, *summary_only_dirs(inputs))  # fmt: skip

    def listed_after(number: int) -> UnmatchedBatch:
        return orphans_batch(orphans_after.get(number, ()), inputs, keep_rows)

    executor = LocalPool(workers, options.jobs, listed_after)
    done = drive(planned, units, executor, options, output_dir, formats=formats, progress=progress, keep_rows=keep_rows)
    return done.result, inputs


def collect_inputs(options: CompareOptions) -> CompareInputs:
    """Both dumps as `options` select them (collect.py), wherever the compare runs."""
    return collect(
        options.target, options.golden, rank=options.rank, target_run=options.target_run,
        golden_run=options.golden_run, fx_token_base=options.fx_token_base, db=options.db, graph=options.graph,
        acl_stages=(options.target_stage, options.golden_stage),
        dump_options=options.dump_options,
    )  # fmt: skip


def directory_items(inputs: CompareInputs) -> tuple[Unmatched, ...]:
    """What `inputs` list before any unit: unusable directories and files, and the directories no unit compares
    (of those, the golden files as out of scope)."""
    items = list(inputs.unmatched)
    for role, d in inputs.unbound:
        source = inputs.target if role is Role.TARGET else inputs.golden
        items += out_of_scope(role, d, source, "golden file of a rank, run or graph that is not compared")
    return tuple(items)


def orphans_batch(orphans: Sequence[DumpDir], inputs: CompareInputs, keep_rows: bool) -> UnmatchedBatch:
    """A binding's golden directories of tokens the target lacks, listed as out of scope."""
    items = [
        item
        for d in orphans
        for item in out_of_scope(Role.GOLDEN, d, inputs.golden, f"token {d.token} missing in the target dump")
    ]
    return UnmatchedBatch.of(items, keep_rows)
