"""The HTML report (`…_report.html`): one self-contained page per rank that opens offline from a file, with the error
along the network (a chart), every row of the CSV (a virtualized table), the selected op's neighbourhood in the
graph, and the header of the compare. Written by default; `--no-html` skips it.

Rows stream in as the CSV's do (`add_rows`); of each row the page keeps its cells, gzip-compressed as they arrive
(JSON text, a tenth of the CSV's size in memory), and a few numbers: its colour, its op (a node of the page's
graph), its place in the token's execution order and whether it is an output. At `finish` the graph's edges around
the table's ops (`page_graph`) and the header are added and the page is written: the libraries inline
(`page_assets`), the data as base64 of the gzip stream, which the page inflates with the browser's own
DecompressionStream. The payload's fields are read by page_files/page.js:

    columns   the CSV's header             rows    the CSV's cells, row by row: a cell held by its column's
    words     per column, the cells it     (a number) is an index into `words`; a JSON string is the cell
              holds most (the first DICTIONARY_LIMIT different ones): a row refers to them, no cell is repeated
    colour    "r"/"y"/"g" per row          out     "1" for an output row, "0" for an input
    dist      per row: 1 - Cosine unrounded (tensor mode; null where there is no cosine), the chart's y
    node      per row: its op's node       x       per row: its op's place in the token's execution order
    nodes     {names, types, producers, found, table}: the graph (`PageGraph`); nodes [0, table) have rows
    meta      mode, thresholds, first divergences (token, node), file names, `shown`: the table's column
              order on the page (indices into `columns`; `shown_order`)
"""

from __future__ import annotations

import base64
import csv
import itertools
import json
import math
import zlib
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Optional, TextIO

from tcmp.compare.judge.metrics import Mode
from tcmp.compare.judge.verdict import Colour
from tcmp.compare.report import page_assets
from tcmp.compare.report.outcome import CompareResult, RankResult
from tcmp.compare.report.page_graph import TableOp, page_graph
from tcmp.compare.report.page_header import UnmatchedKept, about_html, header_html, unmatched_html
from tcmp.compare.report.table import NUMBER_COLUMNS, RenderedRows, RowOp, columns, csv_lines
from tcmp.schemas.graph import Graph

_COLOUR_CODES = {Colour.RED: "r", Colour.YELLOW: "y", Colour.GREEN: "g"}
_OUTPUT_CODES = {True: ord("1"), False: ord("0")}
_json_string = json.encoder.encode_basestring  # what json.dumps(ensure_ascii=False) writes for a str (its C code)
_GZIP = 31  # zlib wbits: a gzip stream, what DecompressionStream("gzip") reads
_LEVEL = 6
# more output rows than this are drawn with WebGL where the browser has it (SVG slows down past a few thousand
# points); plotly's WebGL renderer compiles code at run time, so only such a page's CSP allows 'unsafe-eval'
SVG_POINTS = 5000
# a unit's rows are coded this many at a time: as lists of cells they take ~1.5 KB a row (a 100K-op graph's token:
# 220K rows, 320 MB at once)
ROWS_AT_ONCE = 4096
Places = dict[tuple[str, str, int], int]  # an op execution (graph, op name, execution) -> its place within a unit
DICTIONARY_LIMIT = 1000  # different cells a column's `words` hold: dtypes, shapes, verdicts, zeros, N/A
# the page's table shows these first, API Name frozen at the left edge: a row's name and the cells its verdict comes
# from are on screen together (the CSV keeps msprobe's order)
FIRST_SHOWN = ("API Name", "Result", "Accuracy Reached or Not", "Cosine", "MaxRelativeErr")


def shown_order(mode: Mode) -> list[int]:
    """The table's columns as the page shows them: indices into `columns(mode)`, FIRST_SHOWN (those the mode has)
    first, the others in the CSV's order."""
    header = columns(mode)
    first = [header.index(name) for name in FIRST_SHOWN if name in header]
    return first + [i for i in range(len(header)) if i not in first]


