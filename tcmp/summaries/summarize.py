"""One-pass tensor summaries: numel, min, max, mean, L2 norm, NaN/inf counts and the CRC-32 of the canonical bytes.

The canonical bytes of a tensor are what `tcmp parse` writes: its ND values, C order, little-endian, in the dump's
own dtype, except that bf16, float8, HiFloat8, E8M0 and sub-byte types are exactly widened to float32. So a GE
bf16 tensor and torchair's FX dump of it (saved as float32) hash the same when their values agree.

Speed matters (the daemon condenses hundreds of GB): tensors are walked in chunks that stay in the L2 cache, and
each float chunk is reduced to its moments by an `Engine` (`moments.COMPILED`, the default, or `moments.NUMPY`),
float16 and float32 directly, other float types widened to float32 first. Chunk results
are accumulated in Python floats (float64). NaN and inf are never counted per element on the fast path: they make
the chunk's moments non-finite, and only such chunks take an exact slow pass. The CRC-32 of float16/float32
tensors is taken chunk by chunk too, while each chunk is in the cache; where the CPU allows, the compiled engine
instead takes a whole float16/float32 tensor in one fused pass that yields its moments and its CRC-32.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from tcmp.schemas.dtypes import dtype_name, to_float32
from tcmp.schemas.dump_records import IO, FileSummary, Summary, TensorKind, TensorSummary
from tcmp.schemas.dump_tree import DumpFile, FileKind
from tcmp.schemas.ffts import ffts_attr_text
from tcmp.schemas.formats import PLAIN_FORMATS, format_name
from tcmp.schemas.fx_dump import FxFileName, read_fx_value
from tcmp.schemas.ge_dump import NOT_DUMPED, open_ge_dump
from tcmp.schemas.ge_header import GeTensor
from tcmp.schemas.ge_names import GeFileName
from tcmp.schemas.narrow_floats import is_narrow_float
from tcmp.schemas.stats_files import SummaryTensor, read_fx_min_max_npy, read_ge_min_max_npz, read_stats_csv
from tcmp.schemas.torch_save import read_torch_save
from tcmp.summaries.moments import COMPILED, Engine, numpy_moments

try:  # python-isal: the same CRC-32 as zlib, 5x faster
    from isal.isal_zlib import crc32
except ImportError:  # pragma: no cover - isal is a dependency; zlib keeps tcmp working without it
    crc32 = zlib.crc32

# float32 squares under ~1e-38 underflow; a chunk's lost part is then below 64K * 1.2e-38 ~ 1e-33, which is
# negligible against any sum of squares over this threshold; smaller sums are redone in float64
_TINY_SQUARES = 1e-20
CHUNK = 1 << 16  # elements per chunk: 256 KiB of float32, within the 512 KiB L2 of a core
_OWN_BYTES_CANONICAL = (np.dtype("<f2"), np.dtype("<f4"))


@dataclass
class _Accumulator:
    numel: int = 0
    finite_min: float = math.inf
    finite_max: float = -math.inf
    total: float = 0.0
    squares: float = 0.0
    nan: int = 0
    pos_inf: int = 0
    neg_inf: int = 0
    engine: Engine = COMPILED

    def add_finite(self, numel: int, low: float, high: float, total: float, squares: float) -> None:
        """A chunk known to hold finite values only."""
        self.numel += numel
        self.finite_min = min(self.finite_min, low)
        self.finite_max = max(self.finite_max, high)
        self.total += total
        self.squares += squares

    def add_float_chunk(self, chunk: np.ndarray) -> None:
        """A 1-D float32 or float64 chunk."""
        moments = self.engine.float32 if chunk.dtype == np.float32 else numpy_moments
        low, high, total, squares = moments(chunk)
        if not (math.isfinite(total) and math.isfinite(squares)):
            self.add_exact(chunk)
            return
        if squares < _TINY_SQUARES and (low or high):
            squares = float(np.dot(chunk.astype(np.float64), chunk.astype(np.float64)))
        self.add_finite(chunk.size, low, high, total, squares)

    def add_exact(self, chunk: np.ndarray) -> None:
        """Rare: NaN or inf in this chunk (or an overflow of a float32 sum): count them, sum the rest in float64."""
        self.numel += chunk.size
        nan = np.isnan(chunk)
        inf = np.isinf(chunk)
        self.nan += int(nan.sum())
        self.pos_inf += int((inf & (chunk > 0)).sum())
        self.neg_inf += int((inf & (chunk < 0)).sum())
        finite = chunk[~(nan | inf)].astype(np.float64)
        if finite.size:
            self.finite_min = min(self.finite_min, float(finite.min()))
            self.finite_max = max(self.finite_max, float(finite.max()))
            self.total += float(finite.sum())
            self.squares += float(np.dot(finite, finite))

    def summary(self, crc: Optional[int]) -> Summary:
        if self.numel == 0:
            return Summary(numel=0, min=None, max=None, mean=None, l2norm=None, nan_count=0, inf_count=0, crc32=crc)
        valid = self.numel - self.nan
        low = -math.inf if self.neg_inf else self.finite_min
        high = math.inf if self.pos_inf else self.finite_max
        mean: Optional[float]
        if self.pos_inf and self.neg_inf:
            mean = math.nan  # inf + -inf
        elif self.pos_inf or self.neg_inf:
            mean = math.inf if self.pos_inf else -math.inf
        else:
            mean = self.total / valid if valid else None
        l2 = math.inf if (self.pos_inf or self.neg_inf) else math.sqrt(self.squares)
        return Summary(
            numel=self.numel,
            min=low if valid else None,
            max=high if valid else None,
            mean=mean if valid else None,
            l2norm=l2 if valid else None,
            nan_count=self.nan,
            inf_count=self.pos_inf + self.neg_inf,
            crc32=crc,
        )


class _RunningCrc:
    """The CRC-32 of float16/float32 tensors, whose own bytes are canonical, taken chunk by chunk while each chunk
    is in the cache for its moments (one pass over memory instead of two: +35 % throughput with COMPILED)."""

    def __init__(self) -> None:
        self.value = 0

    def add(self, chunk: np.ndarray) -> None:
        self.value = crc32(chunk, self.value)


def _chunks(flat: np.ndarray, size: int, copy_unaligned: bool) -> Iterator[tuple[int, np.ndarray]]:
    """(start, chunk) of `size` elements. GE payloads sit at arbitrary file offsets and numpy's loops over
    unaligned data run at a third of their speed, so with `copy_unaligned` unaligned chunks are first copied into
    one aligned buffer (a cheap copy within the cache); a chunk is only valid until the next one is taken."""
    aligned = None if flat.flags.aligned or not copy_unaligned else np.empty(min(size, flat.size), dtype=flat.dtype)
    for start in range(0, flat.size, size):
        chunk = flat[start : start + size]
        if aligned is not None:
            np.copyto(aligned[: chunk.size], chunk)
            chunk = aligned[: chunk.size]
        yield start, chunk


def _summarize_float16(flat: np.ndarray, acc: _Accumulator, crc: Optional[_RunningCrc]) -> None:
    if crc is not None and acc.engine.float16_summary is not None:
        low, high, total, squares, crc.value = acc.engine.float16_summary(flat.view(np.int16))
        if not math.isnan(total):
            acc.add_finite(flat.size, low, high, total, squares)
            return
        crc = None  # inf or NaN codes: the moments again, chunk by chunk
    size = acc.engine.float16_chunk
    for start, codes in _chunks(flat.view(np.int16), size, not acc.engine.reads_unaligned):
        if crc is not None:
            crc.add(codes)
        low, high, total, squares = acc.engine.float16(codes)
        if math.isnan(total):  # inf or NaN codes
            acc.add_exact(flat[start : start + size].astype(np.float32))
        else:
            acc.add_finite(codes.size, low, high, total, squares)


def _summarize_float32(flat: np.ndarray, acc: _Accumulator, crc: Optional[_RunningCrc]) -> None:
    if crc is not None and acc.engine.float32_summary is not None:
        low, high, total, squares, crc.value = acc.engine.float32_summary(flat)
        if math.isfinite(total) and math.isfinite(squares) and not (squares < _TINY_SQUARES and (low or high)):
            acc.add_finite(flat.size, low, high, total, squares)
            return
        crc = None  # rare (NaN, inf, a float32 overflow or tiny values): the moments again, chunk by chunk
    for _, chunk in _chunks(flat, CHUNK, not acc.engine.reads_unaligned):
        if crc is not None:
            crc.add(chunk)
        acc.add_float_chunk(chunk)


def _summarize_widened(flat: np.ndarray, acc: _Accumulator, widen: Callable[[np.ndarray], np.ndarray]) -> None:
    for _, chunk in _chunks(flat, CHUNK, copy_unaligned=True):
        acc.add_float_chunk(widen(chunk))


def _summarize_integers(flat: np.ndarray, acc: _Accumulator) -> None:
    for start in range(0, flat.size, CHUNK):
        chunk = flat[start : start + CHUNK]
        acc.numel += chunk.size
        acc.finite_min = min(acc.finite_min, float(chunk.min()))
        acc.finite_max = max(acc.finite_max, float(chunk.max()))
        as_float = chunk.astype(np.float64)
        acc.total += float(as_float.sum())
        acc.squares += float(np.dot(as_float, as_float))


def canonical(array: np.ndarray) -> np.ndarray:
    """The array whose bytes define a tensor's CRC-32: exact float32 for ml_dtypes types, else itself, C order,
    little-endian."""
    widened = to_float32(array)
    if widened.dtype.byteorder == ">":
        widened = widened.astype(widened.dtype.newbyteorder("<"))
    return np.ascontiguousarray(widened)


def crc32_of(array: np.ndarray) -> int:
    data = canonical(array)
    # numpy declares ndarray.__buffer__ (the Buffer protocol) for Python 3.12+ only
    return crc32(memoryview(data).cast("B") if data.size else b"") & 0xFFFFFFFF  # type: ignore[arg-type]


def summarize(array: np.ndarray, *, with_crc: bool = True, engine: Engine = COMPILED) -> Summary:
    """Summary of one tensor in its own dtype (see the module docstring). Complex tensors are summarized by
    magnitude; raw byte payloads should not be passed (their summary has no meaning)."""
    array = np.asarray(array)
    if array.dtype.byteorder == ">":  # a big-endian .npy: its values, in the byte order the canonical bytes use
        array = array.astype(array.dtype.newbyteorder("<"))
    flat = np.ascontiguousarray(array).reshape(-1)  # C order, as the canonical bytes; strided views copied
    running = _RunningCrc() if with_crc and flat.dtype in _OWN_BYTES_CANONICAL else None
    crc = crc32_of(array) if with_crc and running is None else None
    acc = _Accumulator(engine=engine)
    if flat.size == 0:
        return acc.summary(crc32(b"") if with_crc else None)
    kind = flat.dtype.kind
    # a float32 sum or dot that overflows is expected: the chunk then takes the exact float64 path, without a warning
    with np.errstate(over="ignore", invalid="ignore"):
        if flat.dtype == np.float16:
            _summarize_float16(flat, acc, running)
        elif flat.dtype == np.float32:
            _summarize_float32(flat, acc, running)
        elif flat.dtype == np.float64:
            _summarize_widened(flat, acc, lambda c: c)
        elif is_narrow_float(flat.dtype):
            _summarize_widened(flat, acc, to_float32)
        elif kind == "c":
            _summarize_widened(flat, acc, np.abs)
        elif kind == "b":
            _summarize_integers(flat.astype(np.uint8), acc)
        elif kind in "iu":
            _summarize_integers(flat, acc)
        else:
            raise TypeError(f"cannot summarize a {flat.dtype} array")
    return acc.summary(running.value if running is not None else crc)


def _not_dumped(tensor: GeTensor) -> TensorSummary:
    """A tensor the writer skipped: what the header says of it, no summary, and why."""
    return TensorSummary(
        io=tensor.io,
        index=tensor.index,
        sub_index=None,
        kind=TensorKind.NOT_DUMPED,
        dtype=tensor.dtype_name,
        shape=tensor.nd_shape,
        summary=None,
        device_format=tensor.format_name,
        device_shape=tensor.shape,
        notes=(NOT_DUMPED,),
        original_op=_original_op(tensor),
    )


def _original_op(tensor: GeTensor) -> Optional[tuple[str, int]]:
    op = tensor.original_op
    return (op.name, op.output_index) if op is not None else None


def _ge_binary(file: DumpFile, engine: Engine) -> FileSummary:
    with open_ge_dump(file.path) as reader:
        dump = reader.dump
        tensors = []
        for tensor in dump.tensors:
            if not tensor.dumped:
                tensors.append(_not_dumped(tensor))
                continue
            loaded = reader.load(tensor)
            raw = loaded.raw
            summary = (
                Summary(None, None, None, crc32=crc32_of(loaded.array))
                if raw
                else summarize(loaded.array, engine=engine)
            )
            tensors.append(
                TensorSummary(
                    io=tensor.io,
                    index=tensor.index,
                    sub_index=None,
                    kind=TensorKind.RAW if raw else TensorKind.TENSOR,
                    dtype=tensor.dtype_name,
                    shape=tuple(loaded.array.shape),
                    summary=summary,
                    device_format=tensor.format_name,
                    device_shape=tensor.shape,
                    notes=loaded.notes,
                    original_op=_original_op(tensor),
                )
            )
    slicing = ffts_attr_text(dump) if isinstance(file.name, GeFileName) and file.name.ffts is not None else None
    return FileSummary(
        file.path, dump.op_name or file.op_name, dump.dump_time or file.timestamp, tuple(tensors), slicing
    )


def _from_summary_tensor(item: SummaryTensor, kind: TensorKind) -> TensorSummary:
    # a stats CSV's Shape is the dump header's device shape: the ND shape only where the format is a plain layout
    device_layout = item.format is not None and item.format not in PLAIN_FORMATS
    return TensorSummary(
        io=item.io,
        index=item.index,
        sub_index=None,
        kind=kind,
        dtype=dtype_name(item.dtype) if item.dtype is not None else None,
        shape=None if device_layout else item.shape,
        summary=item.summary,
        device_format=format_name(item.format) if item.format is not None else None,
        device_shape=item.shape if device_layout else None,
    )


def _fx(file: DumpFile, engine: Engine) -> FileSummary:
    name = file.name
    assert isinstance(name, FxFileName)
    summary: Optional[Summary]
    if name.min_max:
        summary = read_fx_min_max_npy(file.path)
        tensor = TensorSummary(name.io, name.index, name.sub_index, TensorKind.MIN_MAX, None, None, summary)
        return FileSummary(file.path, name.node, file.timestamp, (tensor,))
    value = read_fx_value(file.path)
    array = value.array
    kind = value.kind
    numeric = array is not None and array.dtype.kind in "biufc"
    summary = summarize(array, engine=engine) if numeric and array is not None else None
    tensor = TensorSummary(
        io=name.io,
        index=name.index,
        sub_index=name.sub_index,
        kind=kind,
        dtype=str(array.dtype) if array is not None else None,
        shape=tuple(array.shape) if array is not None else None,
        summary=summary,
        notes=() if value.text is None or kind is TensorKind.SCALAR else (value.text,),
        elements=_stacked_elements(array, summary, engine)
        if name.io is IO.OUTPUT and numeric and array is not None
        else (),
    )
    return FileSummary(file.path, name.node, file.timestamp, (tensor,))


# An FX output file stacks a list output along its leading dimension (tcmp.compare.match.fx pairs `OUTPUT.1.0`
# with element 0 of `OUTPUT.1`); whether a file is one only the graph says, so every output whose leading
# dimension is short enough to be a list gets its elements summarized. The bound keeps the index small.
MAX_STACKED_ELEMENTS = 64


def _stacked_elements(array: np.ndarray, whole: Optional[Summary], engine: Engine) -> tuple[Summary, ...]:
    if array.ndim == 0 or not 0 < array.shape[0] <= MAX_STACKED_ELEMENTS or whole is None:
        return ()
    if array.shape[0] == 1:  # the one element is the whole file's bytes: the same summary
        return (whole,)
    return tuple(summarize(array[k], engine=engine) for k in range(array.shape[0]))


def _acl(file: DumpFile, engine: Engine) -> FileSummary:
    """An aclgraph `.pt`: its tensor (a saved list: each, as outputs 0, 1, …), dtype named as GE names it."""
    saved = read_torch_save(file.path)
    tensors = tuple(
        TensorSummary(IO.OUTPUT, k, None, TensorKind.TENSOR, dtype_name(t.data_type), t.shape,
                      summarize(t.values, engine=engine))
        for k, t in enumerate(saved.tensors)
    )  # fmt: skip
    return FileSummary(file.path, file.op_name, None, tensors)


def summarize_file(file: DumpFile, *, engine: Engine = COMPILED) -> FileSummary:
    """Summaries of every tensor of one dump file, whatever its kind (raises DumpError subclasses)."""
    if file.kind is FileKind.GE_BINARY:
        return _ge_binary(file, engine)
    if file.kind is FileKind.GE_STATS_CSV:
        tensors = tuple(_from_summary_tensor(r, TensorKind.STATS) for r in read_stats_csv(file.path))
        return FileSummary(file.path, file.op_name, file.timestamp, tensors)
    if file.kind is FileKind.GE_MIN_MAX_NPZ:
        inputs, outputs = read_ge_min_max_npz(file.path)
        tensors = tuple(_from_summary_tensor(r, TensorKind.MIN_MAX) for r in inputs + outputs)
        return FileSummary(file.path, file.op_name, file.timestamp, tensors)
    if file.kind in (FileKind.FX_NPY, FileKind.FX_MIN_MAX_NPY):
        return _fx(file, engine)
    if file.kind is FileKind.ACL_PT:
        return _acl(file, engine)
    raise ValueError(f"{file.path}: a {file.kind.value} file holds no tensors")
