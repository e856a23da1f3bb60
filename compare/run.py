"""`tcmp compare --mode torchair`: collect both dumps, pair tensors token by token, compare the pairs (in worker
processes with `jobs` > 1), judge them, and find where accuracy is first lost."""

from __future__ import annotations

import enum
import math
import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Optional

from tcmp.schemas.errors import DumpError
from tcmp.schemas.fx_dump import read_npy_header
from tcmp.schemas.graph import Graph
from tcmp.schemas.layout import DumpFile, FileKind
from tcmp.schemas.records import IO

from .collect import Binding, CompareInputs, GoldenKind, collect
from .evaluate import TensorLoader, evaluate
from .executions import fx_calls, ge_executions
from .fusion import GraphView
from .match import match_token
from .metrics import NA, Mode
from .records import RAW_KINDS, Role, Row, Unmatched
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


@dataclass(frozen=True)
class Divergence:
    """The earliest op of a token whose output fails while every compared input passes."""

    rank: Optional[int]
    token: int
    op_name: Optional[str]  # None: no op fits (see note)
    op_type: Optional[str]
    rows: tuple[Row, ...]
    note: str = ""


@dataclass(frozen=True)
class RankResult:
    rank: Optional[int]
    rows: tuple[Row, ...]
    unmatched: tuple[Unmatched, ...]
    divergences: tuple[Divergence, ...]
    worst: tuple[Row, ...]
    target_ops: int  # GE op executions in the target
    ops_in_rows: int  # of which appear in the table
    ops_unmatched_only: int  # of which appear only in the unmatched list

    @property
    def counts(self) -> dict[str, int]:
        results = [r.result for r in self.rows]
        return {
            "rows": len(self.rows),
            "pass": results.count(Result.PASS),
            "fail": results.count(Result.FAIL),
            "not_compared": results.count(Result.NA),
            "unmatched": len(self.unmatched),
            "rows_from_index": sum(r.from_index for r in self.rows),
            "rows_from_raw": sum(not r.from_index for r in self.rows),
        }


@dataclass(frozen=True)
class CompareResult:
    options: CompareOptions
    golden_kind: GoldenKind
    mode: Mode
    mode_reason: str
    ranks: tuple[RankResult, ...]
    notes: tuple[str, ...]

    @property
    def failed(self) -> bool:
        return any(r.result is Result.FAIL for rank in self.ranks for r in rank.rows)


@dataclass(frozen=True)
class _Unit:
    """One token of one graph of one rank: planned and compared in one worker, so headers are read once and only
    rows travel back."""

    rank: Optional[int]
    label: str
    model: str
    graph: Optional[Graph]
    token: int
    target_files: tuple[DumpFile, ...]
    golden_files: Optional[tuple[DumpFile, ...]]  # None: this token is missing in the golden
    kind: GoldenKind


@dataclass(frozen=True)
class _UnitResult:
    rows: tuple[Row, ...]
    unmatched: tuple[Unmatched, ...]
    used_golden: frozenset[Path]
    fused_into: tuple[tuple[str, str], ...]
    target_ops: tuple[tuple, ...]


def _by_token(files: Iterable[DumpFile]) -> dict[int, list[DumpFile]]:
    groups: dict[int, list[DumpFile]] = defaultdict(list)
    for f in files:
        groups[f.token if f.token is not None else 0].append(f)
    return groups


def _golden_leftover_reason(f: DumpFile, fused_into: dict[str, str]) -> str:
    fused = fused_into.get(f"{f.op_name}-{f.op_type}") if f.io is not None else fused_into.get(f.op_name)
    if fused is not None:
        return f"inside fused target op {fused}: GE dumps only the fused op's external inputs and outputs"
    if f.kind is FileKind.FX_NPY:
        try:
            header = read_npy_header(f.path)
        except DumpError as exc:
            return f"unreadable: {exc.message}"
        if header.dtype.kind not in "biufc":
            return "non-tensor FX argument (None, string or object): no GE tensor to compare with"
        if header.shape == () and f.io is IO.INPUT:
            return "scalar FX argument without a GE input to compare with"
    if f.io is IO.INPUT:
        return (
            "FX input of a node: GE inputs are compared with their producers' FX outputs (the same tensor), "
            "not with this copy"
        )
    return "no target tensor pairs with this golden tensor (no dumped GE op names it)"


