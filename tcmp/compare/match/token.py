"""Pairing target (GE, fusion on) tensors with golden tensors, for one graph of one rank, token by token.

GE → FX: fx_match (the rules for what torchair's converter and passes did are there). Both goldens share:
- fused ops: outputs through the header's `original_op` or the group's external outputs, inputs through the
  group's external inputs, members found by `GraphView.decompose`;
- GE-inserted Cast/TransData ops (not in the graph, or without any FX tensor): their outputs are checked against
  their own inputs.
GE → GE (fusion off): the same op name is compared input for input and output for output; fused ops through their
members, as above. The k-th execution of an op is the golden's k-th run of it, or when the counts differ (a task
GE ran again) the next run whose output shapes are the same; an execution left without one is listed whole.
Whatever finds no partner is returned as `Unmatched` with the reason — nothing is dropped.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Optional, Union

from tcmp.compare.collect.fusion import GraphView, NameSplitter
from tcmp.compare.match.branches import has_branches, mark_branches_not_taken
from tcmp.compare.match.context import (
    SELF_CHECK_TYPES,
    MatchResult,
    ResolvedExecution,
    TokenContext,
    fused_output,
    graph_title,
    group_inputs,
    note_fusion,
    resolve_execution,
)
from tcmp.compare.match.executions import FxCall, GeExecution, TensorMeta, align_runs, same_shape
from tcmp.compare.match.fx import FxMatcher
from tcmp.compare.records import TensorRef, UnmatchedKind
from tcmp.compare.rules.cast_check import CastCheck, cast_check_for, is_float_dtype_named
from tcmp.schemas.dump_records import IO, TensorSummary
from tcmp.schemas.dump_tree import DumpFile

CAST_SELF_CHECKED = "the target's cast is checked against Cast(its own input)"

# --- GE -> GE (fusion off) -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Link:
    """A target tensor and the golden member's tensor it is compared with."""

    io: IO
    target_index: int
    golden_index: int


