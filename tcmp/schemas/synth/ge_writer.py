"""Format-exact GE dump files for tests, the demo and benchmarks (docs/formats.md, "GE dump files").

A tensor is given by its logical values, dtype and device format; the writer packs it into the device layout
(`pack`, written from the forward index maps), encodes the payload (`dtype_encode`), builds the
DumpData header with protobuf and writes `uint64 L | header | inputs | outputs | buffers | workspaces`. It
returns what a correct reader must give back: the exact ND values after rounding to the dtype.

As CANN's AICPU writer (`OpDumpTask`) does, every input and output carries a device address in the header
(`addresses=False` writes headers without any, as older writers did), and a tensor, buffer or workspace that is not
dumped (device address 0: `TensorSpec(dumped=False)`, `NotDumped(size)`) keeps its size in the header but has no
payload bytes; proto3 leaves its address 0 off the wire.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional, Union

import numpy as np

from tcmp.schemas import proto
from tcmp.schemas.dump_records import IO
from tcmp.schemas.formats import Format
from tcmp.schemas.synth.dtype_encode import encode_values
from tcmp.schemas.synth.pack import pack


@dataclass(frozen=True)
class TensorSpec:
    """One tensor to write. `values` are logical (ND) values; they are rounded to `dtype` on writing."""

    values: np.ndarray
    dtype: int
    format: int = int(Format.ND)
    c0: int = 16
    groups: int = 1
    layout: Optional[int] = None  # logical layout for the conv formats (see pack)
    original_op: Optional[tuple[str, int]] = None  # outputs only: (pre-fusion op name, its output index)
    write_original_shape: bool = True
    dumped: bool = True  # False: address 0 in the header, size kept, no payload (an unconnected optional input)
    address: Optional[int] = None  # device address to record; None: the next one of a realistic allocation


@dataclass(frozen=True)
class NotDumped:
    """A buffer or workspace the writer skipped (device address 0): its size is in the header, its bytes are not."""

    size: int


Extra = Union[bytes, NotDumped]  # a buffer's or workspace's payload, or its absence

# Where the synthetic tensors lie in device memory: HBM addresses as Ascend runtimes hand them out (48-bit,
# 512-byte aligned blocks).
DEVICE_BASE = 0x12C0_4000_0000
DEVICE_ALIGN = 512


@dataclass(frozen=True)
class WrittenTensor:
    """What was written for one tensor, and what a correct reader must return for it."""

    io: IO
    index: int
    dtype: int
    format: int
    expected: np.ndarray  # exact ND values (float64 / complex128 / bool / integer)
    device_shape: tuple[int, ...]
    original_shape: tuple[int, ...]
    size: int
    dumped: bool = True  # False: no payload in the file (the reader must not return `expected`)
    address: int = 0  # the device address in the header (0: not dumped, or a header without addresses)


@dataclass(frozen=True)
class WrittenDump:
    path: Path
    op_name: str
    dump_time: int
    inputs: tuple[WrittenTensor, ...]
    outputs: tuple[WrittenTensor, ...]
    size: int

    @property
    def tensors(self) -> tuple[WrittenTensor, ...]:
        return self.inputs + self.outputs


@dataclass(frozen=True)
class _Encoded:
    payload: bytes
    written: WrittenTensor
    sub_format: int


def _encode(spec: TensorSpec, io: IO, index: int) -> _Encoded:
    values = np.asarray(spec.values)
    packed = pack(values, spec.format, c0=spec.c0, groups=spec.groups, layout=spec.layout)
    device = encode_values(packed.device.reshape(-1), spec.dtype)
    logical = encode_values(values.reshape(-1), spec.dtype).values.reshape(values.shape)
    written = WrittenTensor(
        io=io,
        index=index,
        dtype=spec.dtype,
        format=spec.format,
        expected=logical,
        device_shape=tuple(packed.device_shape),
        original_shape=tuple(packed.original_shape) if spec.write_original_shape else (),
        size=len(device.payload),
        dumped=spec.dumped,
    )
    return _Encoded(device.payload if spec.dumped else b"", written, packed.sub_format)


def _addresses(specs: Sequence[TensorSpec], sizes: Sequence[int]) -> list[int]:
    """Each tensor's device address: its own, else the aligned block after the previous tensors' (0 when it is not
    dumped: that is what makes the writer skip it)."""
    found, cursor = [], DEVICE_BASE
    for spec, size in zip(specs, sizes):
        address = spec.address if spec.address is not None else cursor
        found.append(address if spec.dumped else 0)
        cursor = max(cursor, (address + size + DEVICE_ALIGN - 1) // DEVICE_ALIGN * DEVICE_ALIGN + DEVICE_ALIGN)
    return found


def _addressed(encoded: _Encoded, address: int) -> _Encoded:
    return replace(encoded, written=replace(encoded.written, address=address))


def _extra_size(extra: Extra) -> int:
    return extra.size if isinstance(extra, NotDumped) else len(extra)


def _extra_payload(extra: Extra) -> bytes:
    return b"" if isinstance(extra, NotDumped) else extra


def encode_ge_dump(
    op_name: str,
    inputs: Sequence[TensorSpec],
    outputs: Sequence[TensorSpec],
    *,
    dump_time: int,
    attrs: Sequence[tuple[str, str]] = (),
    buffers: Sequence[Extra] = (),
    workspaces: Sequence[Extra] = (),
    version: str = "2.0",
    addresses: bool = True,
) -> tuple[bytes, tuple[WrittenTensor, ...], tuple[WrittenTensor, ...]]:
    """The bytes of one big-dump file and what was written."""
    if not addresses and not all(s.dumped for s in (*inputs, *outputs)):
        raise ValueError("a tensor that is not dumped needs a header with addresses (its address 0 says so)")
    enc_in = [_encode(s, IO.INPUT, i) for i, s in enumerate(inputs)]
    enc_out = [_encode(s, IO.OUTPUT, i) for i, s in enumerate(outputs)]
    if addresses:
        where = iter(_addresses([*inputs, *outputs], [e.written.size for e in (*enc_in, *enc_out)]))
        enc_in, enc_out = ([_addressed(e, next(where)) for e in part] for part in (enc_in, enc_out))
    header = proto.DumpData(version=version, dump_time=dump_time, op_name=op_name)
    for e in enc_in:
        item = header.input.add(data_type=e.written.dtype, format=e.written.format, size=e.written.size)
        item.shape.dim.extend(e.written.device_shape)
        item.original_shape.dim.extend(e.written.original_shape)
        item.sub_format = e.sub_format
        item.address = e.written.address
    for e, spec in zip(enc_out, outputs):
        item = header.output.add(data_type=e.written.dtype, format=e.written.format, size=e.written.size)
        item.shape.dim.extend(e.written.device_shape)
        item.original_shape.dim.extend(e.written.original_shape)
        item.sub_format = e.sub_format
        item.address = e.written.address
        if spec.original_op is not None:
            item.original_op.name, item.original_op.output_index = spec.original_op
    for extra in buffers:
        header.buffer.add(size=_extra_size(extra))
    for extra in workspaces:
        header.space.add(size=_extra_size(extra))
    for name, value in attrs:
        header.attr.add(name=name, value=value)
    blob = header.SerializeToString()
    parts = [struct.pack("<Q", len(blob)), blob]
    parts += [e.payload for e in enc_in] + [e.payload for e in enc_out]
    parts += [_extra_payload(extra) for extra in (*buffers, *workspaces)]
    return b"".join(parts), tuple(e.written for e in enc_in), tuple(e.written for e in enc_out)


def write_ge_dump(
    path: os.PathLike,
    op_name: str,
    inputs: Sequence[TensorSpec],
    outputs: Sequence[TensorSpec],
    *,
    dump_time: int,
    attrs: Sequence[tuple[str, str]] = (),
    buffers: Sequence[Extra] = (),
    workspaces: Sequence[Extra] = (),
    addresses: bool = True,
) -> WrittenDump:
    data, written_in, written_out = encode_ge_dump(
        op_name, inputs, outputs, dump_time=dump_time, attrs=attrs, buffers=buffers, workspaces=workspaces,
        addresses=addresses,
    )  # fmt: skip
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return WrittenDump(path, op_name, dump_time, written_in, written_out, len(data))


# ge::DataType (nano numbering) for the dump-proto codes the nano writer supports
_PROTO_TO_NANO_DTYPE = {1: 0, 2: 1, 3: 2, 7: 3, 4: 4, 5: 6, 6: 7, 9: 8, 8: 9, 10: 10, 12: 11, 11: 12, 27: 27}


def _tlnv(tag: int, payload: bytes) -> bytes:
    return struct.pack("<II", tag, len(payload)) + payload


def _dims(shape: Sequence[int]) -> bytes:
    return struct.pack(f"<{len(shape)}Q", *shape)


def encode_nano_dump(
    inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec], *, version: int = 1
) -> tuple[bytes, tuple[WrittenTensor, ...], tuple[WrittenTensor, ...]]:
    """A nano dump (TLV header, ge::DataType numbering; docs/formats.md, "Nano dumps")."""
    enc_in = [_encode(s, IO.INPUT, i) for i, s in enumerate(inputs)]
    enc_out = [_encode(s, IO.OUTPUT, i) for i, s in enumerate(outputs)]
    in_records = b""
    for e in enc_in:
        w = e.written
        tlv = _tlnv(0, _dims(w.device_shape)) + _tlnv(1, _dims(w.original_shape))
        in_records += struct.pack("<iiiQQQI", _PROTO_TO_NANO_DTYPE[w.dtype], w.format, 0, 0, 0, w.size, len(tlv))
        in_records += tlv
    out_records = b""
    for e, spec in zip(enc_out, outputs):
        w = e.written
        origin_name, origin_index = spec.original_op or ("", 0)
        tlv = _tlnv(0, _dims(w.device_shape)) + _tlnv(1, _dims(w.original_shape))
        if origin_name:
            tlv += _tlnv(2, origin_name.encode() + b"\0")
        nano_dtype = _PROTO_TO_NANO_DTYPE[w.dtype]
        out_records += struct.pack(
            "<iiiiiiQQQI", nano_dtype, w.format, 0, origin_index, nano_dtype, w.format, 0, 0, w.size, len(tlv)
        )
        out_records += tlv
    in_block = struct.pack("<I", len(enc_in)) + in_records
    out_block = struct.pack("<I", len(enc_out)) + out_records
    header = (
        struct.pack("<II", 0x5A5A5A5A, version)
        + struct.pack("<II", 4, len(in_block))
        + in_block
        + struct.pack("<II", 5, len(out_block))
        + out_block
    )
    data = struct.pack("<Q", len(header)) + header + b"".join(e.payload for e in enc_in + enc_out)
    return data, tuple(e.written for e in enc_in), tuple(e.written for e in enc_out)
