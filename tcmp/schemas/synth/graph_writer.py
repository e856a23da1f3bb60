"""Writes format-exact torchair graph text files for the synthetic dump trees used by tests and benchmarks.

torchair builds a GE IR `GraphDef` and writes `str(graph)`, i.e. protobuf text format
(docs/formats.md, "Graph text structure");
this module does the same from small typed specs, through protobuf's own printer and tcmp's schema (whose enums
are GE's, so `dtype: DT_FLOAT16` and `val_type: VT_LIST_INT` are printed by name exactly as in real files). Like
torchair 2.14's converter it writes, besides what tcmp reads, what it does not: op attributes (the op's own and the
`_input_name_key`/`_input_name_value`/`_output_name_key`/`_output_name_value` lists of the optimized graph), an
input desc per input with a `_meta` string, unfed optional inputs (`input: ""`, `_is_unfed_optional`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from google.protobuf import text_format

from tcmp.schemas.graph import (
    FX_TENSOR_NAME_ATTR,
    ORIGIN_NAME_ATTR,
    ORIGIN_OUTPUT_INDEX_ATTR,
    ORIGINAL_OP_NAMES_ATTR,
    parse_input_edge,
)
from tcmp.schemas.graph_names import GraphKind, GraphNameForm
from tcmp.schemas.proto import GraphDef

_LIST_VALUE_TYPE = GraphDef.DESCRIPTOR.file.pool.FindEnumTypeByName("tcmp.ge_ir.AttrDef.ListValue.ListValueType")

__all__ = [
    "GraphOpSpec",
    "OutputSpec",
    "build_graph_def",
    "graph_file_name",
    "graph_text",
    "write_graph",
]


@dataclass(frozen=True)
class OutputSpec:
    fx_tensor_name: Optional[str]  # "{node}-{target}.OUTPUT.{i}", or None for inner ops of an expansion
    dtype: int  # GE DataType number (tcmp.schemas.proto.GE_IR_DATA_TYPE)
    shape: tuple[int, ...]
    layout: str = "ND"
    origin_name: Optional[str] = None  # `_datadump_origin_name` (GE's own post-fusion graphs)
    origin_output_index: Optional[int] = None  # `_datadump_origin_output_index`


@dataclass(frozen=True)
class GraphOpSpec:
    name: str
    type: str
    inputs: tuple[str, ...] = ()  # "producer:i" data edges, "producer:-1" control edges, "" an unfed optional input
    outputs: tuple[OutputSpec, ...] = ()
    original_op_names: tuple[str, ...] = ()  # `_datadump_original_op_names`
    # The op's own attributes, as torchair's op builders set them: name -> bool, int, float, str, or a list of
    # ints / strings (written as `list { … val_type: … }`).
    attrs: tuple[tuple[str, object], ...] = ()


def graph_file_name(
    number: int,
    rank: int,
    pid: int,
    ts: str,
    kind: Union[GraphKind, str] = GraphKind.ORIGINAL,
    form: GraphNameForm = GraphNameForm.NUMBERED,
) -> str:
    """The file name torchair gives a graph dump in each era (graph_names): since 2025-05
    `dynamo_{kind}_graph_{N}_rank_{R}_pid_{PID}_ts_{TS}.txt`; 2024-01 to 2025-05 `dynamo_{kind}_graph_{TS}.txt`;
    before that `dynamo_{TS}.txt` (the original graph only). The older forms carry no number, rank or pid."""
    kind = GraphKind(kind)
    if form is GraphNameForm.DYNAMO:
        if kind is not GraphKind.ORIGINAL:
            raise ValueError("torchair before 2024-01 dumped the converted (original) graph only")
        return f"dynamo_{ts}.txt"
    if form is GraphNameForm.KIND:
        return f"dynamo_{kind.value}_graph_{ts}.txt"
    return f"dynamo_{kind.value}_graph_{number}_rank_{rank}_pid_{pid}_ts_{ts}.txt"


_VAL_TYPE = {int: "VT_LIST_INT", str: "VT_LIST_STRING", float: "VT_LIST_FLOAT", bool: "VT_LIST_BOOL"}


def build_graph_def(name: str, ops: Iterable[GraphOpSpec]) -> GraphDef:
    """A GraphDef shaped like torchair's: each input gets an input_desc copied from its producer's output desc
    when the producer is among `ops` (torchair copies the desc of every tensor it wires), an unfed optional input
    an empty one marked `_is_unfed_optional`; the op records its input and output names."""
    graph_def = GraphDef(name=name)
    specs = list(ops)
    outputs_by_op = {spec.name: spec.outputs for spec in specs}
    for spec in specs:
        op_def = graph_def.op.add(name=spec.name, type=spec.type)
        op_def.input.extend(spec.inputs)
        for attr_name, value in spec.attrs:
            _set_attr(op_def.attr[attr_name], value)
        if spec.original_op_names:
            _set_attr(op_def.attr[ORIGINAL_OP_NAMES_ATTR], list(spec.original_op_names))
        data_inputs = [text for text in spec.inputs if not text.endswith(":-1")]
        for position, text in enumerate(data_inputs):
            desc = op_def.input_desc.add(name=f"x{position}")
            if not text:
                desc.attr["_is_unfed_optional"].i = 1
                continue
            edge = parse_input_edge(text)
            producer_outputs = outputs_by_op.get(edge.producer, ())
            if 0 <= edge.index < len(producer_outputs):
                _fill_desc(desc, producer_outputs[edge.index], with_attrs=False)
        for position, output in enumerate(spec.outputs):
            _fill_desc(op_def.output_desc.add(name=f"y{position}"), output, with_attrs=True)
        if data_inputs or spec.outputs:
            # torchair fills these with `list.s[:] = …` and sets no val_type (its raw-op builders do, for axes etc.)
            _set_attr(op_def.attr["_input_name_key"], [f"x{i}" for i in range(len(data_inputs))], val_type=False)
            _set_attr(op_def.attr["_input_name_value"], list(range(len(data_inputs))), val_type=False)
            _set_attr(op_def.attr["_output_name_key"], [f"y{i}" for i in range(len(spec.outputs))], val_type=False)
            _set_attr(op_def.attr["_output_name_value"], list(range(len(spec.outputs))), val_type=False)
    return graph_def


def _set_attr(attr, value: object, val_type: bool = True) -> None:
    """An AttrDef from a Python value, as torchair's op builders set them (`op.attr["axes"].list.val_type = 2`)."""
    if isinstance(value, bool):
        attr.b = value
    elif isinstance(value, int):
        attr.i = value
    elif isinstance(value, float):
        attr.f = value
    elif isinstance(value, str):
        attr.s = value.encode()
    elif isinstance(value, bytes):
        attr.s = value
    else:
        items = list(value)  # type: ignore[call-overload]
        kind = type(items[0]) if items else str
        target = {int: attr.list.i, str: attr.list.s, float: attr.list.f, bool: attr.list.b}[kind]
        target.extend(item.encode() if isinstance(item, str) else item for item in items)
        if not items:
            attr.list.SetInParent()  # an empty list is still the attribute's value
        if val_type:
            attr.list.val_type = _LIST_VALUE_TYPE.values_by_name[_VAL_TYPE[kind]].number


