"""Writes format-exact torchair graph text files for the synthetic dump trees used by tests and benchmarks.

torchair builds a GE IR `GraphDef` and writes `str(graph)`, i.e. protobuf text format (spec/dump-formats.md §4.4);
this module does the same from small typed specs, so the files differ from real ones only in which attributes
are present.
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
    GraphKind,
    parse_input_edge,
)
from tcmp.schemas.proto import GraphDef

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
    inputs: tuple[str, ...] = ()  # "producer:i" data edges, "producer:-1" control edges
    outputs: tuple[OutputSpec, ...] = ()
    original_op_names: tuple[str, ...] = ()  # `_datadump_original_op_names`


def graph_file_name(
    number: int,
    rank: int,
    pid: int,
    ts: str,
    kind: Union[GraphKind, str] = GraphKind.ORIGINAL,
    old_style: bool = False,
) -> str:
    """`dynamo_{kind}_graph_{N}_rank_{R}_pid_{PID}_ts_{TS}.txt`, or the older `dynamo_{kind}_graph_{N}_{TS}.txt`
    (old_style, which ignores rank and pid)."""
    kind = GraphKind(kind)
    if old_style:
        return f"dynamo_{kind.value}_graph_{number}_{ts}.txt"
    return f"dynamo_{kind.value}_graph_{number}_rank_{rank}_pid_{pid}_ts_{ts}.txt"


def build_graph_def(name: str, ops: Iterable[GraphOpSpec]) -> GraphDef:
    """A GraphDef shaped like torchair's: each data input also gets an input_desc copied from its producer's
    output desc when the producer is among `ops` (torchair records the desc of every input it wires)."""
    graph_def = GraphDef(name=name)
    specs = list(ops)
    outputs_by_op = {spec.name: spec.outputs for spec in specs}
    for spec in specs:
        op_def = graph_def.op.add(name=spec.name, type=spec.type)
        op_def.input.extend(spec.inputs)
        if spec.original_op_names:
            op_def.attr[ORIGINAL_OP_NAMES_ATTR].list.s.extend(n.encode() for n in spec.original_op_names)
        for text in spec.inputs:
            edge = parse_input_edge(text)
            producer_outputs = outputs_by_op.get(edge.producer, ())
            if 0 <= edge.index < len(producer_outputs):
                _fill_desc(op_def.input_desc.add(), producer_outputs[edge.index], with_attrs=False)
        for output in spec.outputs:
            _fill_desc(op_def.output_desc.add(), output, with_attrs=True)
    return graph_def


def _fill_desc(desc, output: OutputSpec, with_attrs: bool) -> None:
    desc.dtype = output.dtype
    desc.shape.dim.extend(output.shape)
    desc.layout = output.layout
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