def _units(binding: Binding, kind: GoldenKind) -> list[_Unit]:
    target_tokens, golden_tokens = _by_token(binding.target_files), _by_token(binding.golden_files)
    label = binding.graph.name if binding.graph is not None else binding.model
    return [
        _Unit(binding.rank, label, binding.model, binding.graph, token, tuple(files),
              tuple(golden_tokens[token]) if token in golden_tokens else None, kind)
        for token, files in sorted(target_tokens.items())
    ]  # fmt: skip


def _compare_unit(unit: _Unit, mode: Mode, thresholds: Thresholds) -> _UnitResult:
    """Plan one token (headers, executions, pairs) and compare its pairs."""
    view = GraphView(unit.graph) if unit.graph is not None else None
    executions = ge_executions(unit.target_files)
    ops = tuple((unit.label, unit.token, e.order) for e in executions)
    if unit.golden_files is None or (unit.kind is GoldenKind.FX and view is None):
        why = (f"token {unit.token} missing in the golden dump" if unit.golden_files is None
               else f"no graph file for model {unit.model}")  # fmt: skip
        unmatched = tuple(
            Unmatched(Role.TARGET, unit.rank, unit.token, e.op_name, e.op_type, None, None, str(e.files[0].path), why)
            for e in executions
        )  # fmt: skip
        return _UnitResult((), unmatched, frozenset(), (), ops)
    golden: tuple = ()
    if unit.kind is GoldenKind.FX:
        calls = fx_calls(unit.golden_files)
        result = match_token(unit.rank, unit.token, unit.label, view, executions, golden_calls=calls)
    else:
        golden = ge_executions(unit.golden_files)
        result = match_token(unit.rank, unit.token, unit.label, view, executions, golden_ge=golden)
    headers = {h.path: h for e in (*executions, *golden) for h in e.headers}
    loader = TensorLoader(headers)
    rows = tuple(evaluate(p, mode, thresholds, loader) for p in result.pairs)
    return _UnitResult(rows, tuple(result.unmatched), frozenset(result.used_golden),
                       tuple(result.fused_into.items()), ops)  # fmt: skip


def _resolve_mode(mode: DataMode, inputs: CompareInputs) -> tuple[Mode, str]:
    """`auto` is decided from the files: tensor mode when every compared file holds raw tensors."""
    if mode is not DataMode.AUTO:
        return Mode(mode.value), f"--data-mode {mode.value}"
    files = [f for b in inputs.bindings for f in (*b.target_files, *b.golden_files)]
    summary_only = sum(1 for f in files if f.kind not in RAW_KINDS)
    if summary_only == 0:
        return Mode.TENSOR, "auto: every compared file holds raw tensors"
    return Mode.STATISTICS, (
        f"auto: {summary_only} of {len(files)} files hold summaries only (stats CSV, min/max files or the tcmp index)"
    )


def _run_units(units: Sequence[_Unit], mode: Mode, options: CompareOptions, progress) -> list[_UnitResult]:
    jobs = max(1, options.jobs)
    results: list[_UnitResult] = []
    if jobs == 1 or len(units) < 2:
        for unit in units:
            results.append(_compare_unit(unit, mode, options.thresholds))
            if progress:
                progress(len(results), len(units))
        return results
    import multiprocessing

    # One BLAS thread per worker: the workers are the parallelism, and BLAS threads spinning against each other
    # on busy cores made a 32K-element dot 10x slower (measured).
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(variable, "1")
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    with ProcessPoolExecutor(max_workers=min(jobs, len(units)), mp_context=context) as pool:
        futures = [pool.submit(_compare_unit, unit, mode, options.thresholds) for unit in units]
        for future in futures:  # in submission order: rows stay in token and execution order
            results.append(future.result())
            if progress:
                progress(len(results), len(units))
    return results


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


