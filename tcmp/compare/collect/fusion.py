"""Fused GE ops back to the graph ops they were made of.

A UB-fused op is named by concatenating its members' names (docs/decisions.md, "Fused ops"), or
`{first}_ub_fusion` when that exceeds 512 characters; dump file names carry the sanitized form (`.`, `/`, `\\`,
space → `_`). The header's `OpOutput.original_op` names the member and output each fused output stands for; when
it is present it wins. Otherwise the name is split into graph op names with a backtracking search, not the peer's
greedy longest prefix, and among the complete splits the one whose members form a connected piece of the graph,
in graph order, is taken. A name with no complete split may hold members the graph lacks (ops GE made after the
graph was dumped); `decompose_partly` then gives the graph ops it holds and the pieces that are none.

`GraphView` also answers the questions the matcher asks about the graph: an op by (sanitized) name, its producers
and consumers, and a group's external inputs and outputs.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional, cast

from tcmp.schemas.ge_names import sanitize
from tcmp.schemas.graph import Graph, GraphOp, InputEdge

UB_FUSION_SUFFIX = "_ub_fusion"
MAX_SPLITS = 64  # complete splits examined per fused name
_OP_LIKE = re.compile(r"[A-Za-z][A-Za-z0-9_]*(?<!_)")  # how a GE op name reads (ConcatV2, Cast_9, trans_Cast_3)


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

    def partial_split(self, name: str) -> Optional[list[tuple[str, bool]]]:
        """`name` as known names and pieces that are none (`(piece, known)`, in name order): the most of it in
        known names, then the fewest pieces; a piece that is no known name must read as an op name (a letter
        first, not ending in `_`) and lie between known ones or at an end. None without at least one known
        and one unknown piece."""
        name = sanitize(name)
        n = len(name)
        known_at = [[length for length in self._lengths if name[i : i + length] in self._names] for i in range(n)]
        # best[i][after_unknown]: (known characters, -pieces, pieces) for name[i:]
        best: list[list[Optional[tuple[int, int, tuple]]]] = [[None, None] for _ in range(n + 1)]
        best[n] = [(0, 0, ()), (0, 0, ())]
        for i in range(n - 1, -1, -1):
            for after_unknown in (False, True):
                options = []
                for length in known_at[i]:
                    rest = best[i + length][0]
                    if rest is not None:
                        options.append((rest[0] + length, rest[1] - 1, ((name[i : i + length], True), *rest[2])))
                if not after_unknown:
                    for j in range(i + 1, n + 1):
                        if j < n and not known_at[j]:
                            continue
                        piece, rest = name[i:j], best[j][1]
                        if rest is not None and _OP_LIKE.fullmatch(piece):
                            options.append((rest[0], rest[1] - 1, ((piece, False), *rest[2])))
                best[i][after_unknown] = max(options, key=lambda o: (o[0], o[1])) if options else None
        found = best[0][0]
        if found is None or not found[0] or all(known for _, known in found[2]) or len(found[2]) < 2:
            return None
        return [(self._names[piece] if known else piece, known) for piece, known in found[2]]

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
    missing: tuple[str, ...] = ()  # pieces of the name that are no graph op (decompose_partly)
    missing_last: bool = False  # the name ends in such a piece


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
        self._partly: dict[str, Optional[Decomposition]] = {}

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
                # cast: every member is the name of an op of the graph
                ordered = sorted((cast(GraphOp, self.graph.op(m)) for m in members), key=lambda op: op.order)
                return Decomposition(tuple(op.name for op in ordered))
        splits = self._splits(name)
        if not splits:
            return None
        best = max(splits, key=self._split_quality)
        return Decomposition(tuple(op.name for op in best))

    def decompose_partly(self, fused_name: str) -> Optional[Decomposition]:
        """A fused name that `decompose` cannot split completely, as the graph ops it holds and the pieces that
        are no op of the graph (an op GE made after the graph was dumped: `Add_2Cast_9ConcatV2` without a
        ConcatV2); None unless it holds both."""
        if fused_name in self._partly:
            return self._partly[fused_name]
        pieces = self._splitter.partial_split(fused_name)
        found = None
        if pieces is not None:
            members = tuple(dict.fromkeys(self._by_sanitized[sanitize(p)][0].name for p, known in pieces if known))
            missing = tuple(p for p, known in pieces if not known)
            found = Decomposition(members, missing=missing, missing_last=not pieces[-1][1])
        self._partly[fused_name] = found  # every execution of the op, every time it is asked
        return found

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
