"""Rows of the index to and from tcmp's records: what SQLite cannot hold as is (NaN, -0.0, shapes, enums, 20-digit
timestamps) is encoded here, and only here."""

from __future__ import annotations

import enum
import functools
import json
import math
import operator
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Optional, Union

from tcmp.schemas.acl_dump import AclFileName, parse_acl_file_name
from tcmp.schemas.dump_records import IO, Side, Summary, TensorKind, TensorSummary
from tcmp.schemas.dump_tree import DumpFile, FileKind, GraphFile
from tcmp.schemas.fx_dump import FxFileName, parse_fx_file_name
from tcmp.schemas.ge_names import GeFileName, hashed_stem, parse_ge_file_name, resolve_ge_file_name
from tcmp.schemas.graph import GraphOp
from tcmp.schemas.index.columns import STATISTICS, TENSORS
from tcmp.schemas.index.schema import FILE_COLUMNS, TENSOR_COLUMNS, FileKey, FileState


def _shape_text(shape: Optional[tuple[int, ...]]) -> Optional[str]:
    return None if shape is None else ",".join(str(d) for d in shape)


@functools.lru_cache(maxsize=4096)  # tensors of one model share few shapes; tuples are immutable
def _shape_of(text: Optional[str]) -> Optional[tuple[int, ...]]:
    if text is None:
        return None
    return tuple(int(d) for d in text.split(",")) if text else ()


# Enum(value) costs ~2 µs; reading 300k rows makes that seconds. Plain dict lookups instead.
SIDES = {m.value: m for m in Side}
KINDS = {m.value: m for m in FileKind}
STATES = {m.value: m for m in FileState}
_IOS = {m.value: m for m in IO}
_TENSOR_KINDS = {m.value: m for m in TensorKind}

# A row is written from its values by column name, in the order of the table's declaration (NULL for a column
# not given); read back by the positions of the names in that order.
_FILE_NULLS = dict.fromkeys(FILE_COLUMNS)
_file_values = operator.itemgetter(*FILE_COLUMNS)
_TENSOR_NULLS = dict.fromkeys(TENSOR_COLUMNS)
_tensor_values = operator.itemgetter(*TENSOR_COLUMNS)
_T = {name: TENSORS.position(name) for name in TENSOR_COLUMNS}
_TENSOR_DESCRIPTION = operator.itemgetter(
    *(_T[c] for c in ("io", "io_index", "io_sub_index", "kind", "dtype", "shape", "device_format", "device_shape"))
)
_HAS_SUMMARY, _FLOAT_FLAGS, _NOTES, _ELEMENT = _T["has_summary"], _T["float_flags"], _T["notes"], _T["element"]
_ORIGINAL_OP, _ORIGINAL_OP_INDEX = _T["original_op"], _T["original_op_index"]
# (column name, Summary field, position in a row, NaN mask, -0.0 mask) of each statistic; an integer one has no
# flags (masks 0), a float one its bits of float_flags
_STATISTICS_AT = tuple(
    (c.name, c.statistic, _T[c.name], *((1 << c.flags.nan_bit, 1 << c.flags.negative_zero_bit) if c.flags else (0, 0)))
    for c in STATISTICS
    if c.statistic is not None  # all of STATISTICS: says so to the type checker
)


def _statistics(summary: Summary) -> dict:
    """The statistics columns of a summary and its float_flags: what SQLite would lose of a float statistic, NaN
    (stored as NULL) and the sign of a zero (stored as 0.0), is flagged at the bits its column declares."""
    values: dict = {"has_summary": 1}
    flags = 0
    for name, field, _, nan_mask, negative_zero_mask in _STATISTICS_AT:
        value = getattr(summary, field)
        if nan_mask and value is not None:
            if math.isnan(value):
                flags |= nan_mask
                value = None
            elif value == 0.0 and math.copysign(1.0, value) < 0:
                flags |= negative_zero_mask
        values[name] = value
    values["float_flags"] = flags
    return values


def json_or_none(items: Sequence[str]) -> Optional[str]:
    return json.dumps(list(items)) if items else None


def _text(value: Optional[int]) -> Optional[str]:
    return None if value is None else str(value)


def int_or_none(text: Optional[str]) -> Optional[int]:
    return None if text is None else int(text)


