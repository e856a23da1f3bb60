"""The result files of a compare, one set per rank (spec/compare-decisions.md "Columns", "Colours", "What the
report adds"):

    tcmp_compare[_rank{R}]_{time}.csv            the table
    tcmp_compare[_rank{R}]_{time}.xlsx           the same with whole-row fills (--highlight)
    tcmp_compare[_rank{R}]_{time}_unmatched.csv  every target op/tensor and golden tensor without a partner, and why
    tcmp_compare[_rank{R}]_{time}_summary.json   counts, mode, first divergence per token, worst rows, notes
    tcmp_compare[_rank{R}]_{time}_report.html    the page: chart, table, neighbourhoods, header (unless --no-html)

Files are written under temporary names and renamed when complete, so an interrupted compare never leaves a
report that looks finished; existing files are never overwritten.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tcmp.schemas.files import create_temporary

from .collect import Binding
from .metrics import Mode
from .page import PageWriter
from .run import CompareResult, Divergence, RankResult
from .table import UNMATCHED_COLUMNS, RenderedRows, columns, row_cells, typed
from .xlsx import XlsxStream

PREFIX = "tcmp_compare"


@dataclass(frozen=True)
class WrittenReport:
    rank: Optional[int]
    csv: Path
    unmatched: Path
    summary: Path
    xlsx: Optional[Path]
    html: Optional[Path] = None


_SUFFIXES = (".csv", "_unmatched.csv", "_summary.json", "_report.html", ".xlsx")


def _free_stem(directory: Path, stem: str) -> str:
    candidate, n = stem, 0
    while any((directory / f"{candidate}{suffix}").exists() for suffix in _SUFFIXES):
        n += 1
        candidate = f"{stem}_{n}"
    return candidate


def _temporary(directory: Path) -> Path:
    handle, temp = create_temporary(directory, ".tcmp-", ".part")  # readable as the umask allows, not 0600
    os.close(handle)
    return temp


class RankWriter:
    """The files of one rank, written as rows stream in (constant memory, also for the xlsx), under temporary
    names until `ReportSet.finish` renames them."""

    def __init__(
        self, directory: Path, stem: str, rank: Optional[int], mode: Mode, highlight: bool, html: bool = True
    ) -> None:
        self.rank, self.mode = rank, mode
        self.final = {
            "csv": directory / f"{stem}.csv",
            "unmatched": directory / f"{stem}_unmatched.csv",
            "summary": directory / f"{stem}_summary.json",
        }
        if highlight:
            self.final["xlsx"] = directory / f"{stem}.xlsx"
        if html:
            self.final["html"] = directory / f"{stem}_report.html"
        self.temp = {key: _temporary(directory) for key in self.final}
        self._csv_handle = open(self.temp["csv"], "w", newline="", encoding="utf-8")  # noqa: SIM115
        self._csv = csv.writer(self._csv_handle)
        self._csv.writerow(columns(mode))
        self._unmatched_handle = open(self.temp["unmatched"], "w", newline="", encoding="utf-8")  # noqa: SIM115
        self._unmatched = csv.writer(self._unmatched_handle)
        self._unmatched.writerow(UNMATCHED_COLUMNS)
        self._xlsx = XlsxStream(self.temp["xlsx"], mode) if highlight else None
        self.page = PageWriter(mode) if html else None

    def add_rows(self, rows: RenderedRows) -> None:
        """Rendered rows, in table order (the CSV writer's own text: the bytes `csv.writer` would write)."""
        self._csv_handle.write(rows.csv_text)
        if self._xlsx is not None:
            for cells, colour in zip(rows.cells(), rows.colours):
                self._xlsx.add(cells, colour)
        if self.page is not None:
            self.page.add_rows(rows)

    def add_unmatched(self, csv_text: str) -> None:
        """Unmatched items rendered by `table.render_unmatched`."""
        self._unmatched_handle.write(csv_text)
        if self.page is not None:
            self.page.add_unmatched(csv_text)

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
        return WrittenReport(self.rank, f["csv"], f["unmatched"], f["summary"], f.get("xlsx"), f.get("html"))


class ReportSet:
    """All ranks' files of one compare in `output_dir`; nothing is renamed into place before `finish`, so an
    interrupted or failed compare leaves no report that looks complete (and never overwrites an earlier one)."""

    def __init__(
        self, output_dir: Path, mode: Mode, highlight: bool, html: bool = True, bindings: Sequence[Binding] = (),
        rank_in_names: bool = True,
    ) -> None:  # fmt: skip
        """`bindings`: the compare's, whose graphs give the HTML page its edges (no graph file is read again).
        `rank_in_names`: the file names carry `_rank{R}` (not for one rank of a dump without rank directories)."""
        self.rank_in_names = rank_in_names
        self.directory = Path(output_dir)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.mode, self.highlight, self.html = mode, highlight, html
        self.bindings = tuple(bindings)
        self.stamp = time.strftime("%Y%m%d%H%M%S")
        self.writers: dict[Optional[int], RankWriter] = {}

    def writer(self, rank: Optional[int]) -> RankWriter:
        named = rank is not None and self.rank_in_names
        base = f"{PREFIX}_rank{rank}_{self.stamp}" if named else f"{PREFIX}_{self.stamp}"
        taken = {w.final["csv"].stem for w in self.writers.values()}
        stem = _free_stem(self.directory, base)
        while stem in taken:
            stem = _free_stem(self.directory, f"{stem}_")
        self.writers[rank] = RankWriter(self.directory, stem, rank, self.mode, self.highlight, self.html)
        return self.writers[rank]

    def finish(self, result: CompareResult) -> dict[Optional[int], WrittenReport]:
        for rank in result.ranks:
            writer = self.writers[rank.rank]
            summary = summary_json(result, rank)
            writer.close(summary)
            if writer.page is not None:
                graphs = [b.graph for b in self.bindings if b.rank == rank.rank]
                writer.page.finish(writer.temp["html"], result, rank, summary, graphs)
                writer.page = None  # its rows are in the file: not kept while the next rank's page is written
        for writer in self.writers.values():
            for key, temp in writer.temp.items():
                os.replace(temp, writer.final[key])
        return {rank: writer.report() for rank, writer in self.writers.items()}

    def discard(self, rank: Optional[int]) -> None:
        """Drop one rank's files (a rank that could not be finished): its temporary files removed."""
        writer = self.writers.pop(rank, None)
        if writer is not None:
            _abort_writer(writer)

    def abort(self) -> None:
        for writer in self.writers.values():
            _abort_writer(writer)


def _abort_writer(writer: RankWriter) -> None:
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


def _row_json(header: tuple[str, ...], cells: list[str]) -> dict:
    """A row as the CSV has it, its numbers as JSON numbers (`N/A` as null; `NaN` and `inf` as the CSV's text:
    JSON has no such numbers)."""
    return dict(zip(header, typed(header, cells)))


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
        "worst_rows": [_row_json(columns(result.mode), row_cells(r, result.mode)) for r in rank.worst],
        "thresholds": result.options.thresholds.__dict__,
        "notes": list(result.notes),
    }
