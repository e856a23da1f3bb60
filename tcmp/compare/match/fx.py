"""GE → FX pairing for one token: which FX tensor each GE tensor is, and why when there is none.

Rules (docs/decisions.md, "GE against FX"; the torchair behaviours are in torchair_rules):
- a GE output is the FX output its `_fx_tensor_name` names, output path included (`OUTPUT.1.0` is element 0 of
  the list the FX dumper stacked into `OUTPUT.1`); torchair's passes are undone on the way: a view retargeted to
  reshape, a pattern-fused node (through the outputs of the nodes it replaced), a name written over by a
  converter that returns its input (resolved to the producer); symbolic sizes have no FX file;
- a GE input is its producer's FX output (GE-inserted Cast/TransData followed back); the FX node's own input copy
  of that tensor is taken with it. An input fed by a graph input is the FX node's input copy of the same shape
  that nothing else took (the FX node of an op without a name: the named op its converter expansion ends in). An
  input fed by an unnamed op is a tensor inside a converter expansion; one fed by a Const is a constant the
  converter made (a scalar is still compared with the FX scalar argument it came from);
- the k-th GE execution of an op is paired with the k-th call of its FX node; when the counts differ, in order
  among calls whose outputs have the same shapes; an execution left without a call is listed whole, inputs
  included, with both counts, and its consumers read the producer's last run that has a call.
Nothing is compared "by shape" against a tensor the GE tensor cannot be; when unsure, the item is listed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

from tcmp.compare.collect.fusion import GraphView
from tcmp.compare.match.context import (
    MAX_PASS_THROUGH,
    SELF_CHECK_TYPES,
    ResolvedExecution,
    TokenContext,
    fused_output,
    graph_title,
    group_inputs,
    note_fusion,
    resolve_execution,
    stack_info_of,
)
from tcmp.compare.match.executions import FxCall, GeExecution
from tcmp.compare.match.fx_leftovers import FxFindings, golden_reasons
from tcmp.compare.match.fx_side import FxSide
from tcmp.compare.match.fx_sources import Found, FxSources, Missing, Run, Source
from tcmp.compare.records import UnmatchedKind
from tcmp.compare.rules.shapes import squeezed
from tcmp.compare.rules.torchair import (
    PATTERN_BY_FUSED,
    RESHAPE_TARGET,
    RETURNS_INPUT_TARGETS,
    VIEW_OP_TYPES,
    VIEW_TARGET,
    is_sym_target,
    type_fits_target,
)
from tcmp.schemas.dump_records import IO, TensorSummary
from tcmp.schemas.dump_tree import DumpFile, FileKind
from tcmp.schemas.graph import GraphOp, InputEdge

_CONSTANT_TYPES = ("Const", "Constant")
_GRAPH_INPUT_TYPES = ("Data", "RefData", "PlaceHolder", "AippData")


@dataclass(frozen=True)
class _Planned:
    """A target execution as the graph names it, what it is in the graph, and its outputs' FX tensors."""

    execution: GeExecution
    resolved: Optional[ResolvedExecution]
    outputs: tuple[tuple[Source, tuple[str, ...]], ...] = ()  # per output: its FX tensor or why none, and notes
    stray: Optional[str] = None  # why it has no partner call (a task GE ran again): none of its outputs has one


