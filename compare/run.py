"""`tcmp compare --mode torchair`: collect both dumps, pair tensors token by token, compare the pairs (in worker
processes with `jobs` > 1), judge them, and find where accuracy is first lost."""

from __future__ import annotations

import bisect
import enum
import functools
import gc
import math
import multiprocessing
import multiprocessing.queues
import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import Optional, Union

from tcmp import one_blas_thread
from tcmp.schemas.errors import DumpError, unreadable_reason
from tcmp.schemas.fx_dump import read_npy_header
from tcmp.schemas.ge_dump import NOT_DUMPED, GeDump
from tcmp.schemas.graph import Graph
from tcmp.schemas.layout import RAW_TENSOR_KINDS, DumpDir, DumpFile, FileKind
from tcmp.schemas.records import IO

from .collect import Binding, CompareInputs, DumpSource, GoldenKind, by_token, collect
from .evaluate import TensorLoader, evaluate
from .executions import fx_calls, ge_executions
from .fusion import GraphView
from .match import match_token
from .metrics import Mode, fused_loop_built
from .prefetch import read_ahead, read_headers_ahead
from .progress import REPORT_INTERVAL_S, ProgressCallback, ProgressTracker, UnitReport, init_worker, worker_report
from .ranking import worst as worst_rows
from .records import Pair, Role, Row, Unmatched, UnmatchedKind
from .table import RenderedRows, render_rows, render_unmatched
from .verdict import Result, Thresholds, colour, magnitude_jump


class DataMode(str, enum.Enum):
    AUTO = "auto"
    TENSOR = "tensor"
    STATISTICS = "statistics"
    MD5 = "md5"


@dataclass(frozen=True)
class CompareOptions:
    target: Path
    golden: Path
    mode: DataMode = DataMode.AUTO
    rank: Optional[int] = None
    target_run: Optional[str] = None
    golden_run: Optional[str] = None
    fx_token_base: Optional[int] = None
    jobs: int = 1
    thresholds: Thresholds = field(default_factory=Thresholds)
    db: Optional[Path] = None  # `tcmp watch`'s index, when it is not inside the dump trees
    graph: Optional[Path] = None  # the graph text file(s), when they are not under the target


@dataclass(frozen=True)
class Divergence:
    """The earliest op of a token whose output fails while every compared input passes."""

    rank: Optional[int]
    token: int
    op_name: Optional[str]  # None: no op fits (see note)
    op_type: Optional[str]
    rows: tuple[Row, ...]
    note: str = ""
    timestamp: int = 0


@dataclass(frozen=True)
class Counts:
    rows: int = 0
    passed: int = 0
    failed: int = 0
    not_compared: int = 0
    unmatched_target: int = 0
    unmatched_golden: int = 0
    # the same unmatched items by kind: only `no partner` and `unreadable` ask the user to look
    unmatched_by_design: int = 0
    unmatched_out_of_scope: int = 0
    unmatched_no_partner: int = 0
    unmatched_unreadable: int = 0
    rows_from_index: int = 0
    nan_inf_one_side: int = 0  # rows with NaN/inf on one side only (where one appears, and all it spreads to)
    rows_unreadable: int = 0  # rows not compared because a file of theirs could not be read

    @property
    def rows_from_raw(self) -> int:
        return self.rows - self.rows_from_index

    def plus(self, other: Counts) -> Counts:
        return Counts(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(Counts)))

    def as_dict(self) -> dict[str, int]:
        return {
            "rows": self.rows,
            "pass": self.passed,
            "fail": self.failed,
            "not_compared": self.not_compared,
            "unmatched_target": self.unmatched_target,
            "unmatched_golden": self.unmatched_golden,
            "unmatched_by_design": self.unmatched_by_design,
            "unmatched_out_of_scope": self.unmatched_out_of_scope,
            "unmatched_no_partner": self.unmatched_no_partner,
            "unmatched_unreadable": self.unmatched_unreadable,
            "rows_from_index": self.rows_from_index,
            "rows_from_raw": self.rows_from_raw,
            "nan_inf_one_side": self.nan_inf_one_side,
            "rows_unreadable": self.rows_unreadable,
        }

    @property
    def unreadable(self) -> int:
        """Dump files that could not be read: unmatched items of kind `unreadable` and rows not compared for it."""
        return self.unmatched_unreadable + self.rows_unreadable


