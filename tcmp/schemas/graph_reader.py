"""Reader for graph text files: torchair's `dynamo_*graph*.txt` and GE's own `ge_proto_*.txt` dumps, into the
records of `tcmp.schemas.graph`.

The files are protobuf text format of GE IR: `str(GraphDef)` from torchair, a printed `ModelDef` from GE
(docs/formats.md, "Graph text files"). tcmp reads them with its own tolerant reader (`graph_text` gives the fields,
this module what they mean) instead of protobuf's `text_format`, for two reasons:

- protobuf refuses a whole file for one value tcmp never reads: an enum name its schema does not know, an
  identifier where a number stands. A graph is refused here only when its op structure is unreadable: the op
  blocks, their name, type and inputs, their output descs and the attributes tcmp reads (`_fx_tensor_name`,
  `_datadump_original_op_names`, `_datadump_origin_name`, `_datadump_origin_output_index`) — with line and
  column. Anything else odd is a warning at most.
- protobuf's text parser is pure Python at ~4 MB/s; graphs of large models are tens of MB. Reading only what
  tcmp uses, from a one-field-per-line layout classified with numpy, runs at tens of MB/s; window by window
  (graph_stream), its peak memory stays under 3x the file's size.

On every file protobuf's `text_format` accepts (against `tcmp/schemas/proto/ge_ir.proto`), the records equal those
protobuf's message gives (tests/schemas/test_graph_reference.py). The peer's line-based parser breaks on strings
containing `": "` or `" {"` and treats control edges as data inputs; neither happens here.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Optional, Union

from tcmp.schemas.errors import GraphParseError
from tcmp.schemas.graph import (
    FX_TENSOR_NAME_ATTR,
    ORIGIN_NAME_ATTR,
    ORIGIN_OUTPUT_INDEX_ATTR,
    ORIGINAL_OP_NAMES_ATTR,
    STACK_INFO_ATTRS,
    Graph,
    GraphOp,
    InputEdge,
    OutputDesc,
    parse_input_edge,
)
from tcmp.schemas.graph_attrs import AttrReader
from tcmp.schemas.graph_attrs import Refused as _Refused
from tcmp.schemas.graph_attrs import text as _text
from tcmp.schemas.graph_lines import line_view
from tcmp.schemas.graph_stream import Undecided, read_streamed
from tcmp.schemas.graph_subgraphs import SUBGRAPH_ATTR_KEYS, SUBGRAPH_ATTRS
from tcmp.schemas.graph_text import FIELD_CODES, ROOT, NotLineShaped, int_value, string_value
from tcmp.schemas.graph_tokens import token_view
from tcmp.schemas.limits import MAX_GRAPH_TEXT_BYTES, MAX_WHOLE_GRAPH_TEXT_BYTES, refusal
from tcmp.schemas.proto import GE_IR_DATA_TYPE


def read_graph(path: Union[str, Path]) -> Graph:
    """Read one graph text file. Raises GraphParseError, with line and column, when its op structure is
    unreadable; anything else odd is in `Graph.warnings`."""
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > MAX_GRAPH_TEXT_BYTES:  # refused before reading
                raise GraphParseError(path, refusal("graph text", size, MAX_GRAPH_TEXT_BYTES))
            raw = handle.read(size + 1)  # (a buffer of the limit's size would be allocated: read what is there)
            if len(raw) > size:  # grew since
                raw += handle.read(MAX_GRAPH_TEXT_BYTES + 1 - len(raw))
        if len(raw) > MAX_GRAPH_TEXT_BYTES:  # grew since
            raise GraphParseError(path, refusal("graph text", len(raw), MAX_GRAPH_TEXT_BYTES))
    except OSError as exc:
        raise GraphParseError(path, f"cannot read: {exc.strerror or exc}") from exc
    return parse_graph_bytes(raw, path)


def parse_graph_text(text: str, path: Union[str, Path]) -> Graph:
    """Read graph text already in memory (`path` is only recorded and used in messages)."""
    return parse_graph_bytes(text.encode("utf-8", "surrogateescape"), Path(path))


def parse_graph_bytes(raw: bytes, path: Path) -> Graph:
    notes = _utf8_notes(raw)
    reader = GraphTextReader(None)
    try:
        name, ops = read_streamed(raw, reader, WANTED_KEYS)  # memory for a window of the text, not the file
    except (_Refused, NotLineShaped, Undecided, RecursionError):
        if len(raw) > MAX_WHOLE_GRAPH_TEXT_BYTES:  # read whole at ~30x its size: not for a file this large
            what = "graph text off the printers' layout or with an unreadable op structure"
            raise GraphParseError(path, refusal(what, len(raw), MAX_WHOLE_GRAPH_TEXT_BYTES)) from None
        return parse_whole_graph_bytes(raw, path, notes)  # the whole-file view decides (and words the refusal)
    return Graph(name=name, path=path, ops=ops, warnings=(*notes, *reader.warnings()))


def _utf8_notes(raw: bytes) -> list[str]:
    """The note for the first byte that is not UTF-8, if any (decoded a slice at a time: no copy of the file)."""
    if raw.isascii():
        return []
    view = memoryview(raw)
    start = 0
    while start < len(raw):
        end = raw.find(b"\n", start + _UTF8_SLICE) + 1 or len(raw)  # a newline never ends inside a character
        try:
            str(view[start:end], "utf-8")
        except UnicodeDecodeError as exc:
            # One stray byte (e.g. in a stack-trace string) should not cost the whole graph; names that contain
            # it simply will not match.
            return [f"invalid UTF-8 at byte {start + exc.start} replaced with U+FFFD"]
        start = end
    return []


_UTF8_SLICE = 1 << 20


def parse_whole_graph_bytes(raw: bytes, path: Path, notes: Optional[list[str]] = None) -> Graph:
    """The graph from views of the whole file at once: the line view, else the tokenizer's (what a refused or
    odd file is read with; the same records as parse_graph_bytes at many times the file's size)."""
    if notes is None:
        notes = _utf8_notes(raw)
    try:
        try:
            reader = GraphTextReader(line_view(raw, WANTED_KEYS))
            name, ops = reader.read()
        except NotLineShaped:  # not one field per line: the tokenizer sees exactly what protobuf sees
            reader = GraphTextReader(token_view(raw))
            name, ops = reader.read()
    except _Refused as refused:
        line, column = reader.view.position(refused.offset)
        raise GraphParseError(path, f"line {line}, column {column}: {refused.reason}") from None
    except RecursionError:
        raise GraphParseError(path, "blocks nested too deeply to read") from None
    return Graph(name=name, path=path, ops=ops, warnings=(*notes, *reader.warnings()))


