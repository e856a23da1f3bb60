"""Pairing target (GE, fusion on) tensors with golden tensors, for one graph of one rank, token by token.

GE → FX (spec/dump-formats.md §4.4, §5; compare-decisions.md):
- a GE output is paired with the FX output its graph output desc's `_fx_tensor_name` names, output index included;
- a GE input is paired through its producer edge (`producer:k` → the producer's output k → its FX tensor); when the
  producer has no FX tensor (a graph input, a Const), with the FX node's own input of the same shape (noted);
- fused ops: outputs through the header's `original_op` or the group's external outputs, inputs through the
  group's external inputs, members found by `GraphView.decompose`;
- GE-inserted Cast/TransData ops (not in the graph, or without any FX tensor): their outputs are checked against
  their own inputs;
- the k-th execution of an op in a token is paired with the k-th call of its FX node.
GE → GE (fusion off): the same op name is compared input for input and output for output; fused ops through their
members, as above. Whatever finds no partner is returned as `Unmatched` with the reason — nothing is dropped.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Optional

from tcmp.schemas.errors import DumpError
from tcmp.schemas.fx_dump import read_npy_header
from tcmp.schemas.ge_dump import NOT_DUMPED
from tcmp.schemas.ge_names import sanitize
from tcmp.schemas.graph import FxTensorName, GraphOp, InputEdge
from tcmp.schemas.layout import DumpFile, FileKind
from tcmp.schemas.records import IO, TensorKind, TensorSummary

from .executions import FxCall, GeExecution, TensorMeta
from .fusion import GraphView, NameSplitter
from .metrics import squeezed
from .records import Pair, Role, TensorRef, Unmatched, UnmatchedKind

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


@dataclass(frozen=True)
class _Resolved:
    """What a target execution is in the graph."""

    members: tuple[GraphOp, ...]  # one op, or a fused op's members
    fused: bool
    truncated: bool = False


class _Context:
    """Shared by the GE → FX and GE → GE matchers of one token.

    A target tensor the writer did not dump (device address 0) is never paired: whatever the matchers found for it,
    it is listed by design as not dumped, since nothing was measured; a pair whose golden tensor was not dumped is
    listed the same way.
    """

    def __init__(
        self, rank: Optional[int], token: int, graph_label: str, result: MatchResult,
        fx_stored: Mapping[Path, TensorSummary],
    ) -> None:  # fmt: skip
        self.rank, self.token, self.graph_label, self.result = rank, token, graph_label, result
        self.fx_stored = fx_stored

    def fx_ref(self, file: DumpFile, io: IO, index: int, sub_index: Optional[int] = None) -> TensorRef:
        """An FX tensor; one whose raw file `tcmp watch` deleted comes with its stored summary."""
        stored = self.fx_stored.get(file.path)
        return TensorRef((file,), io, index, sub_index, stored=stored, raw_deleted=stored is not None)

    def ge_ref(self, e: GeExecution, io: IO, index: int) -> TensorRef:
        meta = e.tensor(io, index)
        stored, dumped = (meta.stored, meta.dumped) if meta is not None else (None, True)
        return TensorRef(e.files, io, index, stored=stored, raw_deleted=e.raw_deleted, dumped=dumped)

    @staticmethod
    def not_dumped(e: GeExecution, io: Optional[IO], index: Optional[int]) -> bool:
        meta = e.tensor(io, index) if io is not None and index is not None else None
        return meta is not None and not meta.dumped

    def pair(self, e: GeExecution, io: IO, index: int, bench: TensorRef, notes=(), stack=None) -> None:
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
                 self.ge_ref(e, io, index), bench, tuple(notes), stack, e.timestamp)
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

    def unreadable(self, e: GeExecution, reason: str) -> None:
        self._unmatched(e, None, None, reason, UnmatchedKind.UNREADABLE)

    def self_check(self, e: GeExecution, why: str) -> None:
        """A GE-inserted conversion: output j against its own input j (values must survive the conversion)."""
        for k in range(len(e.inputs)):
            if k >= len(e.outputs):
                self.by_design(e, IO.INPUT, k, "GE-inserted op: only its outputs are checked, against its inputs")
        for j in range(len(e.outputs)):
            if j < len(e.inputs):
                bench = self.ge_ref(e, IO.INPUT, j)
                self.pair(e, IO.OUTPUT, j, bench, (f"self check: output {j} against input {j} ({why})",))
            else:
                self.by_design(e, IO.OUTPUT, j, f"self check: no input {j} to compare output {j} with")


def _group_inputs(view: GraphView, resolved: _Resolved) -> list[tuple[GraphOp, int, InputEdge]]:
    """A resolved execution's inputs in order, as (member, its input k, edge): a single op's own; a fused group's
    external inputs; a truncated fused name (only its first member known) its first member's."""
    if not resolved.fused or resolved.truncated:
        first = resolved.members[0]
        return [(first, k, edge) for k, edge in enumerate(first.inputs)]
    return view.external_inputs([m.name for m in resolved.members])


