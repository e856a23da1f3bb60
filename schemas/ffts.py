"""FFTS+ slice files (spec/dump-formats.md §1.8): one op split over threads, one dump file per slice.

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
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np

from .ge_dump import GeDump
from .ge_names import GeFileName

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
    if not dump.attrs:
        return None
    try:
        info = json.loads(dump.attrs[0][1])
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


def _order_key(part: SliceFile) -> tuple[int, int]:
    manual = _LXSLICE.search(part.name.op_name) or _LXSLICE.search(part.dump.op_name)
    rank = int(manual.group(1)) if manual else (part.name.ffts.thread_id if part.name.ffts else 0)
    return rank, part.name.timestamp


def _shaped(array: np.ndarray, extents: Optional[tuple[AxisRange, ...]]) -> np.ndarray:
    if extents is None:
        return array
    shape = tuple(high - low for low, high in extents)
    return array.reshape(shape) if int(np.prod(shape)) == array.size else array


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


def merge_ffts_slices(parts: Sequence[SliceFile]) -> MergedOp:
    """Merge the slice files of one FFTS+ op into whole tensors (see the module docstring)."""
    ordered = sorted(parts, key=_order_key)
    base = ordered[0]
    name = ffts_base_name(base.dump.op_name or base.name.op_name)
    notes: list[str] = []
    attr = parse_ffts_attr(base.dump)
    if len(ordered) == 1:
        if attr is not None and attr.slice_count is not None and attr.slice_count > 1:
            notes.append(
                f"FFTS+ op has 1 slice file but slice_instance_num is {attr.slice_count}: the other slices are "
                "missing; this slice only"
            )
        return MergedOp(name, base.inputs, base.outputs, tuple(notes))
    if attr is None:
        latest = max(ordered, key=lambda p: p.name.timestamp)
        notes.append("FFTS+ slicing attribute missing or unreadable: compared the latest slice only")
        return MergedOp(name, latest.inputs, latest.outputs, tuple(notes))
    if attr.slice_count is not None and attr.slice_count != len(ordered):
        notes.append(f"FFTS+ op has {len(ordered)} slice files but slice_instance_num is {attr.slice_count}")
    if not any(attr.output_cut_axes):
        latest = max(ordered, key=lambda p: p.name.timestamp)
        notes.append("FFTS+ outputCutList has no cut axis: compared the latest slice only")
        return MergedOp(name, latest.inputs, latest.outputs, tuple(notes))

    def extents(kind, thread: int, index: int) -> Optional[tuple[AxisRange, ...]]:
        if not attr.auto or thread >= len(kind) or index >= len(kind[thread]):
            return None
        return kind[thread][index]

    outputs: list[Optional[np.ndarray]] = []
    for index in range(min(len(p.outputs) for p in ordered)):
        if any(p.outputs[index] is None for p in ordered):
            outputs.append(None)
            continue
        pieces = [_shaped(p.outputs[index], extents(attr.output_slices, t, index)) for t, p in enumerate(ordered)]
        axes = attr.output_cut_axes[index] if index < len(attr.output_cut_axes) else ()
        if not axes:
            outputs.append(pieces[0])
            continue
        try:
            outputs.append(np.concatenate(pieces, axis=axes[0]))
        except ValueError as exc:
            notes.append(f"output {index}: slices do not concatenate along axis {axes[0]} ({exc}); slice 0 only")
            outputs.append(pieces[0])

    inputs: list[Optional[np.ndarray]] = []
    for index in range(min(len(p.inputs) for p in ordered)):
        if any(p.inputs[index] is None for p in ordered):
            inputs.append(None)
            continue
        per_thread = [extents(attr.input_slices, t, index) for t in range(len(ordered))]
        axis = _input_cut_axis([e for e in per_thread if e is not None]) if all(per_thread) else None
        if axis is None:
            inputs.append(ordered[0].inputs[index])
            continue
        pieces = [_shaped(p.inputs[index], per_thread[t]) for t, p in enumerate(ordered)]
        try:
            inputs.append(np.concatenate(pieces, axis=axis))
        except ValueError:
            inputs.append(ordered[0].inputs[index])
            notes.append(f"input {index}: slices do not concatenate; slice 0 only")
    if len(inputs) and not attr.input_slices:
        notes.append("FFTS+ inputs: no per-thread slice information; inputs are those of slice 0")
    return MergedOp(name, tuple(inputs), tuple(outputs), tuple(notes))
