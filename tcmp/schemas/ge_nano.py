"""Nano dumps (lite SoCs; docs/formats.md, "Nano dumps"): the same length-prefixed layout with a TLV header.

    uint64 L | uint32 magic 0x5A5A5A5A | uint32 version | TLV(tag 4: inputs) | TLV(tag 5: outputs) | payloads

Each TLV is `uint32 tag, uint32 byte length, value`. The input/output blocks hold `uint32 count` and that many
packed records; a record ends with `uint32 tlv_list_len` and that many bytes of TLNV entries (shape = tag 0,
original shape = tag 1, origin name = tag 2). Dtypes use ge::DataType numbering, mapped to the dump-proto one.
There is no protobuf here, so this is a small struct-based parser that checks every length against the bytes
it has before it reads.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Optional

from tcmp.schemas.dump_records import IO
from tcmp.schemas.errors import DumpCorrupt
from tcmp.schemas.ge_header import LENGTH_PREFIX, GeDump, GeTensor, OriginalOp, check_total

NANO_INPUTS_TAG = 4
NANO_OUTPUTS_TAG = 5
_SHAPE_TAG, _ORIGINAL_SHAPE_TAG, _ORIGIN_NAME_TAG = 0, 1, 2

_INPUT_RECORD = struct.Struct("<iiiQQQI")  # data_type, format, address_type, address, offset, size, tlv_list_len
_OUTPUT_RECORD = struct.Struct("<iiiiiiQQQI")  # … original_index, original_data_type, original_format …
_U32 = struct.Struct("<I")
_TL = struct.Struct("<II")

# ge::DataType (in-memory numbering) -> dump-proto OutputDataType; the peer's NanoDataType table stops at 32
NANO_TO_PROTO_DTYPE = {
    0: 1, 1: 2, 2: 3, 3: 7, 4: 4, 6: 5, 7: 6, 8: 9, 9: 8, 10: 10, 11: 12, 12: 11, 13: 13, 14: 14, 15: 15,
    16: 16, 17: 17, 18: 18, 19: 19, 20: 20, 21: 21, 22: 22, 23: 23, 24: 24, 25: 25, 26: 26, 27: 27, 28: 0,
    29: 28, 30: 29, 31: 30, 32: 31,
}  # fmt: skip
_UNKNOWN_DTYPE = 1000  # outside every table: decoded as raw bytes with a note


class _Cursor:
    def __init__(self, path: Path, data: bytes) -> None:
        self.path, self.data, self.pos = path, data, 0

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise DumpCorrupt(
                self.path, f"nano header: {what} needs {n} bytes at {self.pos}, header has {len(self.data)}"
            )
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt: struct.Struct, what: str) -> tuple:
        return fmt.unpack(self.take(fmt.size, what))


def _tlnv_entries(cursor: _Cursor, length: int) -> dict[int, bytes]:
    entries: dict[int, bytes] = {}
    end = cursor.pos + length
    while cursor.pos < end:
        tag, size = cursor.unpack(_TL, "TLNV entry")
        entries[tag] = cursor.take(size, f"TLNV tag {tag}")
    if cursor.pos != end:
        raise DumpCorrupt(cursor.path, "nano header: TLNV entries overrun their record")
    return entries


def _dims(raw: Optional[bytes], path: Path) -> tuple[int, ...]:
    if not raw:
        return ()
    if len(raw) % 8:
        raise DumpCorrupt(path, f"nano header: shape of {len(raw)} bytes is not a list of uint64")
    return struct.unpack(f"<{len(raw) // 8}Q", raw)


def _block(cursor: _Cursor, expected_tag: int, record: struct.Struct, io: IO):
    tag, length = cursor.unpack(_TL, f"{io.value} TLV")
    if tag != expected_tag:
        raise DumpCorrupt(cursor.path, f"nano header: expected TLV tag {expected_tag} for {io.value}s, got {tag}")
    end = cursor.pos + length
    (count,) = cursor.unpack(_U32, f"{io.value} count")
    items = []
    for _ in range(count):
        fields = cursor.unpack(record, f"{io.value} record")
        items.append((fields, _tlnv_entries(cursor, fields[-1])))
    if cursor.pos != end:
        raise DumpCorrupt(cursor.path, f"nano header: {io.value} TLV length {length} does not match its records")
    return items


def read_nano_header(path: Path, header: bytes, header_length: int, file_size: int):
    """Decode a nano header into the same GeDump record the big-dump reader gives."""
    cursor = _Cursor(path, header)
    cursor.unpack(_U32, "magic")
    (version,) = cursor.unpack(_U32, "version")
    raw_inputs = _block(cursor, NANO_INPUTS_TAG, _INPUT_RECORD, IO.INPUT)
    raw_outputs = _block(cursor, NANO_OUTPUTS_TAG, _OUTPUT_RECORD, IO.OUTPUT)
    check_total(path, header_length, [f[5] for f, _ in raw_inputs] + [f[8] for f, _ in raw_outputs], file_size)

    def dtype(code: int) -> int:
        return NANO_TO_PROTO_DTYPE.get(code, _UNKNOWN_DTYPE)

    offset = LENGTH_PREFIX.size + header_length
    inputs = []
    for i, (f, tlv) in enumerate(raw_inputs):
        data_type, fmt, _, _, _, size, _ = f
        inputs.append(
            GeTensor(IO.INPUT, i, dtype(data_type), fmt & 0xFF, (fmt >> 8) & 0xFFFF,
                     _dims(tlv.get(_SHAPE_TAG), path), _dims(tlv.get(_ORIGINAL_SHAPE_TAG), path), size, offset)
        )  # fmt: skip
        offset += size
    outputs = []
    for i, (f, tlv) in enumerate(raw_outputs):
        data_type, fmt, _, original_index, original_dtype, original_format, _, _, size, _ = f
        name = tlv.get(_ORIGIN_NAME_TAG, b"").split(b"\0", 1)[0].decode("utf-8", "replace")
        original = OriginalOp(name, original_index, dtype(original_dtype), original_format) if name else None
        outputs.append(
            GeTensor(IO.OUTPUT, i, dtype(data_type), fmt & 0xFF, (fmt >> 8) & 0xFFFF,
                     _dims(tlv.get(_SHAPE_TAG), path), _dims(tlv.get(_ORIGINAL_SHAPE_TAG), path), size, offset,
                     original)
        )  # fmt: skip
        offset += size
    return GeDump(
        path=path,
        op_name="",  # nano headers carry no op name; callers take it from the file name
        version=f"nano {version}",
        dump_time=0,
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        buffer_sizes=(),
        workspace_sizes=(),
        attrs=(),
        header_length=header_length,
        file_size=file_size,
        nano=True,
    )