_DATA_TYPES = {name.encode(): value.number for name, value in GE_IR_DATA_TYPE.values_by_name.items()}
_INT32 = range(-(2**31), 2**31)
_OP_ATTRS = frozenset(k.encode() for k in (ORIGINAL_OP_NAMES_ATTR, *STACK_INFO_ATTRS, *SUBGRAPH_ATTR_KEYS))
_DESC_ATTRS = frozenset(k.encode() for k in (FX_TENSOR_NAME_ATTR, ORIGIN_NAME_ATTR, ORIGIN_OUTPUT_INDEX_ATTR))
WANTED_KEYS = tuple(sorted(_OP_ATTRS | _DESC_ATTRS))
_FX_TENSOR_NAME_ATTR_KEY, _ORIGIN_NAME_ATTR_KEY, _ORIGIN_OUTPUT_INDEX_ATTR_KEY, _ORIGINAL_OP_NAMES_ATTR_KEY = (
    FX_TENSOR_NAME_ATTR.encode(), ORIGIN_NAME_ATTR.encode(), ORIGIN_OUTPUT_INDEX_ATTR.encode(),
    ORIGINAL_OP_NAMES_ATTR.encode(),
)  # fmt: skip
_STACK_INFO_KEYS = tuple(key.encode() for key in STACK_INFO_ATTRS)
_SUBGRAPH_ATTR_KEYS = {op_type.encode(): tuple(k.encode() for k in keys) for op_type, keys in SUBGRAPH_ATTRS.items()}
# Field name codes (graph_text.FIELD_CODES).
_OP, _NAME, _GRAPH, _TYPE, _INPUT, _ATTR, _OUTPUT_DESC, _KEY, _VALUE, _DTYPE, _SHAPE, _LAYOUT, _DIM, _LIST, _S, _I = (
    FIELD_CODES[name]
    for name in (b"op", b"name", b"graph", b"type", b"input", b"attr", b"output_desc", b"key", b"value", b"dtype",
                 b"shape", b"layout", b"dim", b"list", b"s", b"i")
)  # fmt: skip
_SUBGRAPH_NAME, _FUNC, _NA = FIELD_CODES[b"subgraph_name"], FIELD_CODES[b"func"], FIELD_CODES[b"na"]


