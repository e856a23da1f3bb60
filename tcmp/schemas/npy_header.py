""".npy headers and completeness: what an FX dump file's header says (dtype, shape, where the payload lies) and
whether the file is as long as the header promises.

A header is read with one open and one read of its first bytes, and parsed from those bytes when it is np.save's
own layout (every FX file); anything else goes through numpy's readers on the file.
"""

from __future__ import annotations

import functools
import math
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

import numpy as np
from numpy.lib import format as npy_format

from tcmp.schemas.dump_records import Completeness
from tcmp.schemas.errors import DumpCorrupt, DumpIncomplete
from tcmp.schemas.limits import MAX_NPY_HEADER_BYTES, MAX_NPY_NDIM, refusal
from tcmp.schemas.pickle_scan import scan_pickle

PathLike = Union[str, Path]

_MAGIC_PREFIX = b"\x93NUMPY"
_MAGIC_LENGTH = len(_MAGIC_PREFIX) + 2  # + major, minor version bytes
# version -> struct format of the header-length field that follows the magic
_HEADER_LENGTH_FORMATS = {(1, 0): "<H", (2, 0): "<I", (3, 0): "<I"}
_LENGTH_STRUCTS = {version: struct.Struct(f) for version, f in _HEADER_LENGTH_FORMATS.items()}
# The first read of a file: np.save's headers are 128 bytes (a multiple of 64); a longer one is read again.
FIRST_READ = 4096


@dataclass(frozen=True)
class NpyHeader:
    dtype: np.dtype
    shape: tuple[int, ...]
    fortran_order: bool
    data_offset: int  # where the payload starts
    data_nbytes: Optional[int]  # exact payload size; None for object arrays (a pickle of unknown length)


def as_path(path: PathLike) -> Path:
    return path if isinstance(path, Path) else Path(path)  # Path(a_path) parses the whole path again


def read_npy_header(path: PathLike) -> NpyHeader:
    """Parse the header (np.save's layout from one read, anything else with numpy.lib.format's readers).

    DumpIncomplete if the file ends inside the header (the writer has not finished it); DumpCorrupt if the bytes
    are not an .npy header at all.
    """
    path = as_path(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        head = os.pread(fd, FIRST_READ, 0)
        size = len(head) if len(head) < FIRST_READ else os.fstat(fd).st_size  # a short read ends at the end
        header = _header_from_bytes(head, size)
        if header is not None:
            return header
        with open(fd, "rb", closefd=False) as fp:
            return parse_npy_header(fp, size, path)
    finally:
        os.close(fd)


def _header_from_bytes(head: bytes, size: int) -> Optional[NpyHeader]:
    """The header from the first bytes of a file when it is np.save's own layout and lies whole in them; None
    otherwise (numpy's readers then decide, with their errors for what is wrong)."""
    version = (head[6], head[7]) if head.startswith(_MAGIC_PREFIX) and len(head) >= _MAGIC_LENGTH else None
    length = _LENGTH_STRUCTS.get(version) if version != (3, 0) else None  # type: ignore[arg-type]
    if length is None or len(head) < _MAGIC_LENGTH + length.size:
        return None
    (header_length,) = length.unpack_from(head, _MAGIC_LENGTH)
    data_offset = _MAGIC_LENGTH + length.size + header_length
    if header_length > MAX_NPY_HEADER_BYTES or data_offset > len(head) or size < data_offset:
        return None
    fast = _fast_header(head[_MAGIC_LENGTH + length.size : data_offset])
    if fast is None or len(fast[0]) > MAX_NPY_NDIM:
        return None
    shape, fortran_order, dtype = fast
    return NpyHeader(
        dtype, shape, fortran_order, data_offset, None if dtype.hasobject else math.prod(shape) * dtype.itemsize
    )


def parse_npy_header(fp, size: int, path: Path) -> NpyHeader:
    """The header of .npy bytes `fp` holds (`size` of them), from its start, checked as `read_npy_header` checks a
    file's; `fp` is left at the end of the header."""
    prefix = fp.read(_MAGIC_LENGTH)
    if len(prefix) < _MAGIC_LENGTH:
        if _could_start_npy(prefix):
            raise DumpIncomplete(path, f"file ends inside the .npy magic ({len(prefix)} bytes)")
        raise DumpCorrupt(path, "not an .npy file (bad magic)")
    if prefix.startswith(_MAGIC_PREFIX):
        version = (prefix[-2], prefix[-1])  # what read_magic returns, without seeking back and reading again
    else:
        fp.seek(0)
        try:
            version = npy_format.read_magic(fp)  # raises, with numpy's own message
        except ValueError as exc:
            raise DumpCorrupt(path, f"not an .npy file: {exc}") from exc
    length_format = _HEADER_LENGTH_FORMATS.get(version)
    if length_format is None:
        raise DumpCorrupt(path, f"unsupported .npy format version {version}")
    length_size = struct.calcsize(length_format)
    length_bytes = fp.read(length_size)
    if len(length_bytes) < length_size:
        raise DumpIncomplete(path, "file ends inside the .npy header length")
    (header_length,) = struct.unpack(length_format, length_bytes)
    if header_length > MAX_NPY_HEADER_BYTES:  # before reading it: a header can list millions of dims
        raise DumpCorrupt(path, refusal(".npy header", header_length, MAX_NPY_HEADER_BYTES))
    data_offset = _MAGIC_LENGTH + length_size + header_length
    if size < data_offset:
        raise DumpIncomplete(path, f"file ends inside the .npy header ({size} of {data_offset} bytes)")
    fast = _fast_header(fp.read(header_length)) if version != (3, 0) else None
    if fast is not None:
        shape, fortran_order, dtype = fast
    else:
        fp.seek(_MAGIC_LENGTH)
        try:
            shape, fortran_order, dtype = _read_array_header(fp, version)
        except Exception as exc:  # numpy parses the untrusted header with tokenize and ast, which raise what they
            # like on garbage (TokenError, RecursionError, MemoryError, ...): all of it means a corrupt file
            reason = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)  # not TokenError's tuple
            raise DumpCorrupt(path, f"bad .npy header: {reason}") from exc
    if len(shape) > MAX_NPY_NDIM:
        raise DumpCorrupt(path, refusal(".npy shape", len(shape), MAX_NPY_NDIM, "dims"))
    if any(dim < 0 for dim in shape):
        raise DumpCorrupt(path, f"bad .npy header: negative dimension in shape {shape}")
    data_nbytes = None if dtype.hasobject else math.prod(shape) * dtype.itemsize
    return NpyHeader(
        dtype=dtype,
        shape=tuple(shape),
        fortran_order=bool(fortran_order),
        data_offset=data_offset,
        data_nbytes=data_nbytes,
    )


