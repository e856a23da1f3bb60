"""Pairing an aclgraph target (one `.pt` per FX node output torchair saved) with its golden, token by token.

Both sides name FX nodes, so pairing is by node name: the target file of node n (its output; aclgraph saves each
node's single output) pairs with
- an FX golden (torchair's FX dumper): output 0 of node n's call in that token (`{n}-{target}.OUTPUT.0`); the FX
  dumper's INPUT files are copies of their producers' outputs (or of graph inputs) and pair with nothing;
- an aclgraph golden (the other stage, or another run): the golden's file of node n.

Where the stages differ (the optimized stage is the graph after torchair's FX passes) the behaviours table says
why: no-op nodes removed (`rules.torchair.NOOP_TARGETS`), pattern-fused nodes made (`PATTERN_BY_FUSED`). aclgraph
saves graph inputs and the getitem users of multi-output nodes, which the FX dumper does not write; which output
of which node a getitem takes is in no file name, so those are listed by design, not guessed.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Optional

from tcmp.compare.match.context import MatchResult, TokenContext
from tcmp.compare.match.executions import FxCall, GeExecution, TensorMeta
from tcmp.compare.records import TensorRef, UnmatchedKind
from tcmp.compare.rules.torchair import NOOP_TARGETS, PATTERN_BY_FUSED
from tcmp.schemas.dump_records import IO, FileSummary, TensorSummary
from tcmp.schemas.dump_tree import DumpFile

# node names of a graph's inputs as dynamo / AOT autograd spell them (`arg0_1`, `primals_3`, `l_x_`, `L_self_w_`)
_PLACEHOLDER = re.compile(r"(arg\d+_\d+|primals_\d+|tangents_\d+|[lL]_\w*_)")
_GETITEM = re.compile(r"getitem(_\d+)?")
GETITEM_TARGET = "operator.getitem"

GETITEM_WHY = (
    "getitem of a multi-output node: the FX dumper writes the node's outputs (OUTPUT.i) instead, and no file name "
    "says which node and output this getitem takes"
)
PLACEHOLDER_WHY = "graph input (placeholder): the FX dumper writes no graph inputs, only their consumers' INPUT copies"
FX_INPUT_WHY = "FX input of a node: aclgraph saves node outputs only; this is a copy of its producer's output"
MULTI_OUTPUT_WHY = (
    "output of a multi-output node: aclgraph saves its getitem users instead, whose names do not say which output "
    "they take"
)


def acl_op_type(node: str, calls: Mapping[str, Sequence[FxCall]]) -> str:
    """The target's "op type": the FX target the golden's call of the node names, else what the name says."""
    found = calls.get(node)
    if found:
        return found[0].target
    return GETITEM_TARGET if _GETITEM.fullmatch(node) else ""


def acl_executions(
    files: Sequence[DumpFile],
    stored: Mapping[Path, FileSummary],
    calls: Mapping[str, Sequence[FxCall]] = MappingProxyType({}),
) -> tuple[GeExecution, ...]:
    """One token's aclgraph files as executions of one output each, in the golden FX dump's call order where it
    has the node (its timestamps), then by node name. `calls`: the golden's calls by node name."""

    def order(f: DumpFile) -> tuple:
        found = calls.get(f.op_name)
        return (0, int(found[0].timestamp or 0), f.op_name) if found else (1, 0, f.op_name)

    executions = []
    for k, f in enumerate(sorted(files, key=order)):
        summary = stored.get(f.path)
        tensor: Optional[TensorSummary] = summary.tensors[0] if summary is not None and summary.tensors else None
        meta = TensorMeta(IO.OUTPUT, 0, tensor.shape if tensor else None, tensor.dtype if tensor else None, tensor)
        executions.append(
            GeExecution(f.op_name, acl_op_type(f.op_name, calls), 0, (f,), (), (meta,), (None,), order=k,
                        raw_deleted=summary is not None)
        )  # fmt: skip
    return tuple(executions)


def calls_by_node(calls: Mapping[str, Sequence[FxCall]]) -> dict[str, list[FxCall]]:
    """The golden FX calls of a token by node name (a key is `{node}-{target}`)."""
    by_node: dict[str, list[FxCall]] = defaultdict(list)
    for found in calls.values():
        for call in found:
            by_node[call.node].append(call)
    return dict(by_node)


def _missing_why(node: str, golden: str, fused: bool) -> tuple[str, UnmatchedKind]:
    if _GETITEM.fullmatch(node):
        return GETITEM_WHY, UnmatchedKind.BY_DESIGN
    if _PLACEHOLDER.fullmatch(node):
        return PLACEHOLDER_WHY, UnmatchedKind.BY_DESIGN
    if fused:
        return (
            f"node {node} is a pattern fusion torchair's FX passes made in the optimized stage (its target is one of "
            f"{', '.join(sorted(PATTERN_BY_FUSED))}); the {golden} has the nodes it replaced",
            UnmatchedKind.BY_DESIGN,
        )
    return (
        f"no node {node} in this token of the {golden}: a node torchair's FX passes made in the optimized stage, or "
        "one the golden did not dump",
        UnmatchedKind.NO_PARTNER,
    )


