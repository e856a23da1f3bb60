"""An FFTS+ op whose slice files only the index holds: its whole tensors' summaries, merged from the slices' as
the raw slices are merged (the same plan, tcmp.schemas.ffts.plan_ffts_merge, from the stored shapes and slicing
attribute), so the op is paired and judged alike from either source."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Optional

from tcmp.schemas.dump_records import IO, FileSummary, TensorKind, TensorSummary
from tcmp.schemas.dump_tree import DumpFile
from tcmp.schemas.ffts import SliceShapes, TensorPlan, concatenated_shape, parse_ffts_attr_text, plan_ffts_merge
from tcmp.schemas.ge_dump import NOT_DUMPED
from tcmp.schemas.ge_names import GeFileName
from tcmp.summaries.merge import merge_summaries


def _of(summary: FileSummary, io: IO) -> list[TensorSummary]:
    return [t for t in summary.tensors if t.io is io]


def _shapes(tensors: Sequence[TensorSummary]) -> tuple[Optional[tuple[int, ...]], ...]:
    return tuple(None if t.kind is TensorKind.NOT_DUMPED or t.shape is None else t.shape for t in tensors)


def _merged(plan: Optional[TensorPlan], slices: Sequence[list[TensorSummary]], index: int, notes) -> TensorSummary:
    first = slices[0][index]
    if plan is None:  # a slice did not dump it
        return replace(first, kind=TensorKind.NOT_DUMPED, summary=None, notes=(NOT_DUMPED, *notes))
    pieces = [slices[k][index] for k in plan.parts]
    shape = concatenated_shape(plan)
    if any(p.summary is None for p in pieces):
        return replace(pieces[0], summary=None, shape=shape, notes=tuple(notes))
    contiguous = plan.axis is None or math.prod(shape[: plan.axis]) == 1
    summary, merge_notes = merge_summaries([p.summary for p in pieces], first.dtype, contiguous)  # type: ignore[misc]
    return replace(pieces[0], dtype=first.dtype, shape=shape, summary=summary, notes=(*notes, *merge_notes))


def merged_slice_tensors(files: Sequence[DumpFile], summaries: Sequence[FileSummary]) -> tuple[TensorSummary, ...]:
    """The whole op's tensors (inputs, then outputs) from the stored summaries of its slice files (`files[k]`'s
    in `summaries[k]`); each carries the merge's notes."""
    parts = []
    for file, summary in zip(files, summaries):
        assert isinstance(file.name, GeFileName)
        attr = parse_ffts_attr_text(summary.slicing)
        parts.append(SliceShapes(file.name, summary.op_name, attr, _shapes(_of(summary, IO.INPUT)),
                                 _shapes(_of(summary, IO.OUTPUT))))  # fmt: skip
    plan = plan_ffts_merge(parts)
    merged = []
    for io, plans in ((IO.INPUT, plan.inputs), (IO.OUTPUT, plan.outputs)):
        slices = [_of(s, io) for s in summaries]
        merged += [_merged(p, slices, index, plan.notes) for index, p in enumerate(plans)]
    return tuple(merged)