class FxMatcher:
    def __init__(
        self,
        ctx: TokenContext,
        view: GraphView,
        calls: Mapping[str, tuple[FxCall, ...]],
        target: Sequence[GeExecution],
        stored: Mapping[Path, TensorSummary],
    ) -> None:
        self.ctx, self.view = ctx, view
        self.sources = FxSources(ctx.token, view, FxSide(calls, stored), target)
        self.fx, self.named_keys, self.executions = self.sources.fx, self.sources.named_keys, self.sources.executions
        self.patterns = self.sources.patterns
        self._plans: dict[tuple[str, int], _Planned] = {}

    # --- which run of its op an execution is -------------------------------------------------------------------

    def _call_number(self, e: GeExecution) -> int:
        """Which run of its op `e` is, not counting the runs without a partner call before it (a task GE ran
        again): the k-th for an op whose FX call is found through another name (a producer not dumped)."""
        return sum(1 for x in self.executions.get(e.op_name, ()) if x.order < e.order and not self._stray(x))

    def _stray(self, e: GeExecution) -> bool:
        return self._planned(e).stray is not None

    def _producer_run(self, producer: GraphOp, e: GeExecution) -> Run:
        """The execution of `producer` whose output execution `e` read: its last one before `e` that has a partner
        call (the k-th, as `e` is the k-th run of its op with a call, when the producer was not dumped)."""
        before = [p for p in self.executions.get(producer.name, ()) if p.order < e.order and not self._stray(p)]
        return Run(producer.name, before[-1].execution if before else self._call_number(e))

    # --- matching ----------------------------------------------------------------------------------------------

    def _planned(self, e: GeExecution) -> _Planned:
        """What execution `e` is in the graph and, for one with FX tensors, its outputs' FX tensors (computed
        before its inputs: an execution none of whose outputs has a partner call has no partner at all)."""
        cache_key = (e.op_name, e.execution)
        if cache_key in self._plans:
            return self._plans[cache_key]
        resolved = resolve_execution(self.view, e)
        if resolved is not None and not resolved.fused and resolved.members[0].name != e.op_name:
            e = replace(e, op_name=resolved.members[0].name)  # the graph's name, where the file's is sanitized
        planned = _Planned(e, resolved)
        has_fx = resolved is not None and any(o.fx_tensor for m in resolved.members for o in m.outputs)
        if resolved is not None and (resolved.fused or has_fx or not SELF_CHECK_TYPES.search(e.op_type)):
            outputs = tuple(self._output_source(e, resolved, j) for j in range(len(e.outputs)))
            extra = [s for s, _ in outputs if isinstance(s, Missing) and s.extra_run]
            found = any(isinstance(s, Found) for s, _ in outputs)
            planned = _Planned(e, resolved, outputs, extra[0].reason if extra and not found else None)
        self._plans[cache_key] = planned
        return planned

    def match(self, e: GeExecution) -> None:
        planned = self._planned(e)
        e, resolved = planned.execution, planned.resolved
        if resolved is None:
            if SELF_CHECK_TYPES.search(e.op_type):
                self.ctx.self_check(e, f"GE-inserted {e.op_type}, not in the graph")
            else:
                self.ctx.no_partner(
                    e,
                    None,
                    None,
                    f"no graph entry: {e.op_name!r} is neither an op of graph "
                    f"{graph_title(self.view.graph)} nor a fusion of its ops",
                )
            return
        has_fx = any(o.fx_tensor for m in resolved.members for o in m.outputs)
        if not resolved.fused and not has_fx and SELF_CHECK_TYPES.search(e.op_type):
            self.ctx.self_check(e, f"{e.op_type} without an FX tensor")
            return
        if planned.stray is not None:  # a run without a call: none of its tensors has a partner, inputs included
            self.ctx.unpartnered(e, planned.stray)
            return
        if resolved.fused:
            note_fusion(self.ctx.result, e, resolved)
            self.ctx.missing_members(e, resolved, self.view.graph)
        stack = stack_info_of(resolved)
        self._inputs(e, resolved, stack)
        for j, (source, extra) in enumerate(planned.outputs):
            self._record(e, IO.OUTPUT, j, source, stack, extra)

    def _record(self, e: GeExecution, io: IO, k: int, source: Source, stack, extra=()) -> None:
        if isinstance(source, Missing):
            if source.kind is UnmatchedKind.BY_DESIGN:
                self.ctx.by_design(e, io, k, source.reason)
            else:
                self.ctx.no_partner(e, io, k, source.reason)
            return
        bench = self.ctx.fx_ref(source.file, IO.OUTPUT, source.index, element=source.element, reshaped=source.reshaped)
        self.ctx.pair(e, io, k, bench, (*extra, *source.notes), stack)

    def _output_source(self, e: GeExecution, resolved: ResolvedExecution, j: int) -> tuple[Source, tuple[str, ...]]:
        if resolved.fused:
            found, note = fused_output(self.view, e, resolved, j)
            if found is None:
                return Missing(note, UnmatchedKind.NO_PARTNER), ()
            op, index = found
            extra: tuple[str, ...] = (note,) if note else ()
        else:
            op, index, extra = resolved.members[0], j, ()
        return self.sources.source(op, index, Run(e.op_name, e.execution)), extra

    def _producer(self, edge: InputEdge) -> tuple[Optional[GraphOp], int, list[str]]:
        """The op a data edge comes from, past GE conversion ops without FX tensors (Cast/TransData a pass or GE
        put in, whose value is the same tensor in another dtype or layout)."""
        passed: list[str] = []
        for _ in range(MAX_PASS_THROUGH):
            found = self.view.producer_output(edge)
            if found is None:
                return None, edge.index, passed
            producer, index = found
            desc = producer.outputs[index] if index < len(producer.outputs) else None
            named = desc is not None and desc.fx_tensor is not None
            passes = (
                SELF_CHECK_TYPES.search(producer.type)
                and producer.inputs
                and not any(o.fx_tensor for o in producer.outputs)
            )
            if named or not passes:
                return producer, index, passed
            passed.append(producer.name)
            edge = producer.inputs[0]
        return None, edge.index, passed

    def _inputs(self, e: GeExecution, resolved: ResolvedExecution, stack: Optional[str]) -> None:
        edges = [(op, edge) for op, _, edge in group_inputs(self.view, resolved)]
        by_shape: list[tuple[int, GraphOp, Optional[GraphOp], str]] = []
        for k in range(len(e.inputs)):  # (a tensor not dumped is still paired: its partner is then listed as such)
            if k >= len(edges):
                self.ctx.no_partner(e, IO.INPUT, k, f"GE input {k} has no data edge in the graph ({len(edges)} edges)")
                continue
            consumer, edge = edges[k]
            producer, index, passed = self._producer(edge)
            via = f"via producer edge {edge.producer}:{edge.index}" + (
                f" (through {', '.join(passed)})" if passed else ""
            )
            if producer is None or producer.type in _GRAPH_INPUT_TYPES or producer.type in _CONSTANT_TYPES:
                by_shape.append((k, consumer, producer, edge.producer))
                continue
            desc = producer.outputs[index] if index < len(producer.outputs) else None
            if desc is None or desc.fx_tensor is None:
                inner = (
                    " (a view torchair builds inside its consumer's conversion)"
                    if producer.type in VIEW_OP_TYPES
                    else ""
                )
                source: Source = Missing(
                    f"a tensor inside a converter expansion: its producer {producer.name} "
                    f"carries no _fx_tensor_name (an inner op{inner})",
                    UnmatchedKind.BY_DESIGN,
                )
            else:
                source = self.sources.source(producer, index, self._producer_run(producer, e))
            self._record(e, IO.INPUT, k, source, stack, (via,))
            if isinstance(source, Found):
                call = self._own_call(consumer, e)
                if call is not None:
                    self.fx.claim_copy(call, source.file)
        for k, consumer, producer, name in by_shape:
            self._input_by_shape(e, k, consumer, producer, name, stack)

    def _own_call(self, op: GraphOp, e: GeExecution) -> Optional[FxCall]:
        """The FX call a GE op's inputs are the arguments of: its own FX node's, or, for an op of a converter
        expansion without a name, that of the named op the expansion ends in."""
        for named in self._expansion_ends(op):
            fx = next(o.fx_tensor for o in named.outputs if o.fx_tensor is not None)
            run = self._downstream_run(named, e)
            if fx.target in PATTERN_BY_FUSED and fx.node_key not in self.fx.calls:
                found = self.patterns.of(fx.node_key, PATTERN_BY_FUSED[fx.target], run.execution)
                return found.anchor if found is not None else None
            key = fx.node_key
            if fx.target in RETURNS_INPUT_TARGETS and not type_fits_target(named.type, fx.target):
                producer = self.sources.overwritten_call(named, fx, run)
                if producer is not None:
                    return producer
            if key not in self.fx.calls and fx.target == RESHAPE_TARGET:
                key = f"{key.partition('-')[0]}-{VIEW_TARGET}"
            return self.sources.aligned(run.op_name, run.execution, key, fx.output_index, 0)
        return None

    def _downstream_run(self, named: GraphOp, e: GeExecution) -> Run:
        """The execution of `named` (the end of `e`'s expansion, or `e`'s own op) that follows execution `e`."""
        after = [n for n in self.executions.get(named.name, ()) if n.order >= e.order and not self._stray(n)]
        return Run(named.name, after[0].execution if after else self._call_number(e))

    def _expansion_ends(self, op: GraphOp) -> list[GraphOp]:
        """`op` if it carries a name, else the named ops reached from it through ops without one (one only, or
        none: an expansion is a chain ending in one node's tensors)."""
        if any(o.fx_tensor for o in op.outputs):
            return [op]
        ends: dict[str, GraphOp] = {}
        seen, stack = {op.name}, [op]
        while stack and len(ends) <= 1:
            for consumer, _ in self.view.consumers.get(stack.pop().name, ()):
                if consumer.name in seen:
                    continue
                seen.add(consumer.name)
                if any(o.fx_tensor for o in consumer.outputs):
                    ends[next(o.fx_tensor.node_key for o in consumer.outputs if o.fx_tensor)] = consumer
                else:
                    stack.append(consumer)
        return list(ends.values()) if len(ends) == 1 else []

    def _input_by_shape(self, e, k: int, consumer: GraphOp, producer: Optional[GraphOp], name: str, stack) -> None:
        """An input fed by a graph input or a constant: the FX call's argument copy of that shape nothing took."""
        meta = e.tensor(IO.INPUT, k)
        constant = producer is not None and producer.type in _CONSTANT_TYPES
        what = f"constant {name}" if constant else f"graph input {name}"
        stored = meta.stored if meta is not None else None
        if meta is not None and meta.shape is None and stored is not None and stored.device_shape is not None:
            self.ctx.no_partner(
                e,
                IO.INPUT,
                k,
                f"{what}: a stats CSV gives only the {stored.device_format} device "
                f"shape {list(stored.device_shape)}, no ND shape to pair it by",
            )
            return
        want = meta.shape if meta is not None else None
        call = self._own_call(consumer, e)
        end = next(iter(self._expansion_ends(consumer)), None)
        if (
            call is not None
            and end is not consumer
            and (consumer.type in VIEW_OP_TYPES or not type_fits_target(consumer.type, call.target))
        ):
            # an op without a name reads the argument of the named op it leads to only as an inner op of that
            # node's expansion (Mul inside aten.mul's Mul+Cast); a view built inside its consumer reads the
            # tensor before the view, and another converter's op another node's argument
            call = None
        if call is None:
            ends = self._expansion_ends(consumer)
            sym = next((o.fx_tensor for end in ends for o in end.outputs if o.fx_tensor), None)
            if sym is not None and is_sym_target(sym.target):
                self.ctx.by_design(
                    e,
                    IO.INPUT,
                    k,
                    f"{what} read to compute a symbolic size ({sym}) torchair adds "
                    "(_optimize_sym_input); the FX dump has no sym node",
                )
            elif consumer.type in VIEW_OP_TYPES:
                self.ctx.by_design(
                    e,
                    IO.INPUT,
                    k,
                    f"{what} read by {consumer.name}, a view torchair builds inside its "
                    "consumer's conversion (view optimization): no FX node names it",
                )
            elif not any(o.fx_tensor for o in consumer.outputs):
                why = (
                    f"{what} read by {consumer.name}, an op of a converter expansion without a name: the FX node it "
                    "belongs to is not known (its converter named none of the tensors it returned)"
                )
                self.ctx.by_design(e, IO.INPUT, k, why)
            else:
                self.ctx.no_partner(
                    e, IO.INPUT, k, f"{what} feeds {consumer.name}, which has no FX call to take the input from"
                )
            return
        # a constant is compared only with the float scalar argument it was made from (`x * 0.5`: Mul(x, Const))
        scalar = want is not None and (not want or all(d == 1 for d in want)) and _is_float(meta)
        fitting = []
        for i, j, file in self.fx.unclaimed_inputs(call):
            shape = self.fx.shape(file) if file.kind is not FileKind.FX_MIN_MAX_NPY else None
            if shape is None or not shape.numeric:
                continue
            if constant and not (scalar and shape.shape == () and shape.kind == "f"):
                continue
            if want is None or squeezed(shape.shape) == squeezed(want):
                fitting.append((i, j, file))
        if len(fitting) > 1 and not constant:
            # Several arguments of its shape are left (`x.t() + y`, square; a converter that swaps them): the one
            # holding the same values, else it cannot be told which.
            held = [item for item in fitting if self.fx.holds(item[2], e, k)]
            if not held:
                shown = list(want) if want is not None else "?"
                self.ctx.no_partner(
                    e,
                    IO.INPUT,
                    k,
                    f"{what}: {len(fitting)} arguments of {call.key} of shape {shown} "
                    "are left and none holds its values: which is its copy cannot be told",
                )
                return
            fitting = held
        if fitting:
            i, j, file = fitting[0]
            self.fx.claim(call, (i, j))
            bench = self.ctx.fx_ref(file, IO.INPUT, i, sub_index=j)
            where = f"INPUT.{i}" + (f".{j}" if j is not None else "")
            self.ctx.pair(e, IO.INPUT, k, bench, (f"{what}: {call.key} {where}, the argument of its shape",), stack)
            return
        if constant:
            self.ctx.by_design(
                e,
                IO.INPUT,
                k,
                f"{what}: a constant the converter made from an argument of {call.key} that is not an FX tensor",
            )
        elif any(f.kind is FileKind.FX_MIN_MAX_NPY for _, _, f in call.inputs):
            self.ctx.no_partner(
                e, IO.INPUT, k, f"{what}: the inputs of {call.key} are min/max files without shapes to tell them apart"
            )
        else:
            shown = list(want) if want is not None else "?"
            self.ctx.by_design(
                e,
                IO.INPUT,
                k,
                f"{what}: {call.key} has no positional FX input of shape {shown} left "
                "(the FX dumper writes positional arguments only: a tensor passed as a "
                "keyword argument is never dumped)",
            )

    def leftovers(self, files: Sequence[DumpFile]) -> dict[Path, tuple[str, UnmatchedKind]]:
        learnt = FxFindings(
            self.fx, self.view.graph, self.patterns.replaced_keys, self.sources.written_over, self.named_keys
        )
        return golden_reasons(learnt, files)


def _is_float(meta) -> bool:
    dtype = (meta.dtype or "") if meta is not None else ""
    return "FLOAT" in dtype.upper() or "BF16" in dtype.upper() or dtype.startswith(("float", "bfloat"))


__all__ = ["FxMatcher"]
