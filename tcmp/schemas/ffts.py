"""FFTS+ slice files (docs/formats.md, "FFTS+ slice files"): one op split over threads, one dump file per slice.

File names carry `.4.{context}.{thread}.{device}` (or `.FFTSPLUS.…` in capture mode); the op name often has
`_lxslice<N>` (manual mode) or an `…sgt_graph_<k>_` prefix. `DumpData.attr[0].value` is JSON with `threadMode`
(truthy = automatic), `slice_instance_num`, `outputCutList` (per output, per-axis cut factors) and, in automatic
mode, `input_tensor_slice` / `output_tensor_slice` (per thread, per tensor, per axis `{lower, higher}`).

Merging: order the slices (automatic: by thread id; manual: by the `_lxslice` number), reshape each automatic
slice to its `higher - lower` extents, and concatenate every output along its first cut axis. Inputs are
concatenated along the axis whose slice bounds differ between threads when the JSON says so; otherwise the
first slice's inputs are used, with a note. A file missing from the set, or a missing/garbled JSON, never fails
the op: the result carries notes, and without any cut axis the latest slice is used as the peer does.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional, cast

import numpy as np

from tcmp.schemas.ge_header import GeDump
from tcmp.schemas.ge_names import GeFileName

_LXSLICE = re.compile(r"_lxslice(\d+)")
_SGT_PREFIX = re.compile(r"^.*?sgt_graph_\d+_")

AxisRange = tuple[int, int]


@dataclass(frozen=True)
class FftsAttr:
    auto: bool
    slice_count: Optional[int]
    output_cut_axes: tuple[tuple[int, ...], ...]  # per output: axes with a cut factor != 1
    input_slices: tuple[tuple[tuple[AxisRange, ...], ...], ...]  # per thread, per input, per axis
    output_slices: tuple[tuple[tuple[AxisRange, ...], ...], ...]


@dataclass(frozen=True)
class SliceFile:
    """One slice file: its name, header and its tensors already converted to ND (None: not dumped, device address
    0)."""

    name: GeFileName
    dump: GeDump
    inputs: tuple[Optional[np.ndarray], ...]
    outputs: tuple[Optional[np.ndarray], ...]


@dataclass(frozen=True)
class MergedOp:
    """The whole op; a tensor some slice did not dump is None."""

    op_name: str
    inputs: tuple[Optional[np.ndarray], ...]
    outputs: tuple[Optional[np.ndarray], ...]
    notes: tuple[str, ...]


def ffts_base_name(op_name: str) -> str:
    """The op's graph name: without `_lxslice<N>` and without everything up to `sgt_graph_<k>_`."""
    return _SGT_PREFIX.sub("", _LXSLICE.sub("", op_name))


def _ranges(per_thread) -> tuple[tuple[tuple[AxisRange, ...], ...], ...]:
    return tuple(
        tuple(tuple((int(axis["lower"]), int(axis["higher"])) for axis in tensor) for tensor in thread)
        for thread in per_thread or ()
    )


def parse_ffts_attr(dump: GeDump) -> Optional[FftsAttr]:
    """The slicing JSON of `attr[0]`, or None when absent or unreadable (the peer assumed it always exists)."""
    return parse_ffts_attr_text(ffts_attr_text(dump))


def ffts_attr_text(dump: GeDump) -> Optional[str]:
    """The slicing attribute as dumped (what the index stores of a slice file), None without one."""
    return dump.attrs[0][1] if dump.attrs else None


def parse_ffts_attr_text(text: Optional[str]) -> Optional[FftsAttr]:
    if text is None:
        return None
    try:
        info = json.loads(text)
        cuts = tuple(
            tuple(axis for axis, factor in enumerate(output) if int(factor) != 1)
            for output in info.get("outputCutList") or ()
        )
        count = info.get("slice_instance_num")
        return FftsAttr(
            auto=bool(info.get("threadMode")),
            slice_count=int(count) if count is not None else None,
            output_cut_axes=cuts,
            input_slices=_ranges(info.get("input_tensor_slice")),
            output_slices=_ranges(info.get("output_tensor_slice")),
        )
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


