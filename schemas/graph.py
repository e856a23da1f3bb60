"""Reader for torchair's graph text files (`dynamo_original_graph_*.txt`, `dynamo_optimized_graph_*.txt`).

The files are `str()` of GE IR's `GraphDef`, i.e. protobuf text format (spec/dump-formats.md §3.3, §4.4). They are
parsed with `google.protobuf.text_format` against tcmp's subset of `ge_ir.proto`, never by hand: the peer's
line-based parser breaks on strings containing `": "` or `" {"` and treats control edges as data inputs (§5.3
items 5, 11). The protobuf messages are then condensed into small frozen records that the matcher and the index
use.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

from google.protobuf import text_format

from tcmp.schemas.errors import GraphParseError
from tcmp.schemas.proto import GraphDef

__all__ = [
    "FxTensorName",
    "Graph",
    "GraphFileName",
    "GraphKind",
    "GraphOp",
    "InputEdge",
    "OutputDesc",
    "parse_graph_file_name",
    "parse_graph_text",
    "parse_input_edge",
    "read_graph",
]

# Attribute keys torchair / GE put on ops and output descs (spec §4.4, §5.2).
FX_TENSOR_NAME_ATTR = "_fx_tensor_name"
ORIGINAL_OP_NAMES_ATTR = "_datadump_original_op_names"
ORIGIN_NAME_ATTR = "_datadump_origin_name"
ORIGIN_OUTPUT_INDEX_ATTR = "_datadump_origin_output_index"
# torchair does not always record a stack; these are the keys seen or plausible for one, first match wins.
STACK_INFO_ATTRS = ("_stack_info", "stack_trace", "_fx_stack_trace")

CONTROL_EDGE_INDEX = -1

# Stands in for an enum value name this proto subset does not know (e.g. a dtype added by a newer GE). The
# ge_ir enums are proto3 (open), so text format accepts any int32 number for them; this one can never be a real
# DataType, so a desc carrying it reads back as "dtype unknown" (None).
UNKNOWN_ENUM_NUMBER = -(2**31)
# Each retry re-parses the whole file; distinct unknown names are few, and every occurrence that sits on its own
# line is replaced in one go, so this cap is only reached by pathological files.
_MAX_UNKNOWN_ENUM_RETRIES = 64


# ----------------------------------------------------------------------------------------------------------------
# File names


class GraphKind(str, enum.Enum):
    ORIGINAL = "original"  # dumped right after FX -> GE conversion
    OPTIMIZED = "optimized"  # dumped after torchair's own graph passes


@dataclass(frozen=True)
class GraphFileName:
    kind: GraphKind
    number: int  # process-global counter from 1; the GE graph is named graph_{number}
    rank: Optional[int]  # None for the older naming form
    pid: Optional[int]
    timestamp: Optional[str]  # UTC %Y%m%d%H%M%S%f as written; None when the writer left it out


_GRAPH_FILE_NAME = re.compile(
    r"dynamo_(?P<kind>original|optimized)_graph_(?P<number>\d+)"
    r"(?:_rank_(?P<rank>\d+)_pid_(?P<pid>\d+)(?:_ts_(?P<ts>\d+))?"  # current form (ts optional in the writer)
    r"|_(?P<old_ts>\d+))"  # older form: dynamo_original_graph_{N}_{ts}
    r"\.txt"
)


def parse_graph_file_name(name: str) -> Optional[GraphFileName]:
    """Recognise a torchair graph text file by its base name; None for anything else (including `.py`/`.pbtxt`
    graph dumps, which are not protobuf text format)."""
    match = _GRAPH_FILE_NAME.fullmatch(name)
    if match is None:
        return None
    rank, pid = match["rank"], match["pid"]
    return GraphFileName(
        kind=GraphKind(match["kind"]),
        number=int(match["number"]),
        rank=int(rank) if rank is not None else None,
        pid=int(pid) if pid is not None else None,
        timestamp=match["ts"] if match["ts"] is not None else match["old_ts"],
    )


# ----------------------------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True)
class FxTensorName:
    """`{node}-{target}.OUTPUT.{i}`: which FX node output a GE tensor was converted from."""

    node_key: str  # "{node}-{target}", the same key the FX dump file names carry
    output_index: int

    @classmethod
    def parse(cls, text: str) -> Optional[FxTensorName]:
        match = _FX_TENSOR_NAME.fullmatch(text)
        if match is None:
            return None
        return cls(node_key=match["key"], output_index=int(match["index"]))

    def __str__(self) -> str:
        return f"{self.node_key}.OUTPUT.{self.output_index}"


_FX_TENSOR_NAME = re.compile(r"(?P<key>.+)\.OUTPUT\.(?P<index>\d+)", re.DOTALL)


@dataclass(frozen=True)
class InputEdge:
    producer: str
    index: int  # producer's output index; -1 marks a control edge

    @property
    def is_control(self) -> bool:
        return self.index == CONTROL_EDGE_INDEX


def parse_input_edge(text: str) -> InputEdge:
    """`"producer:3"` -> InputEdge("producer", 3).

    The index is the text after the *last* ':' when that text is an integer, so producer names may themselves
    contain ':' (`"ns::op:1"` -> ("ns::op", 1)). Without an integer suffix the whole text is the producer and the
    index is 0, as GE reads an edge written without an index.
    """
    producer, sep, index_text = text.rpartition(":")
    if sep and _is_int(index_text):
        return InputEdge(producer=producer, index=int(index_text))
    return InputEdge(producer=text, index=0)


def _is_int(text: str) -> bool:
    digits = text[1:] if text[:1] in ("-", "+") else text
    return digits.isdigit() and digits.isascii()


@dataclass(frozen=True)
class OutputDesc:
    index: int  # position in the op's output_desc list
    fx_tensor_name: Optional[str]  # `_fx_tensor_name`, only on the last GE op(s) of a converter's expansion
    dtype: Optional[int]  # GE DataType number; None when the file named a dtype this tool does not know
    shape: tuple[int, ...]
    layout: str
    origin_name: Optional[str]  # `_datadump_origin_name` (fused ops: the original op this output came from)
    origin_output_index: Optional[int]  # `_datadump_origin_output_index`

    @property
    def fx_tensor(self) -> Optional[FxTensorName]:
        return FxTensorName.parse(self.fx_tensor_name) if self.fx_tensor_name is not None else None


@dataclass(frozen=True)
class GraphOp:
    order: int  # 0-based position in the file (torchair writes ops in topological order)
    name: str
    type: str
    inputs: tuple[InputEdge, ...]  # data inputs in order; empty strings (absent optional inputs) are left out
    control_inputs: tuple[str, ...]  # producers of `x:-1` edges
    outputs: tuple[OutputDesc, ...]
    original_op_names: tuple[str, ...]  # `_datadump_original_op_names`
    stack_info: Optional[str]

    def as_fields(self) -> list:
        """The op as JSON-ready values in field order (the graph cache stores the list, the index its columns)."""
        return [
            self.order, self.name, self.type, [[e.producer, e.index] for e in self.inputs], list(self.control_inputs),
            [[o.index, o.fx_tensor_name, o.dtype, list(o.shape), o.layout, o.origin_name, o.origin_output_index]
             for o in self.outputs],
            list(self.original_op_names), self.stack_info,
        ]  # fmt: skip

    @classmethod
    def from_fields(cls, order, name, op_type, inputs, control, outputs, originals, stack) -> GraphOp:
        """The inverse of `as_fields`."""
        return cls(
            order=order, name=name, type=op_type,
            inputs=tuple(InputEdge(p, i) for p, i in inputs),
            control_inputs=tuple(control),
            outputs=tuple(OutputDesc(i, fx, dtype, tuple(shape), layout, origin, origin_index)
                          for i, fx, dtype, shape, layout, origin, origin_index in outputs),
            original_op_names=tuple(originals), stack_info=stack,
        )  # fmt: skip


@dataclass(frozen=True)
class Graph:
    name: str
    path: Path
    ops: tuple[GraphOp, ...]
    # What the reader had to work around (unknown enum names, undecodable bytes); empty for a clean file.
    warnings: tuple[str, ...] = ()
    _ops_by_name: dict = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        by_name: dict = {}
        for op in self.ops:
            by_name.setdefault(op.name, op)  # GE names are unique; if not, the first op in file order wins
        object.__setattr__(self, "_ops_by_name", by_name)

    def op(self, name: str) -> Optional[GraphOp]:
        return self._ops_by_name.get(name)

    def __len__(self) -> int:
        return len(self.ops)

    def __contains__(self, name: object) -> bool:
        return name in self._ops_by_name


# ----------------------------------------------------------------------------------------------------------------
# Reading


def read_graph(path: Union[str, Path], workers: int = 1) -> Graph:
    """Parse one graph text file. Raises GraphParseError (with protobuf's line:column) if it cannot be parsed.

    `workers` > 1 parses big files in that many spawned processes (see `_parse_graph_def`); the default stays
    in-process, because a library call should not start processes behind its caller's back.
    """
    path = Path(path)
    raw = path.read_bytes()
    warnings: list[str] = []
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        # One stray byte (e.g. in a stack-trace string) should not cost the whole graph; names that contain the
        # replaced byte will simply not match.
        text = raw.decode("utf-8", errors="replace")
        warnings.append(f"invalid UTF-8 at byte {exc.start} replaced with U+FFFD")
    return parse_graph_text(text, path, warnings=tuple(warnings), workers=workers)


def parse_graph_text(text: str, path: Union[str, Path], warnings: tuple[str, ...] = (), workers: int = 1) -> Graph:
    """Parse graph text already in memory (`path` is only recorded and used in error messages)."""
    path = Path(path)
    graph_def, unknown_enum_names = _parse_graph_def(text, path, workers)
    notes = list(warnings)
    if unknown_enum_names:
        notes.append("unknown enum value(s) read as unknown dtype: " + ", ".join(unknown_enum_names))
    ops = tuple(_graph_op(order, op_def) for order, op_def in enumerate(graph_def.op))
    return Graph(name=graph_def.name, path=path, ops=ops, warnings=tuple(notes))


# MessageToString writes every top-level `op` block starting with this exact line at column 0; nested blocks are
# indented, and a string literal never spans lines, so such a line can only open a top-level field.
_TOP_LEVEL_OP_LINE = re.compile(r"^op \{\r?$", re.MULTILINE)
_CHUNK_CHARS = 1 << 20


def _parse_graph_def(text: str, path: Path, workers: int) -> tuple[GraphDef, tuple[str, ...]]:
    """The GraphDef in `text`, plus the unknown enum names that had to be replaced.

    Big files are cut at top-level `op {` lines into ~1 MB chunks, each parsed by text_format on its own and
    merged in order. This gives exactly the whole-file result: a chunk that parses on its own ends with balanced
    braces, i.e. at a top-level field boundary, and merging messages appends repeated fields in order. It keeps
    an unknown-enum retry local to one chunk and lets `workers` processes share the work (text_format is pure
    Python: ~0.7 MB/s per core). If any chunk fails, the whole text is parsed once more, so errors and their
    line:column positions are always those of a plain parse of the file.
    """
    chunks = _top_level_chunks(text)
    if len(chunks) > 1:
        merged = _parse_chunks(chunks, workers)
        if merged is not None:
            return merged
    try:
        return _parse_text(text)
    except (text_format.ParseError, ValueError) as exc:  # ValueError: a number an enum field cannot hold
        raise GraphParseError(path, f"protobuf text format: {_short(str(exc))}") from exc
    except RecursionError as exc:  # text_format recurses per nesting level
        raise GraphParseError(path, "protobuf text format: blocks nested too deeply to parse") from exc


def _top_level_chunks(text: str) -> list[str]:
    chunks: list[str] = []
    start = 0
    for match in _TOP_LEVEL_OP_LINE.finditer(text):
        if match.start() - start >= _CHUNK_CHARS:
            chunks.append(text[start : match.start()])
            start = match.start()
    chunks.append(text[start:])
    return chunks


def _parse_chunks(chunks: list[str], workers: int) -> Optional[tuple[GraphDef, tuple[str, ...]]]:
    """Merge the chunk parses in order; None if any chunk fails (the caller then parses the whole text)."""
    if workers > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # spawn, not fork: the daemon that calls this runs watcher threads, and forking a threaded process can
        # deadlock.
        context = multiprocessing.get_context("spawn")
        try:
            with ProcessPoolExecutor(max_workers=min(workers, len(chunks)), mp_context=context) as pool:
                results = list(pool.map(_parse_chunk_serialized, chunks))
        except (OSError, RuntimeError):  # no processes here (sandbox, limits, broken pool): parse in-process
            results = [_parse_chunk_serialized(chunk, serialize=False) for chunk in chunks]
    else:
        results = [_parse_chunk_serialized(chunk, serialize=False) for chunk in chunks]
    graph_def = GraphDef()
    unknown_names: list[str] = []
    named_chunks = 0
    for result in results:
        if result is None:
            return None
        chunk_def, names = result
        if isinstance(chunk_def, bytes):
            chunk_def = GraphDef.FromString(chunk_def)
        named_chunks += bool(chunk_def.name)
        graph_def.MergeFrom(chunk_def)
        unknown_names.extend(name for name in names if name not in unknown_names)
    if named_chunks > 1:
        return None  # a repeated singular field: let the whole-text parse report it
    return graph_def, tuple(unknown_names)


def _parse_chunk_serialized(chunk: str, serialize: bool = True):
    """Worker entry point: (GraphDef or its bytes, unknown enum names), or None if the chunk does not parse."""
    try:
        graph_def, names = _parse_text(chunk)
    except (text_format.ParseError, ValueError, RecursionError):
        return None
    return (graph_def.SerializeToString() if serialize else graph_def), names


# Only identifier-like tokens count as enum names from the future; `dtype: 1.5` stays an error.
_UNKNOWN_ENUM_MESSAGE = re.compile(r'Enum type "[^"]*" has no value named (?P<name>[A-Za-z_]\w*)\.$')


def _parse_text(text: str) -> tuple[GraphDef, tuple[str, ...]]:
    """text_format.Parse, retried past enum value names this proto subset does not know.

    An unknown enum *name* is a hard ParseError in text format (unlike unknown fields), yet it only means GE grew
    a new dtype. On that specific error the offending token is replaced by UNKNOWN_ENUM_NUMBER (a number is legal
    for an open proto3 enum) and the parse is retried. Every other line of the form `field: NAME` is replaced in
    the same pass, so a name repeated on thousands of descs costs one retry, not thousands; such a whole-line
    match cannot sit inside a string literal, because text-format strings never span lines. Any other error
    propagates as text_format.ParseError.
    """
    unknown_names: list[str] = []
    for _ in range(_MAX_UNKNOWN_ENUM_RETRIES + 1):
        graph_def = GraphDef()
        try:
            text_format.Parse(text, graph_def, allow_unknown_field=True, allow_unknown_extension=True)
        except text_format.ParseError as exc:
            name = _unknown_enum_name(exc)
            if name is None:
                raise
            patched = _replace_enum_name(text, name, exc.GetLine(), exc.GetColumn())
            if patched == text:
                raise
            text = patched
            if name not in unknown_names:
                unknown_names.append(name)
            continue
        return graph_def, tuple(unknown_names)
    raise text_format.ParseError(f"gave up after {_MAX_UNKNOWN_ENUM_RETRIES} unknown enum values")


def _unknown_enum_name(exc: text_format.ParseError) -> Optional[str]:
    if exc.GetLine() is None or exc.GetColumn() is None:
        return None
    match = _UNKNOWN_ENUM_MESSAGE.search(str(exc))
    return match["name"] if match is not None else None


def _replace_enum_name(text: str, name: str, line: int, column: int) -> str:
    """Replace `name` everywhere it is the whole value of a `field: value` line, then at the exact token
    protobuf reported (1-based line and column; the tokenizer splits lines on '\\n' only)."""
    whole_line = re.compile(rf"^([ \t]*[A-Za-z_]\w*[ \t]*:[ \t]*){re.escape(name)}([ \t]*\r?)$", re.MULTILINE)
    text = whole_line.sub(rf"\g<1>{UNKNOWN_ENUM_NUMBER}\g<2>", text)
    lines = text.split("\n")
    if 1 <= line <= len(lines):
        start = column - 1
        current = lines[line - 1]
        if current.startswith(name, start) and not _continues_identifier(current, start + len(name)):
            lines[line - 1] = current[:start] + str(UNKNOWN_ENUM_NUMBER) + current[start + len(name) :]
            text = "\n".join(lines)
    return text


def _continues_identifier(line: str, position: int) -> bool:
    return position < len(line) and (line[position].isalnum() or line[position] in "_+-")


def _short(message: str, limit: int = 500) -> str:
    """protobuf quotes the whole offending line; graph lines can be huge (stack traces)."""
    return message if len(message) <= limit else message[:limit] + "…"


# ----------------------------------------------------------------------------------------------------------------
# GraphDef -> records


def _graph_op(order: int, op_def) -> GraphOp:
    inputs: list[InputEdge] = []
    control_inputs: list[str] = []
    for text in op_def.input:
        if not text:
            continue  # an absent optional input keeps its slot in GE IR but is not an edge
        edge = parse_input_edge(text)
        if edge.index < 0:
            control_inputs.append(edge.producer)
        else:
            inputs.append(edge)
    attrs = op_def.attr
    return GraphOp(
        order=order,
        name=op_def.name,
        type=op_def.type,
        inputs=tuple(inputs),
        control_inputs=tuple(control_inputs),
        outputs=tuple(_output_desc(index, desc) for index, desc in enumerate(op_def.output_desc)),
        original_op_names=_attr_strings(attrs, ORIGINAL_OP_NAMES_ATTR),
        stack_info=_stack_info(attrs),
    )


def _output_desc(index: int, desc) -> OutputDesc:
    attrs = desc.attr
    return OutputDesc(
        index=index,
        fx_tensor_name=_attr_string(attrs, FX_TENSOR_NAME_ATTR),
        dtype=None if desc.dtype == UNKNOWN_ENUM_NUMBER else int(desc.dtype),
        shape=tuple(desc.shape.dim),
        layout=desc.layout,
        origin_name=_attr_string(attrs, ORIGIN_NAME_ATTR),
        origin_output_index=_attr_int(attrs, ORIGIN_OUTPUT_INDEX_ATTR),
    )


def _stack_info(attrs) -> Optional[str]:
    for key in STACK_INFO_ATTRS:
        lines = _attr_strings(attrs, key)
        if lines:
            return "\n".join(lines)
    return None


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def _attr_string(attrs, key: str) -> Optional[str]:
    if key not in attrs:
        return None
    value = attrs[key]
    return _decode(value.s) if value.WhichOneof("value") == "s" else None


def _attr_strings(attrs, key: str) -> tuple[str, ...]:
    """A string-list attr (`list { s: … }`); a single `s` is accepted as a one-element list."""
    if key not in attrs:
        return ()
    value = attrs[key]
    which = value.WhichOneof("value")
    if which == "list":
        return tuple(_decode(item) for item in value.list.s)
    if which == "s":
        return (_decode(value.s),)
    return ()


def _attr_int(attrs, key: str) -> Optional[int]:
    if key not in attrs:
        return None
    value = attrs[key]
    return int(value.i) if value.WhichOneof("value") == "i" else None