@dataclass(frozen=True)
class RankResult:
    """One rank's outcome. The table itself streams into the report files; `rows` and `unmatched` are kept only
    when asked for (`keep_rows`), so memory does not grow with the dump."""

    rank: Optional[int]
    counts: Counts
    divergences: tuple[Divergence, ...]
    worst: tuple[Row, ...]
    target_ops: int  # GE op executions in the target
    ops_in_rows: int  # of which appear in the table
    rows: tuple[Row, ...] = ()
    unmatched: tuple[Unmatched, ...] = ()
    report: Optional[object] = None  # report.WrittenReport when files were written

    @property
    def ops_unmatched_only(self) -> int:
        return self.target_ops - self.ops_in_rows


@dataclass(frozen=True)
class CompareResult:
    options: CompareOptions
    golden_kind: GoldenKind
    mode: Mode
    mode_reason: str
    ranks: tuple[RankResult, ...]
    notes: tuple[str, ...]
    golden_fused: bool = False  # the GE golden holds fusions of the target's ops: taken with fusion on?

    @property
    def failed(self) -> bool:
        return any(rank.counts.failed for rank in self.ranks)

    @property
    def golden_description(self) -> str:
        """What the golden dump is, as the console and the HTML report name it."""
        if self.golden_kind is GoldenKind.FX:
            return "FX dump"
        return "GE dump that looks taken with fusion on (see the note)" if self.golden_fused else "fusion-off GE dump"

    @property
    def unreadable(self) -> int:
        """Dump files (or directories) that could not be read, over all ranks: the CLI exits 1 for them."""
        return sum(rank.counts.unreadable for rank in self.ranks)


@dataclass(frozen=True)
class _Unit:
    """One token of one graph of one rank: planned and compared in one worker, so headers are read once and only
    rows travel back."""

    rank: Optional[int]
    label: str
    model: str
    graph: Optional[Graph]
    token: int
    target: DumpSource
    golden: DumpSource
    target_dirs: tuple[DumpDir, ...]
    golden_dirs: Optional[tuple[DumpDir, ...]]  # None: this token is missing in the golden
    kind: GoldenKind


@dataclass(frozen=True)
class _UnitResult:
    """What a worker sends back: the rows already rendered (CSV text travels cheaper than records), the
    counts, its few worst rows and its divergence; the full rows only when they are to be kept."""

    table: RenderedRows  # in execution order
    counts: Counts
    worst: tuple[Row, ...]
    unmatched: UnmatchedBatch  # the token's target and golden files without a partner, and unusable files
    target_ops: int
    ops_in_rows: int
    divergence: Optional[Divergence]
    rows: tuple[Row, ...] = ()


_NO_ROWS = RenderedRows("", ())


@dataclass(frozen=True)
class UnmatchedBatch:
    """Unmatched items as they travel to the report: their CSV text and counts (rendered where they are found, in
    the workers), and the items themselves only when they are to be kept."""

    csv_text: str
    counts: Counts
    items: tuple[Unmatched, ...] = ()

    @classmethod
    def of(cls, items: Sequence[Unmatched], keep: bool) -> UnmatchedBatch:
        target = sum(u.role is Role.TARGET for u in items)
        kinds = Counter(u.kind for u in items)
        counts = Counts(
            unmatched_target=target,
            unmatched_golden=len(items) - target,
            unmatched_by_design=kinds[UnmatchedKind.BY_DESIGN],
            unmatched_out_of_scope=kinds[UnmatchedKind.OUT_OF_SCOPE],
            unmatched_no_partner=kinds[UnmatchedKind.NO_PARTNER],
            unmatched_unreadable=kinds[UnmatchedKind.UNREADABLE],
        )
        return cls(render_unmatched(items), counts, tuple(items) if keep else ())


SCALAR_FILE_LIMIT = 1024  # an .npy holding a scalar, None or a short string is far smaller than this


def _small(path: Path) -> bool:
    try:
        return path.stat().st_size < SCALAR_FILE_LIMIT
    except OSError:
        return False  # gone (its raw data deleted by tcmp watch): nothing to read


