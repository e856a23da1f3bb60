"""Pairing an aclgraph target (one `.pt` per FX node output torchair saved) with its golden, token by token.

Both sides name FX nodes, so pairing is by node name: the target file of node n (its output; aclgraph saves each
node's single output) pairs with
- an FX golden (torchair's FX dumper): output 0 of node n's call in that token (`{n}-{target}.OUTPUT.0`); the FX
  dumper's INPUT files are copies of their producers' outputs (or of graph inputs) and pair with nothing;
- an aclgraph golden (the other stage, or another run): the golden's file of node n.

Where the stages differ (the optimized stage is the graph after torchair's FX passes) the behaviours table says
why: no-op nodes removed (`rules.torchair.NOOP_TARGETS`), pattern-fused nodes made (`PATTERN_BY_FUSED`). aclgraph
saves graph inputs and the getitem users of multi-output nodes, which the FX dumper does not write; which output
of which node a getitem takes is in no file name but in torchair's graph dump of the optimized graph
(`schemas.acl_graph_dump`): with it a getitem pairs with that output (`_pair_getitem`), without it it is listed
by design, not guessed.
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
from tcmp.compare.rules.torchair import NOOP_TARGETS, PATTERN_BY_FUSED, VIEW_TARGET
from tcmp.schemas.acl_graph_dump import AclGraphDump, GetItem
from tcmp.schemas.dump_records import IO, FileSummary, TensorSummary
from tcmp.schemas.dump_tree import DumpFile
from tcmp.schemas.errors import DumpError
from tcmp.schemas.fx_dump import read_npy_header

# node names of a graph's inputs as dynamo / AOT autograd spell them (`arg0_1`, `primals_3`, `l_x_`, `L_self_w_`)
_PLACEHOLDER = re.compile(r"(arg\d+_\d+|primals_\d+|tangents_\d+|[lL]_\w*_)")
_GETITEM = re.compile(r"getitem(_\d+)?")
# nodes a pattern replacement inserts are named after the op overload (`view_default`, `_to_copy_default_1`); dynamo
# and AOT autograd name theirs after the op packet (`view`, `view_1`)
_REPLACEMENT = re.compile(r"\w+_default(_\d+)?")
GETITEM_TARGET = "operator.getitem"

GETITEM_WHY = (
    "getitem of a multi-output node: the FX dumper writes the node's outputs (OUTPUT.i) instead, and no file name "
    "says which node and output this getitem takes (torchair's graph dump of the optimized graph does: "
    'config.debug.graph_dump.type = "py")'
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
    if _REPLACEMENT.fullmatch(node):
        return (
            f"node {node} is one torchair's pattern replacement made in the optimized stage (the replacement graph's "
            f"nodes are named after their op overload, `view_default`); the {golden} has the nodes it replaced",
            UnmatchedKind.BY_DESIGN,
        )
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


def _same_shape_call(call: FxCall, stored: Mapping[Path, TensorSummary]) -> bool:
    """Does an FX call's output 0 have its input 0's shape (what makes a view, slice or clone a no-op)? Read from
    the files' headers, or from the index where `tcmp watch` deleted them."""
    first = next((f for i, j, f in call.inputs if i == 0 and j is None), None)
    output = call.output(0)
    if first is None or output is None:
        return False

    def shape(f: DumpFile) -> Optional[tuple[int, ...]]:
        summary = stored.get(f.path)
        return summary.shape if summary is not None else tuple(read_npy_header(f.path).shape)

    try:
        before = shape(first)
        return before is not None and before == shape(output)
    except (DumpError, OSError):
        return False


def _holds_object(f: DumpFile, stored: Mapping[Path, TensorSummary]) -> bool:
    """Is an FX output file a pickled object (a dict or list the node returned, saved by the FX dumper as one object
    array), whose tensors aclgraph saves through the node's getitem users?"""
    summary = stored.get(f.path)
    if summary is not None:
        return summary.dtype == "object"
    try:
        return read_npy_header(f.path).dtype.kind == "O"
    except (DumpError, OSError):
        return False


def _noop_named(node: str) -> Optional[str]:
    """The no-op target a node name spells (`view_6` is an `aten.view.default`'s), None for others."""
    base = re.sub(r"_\d+$", "", node)
    return next((t for t in sorted(NOOP_TARGETS) if t.split(".")[1] == base), None)


def _fused_name(node: str) -> bool:
    """Does a node name spell one of torchair's pattern-fused targets (`npu_add_rms_norm_cast`, `…_1`)?"""
    return any(_spelled(fused) == _node_base(node) for fused in PATTERN_BY_FUSED)


# the patterns with a view form (patterns/add_rms_norm_cast.py, add_rms_norm_dynamic_quant.py's pattern2)
_VIEW_FORMS = frozenset({"npu.npu_add_rms_norm_cast.default", "npu.npu_add_rms_norm_dynamic_quant.default"})