def _note_fusion(result: MatchResult, e: GeExecution, resolved: _Resolved) -> None:
    for member in resolved.members:
        result.fused_into[member.name] = e.op_name
        result.fused_into[sanitize(member.name)] = e.op_name  # as GE file names spell it
        for desc in member.outputs:
            if desc.fx_tensor is not None:
                result.fused_into[desc.fx_tensor.node_key] = e.op_name


def _resolve(view: Optional[GraphView], e: GeExecution) -> Optional[_Resolved]:
    if view is None:
        return None
    op = view.op(e.op_name) or view.op(e.file_op_name)
    if op is not None:
        return _Resolved((op,), fused=False)
    originals = [o[0] for o in e.original_ops if o is not None]
    found = view.decompose(e.op_name, originals) or view.decompose(e.file_op_name, originals)
    if found is None:
        return None
    return _Resolved(tuple(view.graph.op(m) for m in found.members), fused=True, truncated=found.truncated)


def _fused_output(
    view: GraphView, e: GeExecution, resolved: _Resolved, j: int
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
    outputs = view.external_outputs([m.name for m in resolved.members])
    if j >= len(outputs):
        return None, "fused op output without a member output"
    return outputs[j], f"{missing}: the fusion's external output {j} instead" if original is not None else ""


def _stack(resolved: _Resolved) -> Optional[str]:
    return next((m.stack_info for m in resolved.members if m.stack_info), None)


# --- GE -> FX -------------------------------------------------------------------------------------------------


class FxMatcher:
    def __init__(self, ctx: _Context, view: GraphView, calls: dict[str, tuple[FxCall, ...]]) -> None:
        self.ctx, self.view, self.calls = ctx, view, calls
        self._shapes: dict[Path, Optional[tuple[int, ...]]] = {}

    def _call(self, key: str, execution: int) -> Optional[FxCall]:
        calls = self.calls.get(key, ())
        return calls[min(execution, len(calls) - 1)] if calls else None

    def _fx_node_of(self, op: GraphOp) -> Optional[str]:
        return next((o.fx_tensor.node_key for o in op.outputs if o.fx_tensor is not None), None)

    def _shape(self, file: DumpFile) -> Optional[tuple[int, ...]]:
        """The shape of a numeric FX tensor file (None for non-tensor arguments and unreadable headers)."""
        if file.path not in self._shapes:
            shape = None
            stored = self.ctx.fx_stored.get(file.path)
            if stored is not None:  # raw file deleted: the index knows its shape
                numeric = stored.kind in (TensorKind.TENSOR, TensorKind.SCALAR)
                self._shapes[file.path] = stored.shape if numeric else None
                return self._shapes[file.path]
            if file.kind is FileKind.FX_NPY:
                try:
                    header = read_npy_header(file.path)
                    shape = header.shape if header.dtype.kind in "biufc" else None
                except DumpError:
                    shape = None
            self._shapes[file.path] = shape
        return self._shapes[file.path]

    def match(self, e: GeExecution) -> None:
        resolved = _resolve(self.view, e)
        if resolved is not None and not resolved.fused and resolved.members[0].name != e.op_name:
            e = replace(e, op_name=resolved.members[0].name)  # the graph's name, where the file's is sanitized
        if resolved is None:
            if SELF_CHECK_TYPES.search(e.op_type):
                self.ctx.self_check(e, f"GE-inserted {e.op_type}, not in the graph")
            else:
                self.ctx.no_partner(e, None, None, f"no graph entry: {e.op_name!r} is neither an op of graph "
                                                   f"{self.view.graph.name} nor a fusion of its ops")  # fmt: skip
            return
        has_fx = any(o.fx_tensor for m in resolved.members for o in m.outputs)
        if not resolved.fused and not has_fx and SELF_CHECK_TYPES.search(e.op_type):
            self.ctx.self_check(e, f"{e.op_type} without an FX tensor")
            return
        if resolved.fused:
            _note_fusion(self.ctx.result, e, resolved)
        stack = _stack(resolved)
        self._inputs(e, resolved, stack)
        self._outputs(e, resolved, stack)

    def _outputs(self, e: GeExecution, resolved: _Resolved, stack: Optional[str]) -> None:
        for j in range(len(e.outputs)):
            source, note = (
                _fused_output(self.view, e, resolved, j) if resolved.fused else ((resolved.members[0], j), "")
            )
            if source is None:
                self.ctx.no_partner(e, IO.OUTPUT, j, note)
                continue
            op, index = source
            desc = op.outputs[index] if index < len(op.outputs) else None
            fx = desc.fx_tensor if desc is not None else None
            if fx is None:
                self.ctx.by_design(e, IO.OUTPUT, j, f"no _fx_tensor_name on output {index} of {op.name} "
                                                    "(an inner op of a multi-op converter expansion)")  # fmt: skip
                continue
            call = self._call(fx.node_key, e.execution)
            file = call.output(fx.output_index) if call is not None else None
            if file is None:
                self.ctx.no_partner(e, IO.OUTPUT, j, f"golden file missing: {fx} in token {self.ctx.token}")
                continue
            notes = (note,) if note else ()
            self.ctx.pair(e, IO.OUTPUT, j, self.ctx.fx_ref(file, IO.OUTPUT, fx.output_index), notes, stack)

    def _edges(self, resolved: _Resolved) -> list[tuple[GraphOp, InputEdge]]:
        return [(op, edge) for op, _, edge in _group_inputs(self.view, resolved)]

    def _producer_fx(self, edge: InputEdge) -> Optional[FxTensorName]:
        """The FX tensor behind a producer edge, following GE conversion ops without FX tensors back."""
        for _ in range(MAX_PASS_THROUGH):
            found = self.view.producer_output(edge)
            if found is None:
                return None
            producer, index = found
            desc = producer.outputs[index] if index < len(producer.outputs) else None
            if desc is not None and desc.fx_tensor is not None:
                return desc.fx_tensor
            passes = SELF_CHECK_TYPES.search(producer.type) and producer.inputs and not any(
                o.fx_tensor for o in producer.outputs
            )  # fmt: skip
            if not passes:
                return None
            edge = producer.inputs[0]
        return None

    def _inputs(self, e: GeExecution, resolved: _Resolved, stack: Optional[str]) -> None:
        edges = self._edges(resolved)
        claimed: dict[str, set[tuple[int, Optional[int]]]] = defaultdict(set)
        for k in range(len(e.inputs)):
            if self.ctx.not_dumped(e, IO.INPUT, k):  # before pairing by shape: it must not claim an FX input
                self.ctx.by_design(e, IO.INPUT, k, NOT_DUMPED)
                continue
            if k >= len(edges):
                self.ctx.no_partner(e, IO.INPUT, k, f"GE input {k} has no data edge in the graph "
                                                    f"({len(edges)} edges)")  # fmt: skip
                continue
            consumer, edge = edges[k]
            fx = self._producer_fx(edge)
            if fx is not None:
                call = self._call(fx.node_key, e.execution)
                file = call.output(fx.output_index) if call is not None else None
                if file is not None:
                    bench = self.ctx.fx_ref(file, IO.OUTPUT, fx.output_index)
                    self.ctx.pair(e, IO.INPUT, k, bench, (f"via producer edge {edge.producer}:{edge.index}",), stack)
                    continue
            self._input_by_shape(e, k, consumer, edge, claimed, stack)

    def _input_by_shape(self, e, k, consumer: GraphOp, edge: InputEdge, claimed, stack) -> None:
        key = self._fx_node_of(consumer)
        call = self._call(key, e.execution) if key else None
        if call is None:
            self.ctx.no_partner(e, IO.INPUT, k, f"producer {edge.producer} has no FX tensor and {consumer.name} "
                                                "has no FX node to take the input from")  # fmt: skip
            return
        meta = e.tensor(IO.INPUT, k)
        stored = meta.stored if meta is not None else None
        if meta is not None and meta.shape is None and stored is not None and stored.device_shape is not None:
            self.ctx.no_partner(e, IO.INPUT, k, f"producer {edge.producer} has no FX tensor, and a stats CSV gives "
                                f"only the {stored.device_format} device shape {list(stored.device_shape)}: no ND "
                                "shape to pair it by")  # fmt: skip
            return
        want = squeezed(meta.shape) if meta is not None and meta.shape is not None else None
        for i, j, file in call.inputs:
            if (i, j) in claimed[key]:
                continue
            have = self._shape(file)
            if have is None or (want is not None and squeezed(have) != want):
                continue
            claimed[key].add((i, j))
            bench = self.ctx.fx_ref(file, IO.INPUT, i, sub_index=j)
            where = f"INPUT.{i}" + (f".{j}" if j is not None else "")
            self.ctx.pair(e, IO.INPUT, k, bench,
                          (f"producer {edge.producer} has no FX tensor: paired with {call.key} {where} by shape",),
                          stack)  # fmt: skip
            return
        if any(f.kind is FileKind.FX_MIN_MAX_NPY for _, _, f in call.inputs):
            why = (
                f"producer {edge.producer} has no FX tensor, and the inputs of {call.key} are min/max files "
                "without shapes to tell them apart"
            )
            self.ctx.no_partner(e, IO.INPUT, k, why)
            return
        shape = list(meta.shape or ()) if meta else "?"
        self.ctx.no_partner(
            e, IO.INPUT, k, f"producer {edge.producer} has no FX tensor and {call.key} has no unclaimed input of "
            f"shape {shape}"
        )  # fmt: skip


# --- GE -> GE (fusion off) -------------------------------------------------------------------------------------


class GeMatcher:
    def __init__(self, ctx: _Context, view: Optional[GraphView], golden: Sequence[GeExecution]) -> None:
        self.ctx, self.view = ctx, view
        self.by_name: dict[str, list[GeExecution]] = defaultdict(list)
        for g in golden:
            self.by_name[g.op_name].append(g)
            if g.file_op_name != g.op_name:
                self.by_name.setdefault(g.file_op_name, []).append(g)
        self.splitter = NameSplitter(list(self.by_name))

    def _golden(self, name: str, execution: int) -> Optional[GeExecution]:
        found = self.by_name.get(name)
        return found[min(execution, len(found) - 1)] if found else None

    def _golden_ref(self, g: GeExecution, io: IO, index: int) -> Optional[TensorRef]:
        meta = g.tensor(io, index)
        if meta is None:
            return None
        return TensorRef(g.files, io, index, stored=meta.stored, raw_deleted=g.raw_deleted, dumped=meta.dumped)

    def _positional(self, e: GeExecution, g: GeExecution, io: IO, index: int, target_index: int, notes) -> None:
        ref = self._golden_ref(g, io, index)
        if ref is None:
            self.ctx.no_partner(e, io, target_index, f"golden {g.op_name} has no {io.value} {index}")
        else:
            self.ctx.pair(e, io, target_index, ref, notes)

    def match(self, e: GeExecution) -> None:
        same = self._golden(e.op_name, e.execution) or self._golden(e.file_op_name, e.execution)
        if same is not None:
            for io, items in ((IO.INPUT, e.inputs), (IO.OUTPUT, e.outputs)):  # inputs first, as tables read
                for i in range(len(items)):
                    self._positional(e, same, io, i, i, ())
            return
        resolved = _resolve(self.view, e)
        if resolved is not None and resolved.fused:
            self._fused(e, resolved)
            return
        split = self.splitter.split(e.op_name) or self.splitter.split(e.file_op_name)
        if split:  # no graph: by name only, the peer's first-inputs / last-outputs rule
            first, last = self._golden(split[0], e.execution), self._golden(split[-1], e.execution)
            note = ("fused op split by name only (no graph file): inputs of the first member, outputs of the last",)
            for i in range(len(e.inputs)):
                self._positional(e, first, IO.INPUT, i, i, note)
            for j in range(len(e.outputs)):
                self._positional(e, last, IO.OUTPUT, j, j, note)
            return
        self.ctx.no_partner(e, None, None, f"golden data missing: no op {e.op_name!r} in the fusion-off dump, and "
                                           "its name is not a fusion of golden op names")  # fmt: skip

    def _fused(self, e: GeExecution, resolved: _Resolved) -> None:
        view = self.view
        assert view is not None
        _note_fusion(self.ctx.result, e, resolved)
        inputs = _group_inputs(view, resolved)
        for k in range(len(e.inputs)):
            if k >= len(inputs):
                self.ctx.no_partner(e, IO.INPUT, k, "fused op input without a member input")
                continue
            member, index, _ = inputs[k]
            golden = self._golden(member.name, e.execution)
            if golden is None:
                self.ctx.no_partner(e, IO.INPUT, k, f"golden data missing for member {member.name}")
                continue
            self._positional(e, golden, IO.INPUT, index, k, (f"member {member.name} input {index}",))
        for j in range(len(e.outputs)):
            source, note = _fused_output(view, e, resolved, j)
            if source is None:
                self.ctx.no_partner(e, IO.OUTPUT, j, note)
                continue
            member, index = source
            golden = self._golden(member.name, e.execution)
            if golden is None:
                self.ctx.no_partner(e, IO.OUTPUT, j, f"golden data missing for member {member.name}")
                continue
            notes = (note,) if note else ()
            self._positional(e, golden, IO.OUTPUT, index, j, (*notes, f"member {member.name} output {index}"))


def match_token(
    rank: Optional[int],
    token: int,
    graph_label: str,
    view: Optional[GraphView],
    target: Sequence[GeExecution],
    golden_calls: Optional[dict[str, tuple[FxCall, ...]]] = None,
    golden_ge: Optional[Sequence[GeExecution]] = None,
    fx_stored: Mapping[Path, TensorSummary] = MappingProxyType({}),
) -> MatchResult:
    """Pairs and unmatched target tensors of one token (golden leftovers are the caller's: it knows all files).
    `fx_stored`: index summaries of golden FX files whose raw data is gone."""
    result = MatchResult()
    ctx = _Context(rank, token, graph_label, result, fx_stored)
    if golden_calls is not None:
        assert view is not None
        matcher = FxMatcher(ctx, view, golden_calls)
    else:
        matcher = GeMatcher(ctx, view, golden_ge or ())
    for e in target:
        if e.error is not None:
            ctx.unreadable(e, f"unreadable target file: {e.error}")
            continue
        matcher.match(e)
    return result


__all__ = ["FxMatcher", "GeMatcher", "MatchResult", "TensorMeta", "match_token"]