def _golden_leftover_reason(
    f: DumpFile,
    fused_into: Mapping[str, str],
    partner_not_dumped: Mapping[Path, str],
    known: Mapping[Path, tuple[str, UnmatchedKind]] = MappingProxyType({}),
) -> tuple[str, UnmatchedKind]:
    partner = partner_not_dumped.get(f.path)
    if partner is not None:
        return f"its target tensor {partner} was {NOT_DUMPED}", UnmatchedKind.BY_DESIGN
    fused = fused_into.get(f"{f.op_name}-{f.op_type}") if f.io is not None else fused_into.get(f.op_name)
    if fused is not None:
        why = f"inside fused target op {fused}: GE dumps only the fused op's external inputs and outputs"
        return why, UnmatchedKind.BY_DESIGN
    if f.path in known:  # what the matcher learnt about the token (torchair's passes, copies, arguments)
        return known[f.path]
    if f.kind is FileKind.FX_NPY and f.io is IO.INPUT and _small(f.path):  # only a small file can be an argument
        try:
            header = read_npy_header(f.path)
        except DumpError as exc:
            return f"unreadable: {exc.message}", UnmatchedKind.UNREADABLE
        except OSError as exc:  # it could be opened when listed
            return unreadable_reason(exc), UnmatchedKind.UNREADABLE
        if header.dtype.kind not in "biufc":
            why = "non-tensor FX argument (None, string or object): no GE tensor to compare with"
            return why, UnmatchedKind.BY_DESIGN
        if header.shape == () and f.io is IO.INPUT:
            return "scalar FX argument without a GE input to compare with", UnmatchedKind.BY_DESIGN
    if f.io is IO.INPUT:
        why = (
            "FX input of a node: GE inputs are compared with their producers' FX outputs (the same tensor), "
            "not with this copy"
        )
        return why, UnmatchedKind.BY_DESIGN
    return "no target tensor pairs with this golden tensor (no readable GE dump names it)", UnmatchedKind.NO_PARTNER


def _units(binding: Binding, inputs: CompareInputs) -> tuple[list[_Unit], list[DumpDir]]:
    """The binding's units, one per target token, and its golden directories of tokens the target lacks."""
    target_tokens, golden_tokens = by_token(binding.target_dirs), by_token(binding.golden_dirs)
    label = binding.graph.name if binding.graph is not None else binding.model
    units = []
    for token, dirs in sorted(target_tokens.items()):
        golden = tuple(golden_tokens[token]) if token in golden_tokens else None
        units.append(_Unit(binding.rank, label, binding.model, binding.graph, token, inputs.target, inputs.golden,
                           tuple(dirs), golden, inputs.golden_kind))  # fmt: skip
    orphans = [d for token, dirs in sorted(golden_tokens.items()) if token not in target_tokens for d in dirs]
    return units, orphans


def _compare_unit(
    unit: _Unit, mode: Mode, thresholds: Thresholds, keep_rows: bool = False, report: Optional[UnitReport] = None
) -> _UnitResult:
    """Plan one token (`_plan_unit`) and compare its pairs (`report`ing the share done)."""
    plan = _plan_unit(unit, keep_rows)
    if isinstance(plan, _UnitResult):
        return plan
    return _unit_result(unit, plan, [_compare_pairs(plan.pairs, plan.headers, mode, thresholds, keep_rows, report)])


def _compare_unit_in_worker(number: int, unit: _Unit, mode: Mode, thresholds: Thresholds, keep_rows: bool):
    return _compare_unit(unit, mode, thresholds, keep_rows, worker_report(number))


@dataclass(frozen=True)
class _Plan:
    """A token ready to compare: its pairs in execution order, the GE headers read on the way, and what has no
    partner."""

    pairs: tuple[Pair, ...]
    headers: Mapping[Path, GeDump]
    unmatched: UnmatchedBatch
    target_ops: int


