"""Rows of the index to and from tcmp's records: what SQLite cannot hold as is (NaN, -0.0, shapes, enums, 20-digit
timestamps) is encoded here, and only here."""

from __future__ import annotations

import enum
import functools
import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Optional, Union

from tcmp.schemas.dump_records import IO, Side, Summary, TensorKind, TensorSummary
from tcmp.schemas.dump_tree import DumpFile, FileKind, GraphFile
from tcmp.schemas.fx_dump import FxFileName, parse_fx_file_name
from tcmp.schemas.ge_names import GeFileName, hashed_stem, parse_ge_file_name, resolve_ge_file_name
from tcmp.schemas.graph import GraphOp
from tcmp.schemas.index.schema import FileKey, FileState


def _shape_text(shape: Optional[tuple[int, ...]]) -> Optional[str]:
    return None if shape is None else ",".join(str(d) for d in shape)


@functools.lru_cache(maxsize=4096)  # tensors of one model share few shapes; tuples are immutable
def _shape_of(text: Optional[str]) -> Optional[tuple[int, ...]]:
    if text is None:
        return None
    return tuple(int(d) for d in text.split(",")) if text else ()


_FLOAT_FIELDS = ("min", "max", "mean", "l2norm")
# Enum(value) costs ~2 µs; reading 300k rows makes that seconds. Plain dict lookups instead.
SIDES = {m.value: m for m in Side}
KINDS = {m.value: m for m in FileKind}
STATES = {m.value: m for m in FileState}
_IOS = {m.value: m for m in IO}
_TENSOR_KINDS = {m.value: m for m in TensorKind}


_NEGATIVE_ZERO_BIT = len(_FLOAT_FIELDS)  # bits 0-3: the field was NaN; bits 4-7: it was -0.0


def _floats(summary: Summary) -> tuple[tuple[Optional[float], ...], int]:
    """The four float fields for SQLite and the flags of what SQLite would lose: NaN (stored as NULL) and the
    sign of a zero (stored as 0.0)."""
    values: list[Optional[float]] = []
    flags = 0
    for bit, name in enumerate(_FLOAT_FIELDS):
        value = getattr(summary, name)
        if value is not None and math.isnan(value):
            flags |= 1 << bit
            value = None
        elif value == 0.0 and math.copysign(1.0, value) < 0:
            flags |= 1 << (bit + _NEGATIVE_ZERO_BIT)
        values.append(value)
    return tuple(values), flags


def _float_field(value: Optional[float], flags: int, bit: int) -> Optional[float]:
    if flags & (1 << bit):
        return math.nan
    if flags & (1 << (bit + _NEGATIVE_ZERO_BIT)):
        return -0.0
    return value


def json_or_none(items: Sequence[str]) -> Optional[str]:
    return json.dumps(list(items)) if items else None


def _text(value: Optional[int]) -> Optional[str]:
    return None if value is None else str(value)


def int_or_none(text: Optional[str]) -> Optional[int]:
    return None if text is None else int(text)


def _enum_value(value: Optional[enum.Enum]) -> Optional[str]:
    return None if value is None else value.value


def _dump_file_columns(file: DumpFile) -> tuple:
    return (
        file.side.value,
        file.kind.value,
        file.rank,
        file.token,
        file.model,
        file.run,
        file.device,
        file.model_id,
        file.op_type,
        file.op_name,
    )


def _fx_columns(file: DumpFile) -> tuple:
    return (_enum_value(file.io), file.index, getattr(file.name, "sub_index", None))


def file_row(
    path: Path,
    key: Optional[FileKey],
    located: Union[DumpFile, GraphFile, None],
    *,
    state: FileState,
    error: Optional[str],
    summarized: bool,
    header_op_name: Optional[str] = None,
    dump_time: Optional[int] = None,
    mapped_name: Optional[str] = None,
    raw_deleted: bool = False,
    seq: int,
    now_ns: int,
    ffts_attr: Optional[str] = None,
) -> tuple:
    if isinstance(located, DumpFile):
        described = (*_dump_file_columns(located), header_op_name, *_fx_columns(located), _text(located.timestamp))
    elif isinstance(located, GraphFile):
        described = (Side.GRAPH.value, FileKind.GRAPH.value, located.name.rank) + (None,) * 12
    else:
        described = (None,) * 15
    inode, size, mtime_ns, dev = (key.inode, key.size, key.mtime_ns, key.dev) if key is not None else (None,) * 4
    return (
        str(path),
        inode,
        size,
        mtime_ns,
        *described,
        _text(dump_time),
        mapped_name,
        state.value,
        error,
        1,
        int(summarized),
        int(raw_deleted),
        size if summarized else None,
        seq,
        now_ns,
        dev,
        ffts_attr,
    )


