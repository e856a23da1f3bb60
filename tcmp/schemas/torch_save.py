"""`.pt` files written by `torch.save` (torch_npu's `save_npugraph_tensor`, users' own saves), read without torch.

torch.save (torch >= 1.6) writes a zip archive, every entry STORED (uncompressed) and 64-byte aligned:

    {archive}/data.pkl                the pickled object; tensors refer to storages by key (tcmp.schemas.torch_pickle)
    {archive}/data/{key}              one storage's bytes, little-endian
    {archive}/byteorder               `little` (absent before torch 1.10)
    {archive}/version, .format_version, .storage_alignment, .data/serialization_id

`data.pkl` is walked by `torch_pickle` (nothing unpickled, any global outside torch's tensor rebuild refused);
each storage is a slice of the file (memory-mapped for big files, one read for small ones) and each tensor a
strided numpy view of the slice it covers, decoded by `decode_payload` under the GE data type of its torch dtype, so
a `.pt` tensor and a GE tensor of the same bytes have the same values. Every size the file claims is checked
before it is used: the zip directory's size and entry count, data.pkl's size, each storage against its entry, each
tensor's extent against its storage. Compressed entries (torch never writes them) are refused, not inflated.

A file still being written has no zip end record yet (torch writes the directory last): TorchSaveIncomplete, retry
later. The legacy format (torch < 1.6, or `_use_new_zipfile_serialization=False`) is refused as such.
"""

from __future__ import annotations

import io
import math
import mmap
import os
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Optional, Union

import numpy as np

from tcmp.schemas import MMAP_THRESHOLD
from tcmp.schemas.dtypes import DataType, decode_payload
from tcmp.schemas.dump_records import Completeness
from tcmp.schemas.limits import (
    MAX_TORCH_PICKLE_BYTES,
    MAX_TORCH_ZIP_DIRECTORY_BYTES,
    MAX_TORCH_ZIP_ENTRIES,
    refusal,
)
from tcmp.schemas.torch_pickle import (
    TensorRecord,
    TorchSaveCorrupt,
    TorchSaveError,
    TorchSaveIncomplete,
    UnsupportedObject,
    tensors_of,
)

Source = Union[str, "os.PathLike[str]", int, BinaryIO]
"""A path, or an open file (a descriptor or a binary file object): read with pread, its position untouched."""


class LegacyTorchSave(UnsupportedObject):
    """torch.save's format before torch 1.6 (or `_use_new_zipfile_serialization=False`): a bare pickle stream."""


@dataclass(frozen=True)
class TensorHeader:
    """What data.pkl says of one tensor; its storage is not read."""

    key: str  # where it is in the saved object: "" for a lone tensor, "0", "1" … in a list, names in a dict
    shape: tuple[int, ...]
    data_type: DataType
    torch_dtype: str  # "bfloat16", "float8_e4m3fn" …
    numel: int


@dataclass(frozen=True)
class SavedTensor:
    shape: tuple[int, ...]
    data_type: DataType
    torch_dtype: str
    values: np.ndarray  # `shape`, decoded as decode_payload decodes; read-only, may be a strided view of the file
    key: str = ""


@dataclass(frozen=True)
class SavedObject:
    path: Optional[Path]
    tensors: tuple[SavedTensor, ...]  # one for a saved tensor, in order for a list (a dict: insertion order)


_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature … name length, extra length (30 bytes)
_END_RECORD = struct.Struct("<4s4xHHIIH")  # signature, disks, entries here, entries, directory size, offset, comment
_ZIP64_LOCATOR = struct.Struct("<4sIQI")
_ZIP64_END = struct.Struct("<4sQHHIIQQQQ")
_TAIL = _END_RECORD.size + 0xFFFF + _ZIP64_LOCATOR.size  # the end record and the longest comment it may have
# the legacy format is a pickle stream that starts with torch's magic number 0x1950a86a20f9469cfc6c (LONG1)
_LEGACY_MAGIC = b"\x8a\x0a" + (0x1950A86A20F9469CFC6C).to_bytes(10, "little")