def _plan_unit(unit: _Unit, keep_rows: bool) -> Union[_Plan, _UnitResult]:
    """List one token's files and plan it: headers, executions, pairs, and the target and golden files without a
    partner. A token with nothing to compare (missing in the golden, no graph) is its result already."""
    view = GraphView(unit.graph) if unit.graph is not None else None
    target = unit.target.listing(unit.target_dirs)
    golden = unit.golden.listing(unit.golden_dirs) if unit.golden_dirs is not None else None
    problems = target.unusable(Role.TARGET, unit.rank)
    problems += golden.unusable(Role.GOLDEN, unit.rank) if golden is not None else ()
    stored = {**target.stored, **(golden.stored if golden is not None else {})}
    read_headers_ahead((*target.files, *(golden.files if golden is not None else ())))
    executions = ge_executions(target.files, stored)
    if golden is None or (unit.kind is GoldenKind.FX and view is None):
        if golden is None:
            why, kind = f"token {unit.token} missing in the golden dump", UnmatchedKind.OUT_OF_SCOPE
        else:
            why, kind = f"no graph file for model {unit.model}", UnmatchedKind.NO_PARTNER
        unmatched = tuple(
            Unmatched(Role.TARGET, unit.rank, unit.token, e.op_name, e.op_type, None, None, str(e.files[0].path), why,
                      kind)
            for e in executions
        )  # fmt: skip
        leftovers = _golden_leftovers(golden.files, {}) if golden is not None else []
        batch = UnmatchedBatch.of((*problems, *_graph_names(unmatched, view), *leftovers), keep_rows)
        return _UnitResult(_NO_ROWS, Counts(), (), batch, len(executions), 0, None)
    golden_executions: tuple = ()
    if unit.kind is GoldenKind.FX:
        calls = fx_calls(golden.files)
        fx_stored = {path: summary.tensors[0] for path, summary in stored.items() if summary.tensors}
        result = match_token(
            unit.rank,
            unit.token,
            unit.label,
            view,
            executions,
            golden_calls=calls,
            fx_stored=fx_stored,
            golden_files=golden.files,
        )
    else:
        golden_executions = ge_executions(golden.files, stored)
        result = match_token(unit.rank, unit.token, unit.label, view, executions, golden_ge=golden_executions)
    used = result.used_golden
    leftovers = _golden_leftovers(
        [f for f in golden.files if f.path not in used],
        result.fused_into,
        result.partner_not_dumped,
        result.golden_reasons,
    )
    target_unmatched = _graph_names(result.unmatched, view)
    return _Plan(
        pairs=tuple(result.pairs),
        headers={h.path: h for e in (*executions, *golden_executions) for h in e.headers},
        unmatched=UnmatchedBatch.of((*problems, *target_unmatched, *leftovers), keep_rows),
        target_ops=len(executions),
    )


def _graph_names(items: Sequence[Unmatched], view: Optional[GraphView]) -> list[Unmatched]:
    """Target items named by the graph, as the table names ops: a file whose header could not be read is only
    known by its file name, which spells the op name sanitized (`layers_1_MatMul_1` for `layers.1/MatMul_1`)."""
    if view is None:
        return list(items)
    named = []
    for u in items:
        op = view.op(u.op_name) if u.role is Role.TARGET else None
        named.append(replace(u, op_name=op.name) if op is not None and op.name != u.op_name else u)
    return named


@dataclass(frozen=True)
class _Compared:
    """What comparing a run of whole ops of one token gives (a token's pairs, or a part of them)."""

    table: RenderedRows
    counts: Counts
    worst: tuple[Row, ...]
    ops: int  # ops with rows
    divergence: Optional[Divergence]  # the first op here whose output fails while all its inputs pass
    failing: bool  # some op's output fails here
    rows: tuple[Row, ...] = ()


def _compare_pairs(
    pairs: Sequence[Pair],
    headers: Mapping[Path, GeDump],
    mode: Mode,
    thresholds: Thresholds,
    keep_rows: bool,
    report: Optional[UnitReport],
) -> _Compared:
    """Compare pairs (whole ops, in execution order), colour and render the rows, count them, and find their worst
    rows and first divergence."""
    loader = TensorLoader(headers)
    evaluated = []
    for pair in read_ahead(pairs):
        evaluated.append(evaluate(pair, mode, thresholds, loader))
        if report is not None:
            report(len(evaluated) / len(pairs))
    rows = _with_colours(evaluated, thresholds)
    divergence, failing = _first_divergence(rows)
    return _Compared(
        table=render_rows(rows, mode),
        counts=_count(rows),
        worst=worst_rows(rows),
        ops=len({r.pair.order for r in rows}),
        divergence=divergence,
        failing=failing,
        rows=tuple(rows) if keep_rows else (),
    )


