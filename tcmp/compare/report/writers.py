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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Optional, TextIO

from tcmp.compare.collect.binding import Binding
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


@dataclass(frozen=True)
class ReportChoice:
    """Which of the optional report files the command line asks for."""

    highlight: bool = False  # --highlight: the xlsx
    html: bool = True  # not --no-html: the page


@dataclass(frozen=True)
class RankEnd:
    """What a rank's files are finished with: the compare's result, the rank's, its summary (the JSON's content,
    which the page embeds) and the graphs its page draws."""

    result: CompareResult
    rank: RankResult
    summary: dict
    graphs: list


class ReportFile:
    """One report file of a rank, written under a temporary name while rows stream in. A subclass declares its
    `key` (its name in the summary's "files" and in `WrittenReport`), its file name `suffix`, and when a compare
    writes it (`written`); `FORMATS` lists them all. Files finish in `finish_stage` order (FORMATS order within a
    stage): the summary lists the other files, the page shows the summary."""

    key: ClassVar[str]
    suffix: ClassVar[str]
    finish_stage: ClassVar[int] = 0

    @staticmethod
    def written(choice: ReportChoice) -> bool:
        return True

    def __init__(self, temp: Temporary, mode: Mode) -> None:
        self.temp, self.mode = temp, mode

    def add_rows(self, rows: RenderedRows) -> None:
        """Rendered rows, in table order."""

    def add_unmatched(self, csv_text: str) -> None:
        """Unmatched items rendered by `table.render_unmatched`."""

    def finish(self, end: RankEnd) -> None:
        """The file completed and closed (not yet renamed into place)."""
        self.temp.close()

    def discard(self) -> None:
        self.temp.discard()


TEXT_PIECE = 1 << 20


def write_in_pieces(handle: TextIO, text: str) -> None:
    """`handle.write(text)` a MiB at a time: a text file encodes what it is given whole (a unit's rows: 100 MB)."""
    for start in range(0, len(text), TEXT_PIECE):
        handle.write(text[start : start + TEXT_PIECE])


class TableCsv(ReportFile):
    key, suffix = "csv", ".csv"

    def __init__(self, temp: Temporary, mode: Mode) -> None:
        super().__init__(temp, mode)
        self._handle = temp.text(newline="")
        csv.writer(self._handle).writerow(columns(mode))

    def add_rows(self, rows: RenderedRows) -> None:
        write_in_pieces(self._handle, rows.csv_text)  # the CSV writer's own text: the bytes `csv.writer` would write


class UnmatchedCsv(ReportFile):
    key, suffix = "unmatched", "_unmatched.csv"

    def __init__(self, temp: Temporary, mode: Mode) -> None:
        super().__init__(temp, mode)
        self._handle = temp.text(newline="")
        csv.writer(self._handle).writerow(UNMATCHED_COLUMNS)

    def add_unmatched(self, csv_text: str) -> None:
        write_in_pieces(self._handle, csv_text)


class SummaryJson(ReportFile):
    key, suffix = "summary", "_summary.json"
    finish_stage = 1

    def finish(self, end: RankEnd) -> None:
        with self.temp.text() as out:
            out.write(json.dumps(end.summary, indent=2, ensure_ascii=False))


class HighlightedXlsx(ReportFile):
    key, suffix = "xlsx", ".xlsx"

    @staticmethod
    def written(choice: ReportChoice) -> bool:
        return choice.highlight

    def __init__(self, temp: Temporary, mode: Mode) -> None:
        super().__init__(temp, mode)
        self._xlsx: Optional[XlsxStream] = XlsxStream(temp.binary(), mode)

    def add_rows(self, rows: RenderedRows) -> None:
        assert self._xlsx is not None
        for cells, colour in zip(rows.cells(), rows.colours):  # its rows go to xlsxwriter's own temporaries
            self._xlsx.add(cells, colour)

    def finish(self, end: RankEnd) -> None:
        xlsx, self._xlsx = self._xlsx, None
        if xlsx is not None:
            xlsx.close()
        self.temp.close()

    def discard(self) -> None:
        if self._xlsx is not None:
            self._xlsx.discard()
        self.temp.discard()


class HtmlPage(ReportFile):
    key, suffix = "html", "_report.html"
    finish_stage = 2

    @staticmethod
    def written(choice: ReportChoice) -> bool:
        return choice.html

    def __init__(self, temp: Temporary, mode: Mode) -> None:
        super().__init__(temp, mode)
        self._page: Optional[PageWriter] = PageWriter(mode)

    def add_rows(self, rows: RenderedRows) -> None:
        if self._page is not None:
            self._page.add_rows(rows)

    def add_unmatched(self, csv_text: str) -> None:
        if self._page is not None:
            self._page.add_unmatched(csv_text)

    def finish(self, end: RankEnd) -> None:
        page, self._page = self._page, None  # its rows are in the file: not kept while the next rank's page is written
        if page is not None:
            with self.temp.text() as out:
                page.finish(out, end.result, end.rank, end.summary, end.graphs)


# Every report file, in the order of the summary's "files" (a new format: its ReportFile subclass, and its entry).
FORMATS: tuple[type[ReportFile], ...] = (TableCsv, UnmatchedCsv, SummaryJson, HighlightedXlsx, HtmlPage)


