"""Reader for torchair's FX dump files: `np.save` output named `{node}-{target}.INPUT|OUTPUT.{i}[.{j}].{ts}.npy`.

docs/formats.md, "FX file contents": tensors are plain `.npy` (bf16 already upcast to float32 by torchair); non-tensor
args go through `np.array(x)`, which gives 0-d numeric arrays, string arrays, or *object* arrays (e.g. for None) whose
payload is a pickle. Object payloads are never unpickled (unpickling runs arbitrary code): `pickle_scan` walks
their opcodes and describes what they hold.
"""

from __future__ import annotations

import io
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional, Union

import numpy as np

from tcmp.schemas import MMAP_THRESHOLD, SLOTS
from tcmp.schemas.dump_records import IO, Completeness, TensorKind
from tcmp.schemas.errors import DumpCorrupt, DumpIncomplete, NameParseError
from tcmp.schemas.npy_header import (
    NpyHeader,
    as_path,
    npy_completeness,
    parse_npy_header,
    payload_completeness,
    read_npy_header,
)
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


def read_fx_value(path: PathLike, header: Optional[NpyHeader] = None) -> FxValue:
    """Read one FX dump file. DumpIncomplete / DumpCorrupt when its size does not match its header. `header`: the
    file's header as read before (by the matcher), not parsed again."""
    path = as_path(path)
    if header is not None and _small_numeric(header):
        return _read_known_payload(path, header)
    with open(path, "rb", buffering=0) as raw:
        size = os.fstat(raw.fileno()).st_size
        # a small file in one read (the usual activation: tens of KB); its header and payload are then parsed from
        # memory instead of with five reads and a seek, each a syscall; a big one buffered (a pickle is scanned in
        # small reads), its payload mapped
        fp = io.BytesIO(raw.read(size)) if size < MMAP_THRESHOLD else io.BufferedReader(raw)
        header = parse_npy_header(fp, size, path)
        if header.dtype.hasobject:
            scan = scan_pickle(fp, header.data_offset, size, keep_opcodes=True)
            _raise_unless_complete(scan.completeness, path)
            return _describe_object_array(scan)
        _raise_unless_complete(payload_completeness(fp, header, size), path)
        return _read_plain_array(fp, path, header)


_PREADV = hasattr(os, "preadv")


def _small_numeric(header: NpyHeader) -> bool:
    """A payload `_read_known_payload` reads: numbers, below the size that is mapped instead."""
    small = header.data_nbytes is not None and header.data_nbytes < MMAP_THRESHOLD
    return _PREADV and small and header.dtype.kind in _NUMERIC_KINDS and header.dtype.itemsize > 0


def _read_known_payload(path: Path, header: NpyHeader) -> FxValue:
    """A small numeric payload after a header already read: one open and one read into the array, with a byte
    beyond it, so that the length read tells what the file size would (shorter: cut; longer: corrupt)."""
    assert header.data_nbytes is not None
    flat = np.empty(math.prod(header.shape), dtype=header.dtype)
    beyond = bytearray(1)
    fd = os.open(path, os.O_RDONLY)
    try:
        got = os.preadv(fd, [flat.view(np.uint8).data, beyond], header.data_offset)
    finally:
        os.close(fd)
    if got != header.data_nbytes:
        state = Completeness.INCOMPLETE if got < header.data_nbytes else Completeness.CORRUPT
        _raise_unless_complete(state, path)
    return _value_of(flat.reshape(header.shape, order="F" if header.fortran_order else "C"), header.dtype.kind)


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
    return _value_of(array, header.dtype.kind)


def _value_of(array: np.ndarray, kind: str) -> FxValue:
    """What a file's array is, by its dtype kind."""
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
