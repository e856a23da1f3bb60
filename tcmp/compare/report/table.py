"""The cells of the result table (docs/decisions.md, "Columns"): column names per data mode, and a row
rendered to strings with tcmp's cell vocabulary (`N/A`, `NaN`, `inf`/`-inf`, numbers), text escaped against
CSV/spreadsheet formula injection.

Every metric cell of every mode is a plain number written with `SIGNIFICANT_DIGITS` significant digits, relative
errors as fractions (msprobe writes statistics-mode relative errors as strings such as `'3.0255%'`; a column name
then means the same thing in every mode), never `-0`. `typed` turns a rendered row back into numbers for the
xlsx and the summary JSON, so they hold the same values the CSV does.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Optional, Union

from tcmp.compare.judge.metrics import TENSOR_CELLS, Cell, Mode, is_na
from tcmp.compare.judge.rows import Row
from tcmp.compare.judge.verdict import Colour
from tcmp.compare.records import Unmatched
from tcmp.schemas.dump_records import IO

TENSOR_COLUMNS = (*TENSOR_CELLS, "Requires_grad Consistent")
STATISTICS_COLUMNS = (
    "Max diff", "Min diff", "Mean diff", "L2norm diff", "MaxRelativeErr", "MinRelativeErr", "MeanRelativeErr",
    "NormRelativeErr",
)  # fmt: skip
MD5_COLUMNS = ("NPU MD5", "BENCH MD5")
STATS_COLUMNS = (
    "NPU max", "NPU min", "NPU mean", "NPU l2norm", "Bench max", "Bench min", "Bench mean", "Bench l2norm",
)  # fmt: skip
# after msprobe's eight statistics columns, which keep their names and their order: max, min, mean and l2norm are
# taken over the finite values, so a NaN shows only here
NAN_INF_COLUMNS = ("NPU NaN count", "NPU inf count", "Bench NaN count", "Bench inf count")
LEADING = (
    "Token", "Rank", "API Name", "Stack Info", "Data Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape",
    "Bench Tensor Shape",
)  # fmt: skip
TRAILING = ("Result", "Accuracy Reached or Not", "Err_message")
UNMATCHED_COLUMNS = ("Side", "Token", "Rank", "Op Name", "Op Type", "IO", "Index", "Path", "Kind", "Reason")
STATISTICS_RELATIVE_COLUMNS = STATISTICS_COLUMNS[4:]  # the ones the xlsx shows as percentages (statistics mode only)
_INTEGER_COLUMNS = frozenset(("Token", "Rank", *NAN_INF_COLUMNS))
NUMBER_COLUMNS = frozenset((*TENSOR_CELLS, *STATISTICS_COLUMNS, *STATS_COLUMNS, *_INTEGER_COLUMNS))
SIGNIFICANT_DIGITS = 8  # tells 0.9999 from 1 and 0.0099999996 from 0.01; a float32 value to its last digit or so
MESSAGE_SEPARATOR = "; "
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_FORMULA_START = re.compile("^'*[ ]*[=+\\-@\t\r]")
_FORMULA_FIRST = frozenset("' =+-@\t\r")  # what a cell _FORMULA_START matches can begin with
Typed = Union[str, float, int, None]


def columns(mode: Mode) -> tuple[str, ...]:
    if mode is Mode.TENSOR:
        return LEADING + TENSOR_COLUMNS + STATS_COLUMNS + NAN_INF_COLUMNS + TRAILING
    if mode is Mode.STATISTICS:
        return LEADING + STATISTICS_COLUMNS + STATS_COLUMNS + NAN_INF_COLUMNS + TRAILING
    return LEADING + MD5_COLUMNS + TRAILING


def percent_columns(mode: Mode) -> frozenset[int]:
    """Where in `columns(mode)` the xlsx shows a fraction as a percentage: statistics mode's relative errors (a
    tensor-mode MaxRelativeErr, of the same name, stays a plain number, as msprobe writes it)."""
    if mode is not Mode.STATISTICS:
        return frozenset()
    header = columns(mode)
    return frozenset(header.index(name) for name in STATISTICS_RELATIVE_COLUMNS)


_FLOAT_FORMAT = f".{SIGNIFICANT_DIGITS}g"
# what `format` writes for the floats the table spells otherwise (it writes `inf` and `-inf` as the table does)
_FORMATTED_SPECIALS = {"nan": "NaN", "-0": "0"}


def number(value: Optional[Cell]) -> str:
    """A float cell: `N/A` when unknown, `NaN`, `inf` / `-inf`, else `SIGNIFICANT_DIGITS` significant digits
    (trailing zeros dropped; `0`, never `-0`)."""
    if type(value) is float:  # nearly every cell: one format call (the checks below cost more than it)
        formatted = format(value, _FLOAT_FORMAT)
        return _FORMATTED_SPECIALS.get(formatted, formatted)
    if value is None or is_na(value):
        return "N/A"
    if isinstance(value, bool):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value == 0:
        return "0"  # also -0.0
    return f"{float(value):.{SIGNIFICANT_DIGITS}g}"


def count(value: Optional[int]) -> str:
    return "N/A" if value is None else str(value)


def _formula_like(value: str) -> bool:
    return bool(_FORMULA_START.match(value)) and not _NUMBER.match(value)


def text(value: str) -> str:
    """A text cell, escaped against CSV/spreadsheet formula injection: a cell a spreadsheet could take for a formula
    (OWASP's list: `=`, `+`, `-`, `@`, TAB or CR first, also after spaces) gets a `'` in front. So does one that
    already starts with `'`s before such a character, so that `unescaped` can tell the two apart."""
    if not value or value[0] not in _FORMULA_FIRST:  # most cells: no regular expression to run
        return value
    return "'" + value if _formula_like(value) else value


def unescaped(cell: str) -> str:
    """A text cell as the name it holds: `text`'s `'` taken off (for the xlsx, whose cells are typed strings that no
    spreadsheet evaluates, and the summary JSON)."""
    return cell[1:] if cell.startswith("'") and _formula_like(cell[1:]) else cell


def _shape(shape) -> str:
    return "N/A" if shape is None else str(list(shape))


def row_cells(row: Row, mode: Mode) -> list[str]:
    p = row.pair
    cells = [
        str(p.token),
        "N/A" if p.rank is None else str(p.rank),
        text(p.api_name),
        text(p.stack_info or "N/A"),
        text(str([row.pair.npu.label, row.pair.bench_label])),
        text(row.npu.dtype or "N/A"),
        text(row.bench.dtype or "N/A"),
        _shape(row.npu.shape),
        _shape(row.bench.shape),
    ]
    if mode is Mode.TENSOR:
        cells += [number(c) for c in row.tensor.cells] if row.tensor else ["N/A"] * len(TENSOR_CELLS)
        cells.append("N/A")  # Requires_grad Consistent: torchair inference dumps do not record it
    elif mode is Mode.STATISTICS:
        if row.statistics is None:
            cells += ["N/A"] * 8
        else:
            cells += [number(d.diff) for d in row.statistics.diffs]
            cells += [number(d.relative) for d in row.statistics.diffs]
    else:
        cells += [row.npu.crc32 or "N/A", row.bench.crc32 or "N/A"]
    if mode is not Mode.MD5:
        for stats in (row.npu, row.bench):
            cells += [number(stats.max), number(stats.min), number(stats.mean), number(stats.l2norm)]
        cells += [count(row.npu.nan_count), count(row.npu.inf_count), count(row.bench.nan_count),
                  count(row.bench.inf_count)]  # fmt: skip
    cells += [row.result.value, "Yes" if row.accuracy_reached else "No", text(message(row))]
    return cells


def message(row: Row) -> str:
    """The row's Err_message: its parts (sentences and notes from different checks) joined by "; ", each but the
    last without its full stop."""
    parts = [p[:-1] if p.endswith(".") and not p.endswith("..") else p for p in row.messages[:-1]]
    return MESSAGE_SEPARATOR.join((*parts, *row.messages[-1:]))


def typed(header: Sequence[str], cells: Sequence[str]) -> list[Typed]:
    """A rendered row's cells as values: numbers in the number columns (int for tokens, ranks and counts), `None`
    for `N/A`; `NaN` and `inf` stay text (neither JSON nor a spreadsheet has them), and so does every text column
    (an MD5 or an API name that looks like a number included)."""
    values: list[Typed] = []
    for name, cell in zip(header, cells):
        if name not in NUMBER_COLUMNS:
            values.append(unescaped(cell))
        elif not _NUMBER.match(cell):
            values.append(None if cell == "N/A" else cell)
        else:
            values.append(int(cell) if name in _INTEGER_COLUMNS else float(cell))
    return values


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


class RowOp(NamedTuple):
    """What the HTML page needs of a row besides its cells: the op it belongs to (the CSV names it only inside the
    API Name, and has no op type), whether the row is an output, and 1 - Cosine at full precision (the chart's
    y; the Cosine cell's 8 digits would draw noise near 1 as steps)."""

    graph: str  # the binding's label: its graph's name, else its model's
    op_name: str
    op_type: str
    execution: int
    output: bool
    cosine_distance: Optional[float] = None  # no cosine (not tensor mode, an N/A or NaN cell)


@dataclass(frozen=True)
class RenderedRows:
    """Rows of the table as their CSV text, with each row's colour and op: one string per unit of rows travels from
    a worker and waits for its turn in far less memory than a string per cell."""

    csv_text: str
    colours: tuple[Colour, ...]
    ops: tuple[RowOp, ...] = ()

    def cells(self) -> Iterator[list[str]]:
        return csv.reader(csv_lines(self.csv_text))

    @classmethod
    def joined(cls, parts: Sequence[RenderedRows]) -> RenderedRows:
        return cls(
            "".join(p.csv_text for p in parts),
            tuple(c for p in parts for c in p.colours),
            tuple(op for p in parts for op in p.ops),
        )


def csv_lines(text: str) -> Iterator[str]:
    """The lines of CSV text as `csv.reader` takes them, one at a time: `io.StringIO(text)` would hold a copy of
    four bytes a character (a 100K-op graph's token: 100 MB of rows, 400 MB). Cut at "\\n" only: `csv.writer`
    quotes every field holding "\\r" or "\\n", and the reader takes a quoted field's line break as its own."""
    start, end = 0, len(text)
    while start < end:
        stop = text.find("\n", start) + 1 or end
        yield text[start:stop]
        start = stop


def render_unmatched(items: Sequence[Unmatched]) -> str:
    """Unmatched items as the CSV text of their rows (see RenderedRows)."""
    text = io.StringIO(newline="")
    csv.writer(text).writerows(unmatched_cells(u) for u in items)
    return text.getvalue()


def render_rows(rows: Sequence[Row], mode: Mode) -> RenderedRows:
    text = io.StringIO(newline="")
    csv.writer(text).writerows(row_cells(row, mode) for row in rows)
    ops = tuple(
        RowOp(r.pair.graph, r.pair.op_name, r.pair.op_type, r.pair.execution, r.pair.io is IO.OUTPUT,
              r.tensor.cosine_distance if r.tensor is not None else None)
        for r in rows
    )  # fmt: skip
    return RenderedRows(text.getvalue(), tuple(row.colour for row in rows), ops)
