"""The reference for tcmp's graph reader: protobuf's own text_format parser, and the records its messages give.

This is how tcmp read graph text files before it had its own reader; the tests hold the tolerant reader to it on
every file protobuf accepts.
"""

from __future__ import annotations

from google.protobuf import text_format

from tcmp.schemas.graph import (
    FX_TENSOR_NAME_ATTR,
    ORIGIN_NAME_ATTR,
    ORIGIN_OUTPUT_INDEX_ATTR,
    ORIGINAL_OP_NAMES_ATTR,
    STACK_INFO_ATTRS,
    GraphOp,
    InputEdge,
    OutputDesc,
    parse_input_edge,
)
from tcmp.schemas.graph_subgraphs import SUBGRAPH_ATTRS
from tcmp.schemas.proto import GraphDef, ModelDef


def reference_records(text: str) -> tuple[str, tuple[GraphOp, ...]]:
    """(graph name, op records) as protobuf's text_format reads `text`: a GraphDef, or every graph of a ModelDef
    (the root graph's ops, then each subgraph's, marked with its name) when the top level holds no `op`. Raises
    text_format.ParseError where protobuf refuses."""
    graph_def = GraphDef()
    text_format.Parse(text, graph_def, allow_unknown_field=True, allow_unknown_extension=True)
    if graph_def.op:
        return graph_def.name, tuple(_graph_op(order, op_def, None) for order, op_def in enumerate(graph_def.op))
    model_def = ModelDef()
    text_format.Parse(text, model_def, allow_unknown_field=True, allow_unknown_extension=True)
    if not model_def.graph:
        return graph_def.name, ()
    ops = []
    for k, graph in enumerate(model_def.graph):
        for op_def in graph.op:
            ops.append(_graph_op(len(ops), op_def, None if k == 0 else graph.name))
    return model_def.graph[0].name, tuple(ops)


def _subgraphs(op_def) -> tuple[str, ...]:
    named = tuple(name for name in op_def.subgraph_name if name)
    if named:
        return named
    found: list[str] = []
    for key in SUBGRAPH_ATTRS.get(op_def.type, ()):
        if key not in op_def.attr:
            continue
        value = op_def.attr[key]
        which = value.WhichOneof("value")
        functions = [value.func] if which == "func" else list(value.list.na) if which == "list" else []
        found.extend(f.name for f in functions if f.name)
    return tuple(found)


def _graph_op(order: int, op_def, subgraph) -> GraphOp:
    inputs: list[InputEdge] = []
    control_inputs: list[str] = []
    for text in op_def.input:
        if not text:
            continue
        edge = parse_input_edge(text)
        if edge.index < 0:
            control_inputs.append(edge.producer)
        else:
            inputs.append(edge)
    stack = None
    for key in STACK_INFO_ATTRS:
        lines = _attr_strings(op_def.attr, key)
        if lines:
            stack = "\n".join(lines)
            break
    return GraphOp(
        order=order,
        name=op_def.name,
        type=op_def.type,
        inputs=tuple(inputs),
        control_inputs=tuple(control_inputs),
        outputs=tuple(
            OutputDesc(
                index=index,
                fx_tensor_name=_attr_string(desc.attr, FX_TENSOR_NAME_ATTR),
                dtype=int(desc.dtype),
                shape=tuple(desc.shape.dim),
                layout=desc.layout,
                origin_name=_attr_string(desc.attr, ORIGIN_NAME_ATTR),
                origin_output_index=_attr_int(desc.attr, ORIGIN_OUTPUT_INDEX_ATTR),
            )
            for index, desc in enumerate(op_def.output_desc)
        ),
        original_op_names=_attr_strings(op_def.attr, ORIGINAL_OP_NAMES_ATTR),
        stack_info=stack,
        subgraph=subgraph,
        subgraphs=_subgraphs(op_def),
    )


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def _attr_string(attrs, key: str):
    if key not in attrs:
        return None
    value = attrs[key]
    return _decode(value.s) if value.WhichOneof("value") == "s" else None


def _attr_strings(attrs, key: str) -> tuple[str, ...]:
    if key not in attrs:
        return ()
    value = attrs[key]
    which = value.WhichOneof("value")
    if which == "list":
        return tuple(_decode(item) for item in value.list.s)
    if which == "s":
        return (_decode(value.s),)
    return ()


def _attr_int(attrs, key: str):
    if key not in attrs:
        return None
    value = attrs[key]
    return int(value.i) if value.WhichOneof("value") == "i" else None
