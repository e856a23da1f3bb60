"""The result files of a compare, one set per rank (spec/compare-decisions.md "Columns", "Colours", "What the
report adds"):

    tcmp_compare[_rank{R}]_{time}.csv            the table
    tcmp_compare[_rank{R}]_{time}.xlsx           the same with whole-row fills (--highlight)
    tcmp_compare[_rank{R}]_{time}_unmatched.csv  every target op/tensor and golden tensor without a partner, and why
    tcmp_compare[_rank{R}]_{time}_summary.json   counts, mode, first divergence per token, worst rows, notes

Files are written under temporary names and renamed when complete, so an interrupted compare never leaves a
report that looks finished; existing files are never overwritten.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .metrics import NA, Cell, Mode
from .records import Row, Unmatched
from .run import CompareResult, Divergence, RankResult
from .verdict import Colour

PREFIX = "tcmp_compare"
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
UNMATCHED_COLUMNS = ("Side", "Token", "Rank", "Op Name", "Op Type", "IO", "Index", "Path", "Reason")
_FILLS = {Colour.RED: "#FF0000", Colour.YELLOW: "#FFFF00", Colour.GREEN: "#C6EFCE"}
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


def _unmatched_cells(u: Unmatched) -> list[str]:
    return [
        u.role.value,
        "N/A" if u.token is None else str(u.token),
        "N/A" if u.rank is None else str(u.rank),
        text(u.op_name),
        text(u.op_type),
        u.io.value if u.io is not None else "N/A",
        "N/A" if u.index is None else str(u.index),
        text(u.path),
        text(u.reason),
    ]


@dataclass(frozen=True)
class WrittenReport:
    rank: Optional[int]
    csv: Path
    unmatched: Path
    summary: Path
    xlsx: Optional[Path]


def _free_stem(directory: Path, stem: str) -> str:
    candidate, n = stem, 0
    while any((directory / f"{candidate}{suffix}").exists() for suffix in (".csv", "_unmatched.csv", "_summary.json")):
        n += 1
        candidate = f"{stem}_{n}"
    return candidate


class _Atomic:
    """Files written under temporary names in the target directory, renamed together at the end."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.pending: list[tuple[Path, Path]] = []

    def open(self, final: Path, mode: str = "w"):
        handle, temp = tempfile.mkstemp(dir=self.directory, prefix=".tcmp-", suffix=".part")
        os.close(handle)
        self.pending.append((Path(temp), final))
        return Path(temp)

    def commit(self) -> None:
        for temp, final in self.pending:
            os.replace(temp, final)

    def abort(self) -> None:
        for temp, _ in self.pending:
            temp.unlink(missing_ok=True)


def _divergence_json(d: Divergence) -> dict:
    return {
        "rank": d.rank,
        "token": d.token,
        "op": d.op_name,
        "op_type": d.op_type,
        "rows": [r.pair.api_name for r in d.rows if r.result.value == "FAIL"],
        "note": d.note,
    }


def _row_json(row: Row, mode: Mode) -> dict:
    cols = columns(mode)
    return dict(zip(cols, row_cells(row, mode)))


def summary_json(result: CompareResult, rank: RankResult, files: dict[str, str]) -> dict:
    return {
        "complete": True,
        "target_path": str(result.options.target),
        "golden_path": str(result.options.golden),
        "golden_type": "fx" if result.golden_kind.value == "fx" else "ge_fusion_off",
        "rank": rank.rank,
        "data_mode": result.mode.value,
        "data_mode_reason": result.mode_reason,
        "counts": rank.counts,
        "target_ops": {
            "total": rank.target_ops,
            "in_table": rank.ops_in_rows,
            "only_in_unmatched": rank.ops_unmatched_only,
        },
        "first_divergence": [_divergence_json(d) for d in rank.divergences],
        "worst_rows": [_row_json(r, result.mode) for r in rank.worst],
        "thresholds": result.options.thresholds.__dict__,
        "notes": list(result.notes),
        "files": files,
    }


def write_reports(result: CompareResult, output_dir: Path, highlight: bool = False) -> list[WrittenReport]:
    """Write every rank's files into `output_dir` (created if needed); nothing half-written is left behind."""
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d%H%M%S")
    atomic = _Atomic(output_dir)
    written = []
    try:
        for rank in result.ranks:
            base = f"{PREFIX}_rank{rank.rank}_{stamp}" if rank.rank is not None else f"{PREFIX}_{stamp}"
            stem = _free_stem(output_dir, base)
            paths = {
                "csv": output_dir / f"{stem}.csv",
                "unmatched": output_dir / f"{stem}_unmatched.csv",
                "summary": output_dir / f"{stem}_summary.json",
            }
            if highlight:
                paths["xlsx"] = output_dir / f"{stem}.xlsx"
            header = columns(result.mode)
            with open(atomic.open(paths["csv"]), "w", newline="", encoding="utf-8") as handle:
                out = csv.writer(handle)
                out.writerow(header)
                out.writerows(row_cells(r, result.mode) for r in rank.rows)
            with open(atomic.open(paths["unmatched"]), "w", newline="", encoding="utf-8") as handle:
                out = csv.writer(handle)
                out.writerow(UNMATCHED_COLUMNS)
                out.writerows(_unmatched_cells(u) for u in rank.unmatched)
            if highlight:
                _write_xlsx(atomic.open(paths["xlsx"]), header, rank.rows, result.mode)
            names = {k: str(v) for k, v in paths.items()}
            with open(atomic.open(paths["summary"]), "w", encoding="utf-8") as handle:
                json.dump(summary_json(result, rank, names), handle, indent=2, ensure_ascii=False)
            written.append(
                WrittenReport(rank.rank, paths["csv"], paths["unmatched"], paths["summary"], paths.get("xlsx"))
            )
        atomic.commit()
    except BaseException:
        atomic.abort()
        raise
    return written


def _write_xlsx(path: Path, header: Sequence[str], rows: Sequence[Row], mode: Mode) -> None:
    import xlsxwriter

    book = xlsxwriter.Workbook(str(path), {"strings_to_numbers": False, "strings_to_formulas": False})
    try:
        bold = book.add_format({"bold": True})
        fills = {c: book.add_format({"bg_color": colour, "pattern": 1}) for c, colour in _FILLS.items()}
        limit = 1_048_575  # rows per sheet after the header
        for part, start in enumerate(range(0, max(1, len(rows)), limit)):
            sheet = book.add_worksheet("Sheet1" if len(rows) <= limit else f"part_{part}")
            sheet.write_row(0, 0, header, bold)
            for offset, row in enumerate(rows[start : start + limit], start=1):
                sheet.write_row(offset, 0, row_cells(row, mode))
                sheet.set_row(offset, None, fills[row.colour])
            sheet.freeze_panes(1, 0)
    finally:
        book.close()
