"""The GE graph torchair handed to GE, read with torchair's own protobuf classes (not tcmp's).

The graph comes from two places that must agree: the serialized `ModelDef` torchair passed to the GE executor's
`load` (what GE compiles and runs — the stub executor saves it), and the `dynamo_optimized_graph_*.txt` torchair
dumped just before. The harness interprets the first and checks that the second says the same.

torchair's generated `ge_ir_by_protoc_3_19_pb2.py` needs only google.protobuf, so it is loaded straight from the
extracted torchair tree; this works in tcmp's environment as well as in the one that runs torchair.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Optional

_IR_MODULE = "_ge_concrete_graph/ge_ir_by_protoc_3_19_pb2.py"
FX_TENSOR_NAME = "_fx_tensor_name"

# Ops GE runs without a task of their own, so GE writes no dump file for them.
NOT_DUMPED = frozenset({"Data", "RefData", "Const", "Constant", "NetOutput"})


def load_ir_module(torchair_package: Path) -> ModuleType:
    """torchair's protobuf module for ge_ir.proto, from the extracted `torchair/` package directory."""
    path = Path(torchair_package) / _IR_MODULE
    spec = importlib.util.spec_from_file_location(f"torchair_ge_ir_{abs(hash(str(path)))}", path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"torchair's GE IR protobuf module is missing: {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class TensorDesc:
    dtype: int  # GE DataType number (the dump header uses the same numbers)
    shape: tuple[int, ...]  # as declared; torchair leaves it empty for most op outputs (GE infers shapes)
    fx_name: Optional[str]  # `_fx_tensor_name`, set on the tensors an FX node's converter returned


@dataclass(frozen=True)
class Edge:
    producer: str
    index: int


@dataclass(frozen=True)
class GeOp:
    name: str
    type: str
    inputs: tuple[Optional[Edge], ...]  # data inputs by position; None = an optional input left unconnected
    control_inputs: tuple[str, ...]
    input_descs: tuple[TensorDesc, ...]
    output_descs: tuple[TensorDesc, ...]
    attrs: object  # the protobuf attr map (AttrDef values), read by the interpreter per op type

    @property
    def dumped(self) -> bool:
        return self.type not in NOT_DUMPED


@dataclass(frozen=True)
class GeGraph:
    name: str
    ops: tuple[GeOp, ...]  # in torchair's order, which is a topological order

    def op(self, name: str) -> GeOp:
        for op in self.ops:
            if op.name == name:
                return op
        raise KeyError(f"graph {self.name} has no op {name}")

    def consumers(self, producer: str, index: int) -> list[tuple[GeOp, int]]:
        """(consumer, input position) of every data edge reading `producer:index`."""
        edge = Edge(producer, index)
        return [(op, pos) for op in self.ops for pos, e in enumerate(op.inputs) if e == edge]


def _desc(proto) -> TensorDesc:
    fx_name = proto.attr[FX_TENSOR_NAME].s.decode() if FX_TENSOR_NAME in proto.attr else None
    return TensorDesc(dtype=int(proto.dtype), shape=tuple(proto.shape.dim), fx_name=fx_name)


def _edge(text: str) -> Optional[Edge]:
    if not text:
        return None
    producer, _, index = text.rpartition(":")
    return Edge(producer, int(index))


def graph_from_proto(graph_def) -> GeGraph:
    ops = []
    for op in graph_def.op:
        edges = [_edge(text) for text in op.input]
        ops.append(
            GeOp(
                name=op.name,
                type=op.type,
                inputs=tuple(e for e in edges if e is None or e.index >= 0),
                control_inputs=tuple(e.producer for e in edges if e is not None and e.index < 0),
                input_descs=tuple(_desc(d) for d in op.input_desc),
                output_descs=tuple(_desc(d) for d in op.output_desc),
                attrs=op.attr,
            )
        )
    return GeGraph(name=graph_def.name, ops=tuple(ops))


def read_model_bytes(data: bytes, ir: ModuleType):
    """The GraphDef inside a serialized ModelDef (what torchair passes to GE's `load`)."""
    model = ir.ModelDef()
    model.ParseFromString(data)
    if len(model.graph) != 1:
        raise ValueError(f"expected one graph in the ModelDef torchair loaded, found {len(model.graph)}")
    return model.graph[0]


def read_graph_text(path: Path, ir: ModuleType):
    """A torchair graph dump (`str()` of the GraphDef, protobuf text format) parsed by protobuf itself."""
    from google.protobuf import text_format

    graph = ir.GraphDef()
    text_format.Parse(Path(path).read_text(), graph)
    return graph