class _File:
    """The input file, read at offsets only (a caller's file object keeps its position)."""

    def __init__(self, source: Source) -> None:
        self.owned = isinstance(source, (str, os.PathLike))
        if isinstance(source, (str, os.PathLike)):
            self.path: Optional[Path] = Path(source)
            self.fd = os.open(source, os.O_RDONLY | os.O_CLOEXEC)
        elif isinstance(source, int):
            self.path, self.fd = None, source
        else:
            name = getattr(source, "name", None)
            self.path, self.fd = (Path(name) if isinstance(name, (str, os.PathLike)) else None), source.fileno()
        self.label = str(self.path) if self.path is not None else None
        self.size = os.fstat(self.fd).st_size
        self.buffer: Optional[memoryview] = None

    def close(self) -> None:
        if self.owned:
            os.close(self.fd)

    def read(self, offset: int, length: int) -> bytes:
        data = os.pread(self.fd, length, offset)
        if len(data) != length:
            raise TorchSaveCorrupt(self.label, "file shrank while it was read")
        return data

    def view(self, offset: int, length: int) -> memoryview:
        """`length` bytes at `offset`: from one read of a small file, from a memory map of a big one."""
        if self.buffer is None:
            if os.fstat(self.fd).st_size != self.size:  # mapping a file that changed size risks SIGBUS
                raise TorchSaveCorrupt(self.label, "file changed size while it was read")
            if self.size < MMAP_THRESHOLD:
                self.buffer = memoryview(self.read(0, self.size))
            else:
                self.buffer = memoryview(mmap.mmap(self.fd, 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ))
        return self.buffer[offset : offset + length]


class _Positional(io.RawIOBase):
    """A file object over `_File` for zipfile's directory parser (which seeks and reads)."""

    def __init__(self, file: _File) -> None:
        self.file = file
        self.position = 0

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        base = (0, self.position, self.file.size)[whence]
        self.position = max(base + offset, 0)
        return self.position

    def tell(self) -> int:
        return self.position

    def read(self, size: Optional[int] = -1) -> bytes:
        remaining = max(self.file.size - self.position, 0)
        length = remaining if size is None or size < 0 else min(size, remaining)
        data = os.pread(self.file.fd, length, self.position)
        self.position += len(data)
        return data


@dataclass(frozen=True)
class _Entry:
    name: str
    offset: int  # of its data in the file
    size: int


@dataclass(frozen=True)
class _Archive:
    prefix: str  # "{archive}/"
    entries: dict[str, _Entry]


def _refuse_other_formats(file: _File) -> None:
    head = file.read(0, min(file.size, 512))
    if head.startswith(b"PK\x03\x04"):
        return
    if len(head) < 4 and b"PK\x03\x04".startswith(head):
        raise TorchSaveIncomplete(file.label, f"only {file.size} bytes: the zip archive has only begun")
    legacy = "torch.save's legacy format (torch < 1.6, or _use_new_zipfile_serialization=False)"
    if head[:1] == b"\x80" and head[2:14] == _LEGACY_MAGIC:
        raise LegacyTorchSave(file.label, f"{legacy}: not read; save it again with torch >= 1.6's default format")
    if head[257:262] == b"ustar":
        raise LegacyTorchSave(file.label, f"a tar archive, {legacy}: not read")
    raise TorchSaveCorrupt(file.label, "not a torch.save file: neither a zip archive nor torch's legacy format")