def _pattern_replaced(target: str, token_targets: frozenset[str]) -> Optional[str]:
    """Why a golden node of `target` has no aclgraph save when a torchair pattern fusion replaced it: it is a
    pattern's anchor or consumer, and the token's golden holds the anchor and a consumer both (the optimized stage
    saves the fused node, or only its getitems when it has several outputs). None when no pattern explains it."""
    for pattern in PATTERN_BY_FUSED.values():
        # a pattern's view form replaces the view between anchor and consumer too (`cast(y.view(-1, h))`)
        members = (pattern.anchor, *pattern.consumer, *((VIEW_TARGET,) if pattern.fused in _VIEW_FORMS else ()))
        if target in members and pattern.anchor in token_targets and token_targets.intersection(pattern.consumer):
            return (f"replaced by torchair's pattern fusion into {pattern.fused} ({pattern.source}) in the optimized "
                    "stage, which saves the fused node (through its getitems when it has several outputs)")  # fmt: skip
    return None


def _pair_getitem(
    ctx: TokenContext,
    e: GeExecution,
    item: GetItem,
    graph: AclGraphDump,
    by_node: Mapping[str, Sequence[FxCall]],
    by_target: Mapping[str, Sequence[FxCall]],
) -> bool:
    """A saved getitem that torchair's graph dump ties to output `item.index` of node `item.source`, paired with
    that output in the FX golden: the node's own output (a node both graphs have), or, for a node torchair's pattern
    fusion made, the output of the replaced node it stands for. False when the graph dump does not tell."""
    said = f"{e.op_name} is output {item.index} of {item.source} (torchair's graph dump)"
    own = by_node.get(item.source)
    pattern = PATTERN_BY_FUSED.get(graph.targets.get(item.source, ""))
    if own:
        call, index, reshaped = own[0], item.index, False
        notes: tuple[str, ...] = (said,)
        if len(own) > 1:
            ctx.no_partner(e, IO.OUTPUT, 0, f"{said}; the golden FX dump has {len(own)} calls of {item.source} in "
                                            "this token (several graphs): which one cannot be told")  # fmt: skip
            return True
    elif pattern is not None:
        replaced = pattern.outputs[item.index] if item.index < len(pattern.outputs) else None
        if replaced is None:
            ctx.by_design(e, IO.OUTPUT, 0, f"{said}, a node torchair's pattern fusion ({pattern.source}) made from "
                                           "nodes that had no such output")  # fmt: skip
            return True
        replaced_calls = [c for t in replaced.target for c in by_target.get(t, ())]
        if len(replaced_calls) != 1:
            why = (
                f"{said}, which torchair's pattern fusion ({pattern.source}) made; the golden has "
                f"{len(replaced_calls)} calls of the node it replaced ({' / '.join(replaced.target)}) in this "
                "token: which one cannot be told"
            )
            ctx.by_design(e, IO.OUTPUT, 0, why)
            return True
        call, index = replaced_calls[0], replaced.index
        notes = (f"{said}: pattern-fused by torchair ({pattern.source}), compared with {call.key}.OUTPUT.{index}",)
        # a pattern's view form: the consumer computed the fused output's elements on a view of it
        reshaped = pattern.anchor not in replaced.target and pattern.fused in _VIEW_FORMS
        if reshaped:
            notes += ("the golden may hold it in another shape (the pattern's view form): compared element by element",)
    else:
        return False
    output = call.output(index)
    if output is None:
        ctx.no_partner(e, IO.OUTPUT, 0, f"{said}; golden node {call.node} has no OUTPUT.{index} file in this token")
        return True
    ctx.pair(e, IO.OUTPUT, 0, ctx.fx_ref(output, IO.OUTPUT, 0, reshaped=reshaped), notes)
    return True


