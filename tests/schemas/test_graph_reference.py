"""tcmp's graph reader against protobuf's own text_format parser, on generated graphs.

Graphs are built as protobuf messages with everything GE IR can hold (every AttrDef kind, every ListValueType,
strings with quotes, braces, escapes, non-ASCII and invalid UTF-8), printed every way protobuf prints them (the
Python printer with and without its options, upb's own `str()`), and mutated into text format that no printer
writes but protobuf accepts (comments, one field list per line, `<…>` blocks, list syntax). On every text
protobuf accepts, the records must equal those its message gives (graph_reference.reference_records).
"""

from __future__ import annotations

import re
from pathlib import Path

import hypothesis.strategies as st
from google.protobuf import text_format
from hypothesis import HealthCheck, given, settings

from tcmp.schemas import graph_stream
from tcmp.schemas.graph_lines import line_view
from tcmp.schemas.graph_reader import WANTED_KEYS, GraphTextReader, parse_graph_text, parse_whole_graph_bytes
from tcmp.schemas.graph_text import NotLineShaped
from tcmp.schemas.graph_tokens import token_view
from tcmp.schemas.proto import GE_IR_DATA_TYPE, GraphDef, ModelDef

from .graph_reference import reference_records

_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_READ_KEYS = [k.decode() for k in WANTED_KEYS]
_LIST_TYPES = GraphDef.DESCRIPTOR.file.pool.FindEnumTypeByName("tcmp.ge_ir.AttrDef.ListValue.ListValueType")

# Text with everything that breaks a naive reader: quotes, braces, colons, escapes, comment marks, non-ASCII.
_TRICKY = st.text(alphabet=st.sampled_from([*"ab_:. {}<>[]#\"'\\\n\t/", "é", "中", "\x00", "\x7f"]), max_size=12)
_NAMES = st.one_of(st.sampled_from(["x", "add_1", "MatMulV2", "a: b {", "layer.0/attn"]), _TRICKY)
_BYTES = st.one_of(_TRICKY.map(lambda s: s.encode()), st.binary(max_size=8))
_INT64 = st.integers(-(2**63), 2**63 - 1)
_DTYPES = st.one_of(st.sampled_from([v.number for v in GE_IR_DATA_TYPE.values]), st.integers(-(2**31), 2**31 - 1))


@st.composite
def _attr_value(draw, attr, depth: int = 0) -> None:
    """Fill one AttrDef with a random member of its oneof (or none)."""
    kind = draw(st.sampled_from(["s", "i", "f", "b", "bt", "list", "dt", "expression", "td", "func", "lli", "none"]))
    if kind == "s":
        attr.s = draw(_BYTES)
    elif kind == "i":
        attr.i = draw(_INT64)
    elif kind == "f":
        attr.f = draw(st.floats(width=32, allow_nan=False))
    elif kind == "b":
        attr.b = draw(st.booleans())
    elif kind == "bt":
        attr.bt = draw(_BYTES)
    elif kind == "dt":
        attr.dt = draw(_INT64)
    elif kind == "expression":
        attr.expression = draw(_BYTES)
    elif kind == "list":
        attr.list.SetInParent()
        attr.list.s.extend(draw(st.lists(_BYTES, max_size=3)))
        attr.list.i.extend(draw(st.lists(_INT64, max_size=3)))
        attr.list.b.extend(draw(st.lists(st.booleans(), max_size=2)))
        attr.list.val_type = draw(st.sampled_from([v.number for v in _LIST_TYPES.values]))
        if depth < 2:
            for name in draw(st.lists(_NAMES, max_size=2)):  # `Case`'s branches: a list of functions
                function = attr.list.na.add(name=name)
                for key in draw(st.lists(_NAMES, max_size=1)):
                    draw(_attr_value(function.attr[key], depth + 1))
    elif kind == "td" and depth < 2:
        draw(_tensor_desc(attr.td, depth + 1))
    elif kind == "func" and depth < 2:
        attr.func.name = draw(_NAMES)
        for key in draw(st.lists(_NAMES, max_size=2)):
            draw(_attr_value(attr.func.attr[key], depth + 1))
    elif kind == "lli":
        for row in draw(st.lists(st.lists(_INT64, max_size=3), max_size=2)):
            attr.list_list_int.list_list_i.add().list_i.extend(row)


@st.composite
def _attrs(draw, attr_map, depth: int) -> None:
    for key in draw(st.lists(st.one_of(st.sampled_from([*_READ_KEYS, "_meta", "axes"]), _NAMES), max_size=4)):
        draw(_attr_value(attr_map[key], depth))


@st.composite
def _tensor_desc(draw, desc, depth: int = 0) -> None:
    if draw(st.booleans()):
        desc.name = draw(_NAMES)
    desc.dtype = draw(_DTYPES)
    if draw(st.booleans()):
        desc.shape.dim.extend(draw(st.lists(_INT64, max_size=4)))
    desc.layout = draw(st.sampled_from(["", "ND", "NCHW", "FRACTAL_NZ"]))
    desc.size = draw(st.integers(0, 2**40))
    draw(_attrs(desc.attr, depth + 1))


_OP_TYPES = st.one_of(_NAMES, st.sampled_from(["PartitionedCall", "If", "While", "Case", "StatelessIf"]))


