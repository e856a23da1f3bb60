"""Which FX tensor a GE op's output is, in one execution (the output rules of tcmp.compare.match.fx's docstring):
the FX call of the execution (runs aligned with calls), the output file or list element its `_fx_tensor_name`
names, and torchair's passes undone on the way (a view retargeted to reshape, a pattern-fused node, a name written
over by a converter that returns its input)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Optional, Union

from tcmp.compare.collect.fusion import GraphView
from tcmp.compare.match.executions import FxCall, GeExecution, align_runs
from tcmp.compare.match.fx_patterns import PatternCalls
from tcmp.compare.match.fx_side import FxSide
from tcmp.compare.records import UnmatchedKind
from tcmp.compare.rules.torchair import (
    PATTERN_BY_FUSED,
    RESHAPE_TARGET,
    RETURNS_INPUT_TARGETS,
    VIEW_OP_TYPES,
    VIEW_TARGET,
    is_sym_target,
    type_fits_target,
)
from tcmp.schemas.dump_records import IO
from tcmp.schemas.dump_tree import DumpFile
from tcmp.schemas.graph import FxTensorName, GraphOp
from tcmp.summaries.summarize import MAX_STACKED_ELEMENTS

_BUILT_IN_CONSUMER = " (a view torchair builds inside its consumer's conversion)"


@dataclass(frozen=True)
class Run:
    """One execution of a graph op in the token: the one whose FX call is asked for."""

    op_name: str
    execution: int


@dataclass(frozen=True)
class Found:
    """The FX tensor a GE tensor is: a file's output (or one element of it), with the notes of how it was found."""

    file: DumpFile
    index: int
    element: Optional[int] = None
    notes: tuple[str, ...] = ()
    reshaped: bool = False  # the FX tensor holds the GE tensor's elements in another shape (a folded-in view)


@dataclass(frozen=True)
class Missing:
    """No FX tensor, and why."""

    reason: str
    kind: UnmatchedKind
    extra_run: bool = False  # the op ran more often than its FX node was called: this run has no call


Source = Union[Found, Missing]


