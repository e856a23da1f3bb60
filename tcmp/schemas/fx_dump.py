"""Reader for torchair's FX dump files: `np.save` output named `{node}-{target}.INPUT|OUTPUT.{i}[.{j}].{ts}.npy`.

docs/formats.md, "FX file contents": tensors are plain `.npy` (bf16 already upcast to float32 by torchair); non-tensor
args go through `np.array(x)`, which gives 0-d numeric arrays, string arrays, or *object* arrays (e.g. for None) whose
payload is a pickle. Object payloads are never unpickled (unpickling runs arbitrary code): `pickle_scan` walks
their opcodes and describes what they hold.
"""

from __future__ import annotations

import functools
import io
import math
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional, Union

import numpy as np
from numpy.lib import format as npy_format

from tcmp.schemas import MMAP_THRESHOLD, SLOTS
from tcmp.schemas.dump_records import IO, Completeness, TensorKind
from tcmp.schemas.errors import DumpCorrupt, DumpIncomplete, NameParseError
from tcmp.schemas.limits import MAX_NPY_HEADER_BYTES, MAX_NPY_NDIM, refusal
from tcmp.schemas.pickle_scan import (
    PickleScan,
    SymbolicUnpickler,
    Undescribable,
    clip,
    describe,
    numpy_array_parts,
    scan_pickle,
)

__all__ = [
    "FxFileName",
    "FxValue",
    "NpyHeader",
    "npy_completeness",
    "parse_fx_file_name",
    "parse_npy_header",
    "read_fx_value",
    "read_npy_header",
]

PathLike = Union[str, Path]

# ----------------------------------------------------------------------------------------------------------------
# File names

# The node key ("{node}-{target}") contains dots (`aten.mm.default`), so everything is anchored at the end: the
# greedy key takes all but the *last* `.INPUT.`/`.OUTPUT.` group that is followed by digits up to `.npy`.
_FX_FILE_NAME = re.compile(
    r"(?P<key>.+)\."
    r"(?:INPUT\.(?P<input_index>\d+)(?:\.(?P<sub_index>\d+))?|OUTPUT\.(?P<output_index>\d+))"
    r"\.(?P<timestamp>\d+)(?P<min_max>_min_max)?\.npy",
    re.DOTALL,
)


@dataclass(frozen=True, **SLOTS)
class FxFileName:
    node: str  # FX node name, e.g. "mm_1"
    target: str  # str of the op overload, e.g. "aten.mm.default"
    io: IO
    index: int  # positional arg i (inputs) or output k
    sub_index: Optional[int]  # j for a list/tuple arg dumped as `.INPUT.{i}.{j}`
    timestamp: str  # %Y%m%d%H%M%S%f, shared by all files of one node call
    min_max: bool  # `_min_max.npy` appendix file: only [min, max] survives

    @property
    def key(self) -> str:
        """The node key, as `_fx_tensor_name` in the graph carries it (before `.OUTPUT.{i}`)."""
        return f"{self.node}-{self.target}"


def parse_fx_file_name(name: str) -> FxFileName:
    """Split an FX dump file's base name into its parts; NameParseError if it is not one."""
    match = _FX_FILE_NAME.fullmatch(name)
    if match is None:
        raise NameParseError(
            name, "not an FX dump file name ({node}-{target}.INPUT|OUTPUT.{i}[.{j}].{timestamp}[_min_max].npy)"
        )
    node, dash, target = match["key"].partition("-")
    if not dash or not node or not target:
        raise NameParseError(name, "FX dump file name without a '{node}-{target}' key")
    is_input = match["input_index"] is not None
    sub_index = match["sub_index"]
    return FxFileName(
        node=node,
        target=target,
        io=IO.INPUT if is_input else IO.OUTPUT,
        index=int(match["input_index"] if is_input else match["output_index"]),
        sub_index=int(sub_index) if sub_index is not None else None,
        timestamp=match["timestamp"],
        min_max=match["min_max"] is not None,
    )


# ----------------------------------------------------------------------------------------------------------------
# .npy header and completeness

_MAGIC_PREFIX = b"\x93NUMPY"
_MAGIC_LENGTH = len(_MAGIC_PREFIX) + 2  # + major, minor version bytes
# version -> struct format of the header-length field that follows the magic
_HEADER_LENGTH_FORMATS = {(1, 0): "<H", (2, 0): "<I", (3, 0): "<I"}


@dataclass(frozen=True)
class NpyHeader:
    dtype: np.dtype
    shape: tuple[int, ...]
    fortran_order: bool
    data_offset: int  # where the payload starts
    data_nbytes: Optional[int]  # exact payload size; None for object arrays (a pickle of unknown length)


def read_npy_header(path: PathLike) -> NpyHeader:
    """Parse the header with numpy.lib.format's readers.

    DumpIncomplete if the file ends inside the header (the writer has not finished it); DumpCorrupt if the bytes
    are not an .npy header at all.
    """
    path = _as_path(path)
    with open(path, "rb") as fp:
        size = os.fstat(fp.fileno()).st_size
        return _read_header(fp, size, path)


def parse_npy_header(fp, size: int, path: Path) -> NpyHeader:
    """The header of .npy bytes `fp` holds (`size` of them), checked as `read_npy_header` checks a file's."""
    return _read_header(fp, size, path)


def _as_path(path: PathLike) -> Path:
    return path if isinstance(path, Path) else Path(path)  # Path(a_path) parses the whole path again