def chosen_formats(choice: ReportChoice) -> tuple[type[ReportFile], ...]:
    """The report files a compare with `choice` writes."""
    return tuple(f for f in FORMATS if f.written(choice))


DEFAULT_FORMATS = chosen_formats(ReportChoice())


def _free_stem(directory: Directory, stem: str, formats: Sequence[type[ReportFile]]) -> str:
    """`stem`, or `stem_N`, such that no report file of any format exists under it (never overwrite a report)."""
    suffixes = {f.suffix for f in (*FORMATS, *formats)}
    candidate, n = stem, 0
    while any(directory.exists(f"{candidate}{suffix}") for suffix in suffixes):
        n += 1
        candidate = f"{stem}_{n}"
    return candidate


class RankWriter:
    """The files of one rank, written as rows stream in (constant memory, also for the xlsx), under temporary
    names until `ReportSet.finish` renames them."""

    def __init__(
        self, directory: Directory, stem: str, rank: Optional[int], mode: Mode, formats: Sequence[type[ReportFile]]
    ) -> None:
        self.rank, self.mode, self.stem = rank, mode, stem
        self.final = {f.key: directory.path / f"{stem}{f.suffix}" for f in formats}
        self.files: list[ReportFile] = []
        for f in formats:
            temp = directory.temporary()  # readable as the umask allows, not 0600
            try:
                self.files.append(f(temp, mode))
            except BaseException:  # a package the page needs is missing: no temporary left behind
                temp.discard()
                self.discard()
                raise

    def add_rows(self, rows: RenderedRows) -> None:
        """Rendered rows, in table order."""
        self._each(self.files, lambda f: f.add_rows(rows))

    def add_unmatched(self, csv_text: str) -> None:
        """Unmatched items rendered by `table.render_unmatched`."""
        self._each(self.files, lambda f: f.add_unmatched(csv_text))

    def finish(self, end: RankEnd) -> None:
        """Every file written and closed; a write that fails (a full disk) raises a WriteError naming the report
        file it was for."""
        end.summary["files"] = {key: str(path) for key, path in self.final.items()}
        self._each(sorted(self.files, key=lambda f: f.finish_stage), lambda f: f.finish(end))

    def _each(self, files: Sequence[ReportFile], step: Callable[[ReportFile], None]) -> None:
        """`step` on each file in turn; an OSError becomes the WriteError naming that file's report."""
        for f in files:
            try:
                step(f)
            except OSError as exc:
                raise self._failed(exc, f.key) from exc

    def publish(self) -> None:
        for f in self.files:
            f.temp.publish(self.final[f.key].name)

    def discard(self) -> None:
        for f in self.files:
            f.discard()

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
        self, output_dir: Path, mode: Mode, formats: Sequence[type[ReportFile]] = DEFAULT_FORMATS,
        bindings: Sequence[Binding] = (), rank_in_names: bool = True,
    ) -> None:  # fmt: skip
        """`formats`: the files to write (`chosen_formats`; the CSV, unmatched CSV and summary always).
        `bindings`: the compare's, whose graphs give the HTML page its edges (no graph file is read again).
        `rank_in_names`: the file names carry `_rank{R}` (not for one rank of a dump without rank directories)."""
        self.rank_in_names = rank_in_names
        self.directory = Directory(Path(output_dir), create=True)
        self.directory.remove_stale_temporaries()  # of compares killed before they finished
        self.mode, self.formats = mode, tuple(formats)
        self.bindings = tuple(bindings)
        self.stamp = time.strftime("%Y%m%d%H%M%S")
        self.writers: dict[Optional[int], RankWriter] = {}

    def writer(self, rank: Optional[int]) -> RankWriter:
        named = rank is not None and self.rank_in_names
        base = f"{PREFIX}_rank{rank}_{self.stamp}" if named else f"{PREFIX}_{self.stamp}"
        taken = {w.stem for w in self.writers.values()}
        stem = _free_stem(self.directory, base, self.formats)
        while stem in taken:
            stem = _free_stem(self.directory, f"{stem}_", self.formats)
        self.writers[rank] = RankWriter(self.directory, stem, rank, self.mode, self.formats)
        return self.writers[rank]

    def finish(self, result: CompareResult) -> dict[Optional[int], WrittenReport]:
        for rank in result.ranks:
            graphs = [b.graph for b in self.bindings if b.rank == rank.rank]
            self.writers[rank.rank].finish(RankEnd(result, rank, summary_json(result, rank), graphs))
        pause_for_tests()
        for writer in self.writers.values():
            writer.publish()
        self.directory.close()
        return {rank: writer.report() for rank, writer in self.writers.items()}

    def discard(self, rank: Optional[int]) -> None:
        """Drop one rank's files (a rank that could not be finished): its temporary files removed."""
        writer = self.writers.pop(rank, None)
        if writer is not None:
            writer.discard()

    def abort(self) -> None:
        for writer in self.writers.values():
            writer.discard()
        self.directory.close()


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


_GOLDEN_TYPES = {
    "fx": "fx",
    "ge": "ge_fusion_off",
    "acl": "aclgraph",
}  # GoldenKind's values, as summary.json spells them


def summary_json(result: CompareResult, rank: RankResult) -> dict:
    return {
        "complete": True,
        "target_path": str(result.options.target),
        "golden_path": str(result.options.golden),
        "golden_type": _GOLDEN_TYPES[result.golden_kind.value],
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
