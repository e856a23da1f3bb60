"""The result files of a compare, one set per rank (docs/decisions.md, "The result table",
"Colours"):

    tcmp_compare[_rank{R}]_{time}.csv            the table
    tcmp_compare[_rank{R}]_{time}.xlsx           the same with whole-row fills (--highlight)
    tcmp_compare[_rank{R}]_{time}_unmatched.csv  every target op/tensor and golden tensor without a partner, and why
    tcmp_compare[_rank{R}]_{time}_summary.json   counts, mode, first divergence per token, worst rows, notes
    tcmp_compare[_rank{R}]_{time}_report.html    the page: chart, table, neighbourhoods, header (unless --no-html)

Files are written under temporary names and renamed when complete, so an interrupted compare never leaves a
report that looks finished; existing files are never overwritten. All of them go through `schemas.files`: created
relative to the output directory's descriptor, never reopened by name, a swapped temporary refused.
"""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tcmp.compare.collect.inputs import Binding
from tcmp.compare.judge.metrics import Mode
from tcmp.compare.report.outcome import CompareResult, Divergence, RankResult
from tcmp.compare.report.page import PageWriter
from tcmp.compare.report.table import UNMATCHED_COLUMNS, RenderedRows, columns, row_cells, typed
from tcmp.compare.report.xlsx import XlsxStream
from tcmp.schemas.files import Directory, Temporary, TemporaryReplacedError, WriteError, pause_for_tests

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


def _free_stem(directory: Directory, stem: str) -> str:
    candidate, n = stem, 0
    while any(directory.exists(f"{candidate}{suffix}") for suffix in _SUFFIXES):
        n += 1
        candidate = f"{stem}_{n}"
    return candidate


class RankWriter:
    """The files of one rank, written as rows stream in (constant memory, also for the xlsx), under temporary
    names until `ReportSet.finish` renames them."""

    def __init__(
        self, directory: Directory, stem: str, rank: Optional[int], mode: Mode, highlight: bool, html: bool = True
    ) -> None:
        self.rank, self.mode = rank, mode
        self.final = {
            "csv": directory.path / f"{stem}.csv",
            "unmatched": directory.path / f"{stem}_unmatched.csv",
            "summary": directory.path / f"{stem}_summary.json",
        }
        if highlight:
            self.final["xlsx"] = directory.path / f"{stem}.xlsx"
        if html:
            self.final["html"] = directory.path / f"{stem}_report.html"
        self.temp: dict[str, Temporary] = {}
        for key in self.final:  # readable as the umask allows, not 0600
            self.temp[key] = directory.temporary()
        self._csv_handle = self.temp["csv"].text(newline="")
        self._csv = csv.writer(self._csv_handle)
        self._csv.writerow(columns(mode))
        self._unmatched_handle = self.temp["unmatched"].text(newline="")
        self._unmatched = csv.writer(self._unmatched_handle)
        self._unmatched.writerow(UNMATCHED_COLUMNS)
        self._xlsx = XlsxStream(self.temp["xlsx"].binary(), mode) if highlight else None
        self.page = PageWriter(mode) if html else None

    def add_rows(self, rows: RenderedRows) -> None:
        """Rendered rows, in table order (the CSV writer's own text: the bytes `csv.writer` would write)."""
        try:
            self._csv_handle.write(rows.csv_text)
        except OSError as exc:
            raise self._failed(exc, "csv") from exc
        if self._xlsx is not None:
            try:
                for cells, colour in zip(rows.cells(), rows.colours):
                    self._xlsx.add(cells, colour)
            except OSError as exc:  # its rows go to xlsxwriter's own temporaries
                raise self._failed(exc, "xlsx") from exc
        if self.page is not None:
            self.page.add_rows(rows)

    def add_unmatched(self, csv_text: str) -> None:
        """Unmatched items rendered by `table.render_unmatched`."""
        try:
            self._unmatched_handle.write(csv_text)
        except OSError as exc:
            raise self._failed(exc, "unmatched") from exc
        if self.page is not None:
            self.page.add_unmatched(csv_text)

    def close(self, summary: Optional[dict]) -> None:
        """Everything but the page written and closed; a write that fails (a full disk) raises a WriteError
        naming the report file it was for."""
        key = "csv"
        try:
            self.temp[key].close()
            key = "unmatched"
            self.temp[key].close()
            if self._xlsx is not None:
                key, xlsx, self._xlsx = "xlsx", self._xlsx, None
                xlsx.close()
                self.temp[key].close()
            if summary is not None:
                key = "summary"
                summary["files"] = {name: str(path) for name, path in self.final.items()}
                with self.temp[key].text() as out:
                    out.write(json.dumps(summary, indent=2, ensure_ascii=False))
        except OSError as exc:
            raise self._failed(exc, key) from exc

    def _failed(self, exc: OSError, key: str) -> WriteError:
        """`exc` named by the report it happened to (a write error names no file), and what became of them."""
        if isinstance(exc, TemporaryReplacedError):
            return exc
        why = f"{exc.strerror or exc}; no report of this compare kept, no temporary left"
        return WriteError(exc.errno, why, str(self.final[key]))

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
        self.directory = Directory(Path(output_dir), create=True)
        self.stale_removed = self.directory.remove_stale_temporaries()  # of compares killed before they finished
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
                try:
                    with writer.temp["html"].text() as page:
                        writer.page.finish(page, result, rank, summary, graphs)
                except OSError as exc:
                    raise writer._failed(exc, "html") from exc
                writer.page = None  # its rows are in the file: not kept while the next rank's page is written
        pause_for_tests()
        for writer in self.writers.values():
            for key, temp in writer.temp.items():
                temp.publish(writer.final[key].name)
        self.directory.close()
        return {rank: writer.report() for rank, writer in self.writers.items()}

    def discard(self, rank: Optional[int]) -> None:
        """Drop one rank's files (a rank that could not be finished): its temporary files removed."""
        writer = self.writers.pop(rank, None)
        if writer is not None:
            _abort_writer(writer)

    def abort(self) -> None:
        for writer in self.writers.values():
            _abort_writer(writer)
        self.directory.close()


def _abort_writer(writer: RankWriter) -> None:
    if writer._xlsx is not None:
        writer._xlsx.discard()
    for temp in writer.temp.values():
        temp.discard()


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