class PageWriter:
    """The HTML report of one rank, built as rows stream past (see the module docstring)."""

    def __init__(self, mode: Mode) -> None:
        for library in (page_assets.plotly_js, page_assets.datatables_js, page_assets.datatables_css):
            library()  # a missing package fails the compare before it starts, not after it
        self.mode = mode
        self._packed = zlib.compressobj(_LEVEL, zlib.DEFLATED, _GZIP)
        self._chunks: list[bytes] = []
        self._rows = 0
        self._colours = bytearray()
        self._outputs = bytearray()
        self._node = array("l")
        self._x = array("l")
        self._distance = array("d")  # NaN: none
        self._ops: dict[tuple[str, str], int] = {}  # (graph label, op name) -> node
        self._op_types: list[str] = []
        self._next_x: dict[int, int] = {}  # token -> the place its next op takes
        self._words: list[dict[str, int]] = [{} for _ in columns(mode)]
        self._known: list[dict[str, str]] = [{} for _ in columns(mode)]  # per column: word -> its index as JSON
        self._mostly_new = [False for _ in columns(mode)]  # per column: its words are full and most cells miss them
        self.unmatched = UnmatchedKept()
        self._write('{"rows":[')

    def _write(self, text: str) -> None:
        chunk = self._packed.compress(text.encode("utf-8"))
        if chunk:
            self._chunks.append(chunk)

    def add_rows(self, rows: RenderedRows) -> None:
        """One unit's rows (a token of a graph), in execution order: ROWS_AT_ONCE rows at a time."""
        cells = rows.cells()
        placed: Places = {}
        for start in itertools.count(0, ROWS_AT_ONCE):
            table = list(itertools.islice(cells, ROWS_AT_ONCE))
            if not table:
                return
            end = start + len(table)
            self._add_table(table, rows.colours[start:end], rows.ops[start:end], placed)

    def _add_table(
        self, table: list[list[str]], colours: Sequence[Colour], ops: Sequence[RowOp], placed: Places
    ) -> None:
        # Column by column, in bulk: per cell only C-level maps (a dictionary look-up, a JSON string's escaping).
        # Each row's text is what json.dumps(row cells coded, ensure_ascii=False) gives, rows joined by ",".
        coded = [self._coded(j, column) for j, column in enumerate(zip(*table)) if j < len(self._words)]
        self._write(("," if self._rows else "") + "[" + "],[".join(map(", ".join, zip(*coded))) + "]")
        self._rows += len(table)
        self._colours += "".join(map(_COLOUR_CODES.__getitem__, colours)).encode()
        self._outputs += bytes(_OUTPUT_CODES[op.output] for op in ops)
        self._distance.extend(math.nan if op.cosine_distance is None else op.cosine_distance for op in ops)
        for cells, op in zip(table, ops):
            node = self._ops.setdefault((op.graph, op.op_name), len(self._ops))
            if node == len(self._op_types):
                self._op_types.append(op.op_type)
            self._node.append(node)
            key = (op.graph, op.op_name, op.execution)
            if key not in placed:
                token = int(cells[0])
                placed[key] = self._next_x.get(token, 0)
                self._next_x[token] = placed[key] + 1
            self._x.append(placed[key])

    def _coded(self, j: int, column: Sequence[str]) -> list[str]:
        """A column's cells of a unit as JSON text: its word's index where its column's `words` hold it (cells
        are taken in as words in the order they first appear, while fewer than DICTIONARY_LIMIT), else the cell
        as a JSON string."""
        words, known = self._words[j], self._known[j]
        if len(words) < DICTIONARY_LIMIT:
            for cell in dict.fromkeys(column):
                if cell not in words:
                    if len(words) == DICTIONARY_LIMIT:
                        break
                    known[cell] = str(len(words))
                    words[cell] = len(words)
        if self._mostly_new[j]:  # a column of names or numbers: nearly every cell its own JSON string
            return list(map(known.get, column, map(_json_string, column)))
        found = list(map(known.get, column))
        misses = found.count(None)
        if not misses:
            return found  # type: ignore[return-value]  # no None in it
        if misses > len(found) // 8:
            self._mostly_new[j] = len(words) == DICTIONARY_LIMIT
            return list(map(known.get, column, map(_json_string, column)))
        return [_json_string(cell) if text is None else text for cell, text in zip(column, found)]

    def add_unmatched(self, csv_text: str) -> None:
        self.unmatched.add(csv.reader(csv_lines(csv_text)))

    def _node_of(self, graph: Optional[str], op_name: str) -> Optional[int]:
        if graph is not None:
            return self._ops.get((graph, op_name))
        return next((node for (_, name), node in self._ops.items() if name == op_name), None)

    def finish(
        self, page: TextIO, result: CompareResult, rank: RankResult, summary: dict, graphs: Sequence[Optional[Graph]]
    ) -> None:
        """Write the page into `page` (the report's temporary, opened by schemas.files)."""
        table_ops = [TableOp(graph, name, kind) for (graph, name), kind in zip(self._ops, self._op_types)]
        graph = page_graph(table_ops, graphs)
        divergences = [
            {"token": d.token, "op": d.op_name, "node": self._node_of(d.rows[0].pair.graph if d.rows else None,
                                                                      d.op_name)}
            for d in rank.divergences
            if d.op_name is not None
        ]  # fmt: skip
        rest = {
            "columns": list(columns(self.mode)),
            "words": [list(words) for words in self._words],
            "colour": self._colours.decode(),
            "out": self._outputs.decode(),
            "node": self._node.tolist(),
            "x": self._x.tolist(),
            "dist": [None if math.isnan(d) else d for d in self._distance] if self.mode is Mode.TENSOR else [],
            "nodes": {
                "names": graph.names, "types": graph.types, "producers": graph.producers, "found": graph.found,
                "table": len(table_ops),
            },
            "meta": {
                "mode": result.mode.value,
                "numeric": [name for name in columns(self.mode) if name in NUMBER_COLUMNS],
                "shown": shown_order(self.mode),
                "thresholds": result.options.thresholds.__dict__,
                "divergences": divergences,
                "files": summary.get("files", {}),
                "svg_points": SVG_POINTS,
            },
        }  # fmt: skip
        self._write("]," + json.dumps(rest, ensure_ascii=False)[1:])
        self._chunks.append(self._packed.flush())
        payload = b"".join(self._chunks)
        self._chunks = []
        unmatched_name = Path(summary.get("files", {}).get("unmatched", "the unmatched CSV")).name
        static = {
            "header": header_html(result, rank, self._node_of),
            "unmatched": unmatched_html(self.unmatched, unmatched_name),
        }
        write_page(page, static, payload, webgl=self._outputs.count(b"1") > SVG_POINTS)


