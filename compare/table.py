"""The cells of the result table (spec/compare-decisions.md "Columns"): column names per data mode, and a row
rendered to strings with tcmp's cell vocabulary (`N/A`, `NaN`, `inf`/`-inf`, percentages), text escaped against
CSV/spreadsheet formula injection."""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Optional

from .metrics import NA, Cell, Mode
from .records import Row, Unmatched
from .verdict import Colour

TENSOR_COLUMNS = (
    "Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio", "Five Thousandth Err Ratio",
    "Requires_grad Consistent",
)  # fmt: skip
STATISTICS_COLUMNS = (
    "Max diff", "Min diff", "Mean diff", "L2norm diff", "MaxRelativeErr", "MinRelativeErr", "MeanRelativeErr",
    "NormRelativeErr",
)  # fmt: skip
MD5_COLUMNS = ("NPU MD5", "BENCH MD5")
STATS_COLUMNS = (
    "NPU max", "NPU min", "NPU mean", "NPU l2norm", "Bench max", "Bench min", "Bench mean", "Bench l2norm",
)  # fmt: skip
LEADING = (
    "Token", "Rank", "API Name", "Stack Info", "Data Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape",
    "Bench Tensor Shape",
)  # fmt: skip
TRAILING = ("Result", "Accuracy Reached or Not", "Err_message")
UNMATCHED_COLUMNS = ("Side", "Token", "Rank", "Op Name", "Op Type", "IO", "Index", "Path", "Kind", "Reason")
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def columns(mode: Mode) -> tuple[str, ...]:
    if mode is Mode.TENSOR:
        return LEADING + TENSOR_COLUMNS + STATS_COLUMNS + TRAILING
    if mode is Mode.STATISTICS:
        return LEADING + STATISTICS_COLUMNS + STATS_COLUMNS + TRAILING
    return LEADING + MD5_COLUMNS + TRAILING


def number(value: Optional[float]) -> str:
    """A float cell: `N/A` when unknown, `NaN`, `inf` / `-inf`, else Python's shortest round-trip form."""
    if value is None or value is NA:
        return "N/A"
    if isinstance(value, bool):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(float(value))


def percent(value: Cell) -> str:
    if value is NA:
        return "N/A"
    if math.isnan(value) or math.isinf(value):
        return number(value)
    return f"{value * 100!r}%"


def text(value: str) -> str:
    """A text cell, escaped against CSV/spreadsheet formula injection."""
    if value and value[0] in "=+-@" and not _NUMBER.match(value):
        return "'" + value
    return value


def _shape(shape) -> str:
    return "N/A" if shape is None else str(list(shape))


def row_cells(row: Row, mode: Mode) -> list[str]:
    p = row.pair
    cells = [
        str(p.token),
        "N/A" if p.rank is None else str(p.rank),
        text(p.api_name),
        text(p.stack_info or "N/A"),
        text(str([row.pair.npu.label, row.pair.bench.label])),
        text(row.npu.dtype or "N/A"),
        text(row.bench.dtype or "N/A"),
        _shape(row.npu.shape),
        _shape(row.bench.shape),
    ]
    if mode is Mode.TENSOR:
        cells += [number(c) for c in row.tensor.cells] if row.tensor else ["N/A"] * 6
        cells.append("N/A")  # Requires_grad Consistent: torchair inference dumps do not record it
    elif mode is Mode.STATISTICS:
        if row.statistics is None:
            cells += ["N/A"] * 8
        else:
            cells += [number(d.diff) for d in row.statistics.diffs]
            cells += [percent(d.relative) for d in row.statistics.diffs]
    else:
        cells += [row.npu.crc32 or "N/A", row.bench.crc32 or "N/A"]
    if mode is not Mode.MD5:
        for stats in (row.npu, row.bench):
            cells += [number(stats.max), number(stats.min), number(stats.mean), number(stats.l2norm)]
    cells += [row.result.value, "Yes" if row.accuracy_reached else "No", text(" ".join(row.messages))]
    return cells


def unmatched_cells(u: Unmatched) -> list[str]:
    return [
        u.role.value,
        "N/A" if u.token is None else str(u.token),
        "N/A" if u.rank is None else str(u.rank),
        text(u.op_name),
        text(u.op_type),
        u.io.value if u.io is not None else "N/A",
        "N/A" if u.index is None else str(u.index),
        text(u.path),
        u.kind.value,
        text(u.reason),
    ]


@dataclass(frozen=True)
class RenderedRows:
    """Rows of the table as their CSV text, with each row's colour: one string per unit of rows travels from a
    worker and waits for its turn in far less memory than a string per cell."""

    csv_text: str
    colours: tuple[Colour, ...]

    def cells(self) -> Iterator[list[str]]:
        return csv.reader(io.StringIO(self.csv_text, newline=""))

    @classmethod
    def joined(cls, parts: Sequence[RenderedRows]) -> RenderedRows:
        return cls("".join(p.csv_text for p in parts), tuple(c for p in parts for c in p.colours))


def render_unmatched(items: Sequence[Unmatched]) -> str:
    """Unmatched items as the CSV text of their rows (see RenderedRows)."""
    text = io.StringIO(newline="")
    csv.writer(text).writerows(unmatched_cells(u) for u in items)
    return text.getvalue()


def render_rows(rows: Sequence[Row], mode: Mode) -> RenderedRows:
    text = io.StringIO(newline="")
    csv.writer(text).writerows(row_cells(row, mode) for row in rows)
    return RenderedRows(text.getvalue(), tuple(row.colour for row in rows))