def _read_header(fp, size: int, path: Path) -> NpyHeader:
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
    path = _as_path(path)
    with open(path, "rb") as fp:
        size = os.fstat(fp.fileno()).st_size
        try:
            header = _read_header(fp, size, path)
        except DumpIncomplete:
            return Completeness.INCOMPLETE
        except DumpCorrupt:
            return Completeness.CORRUPT
        return _payload_completeness(fp, header, size)


def _payload_completeness(fp, header: NpyHeader, size: int) -> Completeness:
    if header.data_nbytes is not None:
        expected = header.data_offset + header.data_nbytes
        if size == expected:
            return Completeness.COMPLETE
        return Completeness.INCOMPLETE if size < expected else Completeness.CORRUPT
    return scan_pickle(fp, header.data_offset, size, keep_opcodes=False).completeness


# ----------------------------------------------------------------------------------------------------------------
# Values


@dataclass(frozen=True)
class FxValue:
    """What an FX .npy file holds. `kind` is one of TensorKind's FX kinds: TENSOR; SCALAR (0-d numeric: an
    int/float/bool arg); NONE (an arg that was None); STRING (a string arg, or torchair's `np.array(f"{x}")`
    fallback); OBJECT (anything else a pickle held: torch.dtype, lists with None, …, described in `text`)."""

    kind: TensorKind
    array: Optional[np.ndarray]  # TENSOR (memory-mapped, lazy), SCALAR (0-d), STRING (string arrays); else None
    text: Optional[str]  # short human-readable value for everything but TENSOR


_NUMERIC_KINDS = "biufc"


def read_fx_value(path: PathLike) -> FxValue:
    """Read one FX dump file. DumpIncomplete / DumpCorrupt when its size does not match its header."""
    path = _as_path(path)
    with open(path, "rb", buffering=0) as raw:
        size = os.fstat(raw.fileno()).st_size
        # a small file in one read (the usual activation: tens of KB); its header and payload are then parsed from
        # memory instead of with five reads and a seek, each a syscall; a big one buffered (a pickle is scanned in
        # small reads), its payload mapped
        fp = io.BytesIO(raw.read(size)) if size < MMAP_THRESHOLD else io.BufferedReader(raw)
        header = _read_header(fp, size, path)
        if header.dtype.hasobject:
            scan = scan_pickle(fp, header.data_offset, size, keep_opcodes=True)
            _raise_unless_complete(scan.completeness, path)
            return _describe_object_array(scan)
        _raise_unless_complete(_payload_completeness(fp, header, size), path)
        return _read_plain_array(fp, path, header)


def _raise_unless_complete(state: Completeness, path: Path) -> None:
    if state is Completeness.INCOMPLETE:
        raise DumpIncomplete(path, "file is shorter than its .npy header promises")
    if state is Completeness.CORRUPT:
        raise DumpCorrupt(path, "file size does not match its .npy header")


def _read_plain_array(fp, path: Path, header: NpyHeader) -> FxValue:
    """The payload as an array, from the header already parsed (np.load would parse it again). Big payloads
    are memory-mapped (lazy); small ones read with one call."""
    order: Literal["C", "F"] = "F" if header.fortran_order else "C"
    count = math.prod(header.shape)
    array: np.ndarray
    if header.data_nbytes and header.data_nbytes >= MMAP_THRESHOLD:
        array = np.memmap(path, header.dtype, mode="r", offset=header.data_offset, shape=header.shape, order=order)
    else:
        # readinto a new array: np.fromfile on a Python file object dups the descriptor and costs more than the read
        flat = np.empty(count, dtype=header.dtype)
        if header.data_nbytes:
            fp.seek(header.data_offset)
            if fp.readinto(flat.view(np.uint8)) != header.data_nbytes:
                raise DumpIncomplete(path, "file shrank while being read")
        array = flat.reshape(header.shape, order=order)
    kind = header.dtype.kind
    if kind in ("U", "S"):
        return FxValue(TensorKind.STRING, array, _string_text(array))
    if array.ndim == 0 and kind in _NUMERIC_KINDS:
        scalar = np.array(array)  # detach from the mapping: a 0-d value is tiny
        return FxValue(TensorKind.SCALAR, scalar, clip(repr(scalar.item())))
    return FxValue(TensorKind.TENSOR, array, None)


def _string_text(array: np.ndarray) -> str:
    if array.ndim == 0:
        value = array.item()
        return clip(value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value))
    return clip(repr(array.tolist()) if array.size <= 16 else f"string array of shape {array.shape}")


def _describe_object_array(scan: PickleScan) -> FxValue:
    if scan.truncated:
        return FxValue(TensorKind.OBJECT, None, "large object array (not described)")
    try:
        root = SymbolicUnpickler().run(scan.opcodes)
    except (Undescribable, IndexError, KeyError, TypeError, ValueError):
        return FxValue(TensorKind.OBJECT, None, "object array with an unrecognised pickle payload")
    parts = numpy_array_parts(root)
    if parts is None:
        return FxValue(TensorKind.OBJECT, None, clip(describe(root)))
    shape, elements = parts
    if shape == () and len(elements) == 1:
        return _single_value(elements[0])
    prefix = "" if len(shape) == 1 else f"shape {shape}: "
    return FxValue(TensorKind.OBJECT, None, clip(prefix + describe(elements)))


def _single_value(value: object) -> FxValue:
    if value is None:
        return FxValue(TensorKind.NONE, None, "None")
    if isinstance(value, (bool, int, float, complex)):
        return FxValue(TensorKind.SCALAR, np.array(value), clip(repr(value)))
    if isinstance(value, str):
        return FxValue(TensorKind.STRING, None, clip(value))
    return FxValue(TensorKind.OBJECT, None, clip(describe(value)))