def _directory_bounds(file: _File) -> None:
    """Check the end record's entry count and directory size before zipfile builds anything from them."""
    tail_start = max(file.size - _TAIL, 0)
    tail = file.read(tail_start, file.size - tail_start)
    at = tail.rfind(b"PK\x05\x06")
    while at >= 0 and at + _END_RECORD.size + _END_RECORD.unpack_from(tail, at)[-1] != len(tail):
        at = tail.rfind(b"PK\x05\x06", 0, at)  # bytes that only look like one (tensor data, a comment)
    if at < 0:
        raise TorchSaveIncomplete(file.label, "no zip end record: still being written (or cut short)")
    _sig, _here, entries, directory_bytes, _offset, _comment = _END_RECORD.unpack_from(tail, at)
    if (entries == 0xFFFF or directory_bytes == 0xFFFFFFFF) and at >= _ZIP64_LOCATOR.size:
        signature, _disk, end64, _disks = _ZIP64_LOCATOR.unpack_from(tail, at - _ZIP64_LOCATOR.size)
        if signature != b"PK\x06\x07" or end64 + _ZIP64_END.size > file.size:
            raise TorchSaveCorrupt(file.label, "zip64 end record missing or outside the file")
        record = _ZIP64_END.unpack(file.read(end64, _ZIP64_END.size))
        entries, directory_bytes = record[7], record[8]
    if entries > MAX_TORCH_ZIP_ENTRIES:
        raise TorchSaveCorrupt(file.label, refusal("a zip directory", entries, MAX_TORCH_ZIP_ENTRIES, "entries"))
    if directory_bytes > MAX_TORCH_ZIP_DIRECTORY_BYTES:
        raise TorchSaveCorrupt(file.label, refusal("a zip directory", directory_bytes, MAX_TORCH_ZIP_DIRECTORY_BYTES))


def _archive(file: _File) -> _Archive:
    """The zip directory, each entry with where its data lies (checked inside the file)."""
    _refuse_other_formats(file)
    _directory_bounds(file)
    try:
        infos = zipfile.ZipFile(_Positional(file)).infolist()
    except (zipfile.BadZipFile, ValueError, struct.error, EOFError) as exc:
        raise TorchSaveCorrupt(file.label, f"unreadable zip directory: {exc}") from exc
    entries: dict[str, _Entry] = {}
    for info in infos:
        if info.header_offset + _LOCAL_HEADER.size > file.size:
            raise TorchSaveCorrupt(file.label, f"zip entry {info.filename!r} starts past the end of the file")
        signature, name_length, extra_length = _LOCAL_HEADER.unpack(file.read(info.header_offset, _LOCAL_HEADER.size))
        offset = info.header_offset + _LOCAL_HEADER.size + name_length + extra_length
        if signature != b"PK\x03\x04" or offset + info.compress_size > file.size:
            raise TorchSaveCorrupt(file.label, f"zip entry {info.filename!r} lies outside the file")
        if info.compress_type != zipfile.ZIP_STORED or info.compress_size != info.file_size:
            raise UnsupportedObject(
                file.label, f"zip entry {info.filename!r} is compressed: torch.save stores every entry, not inflated"
            )
        entries[info.filename] = _Entry(info.filename, offset, info.file_size)
    pickles = [name for name in entries if name.endswith("/data.pkl") and name.count("/") == 1]
    if len(pickles) != 1:
        raise TorchSaveCorrupt(file.label, f"{len(pickles)} `{{archive}}/data.pkl` entries, not one: not torch.save's")
    prefix = pickles[0][: -len("data.pkl")]
    order = entries.get(prefix + "byteorder")
    if order is not None and file.read(order.offset, min(order.size, 16)) != b"little":
        raise UnsupportedObject(file.label, "saved on a big-endian machine: its storages are not read")
    return _Archive(prefix, entries)


def _records(file: _File, archive: _Archive) -> tuple[TensorRecord, ...]:
    entry = archive.entries[archive.prefix + "data.pkl"]
    if entry.size > MAX_TORCH_PICKLE_BYTES:
        raise TorchSaveCorrupt(file.label, refusal("data.pkl", entry.size, MAX_TORCH_PICKLE_BYTES))
    return tensors_of(file.label, file.read(entry.offset, entry.size))