Shape = tuple[int, ...]


@dataclass(frozen=True)
class SliceShapes:
    """What the merge is decided from, for one slice file: its name, the header's op name, its slicing attribute
    and its tensors' ND shapes (None: not dumped). The raw files and the index both give it."""

    name: GeFileName
    op_name: str
    attr: Optional[FftsAttr]
    inputs: tuple[Optional[Shape], ...]
    outputs: tuple[Optional[Shape], ...]


@dataclass(frozen=True)
class TensorPlan:
    """How one tensor of the whole op is made: the pieces of `parts` (positions in the order given to the plan),
    each laid out in its shape of `shapes`, concatenated along `axis` (None: the one part as is)."""

    parts: tuple[int, ...]
    shapes: tuple[Shape, ...]
    axis: Optional[int]


@dataclass(frozen=True)
class MergePlan:
    """The whole op from its slices; a tensor some slice did not dump has no plan (None)."""

    op_name: str
    inputs: tuple[Optional[TensorPlan], ...]
    outputs: tuple[Optional[TensorPlan], ...]
    notes: tuple[str, ...]


def _order_key(part: SliceShapes) -> tuple[int, int]:
    manual = _LXSLICE.search(part.name.op_name) or _LXSLICE.search(part.op_name)
    rank = int(manual.group(1)) if manual else (part.name.ffts.thread_id if part.name.ffts else 0)
    return rank, part.name.timestamp


def _shaped(shape: Shape, extents: Optional[tuple[AxisRange, ...]]) -> Shape:
    if extents is None:
        return shape
    wanted = tuple(high - low for low, high in extents)
    return wanted if math.prod(wanted) == math.prod(shape) else shape


def _input_cut_axis(slices: Sequence[tuple[AxisRange, ...]]) -> Optional[int]:
    """The axis along which threads took different, consecutive ranges of one input."""
    if len(slices) < 2 or any(len(s) != len(slices[0]) for s in slices):
        return None
    for axis in range(len(slices[0])):
        bounds = [s[axis] for s in slices]
        if len(set(bounds)) > 1:
            contiguous = all(bounds[i][1] == bounds[i + 1][0] for i in range(len(bounds) - 1))
            return axis if contiguous else None
    return None


def _concatenable(shapes: Sequence[Shape], axis: int) -> bool:
    first = shapes[0]
    return 0 <= axis < len(first) and all(
        len(s) == len(first) and all(a == b for k, (a, b) in enumerate(zip(s, first)) if k != axis) for s in shapes
    )


def concatenated_shape(plan: TensorPlan) -> Shape:
    if plan.axis is None:
        return plan.shapes[0]
    first = plan.shapes[0]
    return (*first[: plan.axis], sum(s[plan.axis] for s in plan.shapes), *first[plan.axis + 1 :])