def _compare_part_in_worker(
    number: int, part: int, weight: float, pairs: tuple[Pair, ...], headers: Mapping[Path, GeDump], mode: Mode,
    thresholds: Thresholds, keep_rows: bool,
) -> _Compared:  # fmt: skip
    return _compare_pairs(pairs, headers, mode, thresholds, keep_rows, worker_report(number, part, weight))


def _unit_result(unit: _Unit, plan: _Plan, parts: Sequence[_Compared]) -> _UnitResult:
    """A token's result from its plan and its pairs compared (in parts, in execution order)."""
    divergence = next((p.divergence for p in parts if p.divergence is not None), None)
    if divergence is None and any(p.failing for p in parts):
        divergence = Divergence(unit.rank, unit.token, None, None, (), _NO_DIVERGENCE, timestamp=2**63)
    return _UnitResult(
        table=RenderedRows.joined([p.table for p in parts]),
        counts=functools.reduce(Counts.plus, (p.counts for p in parts), Counts()),
        worst=worst_rows(r for p in parts for r in p.worst),
        unmatched=plan.unmatched,
        target_ops=plan.target_ops,
        ops_in_rows=sum(p.ops for p in parts),
        divergence=divergence,
        rows=tuple(r for p in parts for r in p.rows),
    )


def _split(pairs: Sequence[Pair], parts: int) -> list[tuple[Pair, ...]]:
    """A token's pairs in up to `parts` runs of about the same length, cut only between ops (an op's rows are
    coloured together); in one run if an op's pairs are not all next to each other."""
    starts = [i for i in range(1, len(pairs)) if pairs[i].order != pairs[i - 1].order]  # where an op begins
    orders = [pairs[i].order for i in (0, *starts)] if pairs else []
    if orders != sorted(set(orders)):
        return [tuple(pairs)]
    cuts = [0]
    for k in range(1, parts):
        ideal = k * len(pairs) / parts
        at = bisect.bisect_left(starts, ideal)
        nearest = min(starts[max(0, at - 1) : at + 1], key=lambda s: abs(s - ideal), default=None)
        if nearest is not None and nearest > cuts[-1]:
            cuts.append(nearest)
    bounds = [*cuts, len(pairs)]
    return [tuple(pairs[a:b]) for a, b in zip(bounds, bounds[1:]) if b > a]


# The share of a token's time spent planning it (listing, headers, matching): serial when the token is split over
# the processes. bench_compare --tokens 1 --jobs 1: 1.5 s of 4.3 s.
PLAN_SHARE = 0.35


def _split_tokens(units: int, processes: int) -> bool:
    """Whether splitting each token over the processes ends sooner than a token per process: `units` tokens one
    after another, each planned in one process and compared in `processes` parts, against ceil(units / processes)
    rounds of whole tokens. True for one token on 2 or more processes, 2 tokens on 8; false for 3 tokens on 8."""
    if processes < 2:
        return False
    return units * (PLAN_SHARE + (1 - PLAN_SHARE) / processes) < math.ceil(units / processes)


def _compare_split(
    number: int, unit: _Unit, mode: Mode, options: CompareOptions, keep_rows: bool, workers: Workers,
    tracker: ProgressTracker,
) -> _UnitResult:  # fmt: skip
    """One token over every process, for compares with fewer tokens than processes: planned here, its pairs
    compared in parts of whole ops, the first here and the others in the workers."""
    plan = _plan_unit(unit, keep_rows)
    if isinstance(plan, _UnitResult):
        return plan
    if not plan.pairs:
        return _unit_result(unit, plan, [])
    parts = _split(plan.pairs, max(1, options.jobs))
    weights = [len(part) / len(plan.pairs) for part in parts]
    futures = []
    for k, part in enumerate(parts[1:], start=1):
        headers = _headers_of(part, plan.headers)
        args = (number, k, weights[k], part, headers, mode, options.thresholds, keep_rows)
        futures.append(workers.pool.submit(_compare_part_in_worker, *args))
    report = tracker.report_for(number, 0, weights[0])
    mine = _compare_pairs(parts[0], plan.headers, mode, options.thresholds, keep_rows, report)
    return _unit_result(unit, plan, [mine, *(_result(f, tracker) for f in futures)])


