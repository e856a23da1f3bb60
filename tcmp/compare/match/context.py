"""What the GE → FX and GE → GE matchers share: the token's result, the context that records pairs and unmatched
items, and how a target execution is found in the graph (one op, or a fused op's members)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, cast

from tcmp.compare.collect.fusion import GraphView
from tcmp.compare.collect.guidance import FUSION_OP_TYPES
from tcmp.compare.match.executions import GeExecution
from tcmp.compare.records import Pair, Role, TensorRef, Unmatched, UnmatchedKind
from tcmp.compare.rules.cast_check import CastCheck, cast_check_for
from tcmp.compare.rules.ulp import RULE, float_type_named
from tcmp.schemas.dtypes import dtype_name
from tcmp.schemas.dump_records import IO, TensorSummary
from tcmp.schemas.dump_tree import DumpFile
from tcmp.schemas.ge_dump import NOT_DUMPED
from tcmp.schemas.ge_names import sanitize
from tcmp.schemas.graph import Graph, GraphOp, InputEdge
from tcmp.schemas.npy_header import NpyHeader

SELF_CHECK_TYPES = re.compile(r"Cast|TransData", re.IGNORECASE)
MAX_PASS_THROUGH = 8  # GE-inserted ops followed back through, per input


@dataclass
class MatchResult:
    pairs: list[Pair] = field(default_factory=list)
    unmatched: list[Unmatched] = field(default_factory=list)
    used_golden: set[Path] = field(default_factory=set)
    # graph ops and FX nodes that live inside a fused target op: why their golden tensors have no partner
    fused_into: dict[str, str] = field(default_factory=dict)
    # golden files whose target partner was not dumped (device address 0): the target tensor, as "op io index"
    partner_not_dumped: dict[Path, str] = field(default_factory=dict)
    # golden files the matcher knows the reason for when nothing pairs with them (torchair's passes, copies, …)
    golden_reasons: dict[Path, tuple[str, UnmatchedKind]] = field(default_factory=dict)
    # the .npy headers of golden FX files read while pairing: the loader reads their payloads without parsing again
    fx_headers: dict[Path, NpyHeader] = field(default_factory=dict)


@dataclass(frozen=True)
class ResolvedExecution:
    """What a target execution is in the graph."""

    members: tuple[GraphOp, ...]  # one op, or a fused op's members
    fused: bool
    truncated: bool = False
    missing: tuple[str, ...] = ()  # pieces of a fused name that are no op of the graph (GraphView.decompose_partly)
    missing_last: bool = False  # the name ends in one of them: the outputs are probably its


class TokenContext:
    """Shared by the GE → FX and GE → GE matchers of one token.

    A target tensor the writer did not dump (device address 0) is never paired: whatever the matchers found for it,
    it is listed by design as not dumped, since nothing was measured; a pair whose golden tensor was not dumped is
    listed the same way.
    """

    def __init__(
        self, rank: Optional[int], token: int, graph_label: str, result: MatchResult,
        fx_stored: Mapping[Path, TensorSummary], view: Optional[GraphView] = None,
    ) -> None:  # fmt: skip
        self.rank, self.token, self.graph_label, self.result = rank, token, graph_label, result
        self.fx_stored, self.view = fx_stored, view

    def fx_ref(
        self,
        file: DumpFile,
        io: IO,
        index: int,
        sub_index: Optional[int] = None,
        element: Optional[int] = None,
        reshaped: bool = False,
    ) -> TensorRef:
        """An FX tensor (`element`: one of the tensors stacked in the file; `reshaped`: compared in the other side's
        shape); one whose raw file `tcmp watch` deleted comes with its stored summary."""
        stored = self.fx_stored.get(file.path)
        return TensorRef(
            (file,), io, index, sub_index, stored=stored, raw_deleted=stored is not None, element=element,
            reshaped=reshaped,
        )  # fmt: skip

    def ge_ref(self, e: GeExecution, io: IO, index: int) -> TensorRef:
        meta = e.tensor(io, index)
        stored, dumped = (meta.stored, meta.dumped) if meta is not None else (None, True)
        return TensorRef(e.files, io, index, stored=stored, raw_deleted=e.raw_deleted, dumped=dumped)

    @staticmethod
    def not_dumped(e: GeExecution, io: Optional[IO], index: Optional[int]) -> bool:
        meta = e.tensor(io, index) if io is not None and index is not None else None
        return meta is not None and not meta.dumped

    def pair(
        self, e: GeExecution, io: IO, index: int, bench: TensorRef, notes=(), stack=None,
        cast: Optional[CastCheck] = None,
    ) -> None:  # fmt: skip
        if self.not_dumped(e, io, index):
            self.by_design(e, io, index, NOT_DUMPED)
            for f in bench.files:
                self.result.partner_not_dumped.setdefault(f.path, f"{e.op_name} {io.value} {index}")
            return
        if not bench.dumped:
            self.by_design(e, io, index, f"golden {bench.label}: {NOT_DUMPED}")
            self.result.used_golden.update(f.path for f in bench.files)
            return
        self.result.pairs.append(
            Pair(self.rank, self.token, self.graph_label, e.op_name, e.op_type, e.order, e.execution, io, index,
                 self.ge_ref(e, io, index), bench, tuple(notes), stack, e.timestamp, cast,
                 carried_precision(self.view, e, io, index))
        )  # fmt: skip
        self.result.used_golden.update(f.path for f in bench.files)

    def _unmatched(
        self, e: GeExecution, io: Optional[IO], index: Optional[int], reason: str, kind: UnmatchedKind
    ) -> None:
        if self.not_dumped(e, io, index):  # the tensor is not there: why no partner was found does not matter
            reason, kind = NOT_DUMPED, UnmatchedKind.BY_DESIGN
        self.result.unmatched.append(
            Unmatched(Role.TARGET, self.rank, self.token, e.op_name, e.op_type, io, index,
                      str(e.files[0].path), reason, kind)
        )  # fmt: skip

    def by_design(self, e: GeExecution, io: Optional[IO], index: Optional[int], reason: str) -> None:
        """Nothing to pair it with exists (GE-inserted ops' inputs, inner ops of a converter expansion)."""
        self._unmatched(e, io, index, reason, UnmatchedKind.BY_DESIGN)

    def no_partner(self, e: GeExecution, io: Optional[IO], index: Optional[int], reason: str) -> None:
        """A partner should exist and was not found."""
        self._unmatched(e, io, index, reason, UnmatchedKind.NO_PARTNER)

    def unpartnered(self, e: GeExecution, reason: str) -> None:
        """An execution the golden has no run for (a task GE ran again): every tensor listed, inputs first."""
        for io, items in ((IO.INPUT, e.inputs), (IO.OUTPUT, e.outputs)):
            for k in range(len(items)):
                self.no_partner(e, io, k, reason)

    def missing_members(self, e: GeExecution, resolved: ResolvedExecution, graph: Graph) -> None:
        """The pieces of a fused name that are no op of the graph: listed once per execution, by name (the
        members found are compared as for any fused op)."""
        for name in resolved.missing:
            why = f"member {name} not in graph {graph_title(graph)}: only the members in the graph are compared"
            self.no_partner(e, None, None, why)

    def unreadable(self, e: GeExecution, reason: str) -> None:
        self._unmatched(e, None, None, reason, UnmatchedKind.UNREADABLE)

    def self_check(self, e: GeExecution, why: str) -> None:
        """A GE-inserted conversion: output j against its own input j. A conversion that keeps every value
        (a layout change, a wider dtype) must give its input back; one that changes values (float → int, a narrower
        float, → bool) is compared with Cast(input j), the evaluation computes it (`cast_check`)."""
        for k in range(len(e.inputs)):
            if k >= len(e.outputs):
                self.by_design(e, IO.INPUT, k, "GE-inserted op: only its outputs are checked, against its inputs")
        for j in range(len(e.outputs)):
            if j < len(e.inputs):
                bench = self.ge_ref(e, IO.INPUT, j)
                cast = cast_check_for(e.inputs[j].dtype, e.outputs[j].dtype)
                if cast is None or cast.preserving:
                    note = f"self check: output {j} against input {j} ({why})"
                else:
                    note = f"self check: output {j} against Cast(input {j}) {cast.label}, not input {j} ({why})"
                self.pair(e, IO.OUTPUT, j, bench, (note,), cast=cast)
            else:
                self.by_design(e, IO.OUTPUT, j, f"self check: no input {j} to compare output {j} with")


def _narrowest(names: list[Optional[str]], own: Optional[str]) -> Optional[str]:
    """The float dtype name of `names` with the fewest significand bits, where it has fewer than `own`'s."""
    own_dtype = float_type_named(own)
    unit = RULE.unit(own_dtype, own_dtype) if own_dtype is not None else None
    best: Optional[str] = None
    for name in names:
        narrower = RULE.carried_unit(unit, float_type_named(name))
        if narrower is not None:
            unit, best = narrower, name
    return best


def _preserving(source: Optional[str], target: Optional[str]) -> bool:
    """A conversion that keeps every value: a layout change (same dtype) or a wider dtype."""
    if source is None or target is None:
        return False
    check = cast_check_for(source, target)
    return source == target if check is None else check.preserving


def _edge_carried(view: GraphView, edge: InputEdge, depth: int = 0) -> tuple[Optional[str], list[Optional[str]]]:
    """(the dtype an input edge's tensor has, the dtypes it was in before value-preserving conversions made it)."""
    found = view.producer_output(edge)
    if found is None:
        return None, []
    producer, j = found
    desc = next((d for d in producer.outputs if d.index == j), None)
    own = dtype_name(desc.dtype) if desc is not None and desc.dtype is not None else None
    if depth >= MAX_PASS_THROUGH or not SELF_CHECK_TYPES.search(producer.type) or not producer.inputs:
        return own, []
    source, before = _edge_carried(view, producer.inputs[min(j, len(producer.inputs) - 1)], depth + 1)
    return (own, [source, *before]) if _preserving(source, own) else (own, [])


def carried_precision(view: Optional[GraphView], e: GeExecution, io: IO, index: int) -> Optional[str]:
    """The dtype (dump name) of the narrowest precision a target tensor carries, where narrower than its own:
    the output of a value-preserving widening Cast (or TransData) holds its input's values, and so does every
    input such an output feeds, transitively; an input whose graph producer writes a narrower dtype than the GE op
    reads was widened by a GE-inserted cast (`ulp.RULE` counts their rounding in that dtype's ulps)."""
    meta = e.tensor(io, index)
    if meta is None:
        return None
    if io is IO.OUTPUT:
        if not SELF_CHECK_TYPES.search(e.op_type) or index >= len(e.inputs):
            return None
        source = e.inputs[index].dtype
        if not _preserving(source, meta.dtype):
            return None
        op = view.op(e.op_name) if view is not None else None
        before = (
            _edge_carried(view, op.inputs[index])[1]
            if view is not None and op is not None and index < len(op.inputs)  # (op is None where view is)
            else []
        )
        return _narrowest([source, *before], meta.dtype)
    op = view.op(e.op_name) if view is not None else None
    if op is None or index >= len(op.inputs):
        return None
    assert view is not None  # op came from it
    # the graph's producer output in a narrower dtype than the GE op reads: a GE-inserted widening cast between
    source, before = _edge_carried(view, op.inputs[index])
    return _narrowest([source, *before], meta.dtype) if _preserving(source, meta.dtype) else None


def group_inputs(view: GraphView, resolved: ResolvedExecution) -> list[tuple[GraphOp, int, InputEdge]]:
    """A resolved execution's inputs in order, as (member, its input k, edge): a single op's own; a fused group's
    external inputs; a truncated fused name (only its first member known) its first member's."""
    if not resolved.fused or resolved.truncated:
        first = resolved.members[0]
        return [(first, k, edge) for k, edge in enumerate(first.inputs)]
    return view.external_inputs([m.name for m in resolved.members])


def note_fusion(result: MatchResult, e: GeExecution, resolved: ResolvedExecution) -> None:
    for member in resolved.members:
        result.fused_into[member.name] = e.op_name
        result.fused_into[sanitize(member.name)] = e.op_name  # as GE file names spell it
        for desc in member.outputs:
            if desc.fx_tensor is not None:
                result.fused_into[desc.fx_tensor.node_key] = e.op_name


def graph_title(graph: Graph) -> str:
    """A graph as messages name it: its name, or its file's where the GraphDef has none."""
    return graph.name or graph.path.name


def resolve_execution(view: Optional[GraphView], e: GeExecution) -> Optional[ResolvedExecution]:
    if view is None:
        return None
    op = view.op(e.op_name) or view.op(e.file_op_name)
    if op is not None:
        return ResolvedExecution((op,), fused=False)
    originals = [o[0] for o in e.original_ops if o is not None]
    found = view.decompose(e.op_name, originals) or view.decompose(e.file_op_name, originals)
    if found is None and not SELF_CHECK_TYPES.search(e.op_type):  # a GE-inserted Cast is self-checked instead
        partly = view.decompose_partly(e.op_name) or view.decompose_partly(e.file_op_name)
        # one graph name in an op's name makes it a fusion only when GE's type says so (AddN is no Add + "N")
        if partly is not None and (len(partly.members) > 1 or e.op_type in FUSION_OP_TYPES):
            found = partly
    if found is None:
        return None
    members = tuple(cast(GraphOp, view.graph.op(m)) for m in found.members)  # (members are ops of the graph)
    return ResolvedExecution(members, fused=True, truncated=found.truncated, missing=found.missing,
                     missing_last=found.missing_last)  # fmt: skip


def fused_output(
    view: GraphView, e: GeExecution, resolved: ResolvedExecution, j: int
) -> tuple[Optional[tuple[GraphOp, int]], str]:
    """The member output a fused op's output `j` stands for: the header's `original_op` when the graph has that
    op, else the members' j-th external output (unless the fused name was truncated: its members are then only a
    guess). With it, the row's note ("" for none), or without it, why not. Both goldens (FX, fusion-off GE) go
    through here."""
    original = e.original_ops[j] if j < len(e.original_ops) else None
    if original is not None:
        op = view.op(original[0])
        if op is not None:
            return (op, original[1]), f"via original_op {op.name}:{original[1]}"
        missing = f"original_op {original[0]} is not in the graph"
    else:
        missing = "no original_op in the header"
    if resolved.truncated:
        return None, f"fused name truncated to {{first}}_ub_fusion and {missing}"
    if resolved.missing_last:
        return None, (
            f"the fused name ends in {resolved.missing[-1]}, which is not in the graph, and {missing}: the output "
            "is that member's, which no golden tensor stands for"
        )
    outputs = view.external_outputs([m.name for m in resolved.members])
    if j >= len(outputs):
        return None, "fused op output without a member output"
    note = f"{missing}: the fusion's external output {j} instead" if original is not None else ""
    if resolved.missing:
        absent = f"member {', '.join(resolved.missing)} not in the graph: output {j} of the members in it"
        note = f"{note}; {absent}" if note else absent
    return outputs[j], note


def stack_info_of(resolved: ResolvedExecution) -> Optional[str]:
    return next((m.stack_info for m in resolved.members if m.stack_info), None)