def _fill_desc(desc, output: OutputSpec, with_attrs: bool) -> None:
    desc.dtype = output.dtype
    desc.shape.dim.extend(output.shape)
    desc.layout = output.layout
    desc.attr["_meta"].s = f"Tensor(dtype={output.dtype}, shape=torch.Size({list(output.shape)}))".encode()
    if not with_attrs:
        return
    if output.fx_tensor_name is not None:
        desc.attr[FX_TENSOR_NAME_ATTR].s = output.fx_tensor_name.encode()
    if output.origin_name is not None:
        desc.attr[ORIGIN_NAME_ATTR].s = output.origin_name.encode()
    if output.origin_output_index is not None:
        desc.attr[ORIGIN_OUTPUT_INDEX_ATTR].i = output.origin_output_index


def graph_text(graph_def: GraphDef) -> str:
    """What torchair writes with `str(graph)`: protobuf text format via MessageToString, which is what `str()`
    gives under the pure-Python protobuf runtime. (upb's own `str()` prints map entries unsorted; the message is
    the same, only the order of `attr` entries differs.)"""
    return text_format.MessageToString(graph_def)


def write_graph(directory: Union[str, Path], file_name: str, name: str, ops: Sequence[GraphOpSpec]) -> Path:
    """Write graph `name` built from `ops` to `directory/file_name` and return the path."""
    path = Path(directory) / file_name
    path.write_text(graph_text(build_graph_def(name, ops)), encoding="utf-8")
    return path
