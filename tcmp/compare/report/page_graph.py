"""The data edges around the ops of a report, for the HTML page's neighbourhood view.

The table's ops are GE ops; the graph file is torchair's graph before GE fused anything. A table op is one graph op
(found by name, raw or sanitized) or a fused op standing for several (its name split into members as the matcher
splits it, `GraphView.decompose`); each graph op belongs to at most one table op, and a graph op no table op holds
(a Data, a Const, an op without dumps) stands for itself. Edges between graph ops become edges between what holds
them; edges inside a fused op vanish, control edges are left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Optional

from tcmp.compare.collect.fusion import GraphView
from tcmp.schemas.graph import Graph


@dataclass(frozen=True)
class TableOp:
    """An op with rows in the table: the binding label its rows carry, its GE name and type."""

    graph: str
    name: str
    type: str


@dataclass(frozen=True)
class PageGraph:
    """Nodes (the table's ops first, in the order given, then the graph ops no table op holds) and, per node, the
    nodes whose outputs it reads. `found[i]`: table op i was found in its graph."""

    names: tuple[str, ...]
    types: tuple[str, ...]
    producers: tuple[tuple[int, ...], ...]
    found: tuple[bool, ...]


def _members(view: GraphView, name: str) -> tuple[str, ...]:
    op = view.op(name)
    if op is not None:
        return (op.name,)
    decomposition = view.decompose(name)
    return decomposition.members if decomposition is not None else ()


def page_graph(table_ops: Sequence[TableOp], graphs: Iterable[Optional[Graph]]) -> PageGraph:
    """The graph of the page: `graphs` are those of the rank's bindings (None: a binding without a graph file),
    matched to the table ops by the label rows carry (the graph's name)."""
    names = [op.name for op in table_ops]
    types = [op.type for op in table_ops]
    producers: list[set[int]] = [set() for _ in table_ops]
    found = [False] * len(table_ops)
    by_label: dict[str, list[int]] = {}
    for i, op in enumerate(table_ops):
        by_label.setdefault(op.graph, []).append(i)
    for graph in graphs:
        if graph is None or graph.name not in by_label:
            continue
        view = GraphView(graph)
        holder: dict[str, int] = {}  # graph op name -> node
        for i in by_label.pop(graph.name):  # a label once: two bindings of one graph name hold the same ops
            members = _members(view, table_ops[i].name)
            found[i] = bool(members)
            for member in members:
                holder.setdefault(member, i)
        for graph_op in graph.ops:
            if graph_op.name not in holder:
                holder[graph_op.name] = len(names)
                names.append(graph_op.name)
                types.append(graph_op.type)
                producers.append(set())
        for graph_op in graph.ops:
            node = holder[graph_op.name]
            for edge in graph_op.inputs:
                source = holder.get(edge.producer)
                if not edge.is_control and source is not None and source != node:
                    producers[node].add(source)
    return PageGraph(tuple(names), tuple(types), tuple(tuple(sorted(p)) for p in producers), tuple(found))