class GraphTextReader(AttrReader):
    """What the fields of a GraphDef (or of every graph of a ModelDef: the root, then its subgraphs) mean for tcmp:
    the op records.

    Mirrors protobuf's semantics where protobuf accepts the text: repeated fields append in order, a scalar given
    twice keeps the last value, map entries are looked up by key (the last entry of a key wins), and AttrDef's
    value is its oneof member.
    """

    def __init__(self, view) -> None:
        self.view = view
        self._notes: list[str] = []
        self._unknown_types: list[str] = []
        self._handled: set[int] = set()  # damage already reported on its own
        # Equal values read once and shared by the records (op types, layouts, shapes, edges: most repeat).
        self._shared: dict = {}
        self._edges: dict[str, InputEdge] = {}

    def warnings(self) -> tuple[str, ...]:
        notes = list(self._notes)
        if self._unknown_types:
            notes.append("unknown enum value(s) read as unknown dtype: " + ", ".join(self._unknown_types))
        damages = [d for d in self.view.damages if d.offset not in self._handled]
        if damages:
            line, column = self.view.position(damages[0].offset)
            notes.append(
                f"{len(damages)} place(s) that do not parse as text format, inside fields tcmp does not read, "
                f"skipped (first at line {line}, column {column}: {damages[0].reason})"
            )
        return tuple(notes)

    def _share(self, value):
        return self._shared.setdefault(value, value)

    def _note(self, offset: int, message: str) -> None:
        line, _ = self.view.position(offset)
        self._notes.append(f"line {line}: {message}")

    def _require_intact(self, block, offset: int, what: str) -> None:
        damage = self.view.damage(block)
        if damage is not None:
            raise _Refused(damage.offset, f"{what} does not parse: {damage.reason}")

    # --- graph level

    def read(self) -> tuple[str, tuple[GraphOp, ...]]:
        view = self.view
        self._require_intact(ROOT, 0, "the file")
        entries = list(view.entries(ROOT))
        if any(code == _OP for code, *_ in entries):  # a GraphDef (torchair's)
            name, ops = self._graph(entries, None, 0)
            return name, tuple(ops)
        # a ModelDef (GE's own dumps): graph[0] is the root graph, the others its subgraphs
        name, ops = "", []
        blocks = [(payload, offset) for code, is_block, payload, offset in entries if code == _GRAPH and is_block]
        for k, (block, offset) in enumerate(blocks):
            self._require_intact(block, offset, "the graph block")
            graph_entries = list(view.entries(block))
            graph_name, graph_ops = self._graph(graph_entries, None if k == 0 else "", len(ops))
            if k == 0:
                name = graph_name
            ops.extend(graph_ops)
        if not blocks:
            name, _ = self._graph(entries, None, 0)
        return name, tuple(ops)

    def _graph(self, entries, subgraph: Optional[str], first: int) -> tuple[str, list[GraphOp]]:
        """One graph block's name and ops; `subgraph` None for the root graph, else its ops are marked with the
        block's name (read first: protobuf allows it after the ops)."""
        name = self.graph_name(entries)
        within = None if subgraph is None else name
        ops: list[GraphOp] = []
        for code, is_block, payload, offset in entries:
            if code == _OP:
                ops.append(self.op_entry(is_block, payload, offset, first + len(ops), within))
        return name, ops

    def graph_name(self, entries) -> str:
        """A graph's name from its entries (or those of a part of it): the last `name` given."""
        name = ""
        for code, is_block, payload, offset in entries:
            if code == _NAME and not is_block:
                value = string_value(payload)
                if value is None:
                    self._note(offset, "graph name is not a string; left empty")
                name = _text(value) if value is not None else ""
        return name

    def op_entry(self, is_block: bool, payload, offset: int, order: int, subgraph: Optional[str]) -> GraphOp:
        """The op of an `op` entry of a graph."""
        if not is_block:
            raise _Refused(offset, "`op` is not a block")
        return self._op(payload, offset, order, subgraph)

    # --- op level

    def _string(self, is_block: bool, payload, offset: int, what: str) -> str:
        value = None if is_block else string_value(payload)
        if value is None:
            raise _Refused(offset, f"{what} is not a string")
        return _text(value)

    def _op(self, block, offset: int, order: int, subgraph: Optional[str]) -> GraphOp:
        self._require_intact(block, offset, "op block")
        name = op_type = ""
        inputs: list[InputEdge] = []
        control_inputs: list[str] = []
        outputs: list[OutputDesc] = []
        attrs: dict[bytes, tuple] = {}
        subgraphs: list[str] = []
        for code, is_block, payload, at in self.view.entries(block):
            if code == _SUBGRAPH_NAME:
                named = self._string(is_block, payload, at, "op subgraph_name")
                if named:  # GE skips empty names when it reads the field back
                    subgraphs.append(named)
            elif code == _INPUT:
                text = self._string(is_block, payload, at, "op input")
                if not text:
                    continue  # an absent optional input keeps its slot in GE IR but is not an edge
                edge = self._edges.get(text) or self._edges.setdefault(text, parse_input_edge(text))
                if edge.index < 0:
                    control_inputs.append(edge.producer)
                else:
                    inputs.append(edge)
            elif code == _NAME:
                name = self._string(is_block, payload, at, "op name")
            elif code == _TYPE:
                op_type = self._share(self._string(is_block, payload, at, "op type"))
            elif code == _ATTR:
                self._attr_entry(is_block, payload, at, _OP_ATTRS, attrs)
            elif code == _OUTPUT_DESC:
                if not is_block:
                    raise _Refused(at, "output_desc is not a block")
                outputs.append(self._output_desc(payload, at, len(outputs)))
        return GraphOp(
            order=order,
            name=name,
            type=op_type,
            inputs=tuple(inputs),
            control_inputs=tuple(control_inputs),
            outputs=tuple(outputs),
            original_op_names=self._attr_strings(attrs, _ORIGINAL_OP_NAMES_ATTR_KEY, structural=True),
            stack_info=self._stack_info(attrs),
            subgraph=subgraph,
            subgraphs=tuple(subgraphs) if subgraphs else self._function_attrs(op_type, attrs),
        )

    def _function_attrs(self, op_type: str, attrs: dict) -> tuple[str, ...]:
        """The subgraphs an op names in function attributes (`func { name }`, `list { na { name } }`), when its
        `subgraph_name` field names none."""
        found: list[str] = []
        for key in _SUBGRAPH_ATTR_KEYS.get(op_type.encode(), ()):
            member = self._member(attrs, key)
            if member is None or not member[1] or member[0] not in (_FUNC, _LIST):
                continue
            functions = [member[2]] if member[0] == _FUNC else [
                item for code, nested, item, _ in self.view.entries(member[2]) if code == _NA and nested
            ]  # fmt: skip
            for function in functions:
                if self.view.damage(function) is not None:
                    self._note(member[3], f"attribute {_text(key)}: a function that does not parse; ignored")
                    continue
                names = [(nested, payload, at) for code, nested, payload, at in self.view.entries(function)
                         if code == _NAME]  # fmt: skip
                if not names:
                    continue
                nested, payload, at = names[-1]  # a scalar given twice keeps the last value
                value = None if nested else string_value(payload)
                if value is None:
                    self._note(at, f"attribute {_text(key)}: function name is not a string; ignored")
                elif value:
                    found.append(_text(value))
        return tuple(found)

    def _stack_info(self, attrs: dict) -> Optional[str]:
        if not attrs:
            return None
        for key in _STACK_INFO_KEYS:
            lines = self._attr_strings(attrs, key, structural=False)
            if lines:
                return "\n".join(lines)
        return None

    # --- tensor descs

    def _output_desc(self, block, offset: int, index: int) -> OutputDesc:
        self._require_intact(block, offset, "output_desc block")
        dtype: Optional[int] = 0
        shape: tuple[int, ...] = ()
        layout = ""
        attrs: dict[bytes, tuple] = {}
        for code, is_block, payload, at in self.view.entries(block):
            if code == _DTYPE and not is_block:
                dtype = self._data_type(payload, at)
            elif code == _SHAPE and is_block:
                shape = self._shape(payload, at)
            elif code == _LAYOUT and not is_block:
                value = string_value(payload)
                if value is None:
                    self._note(at, "output desc layout is not a string; left empty")
                layout = self._share(_text(value)) if value is not None else ""
            elif code == _ATTR:
                self._attr_entry(is_block, payload, at, _DESC_ATTRS, attrs)
        return OutputDesc(
            index=index,
            fx_tensor_name=self._attr_string(attrs, _FX_TENSOR_NAME_ATTR_KEY),
            dtype=dtype,
            shape=shape,
            layout=layout,
            origin_name=self._attr_string(attrs, _ORIGIN_NAME_ATTR_KEY),
            origin_output_index=self._attr_int(attrs, _ORIGIN_OUTPUT_INDEX_ATTR_KEY),
        )

    def _data_type(self, payload: bytes, offset: int) -> Optional[int]:
        known = _DATA_TYPES.get(payload)
        if known is not None:
            return known
        try:
            number = int(payload.decode("ascii"), 0)  # protobuf's ParseEnum: a number, else a name
        except (ValueError, UnicodeDecodeError):
            if re.fullmatch(rb"[A-Za-z_]\w*", payload):
                name = payload.decode()
                if name not in self._unknown_types:
                    self._unknown_types.append(name)
            else:
                self._note(offset, f"dtype {_text(payload)!r} is neither a DataType name nor a number")
            return None
        if number not in _INT32:
            self._note(offset, f"dtype {number} does not fit an enum (int32)")
            return None
        return number

    def _shape(self, block, offset: int) -> tuple[int, ...]:
        dims = self.view.small_ints(block, _DIM)  # a shape block of `dim: <digits>` lines, the common case
        if dims is not None:
            return self._share(tuple(dims))
        damage = self.view.damage(block)
        found: list[int] = []
        for code, is_block, payload, at in self.view.entries(block):
            if code == _DIM:
                dim = None if is_block else int_value(payload)
                if dim is None:
                    self._note(at, f"shape dim {_text(payload) if not is_block else '{…}'!r} is not a number; "
                                   "shape left empty")  # fmt: skip
                    return ()
                found.append(dim)
        if damage is not None:
            self._handled.add(damage.offset)
            self._note(offset, f"shape does not parse ({damage.reason}); left empty")
            return ()
        return tuple(found)
