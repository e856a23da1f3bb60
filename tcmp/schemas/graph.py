"""The records of a graph text file (torchair's `dynamo_*graph*.txt`, GE's `ge_proto_*.txt`): the graph, its ops,
their input edges and output descs, and the attribute keys tcmp reads from them; `tcmp.schemas.graph_reader` reads
them from a file.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

# Attribute keys torchair / GE put on ops and output descs (docs/formats.md, "Graph text structure").
FX_TENSOR_NAME_ATTR = "_fx_tensor_name"
ORIGINAL_OP_NAMES_ATTR = "_datadump_original_op_names"
ORIGIN_NAME_ATTR = "_datadump_origin_name"
ORIGIN_OUTPUT_INDEX_ATTR = "_datadump_origin_output_index"
# torchair does not always record a stack; these are the keys seen or plausible for one, first match wins.
STACK_INFO_ATTRS = ("_stack_info", "stack_trace", "_fx_stack_trace")

CONTROL_EDGE_INDEX = -1


@dataclass(frozen=True)
class FxTensorName:
    """`{node}-{target}.OUTPUT.{path}`: which FX node output a GE tensor was converted from.

    The path is the output's place in the converter's result: `0`, `1`; torchair 2.14 names elements of nested
    results by their path, `1.0` for a list inside a tuple, `out` or `aux.1` for a dict (`_set_fx_tensor_names`).
    """

    node_key: str  # "{node}-{target}", the same key the FX dump file names carry
    path: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> Optional[FxTensorName]:
        return _parse_fx_tensor_name(text)

    @property
    def output_index(self) -> Optional[int]:
        """The top-level output `i` (the FX dumper's `OUTPUT.{i}` file); None for a dict key."""
        head = self.path[0]
        return int(head) if head.isdigit() and head.isascii() else None

    @property
    def nested(self) -> bool:
        """An element of a nested result (a list in a tuple, a dict entry), not a top-level output."""
        return len(self.path) > 1 or self.output_index is None

    @property
    def target(self) -> str:
        """The FX node's target (`aten.add.Tensor`), the part of the key after the node name."""
        return self.node_key.partition("-")[2]

    def __str__(self) -> str:
        return f"{self.node_key}.OUTPUT.{'.'.join(self.path)}"


_FX_TENSOR_NAME = re.compile(r"(?P<key>.+)\.OUTPUT\.(?P<path>\w+(?:\.\w+)*)", re.DOTALL | re.ASCII)


# the matcher asks for an output's name again for every tensor that reaches it (`OutputDesc.fx_tensor`, ~8 times
# per op): parsed once while its token is paired (an immutable record, so shared)
@functools.lru_cache(maxsize=1 << 16)
def _parse_fx_tensor_name(text: str) -> Optional[FxTensorName]:
    match = _FX_TENSOR_NAME.fullmatch(text)
    if match is None:
        return None
    return FxTensorName(node_key=match["key"], path=tuple(match["path"].split(".")))


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
    # The subgraph (a GraphDef of a ModelDef after the root graph) the op is in; None: the root graph.
    subgraph: Optional[str] = None
    # The subgraphs the op calls, in its IR order (`PartitionedCall`'s f, `If`'s then/else, `While`'s cond/body,
    # `Case`'s branches): `tcmp.schemas.graph_subgraphs`.
    subgraphs: tuple[str, ...] = ()

    def as_fields(self) -> list:
        """The op as JSON-ready values in field order (the graph cache stores the list, the index its columns)."""
        return [
            self.order, self.name, self.type, [[e.producer, e.index] for e in self.inputs], list(self.control_inputs),
            [[o.index, o.fx_tensor_name, o.dtype, list(o.shape), o.layout, o.origin_name, o.origin_output_index]
             for o in self.outputs],
            list(self.original_op_names), self.stack_info, self.subgraph, list(self.subgraphs),
        ]  # fmt: skip

    @classmethod
    def from_fields(
        cls, order, name, op_type, inputs, control, outputs, originals, stack, subgraph=None, subgraphs=()
    ) -> GraphOp:
        """The inverse of `as_fields`."""
        return cls(
            order=order, name=name, type=op_type,
            inputs=tuple(InputEdge(p, i) for p, i in inputs),
            control_inputs=tuple(control),
            outputs=tuple(OutputDesc(i, fx, dtype, tuple(shape), layout, origin, origin_index)
                          for i, fx, dtype, shape, layout, origin, origin_index in outputs),
            original_op_names=tuple(originals), stack_info=stack, subgraph=subgraph, subgraphs=tuple(subgraphs),
        )  # fmt: skip


@dataclass(frozen=True)
class Graph:
    """The ops of a graph file: of a ModelDef, the root graph's ops then each subgraph's, in file order."""

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

    @property
    def has_subgraphs(self) -> bool:
        return any(op.subgraph is not None or op.subgraphs for op in self.ops)

    def __len__(self) -> int:
        return len(self.ops)

    def __contains__(self, name: object) -> bool:
        return name in self._ops_by_name