def _headers_of(pairs: Sequence[Pair], headers: Mapping[Path, GeDump]) -> dict[Path, GeDump]:
    """The GE headers a part of a token's pairs reads (sent along so its worker need not read them again)."""
    paths = {f.path for p in pairs for ref in (p.npu, p.bench) for f in ref.files}
    return {path: header for path, header in headers.items() if path in paths}


def _count(rows: Sequence[Row]) -> Counts:
    results = [r.result for r in rows]
    return Counts(
        rows=len(rows),
        passed=results.count(Result.PASS),
        failed=results.count(Result.FAIL),
        not_compared=results.count(Result.NA),
        rows_from_index=sum(r.from_index for r in rows),
        nan_inf_one_side=sum(r.nan_inf_one_side for r in rows),
        rows_unreadable=sum(r.unreadable for r in rows),
    )


def _resolve_mode(mode: DataMode, inputs: CompareInputs) -> tuple[Mode, str]:
    """`auto` is decided from the directories: tensor mode when every compared file holds raw tensors."""
    if mode is not DataMode.AUTO:
        return Mode(mode.value), f"--data-mode {mode.value}"
    dirs = [d for b in inputs.bindings for d in (*b.target_dirs, *b.golden_dirs)]
    summary_only = sum(1 for d in dirs if d.indexed or not d.kinds <= RAW_TENSOR_KINDS)
    if summary_only == 0:
        return Mode.TENSOR, "auto: every compared file holds raw tensors"
    return Mode.STATISTICS, (
        f"auto: {summary_only} of {len(dirs)} dump directories hold files with summaries only (stats CSV, min/max "
        "files or the tcmp index)"
    )


@dataclass(frozen=True)
class Workers:
    """A compare's helper processes, and the queue their units report their progress on."""

    pool: ProcessPoolExecutor
    progress: multiprocessing.queues.Queue  # of (unit number, part, share of the unit's pairs it compared)


def _start_workers(jobs: int) -> Optional[Workers]:
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
            max_workers=jobs - 1, mp_context=context, initializer=init_worker, initargs=(progress,)
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


@contextmanager
def compare_workers(jobs: int) -> Iterator[Optional[Workers]]:
    """The worker processes of a compare with `jobs` jobs (None for one), for `run_compare(workers=...)`; enter it
    before starting any thread."""
    workers = _start_workers(jobs)
    try:
        yield workers
    finally:
        if workers is not None:
            workers.pool.shutdown(wait=True, cancel_futures=True)


def _run_units(
    units: Sequence[_Unit],
    mode: Mode,
    options: CompareOptions,
    keep_rows: bool,
    workers: Optional[Workers],
    tracker: ProgressTracker,
) -> Iterator[_UnitResult]:
    """Unit results in unit order. With workers, each keeps one unit in hand and the main process takes the next
    unit nobody has; results wait (a few units at most) until those before them are out. With far fewer units than
    processes, each unit in turn is split over all of them (`_compare_split`)."""
    if workers is None or _split_tokens(len(units), options.jobs):
        for number, unit in enumerate(units):
            if workers is None:
                result = _compare_unit(unit, mode, options.thresholds, keep_rows, tracker.report_for(number))
            else:  # few tokens: each over all the processes
                result = _compare_split(number, unit, mode, options, keep_rows, workers, tracker)
            tracker.finished(number)
            yield result
        return
    pool, helpers = workers.pool, max(1, options.jobs - 1)
    futures: dict[int, Future] = {}
    done: dict[int, _UnitResult] = {}
    taken = 0  # units handed out, to a worker or to the main process
    for emit in range(len(units)):
        while emit not in done:
            while sum(not f.done() for f in futures.values()) < helpers and taken < len(units):
                futures[taken] = pool.submit(
                    _compare_unit_in_worker, taken, units[taken], mode, options.thresholds, keep_rows
                )
                taken += 1
            if emit in futures and (futures[emit].done() or taken == len(units) or taken - emit > helpers):
                done[emit] = _result(futures.pop(emit), tracker)
                tracker.finished(emit)
            else:  # every worker busy: the main process compares the next unit itself
                report = tracker.report_for(taken)
                done[taken] = _compare_unit(units[taken], mode, options.thresholds, keep_rows, report)
                tracker.finished(taken)
                taken += 1
        yield done.pop(emit)