def _numbers(summary: Optional[Summary]) -> tuple:
    if summary is None:
        return (0, None, None, None, None, None, None, None, None, 0)
    (low, high, mean, l2), flags = _floats(summary)
    return (1, summary.numel, low, high, mean, l2, summary.nan_count, summary.inf_count, summary.crc32, flags)


def tensor_rows(file_id: int, tensors: Sequence[TensorSummary]) -> Iterator[tuple]:
    """A row per tensor, each followed by a row per element of it (`TensorSummary.elements`, column `element`)."""
    position = 0
    for tensor in tensors:
        described = (tensor.io.value, tensor.index, tensor.sub_index, tensor.kind.value, tensor.dtype)
        yield (
            file_id,
            position,
            *described,
            _shape_text(tensor.shape),
            tensor.device_format,
            _shape_text(tensor.device_shape),
            *_numbers(tensor.summary),
            json_or_none(tensor.notes),
            *(tensor.original_op if tensor.original_op is not None else (None, None)),
            None,
        )
        position += 1
        element_shape = _shape_text(tensor.shape[1:]) if tensor.shape else None
        for k, summary in enumerate(tensor.elements):
            yield (file_id, position, *described, element_shape, None, None, *_numbers(summary), None, None, None, k)
            position += 1


def graph_op_row(file_id: int, op: GraphOp) -> tuple:
    order, name, op_type, inputs, control, outputs, originals, stack = op.as_fields()
    return (file_id, order, name, op_type, *map(json.dumps, (inputs, control, outputs, originals)), stack)


def row_summary(row: tuple) -> Optional[Summary]:
    """The numbers of a tensors row (a tensor's, or one element's)."""
    has_summary, numel, low, high, mean, l2, nan_count, inf_count, crc32, flags = row[10:20]
    if not has_summary:
        return None
    return Summary(
        numel=numel,
        min=_float_field(low, flags, 0),
        max=_float_field(high, flags, 1),
        mean=_float_field(mean, flags, 2),
        l2norm=_float_field(l2, flags, 3),
        nan_count=nan_count,
        inf_count=inf_count,
        crc32=crc32,
    )


def row_element(row: tuple) -> Optional[int]:
    """Which element of the tensor before it a tensors row summarizes; None for a tensor's own row."""
    return row[23]


def tensor_summary(row: tuple) -> TensorSummary:
    io, index, sub_index, kind, dtype, shape, device_format, device_shape = row[2:10]
    notes, original_op, original_op_index = row[20:23]
    return TensorSummary(
        io=_IOS[io],
        index=index,
        sub_index=sub_index,
        kind=_TENSOR_KINDS[kind],
        dtype=dtype,
        shape=_shape_of(shape),
        summary=row_summary(row),
        device_format=device_format,
        device_shape=_shape_of(device_shape),
        notes=tuple(json.loads(notes)) if notes else (),
        original_op=(original_op, original_op_index) if original_op is not None else None,
    )


def graph_op(row: tuple) -> GraphOp:
    order, name, op_type, inputs, control, outputs, originals, stack = row
    inputs, control, outputs, originals = map(json.loads, (inputs, control, outputs, originals))
    return GraphOp.from_fields(order, name, op_type, inputs, control, outputs, originals, stack)


def rebuild_dump_file(path: Path, side: Side, kind: FileKind, mapped_name: Optional[str], placed: tuple) -> DumpFile:
    """A DumpFile from its row: the name is parsed again (cheap, and exactly what locate parsed), everything the
    directories said comes from the columns, `placed` = (rank, token, model, run, device, model_id, op_type,
    op_name) as selected by FILES_SELECT."""
    rank, token, model, run, device, model_id, op_type, op_name = placed
    name = path.name
    if side is Side.FX:
        fx_name = parse_fx_file_name(name)
        timestamp = int(fx_name.timestamp) if fx_name.timestamp.isdigit() else None
        parsed: Union[GeFileName, FxFileName] = fx_name
        io, index = fx_name.io, fx_name.index
    else:
        stem = hashed_stem(name) if mapped_name is not None else None
        if stem is not None and mapped_name is not None:  # (stem is None where mapped_name is)
            parsed = resolve_ge_file_name(name, {stem: mapped_name})
        else:
            parsed = parse_ge_file_name(name)
        timestamp, io, index = parsed.timestamp, None, None
    return DumpFile(
        side=side,
        kind=kind,
        path=path,
        rank=rank,
        token=token,
        model=model,
        run=run,
        op_type=op_type,
        op_name=op_name,
        io=io,
        index=index,
        timestamp=timestamp,
        name=parsed,
        device=device,
        model_id=model_id,
    )
