"""The worst rows of a compare (console, summary JSON): FAILing rows, NaN/inf on one side only first.

A NaN or inf that appears on one side spreads to everything computed from it, so a compare may hold dozens of
such rows; their other metrics are taken over the finite values and say nothing. They are ranked by where they
come in execution order (token, then dump time across the graphs of a token, then order within the graph), so
the row where the NaN first appears — its origin — heads the list. After them come finite errors: the lowest
cosine (tensor mode) or the largest L2-norm relative error (statistics mode), then the largest max relative error.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable

from tcmp.compare.judge.metrics import is_na
from tcmp.compare.judge.rows import Row
from tcmp.compare.judge.verdict import Result

WORST_ROWS = 10


def severity(row: Row) -> tuple:
    """A key that is larger for a worse row."""
    p = row.pair
    if row.nan_inf_one_side:
        return (True, -p.token, -p.timestamp, -p.order, p.io.value == "input", -p.index)  # an input is read first

    def num(cell) -> float:
        return cell if isinstance(cell, float) and not math.isnan(cell) else -math.inf

    if row.tensor is not None:
        cosine = row.tensor.cosine
        cosine = -2.0 if is_na(cosine) or (isinstance(cosine, float) and math.isnan(cosine)) else cosine
        return (False, -cosine, num(row.tensor.max_relative_err))
    if row.statistics is not None:
        return (False, num(row.statistics.l2norm.relative), num(row.statistics.max.relative))
    return (False, 0.0, 0.0)


def worst(rows: Iterable[Row], n: int = WORST_ROWS) -> tuple[Row, ...]:
    """The `n` worst of `rows` (FAILing ones only), worst first."""
    return tuple(heapq.nlargest(n, (r for r in rows if r.result is Result.FAIL), key=severity))