class GeMatcher:
    def __init__(
        self, ctx: TokenContext, view: Optional[GraphView], golden: Sequence[GeExecution], target: Sequence[GeExecution]
    ) -> None:
        self.ctx, self.view = ctx, view
        self.by_name: dict[str, list[GeExecution]] = defaultdict(list)
        for g in golden:
            self.by_name[g.op_name].append(g)
            if g.file_op_name != g.op_name:
                self.by_name.setdefault(g.file_op_name, []).append(g)
        self.splitter = NameSplitter(list(self.by_name))
        self.runs: dict[str, list[GeExecution]] = defaultdict(list)
        for e in target:
            self.runs[e.op_name].append(e)
        self.target = target
        self._alignments: dict[tuple[str, str], dict[int, int]] = {}

    def _golden(self, e: GeExecution, name: str, links: Sequence[_Link]) -> Union[GeExecution, str, None]:
        """The golden run of op `name` that execution `e` is: the k-th with the k-th, or when the counts differ
        in order among runs whose tensors `links` compares have the same shapes. None: no golden op `name`; a
        string: why `e` has no run of it left."""
        found = self.by_name.get(name)
        if not found:
            return None
        runs = self.runs.get(e.op_name, ())
        key = (e.op_name, name)
        if key not in self._alignments:

            def fits(run: GeExecution, g: GeExecution) -> bool:
                for link in links:
                    mine, theirs = run.tensor(link.io, link.target_index), g.tensor(link.io, link.golden_index)
                    if mine is not None and theirs is not None and not same_shape(mine.shape, theirs.shape):
                        return False
                return True

            self._alignments[key] = align_runs(runs, found, fits)
        at = self._alignments[key].get(e.execution)
        if at is None:
            return (
                f"{e.op_name} ran {len(runs)} time(s) in token {self.ctx.token}, {name} {len(found)} time(s) in the "
                f"golden dump: execution {e.execution} has no golden run of the same output shapes left"
            )
        return found[at]

    def leftovers(self, used: Set[Path]) -> dict[Path, tuple[str, UnmatchedKind]]:
        """Why the golden runs of a target op that nothing paired with have no partner: the op ran fewer times in
        the target (or in other shapes)."""
        reasons: dict[Path, tuple[str, UnmatchedKind]] = {}
        for name, found in self.by_name.items():
            runs = self.runs.get(name, ())
            for k, g in enumerate(found):
                if runs and len(runs) != len(found) and not any(f.path in used for f in g.files):
                    why = (
                        f"{name} ran {len(found)} time(s) in token {self.ctx.token} of the golden dump, {len(runs)} "
                        f"in the target: golden run {k} has no target run of the same output shapes"
                    )
                    reasons.update((f.path, (why, UnmatchedKind.NO_PARTNER)) for f in g.files)
        return reasons

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
        own = [_Link(IO.OUTPUT, j, j) for j in range(len(e.outputs))]
        name = e.op_name if e.op_name in self.by_name else e.file_op_name
        same = self._golden(e, name, own)
        if isinstance(same, str):
            self.ctx.unpartnered(e, same)
            return
        if same is not None:
            if self._ge_inserted(e):
                self._inserted(e, same)
                return
            for io, items in ((IO.INPUT, e.inputs), (IO.OUTPUT, e.outputs)):  # inputs first, as tables read
                for i in range(len(items)):
                    self._positional(e, same, io, i, i, ())
            return
        resolved = resolve_execution(self.view, e)
        if resolved is not None and resolved.fused:
            self._fused(e, resolved)
            return
        split = self.splitter.split(e.op_name) or self.splitter.split(e.file_op_name)
        if split:  # no graph: by name only, the peer's first-inputs / last-outputs rule
            first = self._golden(e, split[0], [_Link(IO.INPUT, i, i) for i in range(len(e.inputs))])
            last = self._golden(e, split[-1], own)
            if isinstance(last, str):
                self.ctx.unpartnered(e, last)
                return
            note = ("fused op split by name only (no graph file): inputs of the first member, outputs of the last",)
            for i in range(len(e.inputs)):
                if isinstance(first, GeExecution):
                    self._positional(e, first, IO.INPUT, i, i, note)
                else:
                    self.ctx.no_partner(e, IO.INPUT, i, first or f"golden data missing for member {split[0]}")
            assert last is not None  # split members are golden op names (the splitter's), so each has a run or a why
            for j in range(len(e.outputs)):
                self._positional(e, last, IO.OUTPUT, j, j, note)
            return
        of = f"the ops of graph {graph_title(self.view.graph)} nor " if self.view is not None else ""
        self.ctx.no_partner(e, None, None, f"golden data missing: no op {e.op_name!r} in the fusion-off dump, and "
                                           f"its name is not a fusion of {of}golden op names")  # fmt: skip

    def _ge_inserted(self, e: GeExecution) -> bool:
        """A Cast/TransData that GE put in (not in the graph)."""
        return (
            self.view is not None
            and SELF_CHECK_TYPES.search(e.op_type) is not None
            and resolve_execution(self.view, e) is None
        )

    def _inserted_cast(self, e: GeExecution) -> bool:
        """A GE-inserted Cast that changes values: the golden's same-named cast rounds its own noisy input, so an
        integer output can sit one step away from the golden's although both casts are right."""
        return self._ge_inserted(e) and any(
            _changing(i.dtype, o.dtype) is not None for i, o in zip(e.inputs, e.outputs)
        )

    def _inserted(self, e: GeExecution, same: GeExecution) -> None:
        """A GE-inserted conversion, as against an FX golden: each value-changing output is checked against
        Cast(its own input) with CANN's roundings (`cast_check`), the golden's output left aside; an integer input
        that such a cast wrote is checked the same way, against Cast(that cast's input); every other tensor is
        paired with the golden's."""
        for f in same.files:  # used if any tensor still pairs with the golden's; else listed with this reason
            self.ctx.result.golden_reasons[f.path] = (CAST_SELF_CHECKED, UnmatchedKind.BY_DESIGN)
        cast: Optional[CastCheck]
        for i in range(len(e.inputs)):
            producer = self._cast_producer(e, i)
            if producer is None:
                self._positional(e, same, IO.INPUT, i, i, ())
                continue
            p, j, cast = producer
            note = (
                f"input {i} is output {j} of {p.op_name}, a GE-inserted {p.op_type} (the latest before it that writes "
                f"{cast.target} in this shape): checked as that output is, against Cast({p.op_name} input {j}) "
                f"{cast.label}, not golden {same.op_name} input {i} ({CAST_SELF_CHECKED})"
            )
            self.ctx.pair(e, IO.INPUT, i, self.ctx.ge_ref(p, IO.INPUT, j), (note,), cast=cast)
        for j in range(len(e.outputs)):
            cast = _changing(e.inputs[j].dtype, e.outputs[j].dtype) if j < len(e.inputs) else None
            if cast is None:
                self._positional(e, same, IO.OUTPUT, j, j, ())
                continue
            note = (
                f"golden {same.op_name} output {j} not compared: {CAST_SELF_CHECKED} (GE-inserted {e.op_type}, not in "
                "the graph: noise within the rounding rule in its float input can move a rounded value by one step)"
            )
            self.ctx.pair(e, IO.OUTPUT, j, self.ctx.ge_ref(e, IO.INPUT, j), (note,), cast=cast)

    def _cast_producer(self, e: GeExecution, i: int) -> Optional[tuple[GeExecution, int, CastCheck]]:
        """The GE-inserted value-changing cast whose output is `e`'s integer input `i`: the graph has neither, so
        the latest such cast before `e` in the token that writes that dtype and shape (a wrong one FAILs, it
        cannot hide a fault: its Cast(input) would have to equal this input)."""
        meta = e.inputs[i]
        if is_float_dtype_named(meta.dtype) is not False:  # a float, or a dtype no cast check models
            return None
        best: Optional[tuple[GeExecution, int, CastCheck]] = None
        for p in self.target:
            if p.order >= e.order or p.error is not None or (best is not None and p.order < best[0].order):
                continue
            if not self._inserted_cast(p):
                continue
            for j, (pi, po) in enumerate(zip(p.inputs, p.outputs)):
                cast = _changing(pi.dtype, po.dtype)
                if cast is not None and po.dtype == meta.dtype and same_shape(po.shape, meta.shape):
                    best = (p, j, cast)
                    break
        return best

    def _fused(self, e: GeExecution, resolved: ResolvedExecution) -> None:
        view = self.view
        assert view is not None
        note_fusion(self.ctx.result, e, resolved)
        self.ctx.missing_members(e, resolved, view.graph)
        inputs = group_inputs(view, resolved)
        # per tensor of `e`: the member and its tensor, or why there is none
        wanted: list[tuple[IO, int, Union[tuple[str, int, tuple[str, ...]], str]]] = []
        for k in range(len(e.inputs)):
            if k >= len(inputs):
                wanted.append((IO.INPUT, k, "fused op input without a member input"))
                continue
            member, index, _ = inputs[k]
            wanted.append((IO.INPUT, k, (member.name, index, (f"member {member.name} input {index}",))))
        for j in range(len(e.outputs)):
            source, note = fused_output(view, e, resolved, j)
            if source is None:
                wanted.append((IO.OUTPUT, j, note))
                continue
            member, index = source
            notes = (note,) if note else ()
            wanted.append((IO.OUTPUT, j, (member.name, index, (*notes, f"member {member.name} output {index}"))))
        links: dict[str, list[_Link]] = defaultdict(list)
        for io, k, how in wanted:
            if not isinstance(how, str):
                links[how[0]].append(_Link(io, k, how[1]))
        goldens = {member: self._golden(e, member, member_links) for member, member_links in links.items()}
        output_goldens = [goldens[how[0]] for io, _, how in wanted if io is IO.OUTPUT and not isinstance(how, str)]
        if output_goldens and all(isinstance(g, str) for g in output_goldens):
            # no member has a run left for this one: none of its tensors (str(): a str, checked above)
            self.ctx.unpartnered(e, str(output_goldens[0]))
            return
        for io, k, how in wanted:
            if isinstance(how, str):
                self.ctx.no_partner(e, io, k, how)
                continue
            member_name, index, member_notes = how
            golden = goldens[member_name]
            if not isinstance(golden, GeExecution):
                self.ctx.no_partner(e, io, k, golden or f"golden data missing for member {member_name}")
                continue
            self._positional(e, golden, io, index, k, member_notes)