def _result(future: Future, tracker: ProgressTracker):
    """A worker's result (a unit's, or a part's of a split unit), taking in the workers' progress reports while it
    is awaited."""
    while True:
        try:
            return future.result(timeout=REPORT_INTERVAL_S)
        except FutureTimeout:
            tracker.poll()


def _op_key(row: Row) -> tuple:
    p = row.pair
    return (p.rank, p.token, p.graph, p.order)


def _with_colours(rows: Sequence[Row], thresholds: Thresholds) -> list[Row]:
    by_op: dict[tuple, list[Row]] = defaultdict(list)
    for row in rows:
        by_op[_op_key(row)].append(row)
    coloured = []
    for row in rows:
        jump = False
        if row.pair.io.value == "output" and row.result is Result.PASS:
            inputs = [r.error_cell for r in by_op[_op_key(row)] if r.pair.io.value == "input"]
            jump = magnitude_jump(row.error_cell, inputs, thresholds.magnitude_factor)
        coloured.append(replace(row, colour=colour(row.result, row.accuracy_reached, row.nan_inf_one_side, jump)))
    return coloured


_NO_DIVERGENCE = (
    "every failing op also has a failing input: the error starts in an op that is not compared (see the unmatched list)"
)


def _first_divergence(rows: Sequence[Row]) -> tuple[Optional[Divergence], bool]:
    """Within a run of one token's ops: the first op, in execution order, with a failing output and passing
    inputs; and whether any op's output fails."""
    ops: dict[int, list[Row]] = defaultdict(list)
    for row in rows:
        ops[row.pair.order].append(row)
    failing = False
    for order in sorted(ops):
        op_rows = ops[order]
        outputs = [r for r in op_rows if r.pair.io is IO.OUTPUT and r.result is not Result.NA]
        inputs = [r for r in op_rows if r.pair.io is IO.INPUT and r.result is not Result.NA]
        if any(r.result is Result.FAIL for r in outputs):
            failing = True
            if all(r.result is Result.PASS for r in inputs):
                first = op_rows[0].pair
                return Divergence(first.rank, first.token, first.op_name, first.op_type, tuple(op_rows),
                                  timestamp=first.timestamp), True  # fmt: skip
    return None, failing


class _RankAccumulator:
    """What is kept of a rank while its rows stream past: counts, the worst rows, divergences."""

    def __init__(self, rank: Optional[int], writer, keep_rows: bool) -> None:
        self.rank, self.writer, self.keep_rows = rank, writer, keep_rows
        self.counts = Counts()
        self.worst: list[Row] = []
        self.divergences: dict[int, Divergence] = {}
        self.target_ops = self.ops_in_rows = 0
        self.rows: list[Row] = []
        self.unmatched: list[Unmatched] = []

    def add_unmatched(self, batch: UnmatchedBatch) -> None:
        self.counts = self.counts.plus(batch.counts)
        if self.writer is not None:
            self.writer.add_unmatched(batch.csv_text)
        self.unmatched.extend(batch.items)

    def add_unit(self, result: _UnitResult) -> None:
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
        )


def run_compare(
    options: CompareOptions,
    output_dir: Optional[Path] = None,
    *,
    highlight: bool = False,
    progress: Optional[ProgressCallback] = None,
    keep_rows: bool = False,
    workers: Optional[Workers] = None,
    html: bool = True,
) -> tuple[CompareResult, CompareInputs]:
    """Run a compare and, with `output_dir`, stream its report files there (see tcmp.compare.report; `html`: the
    HTML page too). With `options.jobs` > 1, on `workers` (`compare_workers`) or on workers of its own.
    `progress(done, units)` is told how many units (tokens of a graph) are done, counting the share of its pairs
    each unit under way has compared.

    Raises CompareError (one line) when it cannot run at all; report files appear only when it completes.
    `keep_rows` keeps every row and unmatched item in the result (for tests and library users; the CLI streams).
    """
    if workers is not None or options.jobs < 2:
        return _run(options, output_dir, highlight, progress, keep_rows, workers, html)
    with compare_workers(options.jobs) as started:
        return _run(options, output_dir, highlight, progress, keep_rows, started, html)