def _enum_value(value: Optional[enum.Enum]) -> Optional[str]:
    return None if value is None else value.value


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
    values = dict(_FILE_NULLS, path=str(path))
    if isinstance(located, DumpFile):
        values.update(
            side=located.side.value, kind=located.kind.value, rank=located.rank, token=located.token,
            model=located.model, run=located.run, device=located.device, model_id=located.model_id,
            op_type=located.op_type, op_name=located.op_name, header_op_name=header_op_name,
            io=_enum_value(located.io), io_index=located.index, io_sub_index=getattr(located.name, "sub_index", None),
            timestamp=_text(located.timestamp),
        )  # fmt: skip
    elif isinstance(located, GraphFile):
        values.update(side=Side.GRAPH.value, kind=FileKind.GRAPH.value, rank=located.name.rank)
    if key is not None:
        values.update(inode=key.inode, size=key.size, mtime_ns=key.mtime_ns, dev=key.dev)
    values.update(
        dump_time=_text(dump_time), mapped_name=mapped_name, state=state.value, error=error, attempts=1,
        summaries=int(summarized), raw_deleted=int(raw_deleted), bytes=key.size if summarized and key else None,
        commit_seq=seq, indexed_ns=now_ns, ffts_attr=ffts_attr,
    )  # fmt: skip
    return _file_values(values)


def tensor_rows(file_id: int, tensors: Sequence[TensorSummary]) -> Iterator[tuple]:
    """A row per tensor, each followed by a row per element of it (`TensorSummary.elements`, column `element`)."""
    position = 0
    for tensor in tensors:
        own = {
            **_TENSOR_NULLS, "file_id": file_id, "position": position, "io": tensor.io.value,
            "io_index": tensor.index, "io_sub_index": tensor.sub_index, "kind": tensor.kind.value,
            "dtype": tensor.dtype, "shape": _shape_text(tensor.shape), "device_format": tensor.device_format,
            "device_shape": _shape_text(tensor.device_shape), "has_summary": 0, "float_flags": 0,
            "notes": json_or_none(tensor.notes),
        }  # fmt: skip
        if tensor.summary is not None:
            own.update(_statistics(tensor.summary))
        if tensor.original_op is not None:
            own["original_op"], own["original_op_index"] = tensor.original_op
        yield _tensor_values(own)
        position += 1
        if tensor.elements:
            # an element row: the tensor's description, the element's shape and numbers, nothing else
            described = {name: own[name] for name in ("file_id", "io", "io_index", "io_sub_index", "kind", "dtype")}
            element_shape = _shape_text(tensor.shape[1:]) if tensor.shape else None
            for k, summary in enumerate(tensor.elements):
                element = {**_TENSOR_NULLS, **described, "position": position, "shape": element_shape, "element": k}
                element.update(_statistics(summary))
                yield _tensor_values(element)
                position += 1


def graph_op_row(file_id: int, op: GraphOp) -> tuple:
    order, name, op_type, inputs, control, outputs, originals, stack = op.as_fields()
    return (file_id, order, name, op_type, *map(json.dumps, (inputs, control, outputs, originals)), stack)


def row_summary(row: tuple) -> Optional[Summary]:
    """The numbers of a tensors row (a tensor's, or one element's)."""
    if not row[_HAS_SUMMARY]:
        return None
    flags = row[_FLOAT_FLAGS]
    fields: dict[str, Any] = {}  # Summary's keyword arguments
    for _, field, at, nan_mask, negative_zero_mask in _STATISTICS_AT:
        value = row[at]
        if flags & nan_mask:
            value = math.nan
        elif flags & negative_zero_mask:
            value = -0.0
        fields[field] = value
    return Summary(**fields)


def row_element(row: tuple) -> Optional[int]:
    """Which element of the tensor before it a tensors row summarizes; None for a tensor's own row."""
    return row[_ELEMENT]


def tensor_summary(row: tuple) -> TensorSummary:
    io, index, sub_index, kind, dtype, shape, device_format, device_shape = _TENSOR_DESCRIPTION(row)
    notes, original_op = row[_NOTES], row[_ORIGINAL_OP]
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
        original_op=(original_op, row[_ORIGINAL_OP_INDEX]) if original_op is not None else None,
    )


def graph_op(row: tuple) -> GraphOp:
    order, name, op_type, inputs, control, outputs, originals, stack = row
    inputs, control, outputs, originals = map(json.loads, (inputs, control, outputs, originals))
    return GraphOp.from_fields(order, name, op_type, inputs, control, outputs, originals, stack)


def rebuild_dump_file(path: Path, side: Side, kind: FileKind, mapped_name: Optional[str], placed: tuple) -> DumpFile:
    """A DumpFile from its row: the name is parsed again (cheap, and exactly what locate parsed), everything the
    directories said comes from the columns, `placed` = (rank, token, model, run, device, model_id, op_type,
    op_name) as selected by `files_select`."""
    rank, token, model, run, device, model_id, op_type, op_name = placed
    name = path.name
    parsed: Union[GeFileName, FxFileName, AclFileName]
    if side is Side.ACL:
        parsed = parse_acl_file_name(name)
        timestamp, io, index = None, IO.OUTPUT, 0
    elif side is Side.FX:
        fx_name = parse_fx_file_name(name)
        timestamp = int(fx_name.timestamp) if fx_name.timestamp.isdigit() else None
        parsed = fx_name
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