def match_acl_fx(
    ctx: TokenContext,
    target: Sequence[GeExecution],
    calls: Mapping[str, Sequence[FxCall]],
    golden_files: Sequence[DumpFile],
    fx_stored: Mapping[Path, TensorSummary],
    graph: Optional[AclGraphDump] = None,
) -> MatchResult:
    """aclgraph target ↔ FX golden of one token, by node name (see the module); a getitem by torchair's graph dump
    (`graph`) where there is one."""
    by_node = calls_by_node(calls)
    by_target: dict[str, list[FxCall]] = defaultdict(list)
    for found_calls in calls.values():
        for c in found_calls:
            by_target[c.target].append(c)
    for e in target:
        if e.error is not None:
            ctx.unreadable(e, f"unreadable target file: {e.error}")
            continue
        found = by_node.get(e.op_name)
        item = graph.getitems.get(e.op_name) if graph is not None and not found else None
        if item is not None and graph is not None and _pair_getitem(ctx, e, item, graph, by_node, by_target):
            continue
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
    token_targets = frozenset(by_target)
    for f in golden_files:
        if f.path in result.used_golden:
            continue
        call_of = by_node.get(f.op_name, [])
        if f.io is IO.INPUT:
            result.golden_reasons[f.path] = (FX_INPUT_WHY, UnmatchedKind.BY_DESIGN)
        elif any(len(c.outputs) > 1 for c in call_of) or _holds_object(f, fx_stored):
            result.golden_reasons[f.path] = (MULTI_OUTPUT_WHY, UnmatchedKind.BY_DESIGN)
        elif f.op_type is not None and (fused_why := _pattern_replaced(f.op_type, token_targets)) is not None:
            result.golden_reasons[f.path] = (
                f"no aclgraph save of node {f.op_name}: {fused_why}",
                UnmatchedKind.BY_DESIGN,
            )
        elif f.op_type in NOOP_TARGETS and any(_same_shape_call(c, fx_stored) for c in call_of):
            why = (f"no aclgraph save of node {f.op_name}: a no-op ({f.op_type}, its output of its input's shape) "
                   "torchair's FX passes remove in the optimized stage (remove_noop_ops)")  # fmt: skip
            result.golden_reasons[f.path] = (why, UnmatchedKind.BY_DESIGN)
        else:
            why = f"no aclgraph file of this token saves node {f.op_name}"
            result.golden_reasons[f.path] = (why, UnmatchedKind.NO_PARTNER)
    return result


ACL_GETITEM_WHY = (
    "getitem of a multi-output node: each graph numbers its getitems (torchair's passes between the stages remove "
    "some and make others), and no file name says which node and output a getitem takes"
)


def _node_base(node: str) -> str:
    """The op a node name spells: `bmm_2` → `bmm`, `npu_add_rms_norm_cast_1` → `npu_add_rms_norm_cast`."""
    return re.sub(r"(_default)?(_\d+)?$", "", node)


def _spelled(target: str) -> str:
    """The node name base an FX target gives its nodes (`aten.bmm.default` → `bmm`)."""
    parts = target.split(".")
    return parts[1] if len(parts) > 1 else target


def _pattern_replaced_by_name(node: str, target_bases: frozenset[str], saves_getitems: bool) -> Optional[str]:
    """`_pattern_replaced` for an aclgraph golden, which names no targets: the golden node's name spells a pattern's
    anchor or consumer (the caller knows the target's token saves no node of that name), and the target's token
    saves a node whose name spells the pattern's fused target — or, for a fused node of several outputs (saved only
    through its getitems), getitems."""
    base = _node_base(node)
    for pattern in PATTERN_BY_FUSED.values():
        members = {_spelled(t) for t in (pattern.anchor, *pattern.consumer)}
        fused_saved = _spelled(pattern.fused) in target_bases or saves_getitems
        if base in members and fused_saved:
            return (f"replaced by torchair's pattern fusion into {pattern.fused} ({pattern.source}) in the optimized "
                    "stage")  # fmt: skip
    return None


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
            if _GETITEM.fullmatch(e.op_name):
                why = ACL_GETITEM_WHY
            elif kind is UnmatchedKind.BY_DESIGN and not (
                _fused_name(e.op_name) or _REPLACEMENT.fullmatch(e.op_name)
            ):  # the golden saves those too
                why, kind = f"no node {e.op_name} in this token of the golden aclgraph dump", UnmatchedKind.NO_PARTNER
            (ctx.by_design if kind is UnmatchedKind.BY_DESIGN else ctx.no_partner)(e, IO.OUTPUT, 0, why)
            continue
        meta = g.outputs[0]
        ctx.pair(e, IO.OUTPUT, 0, TensorRef(g.files, IO.OUTPUT, 0, stored=meta.stored, raw_deleted=g.raw_deleted))
    target_bases = frozenset(_node_base(e.op_name) for e in target)
    saves_getitems = any(_GETITEM.fullmatch(e.op_name) for e in target)
    for g in golden:
        if not any(f.path in ctx.result.used_golden for f in g.files):
            why, kind = f"no aclgraph file of this token of the target saves node {g.op_name}", UnmatchedKind.NO_PARTNER
            noop = _noop_named(g.op_name)
            fused_why = _pattern_replaced_by_name(g.op_name, target_bases, saves_getitems)
            if _GETITEM.fullmatch(g.op_name):
                why, kind = ACL_GETITEM_WHY, UnmatchedKind.BY_DESIGN
            elif fused_why is not None:
                why, kind = f"no aclgraph save of node {g.op_name} in the target: {fused_why}", UnmatchedKind.BY_DESIGN
            elif noop is not None:  # an aclgraph dump names no targets: the node name spells the op
                why = (f"no aclgraph save of node {g.op_name} in the target: a no-op ({noop}, by its name) torchair's "
                       "FX passes remove in the optimized stage (remove_noop_ops)")  # fmt: skip
                kind = UnmatchedKind.BY_DESIGN
            ctx.result.golden_reasons.update((f.path, (why, kind)) for f in g.files)
    return ctx.result
