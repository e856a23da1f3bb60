"""Pairing target (GE, fusion on) tensors with golden tensors, for one graph of one rank, token by token.

GE → FX: fx_match (the rules for what torchair's converter and passes did are there). Both goldens share:
- fused ops: outputs through the header's `original_op` or the group's external outputs, inputs through the
  group's external inputs, members found by `GraphView.decompose`;
- GE-inserted Cast/TransData ops (not in the graph, or without any FX tensor): their outputs are checked against
  their own inputs.
GE → GE (fusion off): the same op name is compared input for input and output for output; fused ops through their
members, as above. Whatever finds no partner is returned as `Unmatched` with the reason — nothing is dropped.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Optional

from tcmp.schemas.layout import DumpFile
from tcmp.schemas.records import IO, TensorSummary

from .executions import FxCall, GeExecution, TensorMeta
from .fusion import GraphView, NameSplitter
from .fx_match import FxMatcher
from .match_context import MatchResult, _Context, _fused_output, _group_inputs, _note_fusion, _resolve, _Resolved
from .records import TensorRef

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
    golden_files: Sequence[DumpFile] = (),
) -> MatchResult:
    """Pairs and unmatched target tensors of one token. Golden leftovers are the caller's (it knows all files);
    for an FX golden, `result.golden_reasons` says why those of `golden_files` that nothing paired with have no
    partner, where the matcher knows. `fx_stored`: index summaries of golden FX files whose raw data is gone."""
    result = MatchResult()
    ctx = _Context(rank, token, graph_label, result, fx_stored)
    fx_matcher: Optional[FxMatcher] = None
    if golden_calls is not None:
        assert view is not None
        matcher = fx_matcher = FxMatcher(ctx, view, golden_calls, target, fx_stored)
    else:
        matcher = GeMatcher(ctx, view, golden_ge or ())
    for e in target:
        if e.error is not None:
            ctx.unreadable(e, f"unreadable target file: {e.error}")
            continue
        matcher.match(e)
    if fx_matcher is not None:
        result.golden_reasons.update(
            fx_matcher.leftovers([f for f in golden_files if f.path not in result.used_golden])
        )
    return result


__all__ = ["FxMatcher", "GeMatcher", "MatchResult", "TensorMeta", "match_token"]