def _changing(source: Optional[str], target: Optional[str]) -> Optional[CastCheck]:
    cast = cast_check_for(source, target)
    return cast if cast is not None and not cast.preserving else None


def match_token(
    rank: Optional[int],
    token: int,
    graph_label: str,
    view: Optional[GraphView],
    target: Sequence[GeExecution],
    golden_calls: Optional[dict[str, tuple[FxCall, ...]]] = None,
    golden_ge: Optional[Sequence[GeExecution]] = None,
    fx_stored: Mapping[Path, TensorSummary] = MappingProxyType({}),
    golden_files: Sequence[DumpFile] = (),
) -> MatchResult:
    """Pairs and unmatched target tensors of one token. Golden leftovers are the caller's (it knows all files);
    `result.golden_reasons` says why those that nothing paired with have no partner, where the matcher knows (for
    an FX golden, of `golden_files`). `fx_stored`: index summaries of golden FX files whose raw data is gone."""
    result = MatchResult()
    ctx = TokenContext(rank, token, graph_label, result, fx_stored, view)
    fx_matcher: Optional[FxMatcher] = None
    ge_matcher: Optional[GeMatcher] = None
    matcher: Union[FxMatcher, GeMatcher]
    if golden_calls is not None:
        assert view is not None
        matcher = fx_matcher = FxMatcher(ctx, view, golden_calls, target, fx_stored)
    else:
        matcher = ge_matcher = GeMatcher(ctx, view, golden_ge or (), target)
    for e in target:
        if e.error is not None:
            ctx.unreadable(e, f"unreadable target file: {e.error}")
            continue
        matcher.match(e)
    if fx_matcher is not None:
        result.golden_reasons.update(
            fx_matcher.leftovers([f for f in golden_files if f.path not in result.used_golden])
        )
        result.fx_headers = fx_matcher.fx.headers()
    if ge_matcher is not None:
        result.golden_reasons.update(ge_matcher.leftovers(result.used_golden))
    if view is not None and has_branches(view):
        mark_branches_not_taken(result, view, token, target, golden_ge, golden_calls, golden_files)
    return result


__all__ = ["FxMatcher", "GeMatcher", "MatchResult", "TensorMeta", "match_token"]
