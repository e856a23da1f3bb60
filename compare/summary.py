"""One-pass tensor summaries: numel, min, max, mean, L2 norm, NaN/inf counts and the CRC-32 of the canonical bytes.

The canonical bytes of a tensor are what `tcmp parse` writes: its ND values, C order, little-endian, in the dump's
own dtype, except that bf16, float8, HiFloat8, E8M0 and sub-byte types are exactly widened to float32. So a GE
bf16 tensor and torchair's FX dump of it (saved as float32) hash the same when their values agree.

Speed matters (the daemon condenses hundreds of GB): tensors are walked in chunks that stay in the L2 cache, each
chunk converted once to float32 (fp16 by a bit-level widening that numpy vectorizes, instead of numpy's scalar
fp16 loops), reduced with numpy's vectorized min / max / sum / dot and accumulated in Python floats (float64).
NaN and inf are never counted per element on the fast path: they make the chunk's sum or sum of squares
non-finite, and only such chunks take a slow pass.
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Callable, Optional

import ml_dtypes
import numpy as np

from tcmp.schemas.dtypes import dtype_name, to_float32
from tcmp.schemas.formats import format_name
from tcmp.schemas.fx_dump import FxFileName, FxValueKind, read_fx_value
from tcmp.schemas.ge_dump import open_ge_dump
from tcmp.schemas.layout import DumpFile, FileKind
from tcmp.schemas.records import FileSummary, Summary, TensorKind, TensorSummary
from tcmp.schemas.stats_files import SummaryTensor, read_fx_min_max_npy, read_ge_min_max_npz, read_stats_csv

try:  # python-isal: the same CRC-32 as zlib, 5x faster
    from isal.isal_zlib import crc32 as _crc32
except ImportError:  # pragma: no cover - isal is a dependency; zlib keeps tcmp working without it
    _crc32 = zlib.crc32

_TINY_SQUARES = 1e-30  # below this a float32 dot may have lost squares of values under ~1e-19 to underflow
CHUNK = 1 << 16  # elements per chunk: 256 KiB of float32, resident in a 1 MiB L2
# float16 chunks are larger: each one costs ~8 numpy calls plus Python bookkeeping, and per-call overhead, not
# memory traffic, limits the fp16 path (measured: 1.2 GB/s at 64K elements, 1.5 GB/s at 256K on x86 with 1 MiB L2)
F16_CHUNK = 1 << 18
_F16_TO_F32_SCALE = np.float32(2.0**112)  # rebias a float16 exponent moved into float32 position
_F16_SIGN = 0x8000
_F16_NONFINITE = 0x7C00  # magnitude codes from here up are inf (0x7C00) and NaN
_F16_SIGN_AND_BODY = np.int32(-0x70000001)  # 0x8FFFFFFF as int32
_HALF, _HALF_CODE = struct.Struct("<e"), struct.Struct("<H")
_BF16 = np.dtype(ml_dtypes.bfloat16)


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

    def add_float_chunk(self, chunk: np.ndarray, low: Optional[float] = None, high: Optional[float] = None) -> None:
        """A float32/float64 chunk (`low`/`high`: its min and max, when the caller has them already)."""
        self.numel += chunk.size
        total = float(chunk.sum())
        squares = float(np.dot(chunk, chunk))
        if squares < _TINY_SQUARES and chunk.dtype == np.float32 and chunk.any():
            squares = float(np.dot(chunk.astype(np.float64), chunk.astype(np.float64)))  # float32 squares underflow
        if math.isfinite(total) and math.isfinite(squares):
            self.finite_min = min(self.finite_min, float(chunk.min()) if low is None else low)
            self.finite_max = max(self.finite_max, float(chunk.max()) if high is None else high)
            self.total += total
            self.squares += squares
            return
        # rare: NaN or inf in this chunk (or an overflow of the float32 sum) -> exact slow pass
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


def _f16_to_f32(chunk_i16: np.ndarray, out: np.ndarray) -> np.ndarray:
    """float16 -> float32 in three vectorized passes, instead of numpy's scalar float16 cast: sign-extending the
    16 bits to int32 and shifting them left by 13 puts the sign at bit 31 (bits 30..28 get copies of it, which
    the mask clears) and exponent + mantissa at bits 27..13, float32's layout with an exponent 112 too small;
    multiplying by 2**112 rebiases it, exactly for normals and subnormals. inf/NaN codes would come out as large
    finite numbers, so the caller never passes chunks holding them."""
    bits = out[: chunk_i16.size]
    np.left_shift(chunk_i16, 13, out=bits, dtype=np.int32)
    np.bitwise_and(bits, _F16_SIGN_AND_BODY, out=bits)
    result = bits.view(np.float32)
    np.multiply(result, _F16_TO_F32_SCALE, out=result)
    return result


def _f16_value(code: int) -> float:
    return _HALF.unpack(_HALF_CODE.pack(code))[0]


def _summarize_float16(flat: np.ndarray, acc: _Accumulator) -> None:
    """min and max come from the raw codes, which is cheaper than float reductions: float16 is sign + magnitude,
    so the largest code read as uint16 is the most negative value whenever any value is negative, and the largest
    code read as int16 is the largest value whenever any value is non-negative. The same two maxima tell exactly
    whether the chunk holds inf/NaN (magnitude bits >= 0x7C00); such chunks take the exact slow path."""
    out = np.empty(min(F16_CHUNK, flat.size), dtype=np.int32)
    for start, chunk_signed in _aligned_chunks(flat.view(np.int16), F16_CHUNK):
        chunk_unsigned = chunk_signed.view(np.uint16)
        top_unsigned, top_signed = int(chunk_unsigned.max()), int(chunk_signed.max())
        if top_unsigned >= _F16_SIGN | _F16_NONFINITE or top_signed >= _F16_NONFINITE:
            acc.add_float_chunk(flat[start : start + F16_CHUNK].astype(np.float32))
            continue
        has_negative, has_non_negative = top_unsigned >= _F16_SIGN, top_signed >= 0
        smallest_magnitude = None if has_negative and has_non_negative else int(chunk_unsigned.min())
        low = top_unsigned if has_negative else smallest_magnitude
        high = top_signed if has_non_negative else smallest_magnitude
        acc.add_float_chunk(_f16_to_f32(chunk_signed, out), _f16_value(low), _f16_value(high))


def _aligned_chunks(flat: np.ndarray, size: int) -> Iterator[tuple[int, np.ndarray]]:
    """(start, chunk) of `size` elements. GE payloads sit at arbitrary file offsets and numpy's loops over
    unaligned data run at a third of their speed, so unaligned chunks are first copied into one aligned buffer
    (a cheap copy within the cache); the chunk is only valid until the next one is taken."""
    aligned = None if flat.flags.aligned else np.empty(min(size, flat.size), dtype=flat.dtype)
    for start in range(0, flat.size, size):
        chunk = flat[start : start + size]
        if aligned is not None:
            np.copyto(aligned[: chunk.size], chunk)
            chunk = aligned[: chunk.size]
        yield start, chunk


def _summarize_widened(flat: np.ndarray, acc: _Accumulator, widen: Callable[[np.ndarray], np.ndarray]) -> None:
    for _, chunk in _aligned_chunks(flat, CHUNK):
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
    return _crc32(memoryview(data).cast("B") if data.size else b"") & 0xFFFFFFFF


def summarize(array: np.ndarray, *, with_crc: bool = True) -> Summary:
    """Summary of one tensor in its own dtype (see the module docstring). Complex tensors are summarized by
    magnitude; raw byte payloads should not be passed (their summary has no meaning)."""
    array = np.asarray(array)
    crc = crc32_of(array) if with_crc else None
    flat = array.reshape(-1)
    acc = _Accumulator()
    if flat.size == 0:
        return acc.summary(crc)
    kind = flat.dtype.kind
    # a float32 sum or dot that overflows is expected: the chunk then takes the exact float64 path, without a warning
    with np.errstate(over="ignore", invalid="ignore"):
        if flat.dtype == np.float16:
            _summarize_float16(flat, acc)
        elif flat.dtype == np.float32 or flat.dtype == np.float64:
            _summarize_widened(flat, acc, lambda c: c)
        elif flat.dtype == _BF16 or flat.dtype.type.__module__.startswith("ml_dtypes"):
            _summarize_widened(flat, acc, to_float32)
        elif kind == "c":
            _summarize_widened(flat, acc, np.abs)
        elif kind == "b":
            _summarize_integers(flat.astype(np.uint8), acc)
        elif kind in "iu":
            _summarize_integers(flat, acc)
        else:
            raise TypeError(f"cannot summarize a {flat.dtype} array")
    return acc.summary(crc)


def _ge_binary(file: DumpFile) -> FileSummary:
    with open_ge_dump(file.path) as reader:
        dump = reader.dump
        tensors = []
        for tensor in dump.tensors:
            loaded = reader.load(tensor)
            raw = loaded.raw
            summary = Summary(None, None, None, crc32=crc32_of(loaded.array)) if raw else summarize(loaded.array)
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
                )
            )
    return FileSummary(file.path, dump.op_name or file.op_name, dump.dump_time or file.timestamp, tuple(tensors))


def _from_summary_tensor(item: SummaryTensor, kind: TensorKind) -> TensorSummary:
    return TensorSummary(
        io=item.io,
        index=item.index,
        sub_index=None,
        kind=kind,
        dtype=dtype_name(item.dtype) if item.dtype is not None else None,
        shape=item.shape,
        summary=item.summary,
        device_format=format_name(item.format) if item.format is not None else None,
    )


def _fx(file: DumpFile) -> FileSummary:
    name = file.name
    assert isinstance(name, FxFileName)
    if name.min_max:
        summary = read_fx_min_max_npy(file.path)
        tensor = TensorSummary(name.io, name.index, name.sub_index, TensorKind.MIN_MAX, None, None, summary)
        return FileSummary(file.path, name.node, file.timestamp, (tensor,))
    value = read_fx_value(file.path)
    array = value.array
    kind = _FX_KINDS[value.kind]
    numeric = array is not None and array.dtype.kind in "biufc"
    tensor = TensorSummary(
        io=name.io,
        index=name.index,
        sub_index=name.sub_index,
        kind=kind,
        dtype=str(array.dtype) if array is not None else None,
        shape=tuple(array.shape) if array is not None else None,
        summary=summarize(array) if numeric else None,
        notes=() if value.text is None or kind is TensorKind.SCALAR else (value.text,),
    )
    return FileSummary(file.path, name.node, file.timestamp, (tensor,))


_FX_KINDS = {
    FxValueKind.TENSOR: TensorKind.TENSOR,
    FxValueKind.SCALAR: TensorKind.SCALAR,
    FxValueKind.NONE: TensorKind.NONE,
    FxValueKind.STRING: TensorKind.STRING,
    FxValueKind.OBJECT: TensorKind.OBJECT,
}


def summarize_file(file: DumpFile) -> FileSummary:
    """Summaries of every tensor of one dump file, whatever its kind (raises DumpError subclasses)."""
    if file.kind is FileKind.GE_BINARY:
        return _ge_binary(file)
    if file.kind is FileKind.GE_STATS_CSV:
        tensors = tuple(_from_summary_tensor(r, TensorKind.STATS) for r in read_stats_csv(file.path))
        return FileSummary(file.path, file.op_name, file.timestamp, tensors)
    if file.kind is FileKind.GE_MIN_MAX_NPZ:
        inputs, outputs = read_ge_min_max_npz(file.path)
        tensors = tuple(_from_summary_tensor(r, TensorKind.MIN_MAX) for r in inputs + outputs)
        return FileSummary(file.path, file.op_name, file.timestamp, tensors)
    if file.kind in (FileKind.FX_NPY, FileKind.FX_MIN_MAX_NPY):
        return _fx(file)
    raise ValueError(f"{file.path}: a {file.kind.value} file holds no tensors")