@st.composite
def graph_defs(draw) -> GraphDef:
    graph = GraphDef(name=draw(_NAMES))
    graph.input.extend(draw(st.lists(_NAMES, max_size=2)))
    for _ in range(draw(st.integers(0, 5))):
        op = graph.op.add(name=draw(_NAMES), type=draw(_OP_TYPES))
        op.subgraph_name.extend(draw(st.lists(st.one_of(st.just(""), _NAMES), max_size=2)))
        op.input.extend(
            draw(st.lists(st.one_of(st.just(""), _NAMES, st.builds("{}:{}".format, _NAMES, st.integers(-1, 3))),
                          max_size=4))
        )  # fmt: skip
        op.id = draw(st.integers(0, 100))
        draw(_attrs(op.attr, 0))
        for _ in range(draw(st.integers(0, 2))):
            draw(_tensor_desc(op.input_desc.add()))
        for _ in range(draw(st.integers(0, 3))):
            draw(_tensor_desc(op.output_desc.add()))
    draw(_attrs(graph.attr, 0))
    return graph


def _printed(graph, how: str) -> str:
    if how == "upb":
        return str(graph)  # the C printer of the default backend: map entries in insertion order
    options = {
        "python": {},
        "utf8": {"as_utf8": True},
        "index_order": {"use_index_order": True},
        "one_line": {"as_one_line": True},
        "pointy": {"pointy_brackets": True},
    }[how]
    return text_format.MessageToString(graph, **options)


_HOW = st.sampled_from(["python", "utf8", "index_order", "upb", "one_line", "pointy"])


def _assert_same_records(text: str) -> None:
    name, ops = reference_records(text)
    graph = parse_graph_text(text, "g.txt")
    assert graph.name == name
    assert graph.ops == ops


@_SETTINGS
@given(graph=graph_defs(), how=_HOW)
def test_records_equal_protobufs_on_every_printed_form(graph: GraphDef, how: str) -> None:
    _assert_same_records(_printed(graph, how))


@_SETTINGS
@given(graphs=st.lists(graph_defs(), min_size=1, max_size=3), how=_HOW)
def test_a_model_def_reads_as_all_its_graphs(graphs: list, how: str) -> None:
    """GE's ModelDef dumps: the root graph, then its subgraphs, each op marked with the subgraph it is in."""
    model = ModelDef(name="m")
    for graph in graphs:
        model.graph.add().CopyFrom(graph)
    model.graph.add(name="empty")
    _assert_same_records(_printed(model, how))


@_SETTINGS
@given(graph=graph_defs(), data=st.data())
def test_records_equal_protobufs_on_text_no_printer_writes(graph: GraphDef, data) -> None:
    """Comments, several fields on a line, `name: {` and `[a, b]` lists: the tokenizer's path."""
    lines = text_format.MessageToString(graph).split("\n")
    mutated = []
    for line in lines:
        choice = data.draw(st.sampled_from(["keep", "comment", "join", "colon"]), label="edit")
        if choice == "comment":
            line += "  # a comment } {"
        elif choice == "colon" and line.endswith(" {"):
            line = line[:-2] + ": {"
        if choice == "join" and mutated and "#" not in mutated[-1]:  # (joined after a comment: commented out)
            mutated[-1] += " " + line.strip()
        else:
            mutated.append(line)
    text = "\n".join(mutated)
    text = re.sub(r"(?m)^(\s*)dim: (-?\d+)\n\1dim: (-?\d+)$", r"\1dim: [\2, \3]", text)
    _assert_same_records(text)


@_SETTINGS
@given(graphs=st.lists(graph_defs(), min_size=1, max_size=3), how=_HOW, model=st.booleans(),
       window=st.sampled_from([1, 7, 64, 300]))  # fmt: skip
def test_records_are_the_same_whatever_the_window(graphs: list, how: str, model: bool, window: int) -> None:
    """Windows far smaller than an op: every cut, every regrowth, every graph block split over windows."""
    if model:
        message = ModelDef(name="m")
        for graph in graphs:
            message.graph.add().CopyFrom(graph)
    else:
        message = graphs[0]
    text = _printed(message, how)
    whole = parse_whole_graph_bytes(text.encode("utf-8", "surrogateescape"), Path("g.txt"))
    saved = graph_stream.WINDOW_BYTES
    graph_stream.WINDOW_BYTES = window
    try:
        windowed = parse_graph_text(text, "g.txt")
    finally:
        graph_stream.WINDOW_BYTES = saved
    assert (windowed.name, windowed.ops) == reference_records(text)
    assert windowed.warnings == whole.warnings


@_SETTINGS
@given(graph=graph_defs())
def test_line_and_token_views_read_printed_text_alike(graph: GraphDef) -> None:
    raw = text_format.MessageToString(graph).encode()
    try:
        by_lines = GraphTextReader(line_view(raw, WANTED_KEYS)).read()
    except NotLineShaped:  # a literal holding something only the tokenizer may judge
        return
    assert by_lines == GraphTextReader(token_view(raw)).read()


def test_the_line_view_is_the_one_taken_for_printed_graphs() -> None:
    """The speed rests on it: a printer's output never needs the tokenizer."""
    graph = GraphDef(name="g")
    op = graph.op.add(name='Mul: "x" {1}', type="Mul")
    op.attr["_meta"].s = b"<class 'torch.SymInt'>(s0) # {"
    op.attr["value"].s = bytes(range(256))
    op.output_desc.add(dtype=2).attr["_fx_tensor_name"].s = b"mul-aten.mul.Tensor.OUTPUT.0"
    for text in (text_format.MessageToString(graph), str(graph)):
        view = line_view(text.encode(), WANTED_KEYS)
        assert GraphTextReader(view).read() == reference_records(text)