def _storage_entry(file: _File, archive: _Archive, record: TensorRecord) -> _Entry:
    key = record.storage.key
    if not key or "/" in key or "\\" in key or key in (".", "..") or len(key) > 255:
        raise TorchSaveCorrupt(file.label, f"storage key {key!r} is not a name inside the archive's data/")
    entry = archive.entries.get(f"{archive.prefix}data/{key}")
    if entry is None:
        raise TorchSaveCorrupt(file.label, f"storage {key!r} has no entry {archive.prefix}data/{key}")
    storage = record.storage
    needed = storage.numel * (storage.dtype.itemsize if storage.dtype is not None else 1)
    if entry.size < needed:
        raise TorchSaveCorrupt(file.label, f"storage {key!r} of {needed:,} bytes has an entry of {entry.size:,}")
    return entry


def _values(file: _File, archive: _Archive, record: TensorRecord) -> np.ndarray:
    entry = _storage_entry(file, archive, record)
    itemsize = record.dtype.itemsize
    storage = record.storage
    capacity = storage.numel if storage.dtype is not None else storage.numel // itemsize  # elements of its dtype
    code = record.dtype.data_type
    assert code is not None  # torch_pickle refuses dtypes without a GE code
    numel = math.prod(record.shape)
    if numel == 0:
        return decode_payload(b"", code, 0).array.reshape(record.shape)
    extent = 1 + sum((dim - 1) * step for dim, step in zip(record.shape, record.stride))
    if record.storage_offset + extent > capacity:
        raise TorchSaveCorrupt(
            file.label,
            f"tensor {record.key or '(root)'}: size {list(record.shape)}, stride {list(record.stride)} at offset "
            f"{record.storage_offset} reaches element {record.storage_offset + extent - 1} of a storage of {capacity}",
        )
    span = file.view(entry.offset + record.storage_offset * itemsize, extent * itemsize)
    flat = decode_payload(span, code, extent).array
    strides = tuple(step * flat.itemsize for step in record.stride)
    # as_strided goes through __array_interface__, which has no ml_dtypes types: stride an unsigned view instead
    plain = flat.view(f"u{flat.itemsize}") if flat.itemsize <= 8 else flat
    values = np.lib.stride_tricks.as_strided(plain, record.shape, strides, writeable=False).view(flat.dtype)
    if record.conj:
        values = np.conj(values)
    if record.neg:
        values = np.negative(values)
    return values


def read_torch_save(source: Source) -> SavedObject:
    """Every tensor of a torch.save file, decoded. Raises TorchSaveIncomplete (still being written),
    UnsupportedObject (anything but dense tensors, lists, tuples and dicts of them; LegacyTorchSave for the old
    format) or TorchSaveCorrupt. A file object or descriptor is not closed."""
    file = _File(source)
    try:
        archive = _archive(file)
        records = _records(file, archive)
        tensors = tuple(
            SavedTensor(r.shape, r.dtype.data_type, r.dtype.name, _values(file, archive, r), r.key)  # type: ignore[arg-type]
            for r in records
        )
    finally:
        file.close()
    return SavedObject(file.path, tensors)


def probe_torch_save(source: Source) -> tuple[TensorHeader, ...]:
    """The tensors' headers (shape, dtype, element count) from data.pkl alone; no storage is read."""
    file = _File(source)
    try:
        records = _records(file, _archive(file))
    finally:
        file.close()
    return tuple(
        TensorHeader(r.key, r.shape, r.dtype.data_type, r.dtype.name, math.prod(r.shape))  # type: ignore[arg-type]
        for r in records
    )


def torch_save_completeness(source: Source) -> tuple[Completeness, str]:
    """Is the archive finished (its zip directory written and every entry inside the file), still being
    written, or never readable (and why)."""
    file = _File(source)
    try:
        _archive(file)
    except TorchSaveIncomplete as exc:
        return Completeness.INCOMPLETE, exc.message
    except TorchSaveError as exc:
        return Completeness.CORRUPT, exc.message
    finally:
        file.close()
    return Completeness.COMPLETE, ""


__all__ = [
    "LegacyTorchSave",
    "SavedObject",
    "SavedTensor",
    "Source",
    "TensorHeader",
    "TorchSaveCorrupt",
    "TorchSaveError",
    "TorchSaveIncomplete",
    "UnsupportedObject",
    "probe_torch_save",
    "read_torch_save",
    "torch_save_completeness",
]