def plan_ffts_merge(parts: Sequence[SliceShapes]) -> MergePlan:
    """How to merge the slice files of one FFTS+ op into whole tensors (see the module docstring); positions
    in the plan are those of `parts`."""
    order = sorted(range(len(parts)), key=lambda k: _order_key(parts[k]))
    ordered = [parts[k] for k in order]
    base = ordered[0]
    name = ffts_base_name(base.op_name or base.name.op_name)
    notes: list[str] = []
    attr = base.attr

    def one(k: int, items: tuple[Optional[Shape], ...]) -> tuple[Optional[TensorPlan], ...]:
        return tuple(None if s is None else TensorPlan((k,), (s,), None) for s in items)

    def whole(k: int) -> MergePlan:
        return MergePlan(name, one(k, parts[k].inputs), one(k, parts[k].outputs), tuple(notes))

    if len(ordered) == 1:
        if attr is not None and attr.slice_count is not None and attr.slice_count > 1:
            notes.append(
                f"FFTS+ op has 1 slice file but slice_instance_num is {attr.slice_count}: the other slices are "
                "missing; this slice only"
            )
        return whole(order[0])
    latest = max(order, key=lambda k: parts[k].name.timestamp)
    if attr is None:
        notes.append("FFTS+ slicing attribute missing or unreadable: compared the latest slice only")
        return whole(latest)
    if attr.slice_count is not None and attr.slice_count != len(ordered):
        notes.append(f"FFTS+ op has {len(ordered)} slice files but slice_instance_num is {attr.slice_count}")
    if not any(attr.output_cut_axes):
        notes.append("FFTS+ outputCutList has no cut axis: compared the latest slice only")
        return whole(latest)

    def extents(kind, thread: int, index: int) -> Optional[tuple[AxisRange, ...]]:
        if not attr.auto or thread >= len(kind) or index >= len(kind[thread]):
            return None
        return kind[thread][index]

    first = (order[0],)
    outputs: list[Optional[TensorPlan]] = []
    for index in range(min(len(p.outputs) for p in ordered)):
        if any(p.outputs[index] is None for p in ordered):
            outputs.append(None)
            continue
        # cast: every part's output `index` is there (checked above)
        shapes = tuple(
            _shaped(cast(Shape, p.outputs[index]), extents(attr.output_slices, t, index)) for t, p in enumerate(ordered)
        )
        axes = attr.output_cut_axes[index] if index < len(attr.output_cut_axes) else ()
        if not axes:
            outputs.append(TensorPlan(first, shapes[:1], None))
        elif _concatenable(shapes, axes[0]):
            outputs.append(TensorPlan(tuple(order), shapes, axes[0]))
        else:
            listed = ", ".join(str(list(s)) for s in shapes)
            notes.append(f"output {index}: slices do not concatenate along axis {axes[0]} ({listed}); slice 0 only")
            outputs.append(TensorPlan(first, shapes[:1], None))

    inputs: list[Optional[TensorPlan]] = []
    for index in range(min(len(p.inputs) for p in ordered)):
        if any(p.inputs[index] is None for p in ordered):
            inputs.append(None)
            continue
        per_thread = [extents(attr.input_slices, t, index) for t in range(len(ordered))]
        axis = _input_cut_axis([e for e in per_thread if e is not None]) if all(per_thread) else None
        if axis is None:
            inputs.append(TensorPlan(first, (cast(Shape, base.inputs[index]),), None))
            continue
        shapes = tuple(_shaped(cast(Shape, p.inputs[index]), per_thread[t]) for t, p in enumerate(ordered))
        if _concatenable(shapes, axis):
            inputs.append(TensorPlan(tuple(order), shapes, axis))
        else:
            inputs.append(TensorPlan(first, (cast(Shape, base.inputs[index]),), None))
            notes.append(f"input {index}: slices do not concatenate; slice 0 only")
    if len(inputs) and not attr.input_slices:
        notes.append("FFTS+ inputs: no per-thread slice information; inputs are those of slice 0")
    return MergePlan(name, tuple(inputs), tuple(outputs), tuple(notes))


def _shapes_of(items: Sequence[Optional[np.ndarray]]) -> tuple[Optional[Shape], ...]:
    return tuple(None if a is None else tuple(a.shape) for a in items)


def _apply(plan: Optional[TensorPlan], parts: Sequence[SliceFile], io_of) -> Optional[np.ndarray]:
    if plan is None:
        return None
    pieces = []
    for k, shape in zip(plan.parts, plan.shapes):
        array = io_of(parts[k])
        pieces.append(array.reshape(shape) if tuple(array.shape) != shape else array)
    return pieces[0] if plan.axis is None else np.concatenate(pieces, axis=plan.axis)


def merge_ffts_slices(parts: Sequence[SliceFile]) -> MergedOp:
    """Merge the slice files of one FFTS+ op into whole tensors (see the module docstring)."""
    plan = plan_ffts_merge(
        [SliceShapes(p.name, p.dump.op_name, parse_ffts_attr(p.dump), _shapes_of(p.inputs), _shapes_of(p.outputs))
         for p in parts]
    )  # fmt: skip
    inputs = tuple(_apply(t, parts, lambda p, i=i: p.inputs[i]) for i, t in enumerate(plan.inputs))
    outputs = tuple(_apply(t, parts, lambda p, i=i: p.outputs[i]) for i, t in enumerate(plan.outputs))
    return MergedOp(plan.op_name, inputs, outputs, plan.notes)