def _run(
    options: CompareOptions,
    output_dir: Optional[Path],
    highlight: bool,
    progress: Optional[ProgressCallback],
    keep_rows: bool,
    workers: Optional[Workers],
    html: bool = True,
) -> tuple[CompareResult, CompareInputs]:
    from .report import ReportSet  # report builds on this module's records

    inputs = collect(
        options.target, options.golden, rank=options.rank, target_run=options.target_run,
        golden_run=options.golden_run, fx_token_base=options.fx_token_base, db=options.db, graph=options.graph,
    )  # fmt: skip
    mode, reason = _resolve_mode(options.mode, inputs)
    planned = [_units(binding, inputs) for binding in inputs.bindings]
    units = [unit for binding_units, _ in planned for unit in binding_units]
    reports = ReportSet(output_dir, mode, highlight, html, inputs.bindings) if output_dir is not None else None
    try:
        accumulators = {
            rank: _RankAccumulator(rank, reports.writer(rank) if reports else None, keep_rows) for rank in inputs.ranks
        }

        def accumulator(rank: Optional[int]) -> _RankAccumulator:  # of no rank compared: the first rank's list
            return accumulators[rank if rank in accumulators else inputs.ranks[0]]

        for u in inputs.unmatched:
            accumulator(u.rank).add_unmatched(UnmatchedBatch.of([u], keep_rows))
        for role, d in inputs.unbound:
            source = inputs.target if role is Role.TARGET else inputs.golden
            why = "golden file of a rank, run or graph that is not compared"
            accumulator(d.rank).add_unmatched(UnmatchedBatch.of(_out_of_scope(role, d, source, why), keep_rows))
        # a binding's golden tokens missing in the target are listed after its last unit
        last_unit = {id(binding_units[-1]): orphans for binding_units, orphans in planned if binding_units}
        tracker = ProgressTracker(len(units), progress, workers.progress if workers is not None else None)
        for unit, result in zip(units, _run_units(units, mode, options, keep_rows, workers, tracker)):
            accumulators[unit.rank].add_unit(result)
            for d in last_unit.get(id(unit), ()):
                why = f"token {d.token} missing in the target dump"
                orphans = _out_of_scope(Role.GOLDEN, d, inputs.golden, why)
                accumulators[unit.rank].add_unmatched(UnmatchedBatch.of(orphans, keep_rows))
            del result  # written out: not kept alive while the next unit is compared
        ranks = tuple(acc.result() for acc in accumulators.values())
        notes = inputs.notes
        if mode is Mode.TENSOR and not fused_loop_built():
            notes += (
                "compiled pair loop tcmp.compare._fused not built (no C compiler at install): numpy metrics, slower",
            )
        result = CompareResult(options, inputs.golden_kind, mode, reason, ranks, notes, inputs.golden_fused)
        if reports is not None:
            written = reports.finish(result)
            result = replace(result, ranks=tuple(replace(r, report=written.get(r.rank)) for r in ranks))
    except BaseException:
        if reports is not None:
            reports.abort()
        raise
    return result, inputs


def _golden_leftovers(
    files: Iterable[DumpFile],
    fused_into: Mapping[str, str],
    partner_not_dumped: Mapping[Path, str] = MappingProxyType({}),
    known: Mapping[Path, tuple[str, UnmatchedKind]] = MappingProxyType({}),
) -> list[Unmatched]:
    """The golden files of a compared token that no target tensor pairs with, and why."""
    return [_golden_unmatched(f, *_golden_leftover_reason(f, fused_into, partner_not_dumped, known)) for f in files]


def _golden_unmatched(f: DumpFile, why: str, kind: UnmatchedKind) -> Unmatched:
    return Unmatched(Role.GOLDEN, f.rank, f.token, f.op_name, f.op_type or "", f.io, f.index, str(f.path), why, kind)


def _out_of_scope(role: Role, d: DumpDir, source: DumpSource, why: str) -> list[Unmatched]:
    """A directory no unit compares: its golden files listed as out of scope, and either side's unusable files."""
    listing = source.listing((d,))
    items = listing.unusable(role, d.rank)
    if role is Role.GOLDEN:
        items += (_golden_unmatched(f, why, UnmatchedKind.OUT_OF_SCOPE) for f in listing.files)
    return items