class FxSources:
    """The FX tensors of one token's GE op outputs: what the FX side holds, which FX node each graph output names,
    the token's GE executions by op, and what was learnt on the way (`written_over`)."""

    def __init__(self, token: int, view: GraphView, fx: FxSide, target: Sequence[GeExecution]) -> None:
        self.token, self.fx = token, fx
        # FX node key -> the graph position of the first op output named after it (the converted graph's order)
        self.named_keys: dict[str, int] = {}
        for position, op in enumerate(view.graph.ops):
            for o in op.outputs:
                if o.fx_tensor is not None:
                    self.named_keys.setdefault(o.fx_tensor.node_key, position)
        self.executions: dict[str, list[GeExecution]] = defaultdict(list)
        for e in target:
            self.executions[e.op_name].append(e)
            named = view.op(e.op_name)
            if named is not None and named.name != e.op_name:  # a file's sanitized name: under the graph's too
                self.executions[named.name].append(e)
        self._alignments: dict[tuple[str, str], dict[int, int]] = {}
        self._overwritten: dict[tuple[str, int], Optional[FxCall]] = {}
        self.patterns = PatternCalls(self.fx, self.named_keys)
        self.written_over: dict[str, str] = {}  # FX node key whose converter returned its input -> the producer's key

    # --- the FX call of a GE op --------------------------------------------------------------------------------

    def aligned(self, op_name: str, execution: int, key: str, output_index: Optional[int], j: int) -> Optional[FxCall]:
        """The FX call of `key` that execution `execution` of op `op_name` is (see match.fx's docstring)."""
        calls = self.fx.calls.get(key, ())
        runs = self.executions.get(op_name, ())
        if not calls:
            return None
        if not runs:  # an op not dumped under this name (a fused member): its k-th run, as the caller counts
            return calls[execution] if execution < len(calls) else None
        cache_key = (op_name, key)
        if cache_key not in self._alignments:

            def fits(e: GeExecution, call: FxCall) -> bool:
                meta = e.tensor(IO.OUTPUT, j)
                file = call.output(output_index) if output_index is not None else None
                return meta is None or meta.shape is None or file is None or self.fx.fits(file, meta.shape)

            self._alignments[cache_key] = align_runs(runs, calls, fits)
        at = self._alignments[cache_key].get(execution)
        return calls[at] if at is not None else None

    def _extra_run(self, run: Run, key: str) -> Missing:
        runs, calls = len(self.executions.get(run.op_name, ())), len(self.fx.calls.get(key, ()))
        return Missing(
            f"{run.op_name} ran {runs} time(s) in token {self.token}, {key} {calls}: execution {run.execution} "
            "has no call of the same output shapes left",
            UnmatchedKind.NO_PARTNER,
            extra_run=True,
        )

    def source(self, op: GraphOp, index: int, run: Run) -> Source:
        """The FX tensor output `index` of graph op `op` is, in its execution `run`."""
        desc = op.outputs[index] if index < len(op.outputs) else None
        fx = desc.fx_tensor if desc is not None else None
        if fx is None:
            view = _BUILT_IN_CONSUMER if op.type in VIEW_OP_TYPES else ""
            return Missing(
                f"no _fx_tensor_name on output {index} of {op.name}: an inner op of a converter "
                f"expansion{view}, which names only the tensors it returns",
                UnmatchedKind.BY_DESIGN,
            )
        assert desc is not None  # `fx` is None without it
        key, target, notes = fx.node_key, fx.target, []
        if key not in self.fx.calls:
            if is_sym_target(target):
                return Missing(
                    f"{fx}: a symbolic size torchair computes in the graph (_optimize_sym_input); the FX "
                    "dumper writes no file for a sym node",
                    UnmatchedKind.BY_DESIGN,
                )
            if target in PATTERN_BY_FUSED:
                return self._pattern_source(fx, run, desc.shape)
            if target == RESHAPE_TARGET:
                renamed = f"{key.partition('-')[0]}-{VIEW_TARGET}"
                if renamed in self.fx.calls:
                    key = renamed
                    notes.append("the FX view torchair's _view_to_reshape retargeted to reshape")
        elif target in RETURNS_INPUT_TARGETS and not type_fits_target(op.type, target):
            producer = self.overwritten_call(op, fx, run)
            if producer is not None:
                notes.append(f"named {fx.node_key}, whose converter returns its input: {producer.key}'s output")
                return self._output_file(producer, fx.output_index or 0, (), tuple(notes))
        call = self.aligned(run.op_name, run.execution, key, fx.output_index, index)
        if call is None:
            if key in self.fx.calls:
                return self._extra_run(run, key)
            return Missing(f"golden file missing: {fx} in token {self.token}", UnmatchedKind.NO_PARTNER)
        if fx.output_index is None:
            return Missing(
                f"{fx}: an entry of a dict output; the FX dumper pickles the whole dict into one "
                "OUTPUT.0 file, which tcmp does not unpickle",
                UnmatchedKind.BY_DESIGN,
            )
        return self._output_file(call, fx.output_index, fx.path[1:], tuple(notes))

    def _output_file(self, call: FxCall, index: int, rest: tuple[str, ...], notes: tuple[str, ...]) -> Source:
        file = call.output(index)
        if file is None:
            return Missing(
                f"golden file missing: {call.key}.OUTPUT.{index} in token {self.token}", UnmatchedKind.NO_PARTNER
            )
        if not rest:
            return Found(file, index, None, notes)
        shape = self.fx.shape(file)
        element = int(rest[0]) if rest[0].isdigit() and len(rest) == 1 else None
        if element is None or shape is None or not shape.numeric or not shape.shape or element >= shape.shape[0]:
            how = f"of shape {list(shape.shape)}" if shape is not None and shape.numeric else "not a tensor"
            return Missing(
                f"nested output {call.key}.OUTPUT.{index}.{'.'.join(rest)}: the FX dumper saved the list "
                f"as one file {how}, which does not hold it",
                UnmatchedKind.BY_DESIGN,
            )
        stored = self.fx.stored.get(file.path)
        if stored is not None and element >= len(stored.elements):
            return Missing(
                f"nested output {call.key}.OUTPUT.{index}.{rest[0]}: one of the tensors the FX dumper "
                "stacked into one file, whose raw data tcmp watch deleted; the index holds no summary of that "
                f"element (it summarizes the first {MAX_STACKED_ELEMENTS} of a file, since schema 3)",
                UnmatchedKind.BY_DESIGN,
            )
        return Found(file, index, element, (*notes, f"element {element} of the stacked list output {index}"))

    def overwritten_call(self, op: GraphOp, fx: FxTensorName, run: Run) -> Optional[FxCall]:
        """The FX node whose output a converter that returns its input (`fx`'s node) renamed: the one call before
        it, named nowhere in the graph, whose output is that input and whose target fits the GE op's type."""
        cache_key = (fx.node_key, run.execution)
        if cache_key not in self._overwritten:
            found = None
            over = self.aligned(run.op_name, run.execution, fx.node_key, fx.output_index, 0)
            copy = next((f for i, j, f in over.inputs if i == 0 and j is None), None) if over is not None else None
            if over is not None and copy is not None:
                candidates = [
                    c
                    for c in self.fx.ordered()
                    if c.key not in self.named_keys
                    and int(c.timestamp or 0) <= int(over.timestamp or 0)
                    and type_fits_target(op.type, c.target)
                    and (out := c.output(0)) is not None
                    and self.fx.same_header(out, copy)
                ]
                if len(candidates) > 1:
                    candidates = [
                        c for c in candidates if (out := c.output(0)) is not None and self.fx.same_content(out, copy)
                    ]
                if len(candidates) == 1:
                    found = candidates[0]
                    self.written_over[fx.node_key] = found.key
            self._overwritten[cache_key] = found
        return self._overwritten[cache_key]

    def _pattern_source(self, fx: FxTensorName, run: Run, shape: tuple[int, ...]) -> Source:
        """A pattern-fused node's output (of graph shape `shape`): the output of the replaced node it was computed
        by before the fusion."""
        pattern = PATTERN_BY_FUSED[fx.target]
        index = fx.output_index
        replaced = pattern.outputs[index] if index is not None and index < len(pattern.outputs) else None
        if replaced is None:
            return Missing(
                f"{fx}: output {index} of {fx.target}, which torchair's pattern fusion ({pattern.source}) "
                "made from nodes that had no such output",
                UnmatchedKind.BY_DESIGN,
            )
        found = self.patterns.of(fx.node_key, pattern, run.execution)
        if found is None:
            return Missing(
                f"{fx}: torchair's pattern fusion ({pattern.source}) replaced FX nodes this token's dump "
                "does not let tcmp tell apart",
                UnmatchedKind.BY_DESIGN,
            )
        from_anchor = pattern.anchor in replaced.target
        call = found.anchor if from_anchor else found.consumer
        if call is None:
            return Missing(
                f"{fx}: the node torchair's pattern fusion ({pattern.source}) folded in is not in the FX dump",
                UnmatchedKind.BY_DESIGN,
            )
        notes = [f"pattern-fused by torchair ({pattern.source}): {call.key}.OUTPUT.{replaced.index}"]
        source = self._output_file(call, replaced.index, (), ())
        if isinstance(source, Found) and not from_anchor and found.view is not None:
            fx_shape = self.fx.shape(source.file)
            if fx_shape is not None and fx_shape.numeric and not _same_count(fx_shape.shape, shape):
                return Missing(
                    f"{fx}: {call.key}.OUTPUT.{replaced.index} of shape {list(fx_shape.shape)}, computed on "
                    f"{found.view.key}, does not hold the {list(shape)} elements of the fused output",
                    UnmatchedKind.NO_PARTNER,
                )
            notes.append(f"FX computed it on the view {found.view.key}: compared in GE's shape, element by element")
            return replace(source, notes=tuple(notes), reshaped=True)
        return replace(source, notes=tuple(notes)) if isinstance(source, Found) else source


def _same_count(fx_shape: tuple[int, ...], graph_shape: tuple[int, ...]) -> bool:
    """Whether an FX tensor has as many elements as a graph tensor (true where the graph does not say: a dynamic
    dim, or no shape recorded; the compare checks the dumped tensors then)."""
    if not graph_shape or any(d < 0 for d in graph_shape):
        return True
    return math.prod(fx_shape) == math.prod(graph_shape)


__all__ = ["Found", "FxSources", "Missing", "Run", "Source"]
