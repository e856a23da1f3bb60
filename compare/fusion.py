"""Fused GE ops back to the graph ops they were made of.

A UB-fused op is named by concatenating its members' names (spec/dump-formats.md §3.1, §5), or
`{first}_ub_fusion` when that exceeds 512 characters; dump file names carry the sanitized form (`.`, `/`, `\\`,
space → `_`). The header's `OpOutput.original_op` names the member and output each fused output stands for; when
it is present it wins. Otherwise the name is split into graph op names with a backtracking search, not the peer's
greedy longest prefix, and among the complete splits the one whose members form a connected piece of the graph,
in graph order, is taken.

`GraphView` also answers the questions the matcher asks about the graph: an op by (sanitized) name, its producers
and consumers, and a group's external inputs and outputs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from tcmp.schemas.ge_names import sanitize
from tcmp.schemas.graph import Graph, GraphOp, InputEdge

UB_FUSION_SUFFIX = "_ub_fusion"
MAX_SPLITS = 64  # complete splits examined per fused name


class NameSplitter:
    """Splits a concatenated (sanitized) name into known names, by backtracking over every way to do it."""

    def __init__(self, names: Sequence[str]) -> None:
        self._names = {sanitize(n): n for n in names}
        self._lengths = sorted({len(n) for n in self._names}, reverse=True)

    def splits(self, name: str) -> list[list[str]]:
        """Every complete split of `name` (sanitized names, at most MAX_SPLITS of them) into two or more names."""
        name = sanitize(name)
        found: list[list[str]] = []
        dead: set[int] = set()  # positions from which no split completes

        def walk(position: int, prefix: list[str]) -> bool:
            if position == len(name):
                found.append(list(prefix))
                return True
            if position in dead or len(found) >= MAX_SPLITS:
                return False
            completed = False
            for length in self._lengths:
                piece = name[position : position + length]
                if len(piece) == length and piece in self._names:
                    prefix.append(piece)
                    completed = walk(position + length, prefix) or completed
                    prefix.pop()
            if not completed:
                dead.add(position)
            return completed

        walk(0, [])
        return [s for s in found if len(s) > 1]

    def split(self, name: str) -> Optional[list[str]]:
        """The split with the fewest members (the original names), or None."""
        splits = self.splits(name)
        if not splits:
            return None
        return [self._names[piece] for piece in min(splits, key=len)]


@dataclass(frozen=True)
class Decomposition:
    members: tuple[str, ...]  # graph op names, in name order
    truncated: bool = False  # `{first}_ub_fusion`: only the first member is known from the name


class GraphView:
    """Lookups over one graph: names (raw and sanitized), edges, execution order."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self._by_sanitized: dict[str, list[GraphOp]] = defaultdict(list)
        self.consumers: dict[str, list[tuple[GraphOp, int]]] = defaultdict(list)  # producer -> (consumer, input k)
        for op in graph.ops:
            self._by_sanitized[sanitize(op.name)].append(op)
            for k, edge in enumerate(op.inputs):
                self.consumers[edge.producer].append((op, k))
        self._splitter = NameSplitter(list(self._by_sanitized))

    def op(self, name: str) -> Optional[GraphOp]:
        """By exact name, else by its sanitized form when that is unambiguous."""
        found = self.graph.op(name)
        if found is not None:
            return found
        candidates = self._by_sanitized.get(sanitize(name), [])
        return candidates[0] if len(candidates) == 1 else None

    def producer_output(self, edge: InputEdge) -> Optional[tuple[GraphOp, int]]:
        producer = self.graph.op(edge.producer)
        return None if producer is None else (producer, edge.index)

    # --- fused groups --------------------------------------------------------------------------------------

    def decompose(self, fused_name: str, original_ops: Sequence[str] = ()) -> Optional[Decomposition]:
        """Split a fused op's name into graph op names (see the module docstring); None if no split exists."""
        name = sanitize(fused_name)
        if name.endswith(UB_FUSION_SUFFIX):
            first = self.op(name[: -len(UB_FUSION_SUFFIX)])
            if first is not None:
                ends = [op for op in (self.op(m) for m in dict.fromkeys(original_ops)) if op is not None]
                if not ends:
                    return Decomposition((first.name,), truncated=True)
                # the group is the connected region from its first member to the ops its outputs come from
                members = {first.name} | {e.name for e in ends}
                for end in ends:
                    members |= self._descendants(first.name) & self._ancestors(end.name)
                ordered = sorted((self.graph.op(m) for m in members), key=lambda op: op.order)
                return Decomposition(tuple(op.name for op in ordered))
        splits = self._splits(name)
        if not splits:
            return None
        best = max(splits, key=self._split_quality)
        return Decomposition(tuple(op.name for op in best))

    def _splits(self, name: str) -> list[list[GraphOp]]:
        splits = self._splitter.splits(name)
        return [[op for piece in split for op in self._by_sanitized[piece][:1]] for split in splits]

    def _split_quality(self, members: list[GraphOp]) -> tuple:
        names = {op.name for op in members}
        # connected: every member but one is linked by a data edge to another member
        linked = sum(
            1
            for op in members
            if any(e.producer in names for e in op.inputs)
            or any(c.name in names for c, _ in self.consumers.get(op.name, ()))
        )
        in_order = all(a.order < b.order for a, b in zip(members, members[1:]))
        return (len(members) == 1 or linked == len(members), in_order, -len(members))

    def _descendants(self, name: str) -> set[str]:
        found, stack = set(), [name]
        while stack:
            for consumer, _ in self.consumers.get(stack.pop(), ()):
                if consumer.name not in found:
                    found.add(consumer.name)
                    stack.append(consumer.name)
        return found

    def _ancestors(self, name: str) -> set[str]:
        found, stack = set(), [name]
        while stack:
            op = self.graph.op(stack.pop())
            for edge in op.inputs if op is not None else ():
                if edge.producer not in found:
                    found.add(edge.producer)
                    stack.append(edge.producer)
        return found

    def external_inputs(self, members: Sequence[str]) -> list[tuple[GraphOp, int, InputEdge]]:
        """(member, input k, edge) for every data input whose producer is outside the group, in member order,
        each producer output once (a fused op takes one tensor once)."""
        inside = set(members)
        seen: set[tuple[str, int]] = set()
        result = []
        for name in members:
            op = self.graph.op(name)
            if op is None:
                continue
            for k, edge in enumerate(op.inputs):
                key = (edge.producer, edge.index)
                if edge.producer not in inside and key not in seen:
                    seen.add(key)
                    result.append((op, k, edge))
        return result

    def external_outputs(self, members: Sequence[str]) -> list[tuple[GraphOp, int]]:
        """(member, output j) for every member output used outside the group (or by nothing: a graph output),
        in member order."""
        inside = set(members)
        result = []
        for name in members:
            op = self.graph.op(name)
            if op is None:
                continue
            for j in range(len(op.outputs)):
                users = [c for c, k in self.consumers.get(op.name, ()) if c.inputs[k].index == j]
                if not users or any(c.name not in inside for c in users):
                    result.append((op, j))
        return result