def write_page(page, static: dict[str, str], payload: bytes, webgl: bool) -> None:
    """The page around `payload` (the gzipped data) into `page`: `static` holds its header and unmatched HTML."""
    plotly, datatables, style = page_assets.plotly_js(), page_assets.datatables_js(), page_assets.datatables_css()
    libraries = {"plotly.js (from plotly)": plotly.version, "DataTables (from itables)": datatables.version}
    script = page_assets.page_file("page.js")
    pieces = {
        "<!--csp-->": page_assets.csp_element((script, plotly.text), eval_allowed=webgl),
        "<!--style-->": page_assets.style_element(style.text) + page_assets.style_element(
            page_assets.page_file("page.css")),
        "<!--header-->": static["header"],
        "<!--unmatched-->": static["unmatched"],
        "<!--about-->": about_html(libraries),
        "<!--data-->": f'<script type="{page_assets.BASE64_TYPE}" id="tcmp-data">',
        "<!--datatables-->": page_assets.base64_element(datatables.text.encode("utf-8"), "lib-datatables"),
        "<!--script-->": page_assets.script_parts(script, "tcmp-page"),
        "<!--plotly-->": page_assets.script_parts(plotly.text, "lib-plotly", run=False),
    }  # fmt: skip
    rest = page_assets.page_file("page.html")
    for marker, text in pieces.items():
        before, found, rest = rest.partition(marker)
        if not found:
            raise RuntimeError(f"page.html has no {marker} after the markers before it")
        page.write(before)
        for part in (text,) if isinstance(text, str) else text:
            page_assets.write_text(page, part)
        if marker == "<!--data-->":  # the largest piece: written in slices, never one more copy of it
            step = 3 << 20  # a multiple of 3: the slices' base64 joins into the whole's
            for start in range(0, len(payload), step):
                page.write(base64.b64encode(payload[start : start + step]).decode("ascii"))
            page.write("</script>")
    page.write(rest)
