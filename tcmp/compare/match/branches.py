"""Ops of an `If`/`Case` branch that did not run: out of scope, not "no partner".

An `If` runs one of its branch subgraphs per execution; the ops of the other branch write no dump file in that
token. When the two dumps of a token took different branches (the predicate came out otherwise), the ops of the
branch one side ran have no partner on the other side by construction. The rule (docs/decisions.md, "Branches not
taken"): an item without a partner whose op runs inside branch B of an `If`/`Case` op P is out of scope when, in
the same token of the other dump, no op of B (nested subgraphs included) is dumped while an op of another branch
of P is. Whether a branch ran is read from the dump only: a token in which the other side dumped none of P's
branches says nothing, and its items keep their reason.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Optional

from tcmp.compare.collect.fusion import GraphView
from tcmp.compare.match.context import MatchResult
from tcmp.compare.match.executions import FxCall, GeExecution
from tcmp.compare.records import UnmatchedKind
from tcmp.schemas.dump_tree import DumpFile
from tcmp.schemas.fx_dump import FxFileName
from tcmp.schemas.graph import GraphOp
from tcmp.schemas.graph_subgraphs import BRANCHING_TYPES, SubgraphTree, ran_branches

BRANCH_NOT_TAKEN = "branch not taken"


def _label(position: int, op_type: str) -> str:
    if op_type.endswith("If"):
        return ("then", "else")[position] + " branch" if position < 2 else f"branch {position}"
    return f"branch {position}"


class BranchScope:
    """Which branches of the graph's `If`/`Case` ops each side of one token ran, from the ops it dumped."""

    def __init__(self, view: GraphView, token: int) -> None:
        self.view, self.token = view, token
        self.tree = SubgraphTree(view.graph)

    def graph_ops(self, names: Iterable[str]) -> set[str]:
        """The graph's names of the dumped ops (dump names may be sanitized)."""
        found = set()
        for name in names:
            op = self.view.op(name)
            if op is not None:
                found.add(op.name)
        return found

    def why_not_taken(self, op: Optional[GraphOp], other_dumped: set[str], other: str) -> Optional[str]:
        """The reason when `op` runs in a branch the `other` side did not run in this token, else None."""
        if op is None:
            return None
        for branch in self.tree.branches_around(op):
            ran = ran_branches(self.tree, branch, other_dumped)
            if ran and branch.subgraph not in ran:
                parent = self.view.graph.op(branch.op)
                op_type = parent.type if parent is not None else ""
                taken = ", ".join(_label(branch.siblings.index(r), op_type) + f" {r}" for r in ran)
                return (
                    f"{BRANCH_NOT_TAKEN}: {op.name} is in the {_label(branch.position, op_type)} {branch.subgraph} of "
                    f"{branch.op}, which did not run in token {self.token} of the {other} dump ({taken} did)"
                )
        return None


def has_branches(view: Optional[GraphView]) -> bool:
    return view is not None and any(op.type in BRANCHING_TYPES and op.subgraphs for op in view.graph.ops)


def mark_branches_not_taken(
    result: MatchResult,
    view: GraphView,
    token: int,
    target: Sequence[GeExecution],
    golden_ge: Optional[Sequence[GeExecution]],
    golden_calls: Optional[Mapping[str, tuple[FxCall, ...]]],
    golden_files: Sequence[DumpFile],
) -> None:
    """Turn the token's "no partner" items whose branch the other side did not run into out of scope."""
    scope = BranchScope(view, token)
    target_dumped = scope.graph_ops(n for e in target for n in (e.op_name, e.file_op_name))
    by_key: dict[str, list[GraphOp]] = defaultdict(list)
    for op in view.graph.ops:
        for o in op.outputs:
            if o.fx_tensor is not None:
                by_key[o.fx_tensor.node_key].append(op)
    if golden_ge is not None:
        golden_dumped = scope.graph_ops(n for g in golden_ge for n in (g.op_name, g.file_op_name))
    else:
        golden_dumped = {op.name for key in (golden_calls or {}) for op in by_key.get(key, ())}
    for k, u in enumerate(result.unmatched):
        if u.kind is UnmatchedKind.NO_PARTNER:
            why = scope.why_not_taken(view.op(u.op_name), golden_dumped, "golden")
            if why is not None:
                result.unmatched[k] = replace(u, reason=why, kind=UnmatchedKind.OUT_OF_SCOPE)
    leftovers: list[tuple[DumpFile, list[GraphOp]]] = []
    if golden_ge is not None:
        for g in golden_ge:
            found = view.op(g.op_name)
            leftovers.extend((f, [found] if found is not None else []) for f in g.files)
    else:
        for f in golden_files:
            name = f.name
            if isinstance(name, FxFileName):
                leftovers.append((f, by_key.get(name.key, [])))
    for f, ops in leftovers:
        known = result.golden_reasons.get(f.path)
        if f.path in result.used_golden or (known is not None and known[1] is not UnmatchedKind.NO_PARTNER):
            continue
        for op in ops:
            why = scope.why_not_taken(op, target_dumped, "target")
            if why is not None:
                result.golden_reasons[f.path] = (why, UnmatchedKind.OUT_OF_SCOPE)
                break
