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

import contextlib
import csv
import json
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .metrics import Mode
from .run import CompareResult, Divergence, RankResult
from .table import UNMATCHED_COLUMNS, RenderedRows, columns, row_cells
from .verdict import Colour

PREFIX = "tcmp_compare"
_FILLS = {Colour.RED: "#FF0000", Colour.YELLOW: "#FFFF00", Colour.GREEN: "#C6EFCE"}


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


def _temporary(directory: Path) -> Path:
    handle, temp = tempfile.mkstemp(dir=directory, prefix=".tcmp-", suffix=".part")
    os.close(handle)
    return Path(temp)


class RankWriter:
    """The files of one rank, written as rows stream in (constant memory, also for the xlsx), under temporary
    names until `ReportSet.finish` renames them."""

    def __init__(self, directory: Path, stem: str, rank: Optional[int], mode: Mode, highlight: bool) -> None:
        self.rank, self.mode = rank, mode
        self.final = {
            "csv": directory / f"{stem}.csv",
            "unmatched": directory / f"{stem}_unmatched.csv",
            "summary": directory / f"{stem}_summary.json",
        }
        if highlight:
            self.final["xlsx"] = directory / f"{stem}.xlsx"
        self.temp = {key: _temporary(directory) for key in self.final}
        self._csv_handle = open(self.temp["csv"], "w", newline="", encoding="utf-8")  # noqa: SIM115
        self._csv = csv.writer(self._csv_handle)
        self._csv.writerow(columns(mode))
        self._unmatched_handle = open(self.temp["unmatched"], "w", newline="", encoding="utf-8")  # noqa: SIM115
        self._unmatched = csv.writer(self._unmatched_handle)
        self._unmatched.writerow(UNMATCHED_COLUMNS)
        self._xlsx = _XlsxStream(self.temp["xlsx"], columns(mode)) if highlight else None

    def add_rows(self, rows: RenderedRows) -> None:
        """Rendered rows, in table order (the CSV writer's own text: the bytes `csv.writer` would write)."""
        self._csv_handle.write(rows.csv_text)
        if self._xlsx is not None:
            for cells, colour in zip(rows.cells(), rows.colours):
                self._xlsx.add(cells, colour)

    def add_unmatched(self, csv_text: str) -> None:
        """Unmatched items rendered by `table.render_unmatched`."""
        self._unmatched_handle.write(csv_text)

    def close(self, summary: Optional[dict]) -> None:
        self._csv_handle.close()
        self._unmatched_handle.close()
        if self._xlsx is not None:
            self._xlsx.close()
        if summary is not None:
            summary["files"] = {key: str(path) for key, path in self.final.items()}
            self.temp["summary"].write_text(json.dumps(summary, indent=2, ensure_ascii=False), encoding="utf-8")

    def report(self) -> WrittenReport:
        f = self.final
        return WrittenReport(self.rank, f["csv"], f["unmatched"], f["summary"], f.get("xlsx"))


class _XlsxStream:
    """xlsxwriter in constant-memory mode: rows go to disk as they are written; whole-row fills by colour."""

    LIMIT = 1_048_575  # data rows per sheet

    def __init__(self, path: Path, header: Sequence[str]) -> None:
        import xlsxwriter

        self.book = xlsxwriter.Workbook(
            str(path), {"constant_memory": True, "strings_to_numbers": False, "strings_to_formulas": False}
        )
        self.header = header
        self.bold = self.book.add_format({"bold": True})
        self.fills = {c: self.book.add_format({"bg_color": colour, "pattern": 1}) for c, colour in _FILLS.items()}
        self.sheet, self.row, self.part = None, 0, 0
        self._new_sheet()

    def _new_sheet(self) -> None:
        self.sheet = self.book.add_worksheet("Sheet1" if self.part == 0 else f"part_{self.part}")
        self.sheet.write_row(0, 0, self.header, self.bold)
        self.sheet.freeze_panes(1, 0)
        self.row = 0
        self.part += 1

    def add(self, cells: Sequence[str], colour: Colour) -> None:
        if self.row >= self.LIMIT:
            self._new_sheet()
        self.row += 1
        self.sheet.set_row(self.row, None, self.fills[colour])
        self.sheet.write_row(self.row, 0, cells)

    def close(self) -> None:
        self.book.close()


class ReportSet:
    """All ranks' files of one compare in `output_dir`; nothing is renamed into place before `finish`, so an
    interrupted or failed compare leaves no report that looks complete (and never overwrites an earlier one)."""

    def __init__(self, output_dir: Path, mode: Mode, highlight: bool) -> None:
        self.directory = Path(output_dir)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.mode, self.highlight = mode, highlight
        self.stamp = time.strftime("%Y%m%d%H%M%S")
        self.writers: dict[Optional[int], RankWriter] = {}

    def writer(self, rank: Optional[int]) -> RankWriter:
        base = f"{PREFIX}_rank{rank}_{self.stamp}" if rank is not None else f"{PREFIX}_{self.stamp}"
        taken = {w.final["csv"].stem for w in self.writers.values()}
        stem = _free_stem(self.directory, base)
        while stem in taken:
            stem = _free_stem(self.directory, f"{stem}_")
        self.writers[rank] = RankWriter(self.directory, stem, rank, self.mode, self.highlight)
        return self.writers[rank]

    def finish(self, result: CompareResult) -> dict[Optional[int], WrittenReport]:
        for rank in result.ranks:
            self.writers[rank.rank].close(summary_json(result, rank))
        for writer in self.writers.values():
            for key, temp in writer.temp.items():
                os.replace(temp, writer.final[key])
        return {rank: writer.report() for rank, writer in self.writers.items()}

    def abort(self) -> None:
        for writer in self.writers.values():
            with contextlib.suppress(OSError, ValueError):  # already closed, or the disk is the problem
                writer.close(None)
            for temp in writer.temp.values():
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


def summary_json(result: CompareResult, rank: RankResult) -> dict:
    return {
        "complete": True,
        "target_path": str(result.options.target),
        "golden_path": str(result.options.golden),
        "golden_type": "fx" if result.golden_kind.value == "fx" else "ge_fusion_off",
        "rank": rank.rank,
        "data_mode": result.mode.value,
        "data_mode_reason": result.mode_reason,
        "counts": rank.counts.as_dict(),
        "target_ops": {
            "total": rank.target_ops,
            "in_table": rank.ops_in_rows,
            "only_in_unmatched": rank.ops_unmatched_only,
        },
        "first_divergence": [_divergence_json(d) for d in rank.divergences],
        "worst_rows": [dict(zip(columns(result.mode), row_cells(r, result.mode))) for r in rank.worst],
        "thresholds": result.options.thresholds.__dict__,
        "notes": list(result.notes),
    }
