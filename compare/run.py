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
from tcmp.schemas.layout import DumpFile, FileKind
from tcmp.schemas.records import IO

from .collect import Binding, CompareInputs, GoldenKind, collect
from .evaluate import TensorLoader, evaluate
from .executions import fx_calls, ge_executions
from .fusion import GraphView
from .match import match_token
from .metrics import NA, Mode
from .records import Pair, Role, Row, Unmatched
from .verdict import Result, Thresholds, colour, magnitude_jump

CHUNK_PAIRS = 64  # pairs per work unit sent to a worker


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


@dataclass
class _Plan:
    pairs: list[Pair] = field(default_factory=list)
    unmatched: list[Unmatched] = field(default_factory=list)
    target_ops: dict[Optional[int], set] = field(default_factory=lambda: defaultdict(set))


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


def _plan_binding(binding: Binding, kind: GoldenKind, plan: _Plan) -> None:
    view = GraphView(binding.graph) if binding.graph is not None else None
    target_tokens, golden_tokens = _by_token(binding.target_files), _by_token(binding.golden_files)
    used: set[Path] = set()
    fused_into: dict[str, str] = {}
    label = binding.graph.name if binding.graph is not None else binding.model
    for token in sorted(target_tokens):
        executions = ge_executions(target_tokens[token])
        plan.target_ops[binding.rank].update((label, token, e.order) for e in executions)
        golden = golden_tokens.get(token)
        if golden is None or (kind is GoldenKind.FX and view is None):
            why = (f"token {token} missing in the golden dump" if golden is None
                   else f"no graph file for model {binding.model}")  # fmt: skip
            plan.unmatched += [
                Unmatched(Role.TARGET, binding.rank, token, e.op_name, e.op_type, None, None, str(e.files[0].path), why)
                for e in executions
            ]  # fmt: skip
            continue
        if kind is GoldenKind.FX:
            result = match_token(binding.rank, token, label, view, executions, golden_calls=fx_calls(golden))
        else:
            result = match_token(binding.rank, token, label, view, executions, golden_ge=ge_executions(golden))
        plan.pairs += result.pairs
        plan.unmatched += result.unmatched
        used |= result.used_golden
        fused_into.update(result.fused_into)
    for f in binding.golden_files:
        if f.path not in used:
            plan.unmatched.append(
                Unmatched(Role.GOLDEN, binding.rank, f.token, f.op_name, f.op_type or "", f.io, f.index, str(f.path),
                          _golden_leftover_reason(f, fused_into) if f.token in target_tokens
                          else f"token {f.token} missing in the target dump")
            )  # fmt: skip


def _resolve_mode(mode: DataMode, pairs: Sequence[Pair]) -> tuple[Mode, str]:
    if mode is not DataMode.AUTO:
        return Mode(mode.value), f"--data-mode {mode.value}"
    summary_only = sum(1 for p in pairs if not (p.npu.has_raw and p.bench.has_raw))
    if summary_only == 0:
        return Mode.TENSOR, "auto: every pair has raw tensors on both sides"
    return Mode.STATISTICS, f"auto: {summary_only} of {len(pairs)} pairs have summaries only (index, stats CSV or " \
                            "min/max files)"  # fmt: skip


def _evaluate_chunk(pairs: Sequence[Pair], mode: Mode, thresholds: Thresholds) -> list[Row]:
    loader = TensorLoader()
    return [evaluate(p, mode, thresholds, loader) for p in pairs]


def _chunks(pairs: Sequence[Pair]) -> list[list[Pair]]:
    """Work units that keep an op's rows together (its GE file is then opened once)."""
    chunks, current = [], []
    for i, pair in enumerate(pairs):
        current.append(pair)
        nxt = pairs[i + 1] if i + 1 < len(pairs) else None
        same_op = nxt is not None and (nxt.rank, nxt.token, nxt.graph, nxt.order) == (
            pair.rank, pair.token, pair.graph, pair.order)  # fmt: skip
        if len(current) >= CHUNK_PAIRS and not same_op:
            chunks.append(current)
            current = []
    if current:
        chunks.append(current)
    return chunks


def _evaluate_all(pairs, mode, options: CompareOptions, progress) -> list[Row]:
    chunks = _chunks(pairs)
    rows: list[Row] = []
    jobs = max(1, options.jobs)
    if jobs == 1 or len(chunks) < 2:
        for chunk in chunks:
            rows += _evaluate_chunk(chunk, mode, options.thresholds)
            if progress:
                progress(len(rows), len(pairs))
        return rows
    import multiprocessing

    context = multiprocessing.get_context("forkserver" if "forkserver" in multiprocessing.get_all_start_methods()
                                          else "spawn")  # fmt: skip
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = [pool.submit(_evaluate_chunk, chunk, mode, options.thresholds) for chunk in chunks]
        for future in futures:  # in submission order: rows stay in execution order
            rows += future.result()
            if progress:
                progress(len(rows), len(pairs))
    return rows


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
    plan = _Plan()
    plan.unmatched += inputs.unmatched
    for binding in inputs.bindings:
        _plan_binding(binding, inputs.golden_kind, plan)
    mode, reason = _resolve_mode(options.mode, plan.pairs)
    rows = _with_colours(_evaluate_all(plan.pairs, mode, options, progress), options.thresholds)
    ranks = []
    for rank in inputs.ranks:
        rank_rows = [r for r in rows if r.pair.rank == rank]
        rank_unmatched = [u for u in plan.unmatched if u.rank == rank or (u.rank is None and len(inputs.ranks) == 1)]
        in_rows = {(r.pair.graph, r.pair.token, r.pair.order) for r in rank_rows}
        total = plan.target_ops.get(rank, set())
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
