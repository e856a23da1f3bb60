"""Subgraphs of a GE graph file: which op calls which subgraph, and which ops run inside an `If`/`Case` branch.

A GE `ModelDef` dump (`ge_proto_*.txt`) holds the root graph, then every subgraph (`ModelSerializeImp::
SerializeModel` appends `GetAllSubgraphs()`), each a `graph` block named after the subgraph instance. An op that
calls subgraphs lists their instance names in OpDef's `subgraph_name` field, in the order of its IR's subgraph
names. Graphs converted from a framework may instead name them in function attributes (`func { name: … }`):
`SUBGRAPH_ATTRS` gives those, in the same IR order, per op type. The reader (`graph_reader`) fills
`GraphOp.subgraph` / `GraphOp.subgraphs` from them; `SubgraphTree` answers questions about the nesting.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Optional

from tcmp.schemas.graph import Graph, GraphOp

# The function attributes of GE's control-flow and call ops (GE's functional_ops IR), in IR order. `Case`'s
# `branches` is a list of functions.
SUBGRAPH_ATTRS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("PartitionedCall", "StatefulPartitionedCall"), ("f",)),
    **dict.fromkeys(("If", "StatelessIf", "_If"), ("then_branch", "else_branch")),
    **dict.fromkeys(("While", "StatelessWhile", "_While"), ("cond", "body")),
    **dict.fromkeys(("Case", "StatelessCase", "_Case"), ("branches",)),
    "For": ("body",),
}
SUBGRAPH_ATTR_KEYS = frozenset(key for keys in SUBGRAPH_ATTRS.values() for key in keys)
# Ops that run one of their subgraphs per execution: an op of a branch that did not run has no dump.
BRANCHING_TYPES = frozenset(("If", "StatelessIf", "_If", "Case", "StatelessCase", "_Case"))


@dataclass(frozen=True)
class Branch:
    """One branch subgraph of an `If`/`Case` op."""

    op: str  # the If/Case op
    subgraph: str
    position: int  # 0: then (If) / branch 0 (Case)
    siblings: tuple[str, ...]  # all branch subgraphs of the op, this one included


class SubgraphTree:
    """Who calls which subgraph in one graph file, and the ops each subgraph runs (its nested subgraphs' too)."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self._caller: dict[str, GraphOp] = {}
        for op in graph.ops:
            for name in op.subgraphs:
                self._caller.setdefault(name, op)  # a subgraph instance has one parent node
        self._own: dict[str, list[GraphOp]] = defaultdict(list)
        for op in graph.ops:
            if op.subgraph is not None:
                self._own[op.subgraph].append(op)
        self._within: dict[str, frozenset[str]] = {}

    def caller(self, subgraph: str) -> Optional[GraphOp]:
        return self._caller.get(subgraph)

    def ops_of(self, subgraph: str) -> tuple[GraphOp, ...]:
        """The ops written in the subgraph's own block."""
        return tuple(self._own.get(subgraph, ()))

    def within(self, subgraph: str) -> frozenset[str]:
        """Names of the ops that run when the subgraph runs: its own and those of the subgraphs they call."""
        if subgraph not in self._within:
            self._within[subgraph] = frozenset()  # a cycle (malformed file) ends here
            names: set[str] = set()
            for op in self._own.get(subgraph, ()):
                names.add(op.name)
                for nested in op.subgraphs:
                    names |= self.within(nested)
            self._within[subgraph] = frozenset(names)
        return self._within[subgraph]

    def branches_around(self, op: GraphOp) -> tuple[Branch, ...]:
        """The `If`/`Case` branches the op runs inside, innermost first."""
        found: list[Branch] = []
        seen: set[str] = set()
        subgraph = op.subgraph
        while subgraph is not None and subgraph not in seen:
            seen.add(subgraph)
            parent = self._caller.get(subgraph)
            if parent is None:
                break
            if parent.type in BRANCHING_TYPES:
                found.append(Branch(parent.name, subgraph, parent.subgraphs.index(subgraph), parent.subgraphs))
            subgraph = parent.subgraph
        return tuple(found)


def ran_branches(tree: SubgraphTree, branch: Branch, dumped: Iterable[str]) -> tuple[str, ...]:
    """Of the op's branch subgraphs, those with at least one op among the `dumped` op names."""
    held = set(dumped)
    return tuple(name for name in branch.siblings if tree.within(name) & held)
