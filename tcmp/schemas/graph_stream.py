"""The graph text's line view (graph_lines) window by window, so reading a graph costs memory for a window, not
for the file: the numpy arrays of every line and the fields' lists are those of one window of whole top-level
fields (an op of a GraphDef, or an op of a ModelDef's graph block: its ops are the graph's top-level fields).

A window is classified, then cut after its last whole top-level field (the rest is read again with the next
window); a window without one (a field larger than the window) is read again twice as long. A ModelDef's
`graph {` line and its `}` end the window before them, and the graph's fields are read as top-level fields of
their own, so a graph block of any size is read window by window too.

The records and warnings are those the whole-file view gives (graph_reader.GraphTextReader.read). Whatever that
view could decide differently from here — a refused op, a text off the printers' layout, a file with both ops
and graph blocks at the top — is left to it: the caller reads the whole file again (refused files only).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Optional

import numpy as np

from tcmp.schemas.graph_lines import LineClasses, classify_lines, empty_view, forest_view
from tcmp.schemas.graph_text import FIELD_CODES, ROOT, NotLineShaped

__all__ = ["WINDOW_BYTES", "Undecided", "read_streamed"]

# Bytes of text per window: the numpy temporaries cost ~10x a window, the fields' lists ~5x.
WINDOW_BYTES = 1 << 18
_OP, _NAME, _GRAPH = FIELD_CODES[b"op"], FIELD_CODES[b"name"], FIELD_CODES[b"graph"]
_GRAPH_OPEN = re.compile(rb"graph *:? *\{")  # the line graph_lines names `graph` and opens a block on
_GRAPH_DEF, _MODEL_DEF = "GraphDef", "ModelDef"


class Undecided(Exception):
    """What the whole-file view may read otherwise than this one (ops and graph blocks both at the top)."""


def read_streamed(raw: bytes, reader, wanted_keys: tuple[bytes, ...]) -> tuple[str, tuple]:
    """The name and ops `reader` (a graph_reader.GraphTextReader) reads from `raw`, window by window.
    Raises NotLineShaped (the text is off the printers' layout), Undecided, or whatever `reader` raises."""
    sink = _Sink(reader, empty_view(raw, wanted_keys))
    position, in_graph, size, span = 0, False, len(raw), WINDOW_BYTES
    while position < size or in_graph:
        if position >= size:
            raise NotLineShaped(size)  # a graph block never closed
        end = raw.find(b"\n", position + span - 1) + 1 or size
        lines = classify_lines(raw, position, end)
        depth = lines.depth_after
        n_lines = len(depth)
        stop, after = n_lines, None
        if in_graph:
            below = np.flatnonzero(depth < 0)
            if len(below):
                stop, after = int(below[0]), "close"  # the graph block's `}`
        elif sink.mode != _GRAPH_DEF:
            opens = _graph_open(raw, lines)
            if opens is not None:
                stop, after = opens, "open"
        if after is None:
            if end < size:  # cut after the window's last whole top-level field
                whole = np.flatnonzero(depth == 0)
                if not len(whole):
                    span *= 2
                    continue
                stop = int(whole[-1]) + 1
            elif depth[-1] != 0:
                raise NotLineShaped(size)  # a block never closed
        if stop and depth[:stop].min() < 0:
            raise NotLineShaped(position)  # a `}` without its block
        view = forest_view(raw, lines, stop, wanted_keys)
        if in_graph:
            sink.graph_fields(view)
        else:
            sink.top_fields(view)
        if after == "close":
            sink.close_graph()
            in_graph = False
            stop += 1
        elif after == "open":
            sink.open_graph()
            in_graph = True
            stop += 1
        position = lines.base + int(lines.starts[stop]) if stop < n_lines else end
        span = WINDOW_BYTES
    return sink.finish()


def _graph_open(raw: bytes, lines: LineClasses) -> Optional[int]:
    """The first line of the window that opens a `graph` block at the top level."""
    depth_before = lines.depth_after - lines.is_open
    candidates = np.flatnonzero(
        lines.is_open & (depth_before == 0) & (lines.text[np.minimum(lines.first, len(lines.text) - 1)] == ord("g"))
    )
    for line in candidates.tolist():
        if _GRAPH_OPEN.fullmatch(raw, lines.base + int(lines.first[line]), lines.base + int(lines.ends[line])):
            return line
    return None


class _Sink:
    """What the reader makes of the top-level fields window by window: as GraphTextReader.read does of the
    whole file's."""

    def __init__(self, reader, view) -> None:
        self.reader = reader
        reader.view = view
        self.mode: Optional[str] = None  # GraphDef once an op is met at the top, ModelDef once a graph block is
        self.ops: list = []
        self.names: list = []  # `name` entries of the top level, or of the graph block being read
        self.notes_at = 0  # where the notes of the names go: before those of the ops they name
        self.graphs = 0
        self.graph_first = 0
        self.name = ""

    def top_fields(self, view) -> None:
        self.reader.view = view
        for entry in view.entries(ROOT):
            code, is_block, payload, offset = entry
            if code == _OP:
                if self.mode == _MODEL_DEF:
                    raise Undecided
                self.mode = _GRAPH_DEF
                self.ops.append(self.reader.op_entry(is_block, payload, offset, len(self.ops), None))
            elif code == _NAME and not self.graphs:
                self.names.append(entry)

    def open_graph(self) -> None:
        self.mode = _MODEL_DEF
        self.names, self.notes_at, self.graph_first = [], len(self.reader._notes), len(self.ops)

    def graph_fields(self, view) -> None:
        self.reader.view = view
        for entry in view.entries(ROOT):
            code, is_block, payload, offset = entry
            if code == _OP:
                self.ops.append(self.reader.op_entry(is_block, payload, offset, len(self.ops), None))
            elif code == _NAME:
                self.names.append(entry)

    def _named(self) -> str:
        notes = self.reader._notes
        later = notes[self.notes_at :]
        del notes[self.notes_at :]
        name = self.reader.graph_name(self.names)
        notes.extend(later)
        return name

    def close_graph(self) -> None:
        name = self._named()
        if self.graphs == 0:
            self.name = name
        else:  # a subgraph: its ops are marked with its name
            ops = self.ops
            ops[self.graph_first :] = [dataclasses.replace(op, subgraph=name) for op in ops[self.graph_first :]]
        self.graphs += 1

    def finish(self) -> tuple[str, tuple]:
        if not self.graphs:
            self.name = self._named()
        return self.name, tuple(self.ops)