def _divergences(rows: Sequence[Row]) -> list[Divergence]:
    by_token: dict[tuple, dict[tuple, list[Row]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        by_token[(row.pair.rank, row.pair.token)][_op_key(row)].append(row)
    found = []
    for (rank, token), ops in sorted(by_token.items(), key=lambda kv: (-1 if kv[0][0] is None else kv[0][0], kv[0][1])):
        failing = False
        for key in sorted(ops, key=lambda k: (k[3], k[2])):
            op_rows = ops[key]
            outputs = [r for r in op_rows if r.pair.io.value == "output" and r.result is not Result.NA]
            inputs = [r for r in op_rows if r.pair.io.value == "input" and r.result is not Result.NA]
            if any(r.result is Result.FAIL for r in outputs):
                failing = True
                if all(r.result is Result.PASS for r in inputs):
                    first = op_rows[0].pair
                    found.append(Divergence(rank, token, first.op_name, first.op_type, tuple(op_rows)))
                    break
        else:
            if failing:
                note = (
                    "every failing op also has a failing input: the error starts in an op that is not compared "
                    "(see the unmatched list)"
                )
                found.append(Divergence(rank, token, None, None, (), note))
    return found


def _severity(row: Row) -> tuple:
    def num(cell) -> float:
        return cell if isinstance(cell, float) and not math.isnan(cell) else -math.inf

    if row.tensor is not None:
        cosine = row.tensor.cosine
        cosine = -2.0 if cosine is NA or (isinstance(cosine, float) and math.isnan(cosine)) else cosine
        return (-cosine, num(row.tensor.max_relative_err))
    if row.statistics is not None:
        return (num(row.statistics.l2norm.relative), num(row.statistics.max.relative))
    return (0.0, 0.0)


def run_compare(
    options: CompareOptions, progress: Optional[Callable[[int, int], None]] = None
) -> tuple[CompareResult, CompareInputs]:
    """Run a compare; raises CompareError (one line) when it cannot run at all."""
    inputs = collect(
        options.target, options.golden, rank=options.rank, target_run=options.target_run,
        golden_run=options.golden_run, fx_token_base=options.fx_token_base,
        graph_workers=max(1, options.jobs or os.cpu_count() or 1),
    )  # fmt: skip
    mode, reason = _resolve_mode(options.mode, inputs)
    units = [unit for binding in inputs.bindings for unit in _units(binding, inputs.golden_kind)]
    results = _run_units(units, mode, options, progress)
    rows = _with_colours([row for r in results for row in r.rows], options.thresholds)
    unmatched = list(inputs.unmatched) + [u for r in results for u in r.unmatched]
    for binding in inputs.bindings:
        unmatched += _golden_leftovers(binding, [r for u, r in zip(units, results) if _same(u, binding)])
    target_ops: dict[Optional[int], set] = defaultdict(set)
    for unit, result in zip(units, results):
        target_ops[unit.rank].update(result.target_ops)
    ranks = []
    for rank in inputs.ranks:
        rank_rows = [r for r in rows if r.pair.rank == rank]
        rank_unmatched = [u for u in unmatched if u.rank == rank or (u.rank is None and len(inputs.ranks) == 1)]
        in_rows = {(r.pair.graph, r.pair.token, r.pair.order) for r in rank_rows}
        total = target_ops.get(rank, set())
        worst = sorted((r for r in rank_rows if r.result is Result.FAIL), key=_severity, reverse=True)[:10]
        ranks.append(
            RankResult(
                rank=rank,
                rows=tuple(rank_rows),
                unmatched=tuple(rank_unmatched),
                divergences=tuple(_divergences(rank_rows)),
                worst=tuple(worst),
                target_ops=len(total),
                ops_in_rows=len(in_rows),
                ops_unmatched_only=len(total) - len(in_rows),
            )
        )
    result = CompareResult(options, inputs.golden_kind, mode, reason, tuple(ranks), inputs.notes)
    return result, inputs


def _same(unit: _Unit, binding: Binding) -> bool:
    return unit.rank == binding.rank and unit.model == binding.model


def _golden_leftovers(binding: Binding, results: Sequence[_UnitResult]) -> list[Unmatched]:
    used = set().union(*(r.used_golden for r in results)) if results else set()
    fused_into = {k: v for r in results for k, v in r.fused_into}
    target_tokens = {f.token for f in binding.target_files}
    return [
        Unmatched(Role.GOLDEN, binding.rank, f.token, f.op_name, f.op_type or "", f.io, f.index, str(f.path),
                  _golden_leftover_reason(f, fused_into) if f.token in target_tokens
                  else f"token {f.token} missing in the target dump")
        for f in binding.golden_files
        if f.path not in used
    ]  # fmt: skip