# The header np.save writes for a plain dtype, exactly; anything else goes to numpy's own (slower) parser.
_SIMPLE_HEADER = re.compile(
    rb"\{'descr': '([<>|=][a-zA-Z]\d*)', 'fortran_order': (True|False), 'shape': \(((?:\d+, ?)*\d*)\), \} *\n"
)


@functools.lru_cache(maxsize=64)
def _descr_dtype(descr: bytes) -> np.dtype:
    return np.dtype(descr.decode("ascii"))


@functools.lru_cache(maxsize=256)  # a token's thousands of files share a few hundred headers
def _fast_header(raw: bytes) -> Optional[tuple[tuple[int, ...], bool, np.dtype]]:
    """np.save's own header layout read with one regular expression (numpy's reader evaluates the dict literal
    with `ast`, which dominated reading thousands of small FX files). None when it is not that exact layout."""
    match = _SIMPLE_HEADER.fullmatch(raw)
    if match is None:
        return None
    try:
        dtype = _descr_dtype(match.group(1))
    except TypeError:
        return None
    shape = tuple(int(d) for d in match.group(3).split(b",") if d.strip())
    return shape, match.group(2) == b"True", dtype


def _could_start_npy(prefix: bytes) -> bool:
    """Is `prefix` (shorter than the 8-byte magic) the beginning of a valid magic + known version?"""
    if not _MAGIC_PREFIX.startswith(prefix[: len(_MAGIC_PREFIX)]):
        return False
    known = list(_HEADER_LENGTH_FORMATS)
    if len(prefix) > len(_MAGIC_PREFIX):
        return any(prefix[len(_MAGIC_PREFIX)] == major for major, _ in known)
    return True


def _read_array_header(fp, version: tuple[int, int]):
    if version == (1, 0):
        return npy_format.read_array_header_1_0(fp)
    if version == (2, 0):
        return npy_format.read_array_header_2_0(fp)
    # 3.0 (UTF-8 field names) has no public reader; numpy's own private one is the only correct choice.
    read_private = getattr(npy_format, "_read_array_header", None)
    if read_private is None:  # pragma: no cover - every numpy that writes 3.0 has it
        raise ValueError("this numpy cannot read .npy format 3.0 headers")
    return read_private(fp, version)


def npy_completeness(path: PathLike) -> Completeness:
    """Is the file exactly as long as its header promises?

    Plain arrays: COMPLETE iff size == data_offset + data_nbytes, INCOMPLETE if smaller (also when the file ends
    inside the header), CORRUPT if larger or if the header is not an .npy header.

    Object arrays: numpy writes a single pickle after the header, and a pickle ends with its STOP opcode. The
    payload is walked opcode by opcode with pickletools.genops (decoding only, nothing is executed): COMPLETE iff
    STOP is the last byte of the file; INCOMPLETE if the file ends before STOP (including inside an opcode's
    argument); CORRUPT if bytes follow STOP or an opcode is invalid before the end of the file.
    """
    path = as_path(path)
    with open(path, "rb") as fp:
        size = os.fstat(fp.fileno()).st_size
        try:
            header = parse_npy_header(fp, size, path)
        except DumpIncomplete:
            return Completeness.INCOMPLETE
        except DumpCorrupt:
            return Completeness.CORRUPT
        return payload_completeness(fp, header, size)


def payload_completeness(fp, header: NpyHeader, size: int) -> Completeness:
    """Whether the payload after `header` in `fp` (`size` bytes in all) is whole (see `npy_completeness`)."""
    if header.data_nbytes is not None:
        expected = header.data_offset + header.data_nbytes
        if size == expected:
            return Completeness.COMPLETE
        return Completeness.INCOMPLETE if size < expected else Completeness.CORRUPT
    return scan_pickle(fp, header.data_offset, size, keep_opcodes=False).completeness


__all__ = ["FIRST_READ", "NpyHeader", "as_path", "npy_completeness", "parse_npy_header", "payload_completeness",
           "read_npy_header"]  # fmt: skip
