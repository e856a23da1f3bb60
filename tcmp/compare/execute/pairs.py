"""The compare a worker does: a unit planned and its pairs compared (in execution order, whole ops), the rows
coloured, rendered and counted, their worst rows and first divergence found. Wherever the unit runs."""

from __future__ import annotations

import bisect
import functools
import itertools
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tcmp.compare.execute.prefetch import read_ahead
from tcmp.compare.execute.progress import UnitReport
from tcmp.compare.execute.units import Plan, Unit, UnitResult, plan_unit
from tcmp.compare.judge.evaluate import evaluate
from tcmp.compare.judge.loader import TensorLoader
from tcmp.compare.judge.metrics import Mode
from tcmp.compare.judge.ranking import worst as worst_rows
from tcmp.compare.judge.rows import Row
from tcmp.compare.judge.verdict import Result, Thresholds, colour, magnitude_jump
from tcmp.compare.records import FileHeader, Pair
from tcmp.compare.report.outcome import Counts, Divergence
from tcmp.compare.report.table import RenderedRows, render_rows
from tcmp.schemas.dump_records import IO
from tcmp.schemas.host import fewer_collections


@fewer_collections()
def compare_unit(
    unit: Unit, mode: Mode, thresholds: Thresholds, keep_rows: bool = False, report: Optional[UnitReport] = None
) -> UnitResult:
    """Plan one token (`plan_unit`) and compare its pairs (`report`ing the share done)."""
    plan = plan_unit(unit, keep_rows)
    if isinstance(plan, UnitResult):
        return plan
    return unit_result(unit, plan, [compare_pairs(plan.pairs, plan.headers, mode, thresholds, keep_rows, report)])


@dataclass(frozen=True)
class Compared:
    """What comparing a run of whole ops of one token gives (a token's pairs, or a part of them)."""

    table: RenderedRows
    counts: Counts
    worst: tuple[Row, ...]
    ops: int  # ops with rows
    divergence: Optional[Divergence]  # the first op here whose output fails while all its inputs pass
    failing: bool  # some op's output fails here
    rows: tuple[Row, ...] = ()


# Pairs compared, coloured and rendered at a time (cut between ops): a token's rows wait for their report as CSV
# text (~0.7 KB a row), not as records with their metrics (~2.2 KB more); a 100K-op graph's token has 220K rows.
SLICE_PAIRS = 4096


@fewer_collections()
def compare_pairs(
    pairs: Sequence[Pair],
    headers: Mapping[Path, FileHeader],
    mode: Mode,
    thresholds: Thresholds,
    keep_rows: bool,
    report: Optional[UnitReport],
) -> Compared:
    """Compare pairs (whole ops, in execution order), colour and render the rows, count them, and find their worst
    rows and first divergence: a slice of whole ops at a time (`SLICE_PAIRS`), each slice's records dropped once
    it is rendered."""
    loader = TensorLoader(headers)
    ahead = read_ahead(pairs)  # one read-ahead over all the slices
    parts, done = [], 0
    for piece in split(pairs, math.ceil(len(pairs) / SLICE_PAIRS)):
        evaluated = []
        for pair in itertools.islice(ahead, len(piece)):
            evaluated.append(evaluate(pair, mode, thresholds, loader))
            done += 1
            if report is not None:
                report(done / len(pairs))
        parts.append(_compared(with_colours(evaluated, thresholds), mode, keep_rows))
        del evaluated
    return joined(parts)


def _compared(rows: Sequence[Row], mode: Mode, keep_rows: bool) -> Compared:
    divergence, failing = first_divergence(rows)
    return Compared(
        table=render_rows(rows, mode),
        counts=count_rows(rows),
        worst=worst_rows(rows),
        ops=len({r.pair.order for r in rows}),
        divergence=divergence,
        failing=failing,
        rows=tuple(rows) if keep_rows else (),
    )


def joined(parts: Sequence[Compared]) -> Compared:
    """Runs of whole ops compared one after another (in execution order) as one: the first divergence is the
    first run's that has one, the worst rows the worst of each run's (`heapq.nlargest` keeps ties in order)."""
    if len(parts) == 1:
        return parts[0]
    return Compared(
        table=RenderedRows.joined([p.table for p in parts]),
        counts=functools.reduce(Counts.plus, (p.counts for p in parts), Counts()),
        worst=worst_rows(r for p in parts for r in p.worst),
        ops=sum(p.ops for p in parts),
        divergence=next((p.divergence for p in parts if p.divergence is not None), None),
        failing=any(p.failing for p in parts),
        rows=tuple(r for p in parts for r in p.rows),
    )


def unit_result(unit: Unit, plan: Plan, parts: Sequence[Compared]) -> UnitResult:
    """A token's result from its plan and its pairs compared (in parts, in execution order)."""
    whole = joined(parts)
    divergence = whole.divergence
    if divergence is None and whole.failing:
        divergence = Divergence(unit.rank, unit.token, None, None, (), NO_DIVERGENCE, timestamp=2**63)
    return UnitResult(
        table=whole.table,
        counts=whole.counts,
        worst=whole.worst,
        unmatched=plan.unmatched,
        target_ops=plan.target_ops,
        ops_in_rows=whole.ops,
        divergence=divergence,
        rows=whole.rows,
    )


def split(pairs: Sequence[Pair], parts: int) -> list[tuple[Pair, ...]]:
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


def headers_of(pairs: Sequence[Pair], headers: Mapping[Path, FileHeader]) -> dict[Path, FileHeader]:
    """The GE headers a part of a token's pairs reads (sent along so its worker need not read them again)."""
    paths = {f.path for p in pairs for ref in (p.npu, p.bench) for f in ref.files}
    return {path: header for path, header in headers.items() if path in paths}


def count_rows(rows: Sequence[Row]) -> Counts:
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


def _op_key(row: Row) -> tuple:
    p = row.pair
    return (p.rank, p.token, p.graph, p.order)


def with_colours(rows: Sequence[Row], thresholds: Thresholds) -> list[Row]:
    by_op: dict[tuple, list[Row]] = defaultdict(list)
    for row in rows:
        by_op[_op_key(row)].append(row)
    coloured = []
    for row in rows:
        jump = False
        if row.pair.io.value == "output" and row.result is Result.PASS:
            inputs = [r.error_cell for r in by_op[_op_key(row)] if r.pair.io.value == "input"]
            jump = magnitude_jump(row.error_cell, inputs, thresholds.magnitude_factor)
        coloured.append(row.coloured(colour(row.result, row.accuracy_reached, row.nan_inf_one_side, jump)))
    return coloured


NO_DIVERGENCE = (
    "every failing op also has a failing input: the error starts in an op that is not compared (see the unmatched list)"
)


def first_divergence(rows: Sequence[Row]) -> tuple[Optional[Divergence], bool]:
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