def _fused_name(node: str) -> bool:
    """Does a node name spell one of torchair's pattern-fused targets (`npu_add_rms_norm_cast`, `…_1`)?"""
    base = re.sub(r"(_default)?(_\d+)?$", "", node)
    return any(fused.split(".")[1] == base for fused in PATTERN_BY_FUSED)


def match_acl_fx(
    ctx: TokenContext,
    target: Sequence[GeExecution],
    calls: Mapping[str, Sequence[FxCall]],
    golden_files: Sequence[DumpFile],
    fx_stored: Mapping[Path, TensorSummary],
) -> MatchResult:
    """aclgraph target ↔ FX golden of one token, by node name (see the module)."""
    by_node = calls_by_node(calls)
    for e in target:
        if e.error is not None:
            ctx.unreadable(e, f"unreadable target file: {e.error}")
            continue
        found = by_node.get(e.op_name)
        if not found:
            why, kind = _missing_why(e.op_name, "golden FX dump", _fused_name(e.op_name))
            (ctx.by_design if kind is UnmatchedKind.BY_DESIGN else ctx.no_partner)(e, IO.OUTPUT, 0, why)
            continue
        if len(found) > 1:
            ctx.no_partner(
                e,
                IO.OUTPUT,
                0,
                f"the golden FX dump has {len(found)} calls of node {e.op_name} in token "
                f"{ctx.token} (several graphs): which one is this save cannot be told",
            )
            continue  # fmt: skip
        call = found[0]
        if len(call.outputs) > 1:
            ctx.no_partner(
                e,
                IO.OUTPUT,
                0,
                f"golden node {e.op_name} has {len(call.outputs)} outputs, an aclgraph save holds one tensor",
            )
            continue  # fmt: skip
        output = call.output(0)
        if output is None:
            ctx.no_partner(e, IO.OUTPUT, 0, f"golden node {e.op_name} has no OUTPUT.0 file in token {ctx.token}")
            continue
        ctx.pair(e, IO.OUTPUT, 0, ctx.fx_ref(output, IO.OUTPUT, 0))
    result = ctx.result
    for f in golden_files:
        if f.path in result.used_golden:
            continue
        call_of = by_node.get(f.op_name, [])
        if f.io is IO.INPUT:
            result.golden_reasons[f.path] = (FX_INPUT_WHY, UnmatchedKind.BY_DESIGN)
        elif any(len(c.outputs) > 1 for c in call_of):
            result.golden_reasons[f.path] = (MULTI_OUTPUT_WHY, UnmatchedKind.BY_DESIGN)
        elif f.op_type in NOOP_TARGETS:
            why = (f"no aclgraph save of node {f.op_name}: a no-op ({f.op_type}) torchair's FX passes remove in the "
                   "optimized stage (remove_noop_ops)")  # fmt: skip
            result.golden_reasons[f.path] = (why, UnmatchedKind.BY_DESIGN)
        else:
            why = f"no aclgraph file of this token saves node {f.op_name}"
            result.golden_reasons[f.path] = (why, UnmatchedKind.NO_PARTNER)
    return result


def match_acl_acl(ctx: TokenContext, target: Sequence[GeExecution], golden: Sequence[GeExecution]) -> MatchResult:
    """aclgraph target ↔ aclgraph golden of one token: the same node's file."""
    by_node = {g.op_name: g for g in golden}
    for e in target:
        if e.error is not None:
            ctx.unreadable(e, f"unreadable target file: {e.error}")
            continue
        g = by_node.get(e.op_name)
        if g is None:
            why, kind = _missing_why(e.op_name, "golden aclgraph dump", _fused_name(e.op_name))
            if kind is UnmatchedKind.BY_DESIGN and not _fused_name(e.op_name):  # the golden saves those too
                why, kind = f"no node {e.op_name} in this token of the golden aclgraph dump", UnmatchedKind.NO_PARTNER
            (ctx.by_design if kind is UnmatchedKind.BY_DESIGN else ctx.no_partner)(e, IO.OUTPUT, 0, why)
            continue
        meta = g.outputs[0]
        ctx.pair(e, IO.OUTPUT, 0, TensorRef(g.files, IO.OUTPUT, 0, stored=meta.stored, raw_deleted=g.raw_deleted))
    for g in golden:
        if not any(f.path in ctx.result.used_golden for f in g.files):
            why = f"no aclgraph file of this token of the target saves node {g.op_name}"
            ctx.result.golden_reasons.update((f.path, (why, UnmatchedKind.NO_PARTNER)) for f in g.files)
    return ctx.result
