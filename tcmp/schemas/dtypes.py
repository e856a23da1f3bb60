"""GE dump data types (`OutputDataType`) and payload decoding (docs/formats.md, "dtypes").

GE dump payloads are little-endian. `decode_payload` turns the bytes of one tensor into a flat numpy array
without copying wherever numpy (or ml_dtypes, imported only when such a tensor is met: `narrow_floats`) has a
matching dtype; the rest is decoded with vectorized
numpy (lookup tables for 8-bit float formats, bit arithmetic for sub-byte integers). A dtype tcmp cannot
interpret never raises: its payload comes back as raw uint8 bytes with a note, so one odd tensor cannot make
a whole dump file unreadable.

Zero-copy results are views of the caller's buffer: they stay valid only while that buffer does (an mmap
cannot be closed while a view of it exists), and are read-only when the buffer is.
"""

from __future__ import annotations

import enum
import functools
import operator
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from tcmp.schemas import narrow_floats


class DataType(enum.IntEnum):
    """`OutputDataType` of the dump protobuf; GE's graph IR `DataType` uses the same numbers."""

    DT_UNDEFINED = 0
    DT_FLOAT = 1
    DT_FLOAT16 = 2
    DT_INT8 = 3
    DT_UINT8 = 4
    DT_INT16 = 5
    DT_UINT16 = 6
    DT_INT32 = 7
    DT_INT64 = 8
    DT_UINT32 = 9
    DT_UINT64 = 10
    DT_BOOL = 11
    DT_DOUBLE = 12
    DT_STRING = 13
    DT_DUAL_SUB_INT8 = 14
    DT_DUAL_SUB_UINT8 = 15
    DT_COMPLEX64 = 16
    DT_COMPLEX128 = 17
    DT_QINT8 = 18
    DT_QINT16 = 19
    DT_QINT32 = 20
    DT_QUINT8 = 21
    DT_QUINT16 = 22
    DT_RESOURCE = 23
    DT_STRING_REF = 24
    DT_DUAL = 25
    DT_VARIANT = 26
    DT_BF16 = 27
    DT_INT4 = 28
    DT_UINT1 = 29
    DT_INT2 = 30
    DT_UINT2 = 31
    DT_COMPLEX32 = 32
    DT_HIFLOAT8 = 33
    DT_FLOAT8_E5M2 = 34
    DT_FLOAT8_E4M3FN = 35
    DT_FLOAT8_E8M0 = 36
    DT_FLOAT6_E3M2 = 37
    DT_FLOAT6_E2M3 = 38
    DT_FLOAT4_E2M1 = 39
    DT_FLOAT4_E1M2 = 40
    DT_HIFLOAT4 = 41
    DT_HIFLOAT4_SCALE = 42


class PayloadTooShort(ValueError):
    """A tensor payload holds fewer bytes than its element count needs."""

    def __init__(self, code: int, numel: int, needed: int, available: int) -> None:
        self.code = code
        self.numel = numel
        self.needed = needed
        self.available = available
        shortfall = f"{numel} elements need {needed} bytes, only {available} available"
        super().__init__(f"{dtype_name(code)} payload too short: {shortfall}")


@dataclass(frozen=True)
class Decoded:
    """One decoded payload.

    `raw=True`: `array` is the whole payload as uint8 bytes, with no numeric meaning (its length is the
    payload length, not the element count). `note` says what the user should know about the decoding
    (unsupported dtype, unverified bit order or semantics); None when there is nothing to say.
    """

    array: np.ndarray
    raw: bool
    note: Optional[str]


@functools.lru_cache(maxsize=1024)  # asked per tensor, of a handful of codes
def dtype_name(code: int) -> str:
    """Name of a dtype code: "DT_FLOAT16" for 2, "DT_UNKNOWN(77)" for a number outside the table."""
    try:
        return DataType(code).name
    except ValueError:
        return f"DT_UNKNOWN({code})"


# ---------------------------------------------------------------------------------------------------------
# Lookup tables for the 8-bit float formats that have no numpy/ml_dtypes view.


def _e8m0_table() -> np.ndarray:
    """E8M0 (OCP MX scale): unsigned exponent only, value 2**(b - 127); 0xFF is NaN; no zero, no sign."""
    exponents = np.arange(256, dtype=np.int64) - 127
    table = np.ldexp(1.0, exponents)
    table[0xFF] = np.nan
    return table.astype(np.float32)  # 2**-127 becomes a float32 subnormal: still exact


def _hifloat8_table() -> np.ndarray:
    """HiFloat8 (Ascend HiF8): sign bit, then a prefix-coded "dot" field D that says how many exponent bits
    follow; the exponent is sign-magnitude with an implicit leading 1 (|E| = 2**(D-1) + low bits); the
    mantissa takes what is left. Tapered precision:

        bits 6..3 (dot)  D  exponent bits  mantissa bits  |E|
        11xx             4  4              1              8..15
        10xx             3  3              2              4..7
        01xx             2  2              3              2..3
        001x             1  1              3              1
        0001             0  0              3              0
        0000             denormal: value 2**(M - 23), M = bits 2..0 (M = 0 is zero), 2**-22 .. 2**-16

    Specials: 0x00 is zero (there is no -0), 0x80 is NaN, 0x6F / 0xEF are +inf / -inf (the would-be
    ±1.5 * 2**15). Identical, byte for byte, to the en_dtypes package's hifloat8, and to GE's own hif8_t
    decoder as read. The peer (msprobe 26.2.0) differs: it gives D = 0 and D = 1 a 5-D-bit mantissa
    (0x08 reads as 1.25, not 1.0) and reads 0xEF as +inf.
    """
    code = np.arange(256, dtype=np.int64)
    negative = (code & 0x80) != 0
    body = code & 0x7F
    dot = body >> 3  # bits 6..3
    dot_width = np.select([dot >= 12, dot >= 8, dot >= 4, dot >= 2, dot == 1], [4, 3, 2, 1, 0], default=-1)
    mantissa_bits = np.select([dot_width == 4, dot_width == 3], [1, 2], default=3)
    mantissa = body & ((1 << mantissa_bits) - 1)

    exp_width = np.maximum(dot_width, 0)
    exp_field = (body >> mantissa_bits) & ((1 << exp_width) - 1)
    exp_top = np.where(exp_width > 0, 1 << np.maximum(exp_width - 1, 0), 0)  # sign bit / implicit 1
    exp_magnitude = exp_top + (exp_field & (exp_top - 1).clip(min=0))
    exponent = np.where((exp_field & exp_top) != 0, -exp_magnitude, exp_magnitude)

    normal = np.ldexp(1.0 + mantissa / (1 << mantissa_bits), exponent)
    denormal_m = code & 0x07
    denormal = np.where(denormal_m == 0, 0.0, np.ldexp(1.0, denormal_m - 23))
    magnitude = np.where(dot_width < 0, denormal, normal)
    table = np.where(negative, -magnitude, magnitude)
    table[0x00] = 0.0
    table[0x80] = np.nan
    table[0x6F] = np.inf
    table[0xEF] = -np.inf
    return table.astype(np.float32)


HIFLOAT8_TABLE = _hifloat8_table()
"""float32 value of each of the 256 HiFloat8 bytes."""
HIFLOAT8_TABLE.flags.writeable = False

E8M0_TABLE = _e8m0_table()
"""float32 value of each of the 256 FLOAT8_E8M0 bytes."""
E8M0_TABLE.flags.writeable = False


# ---------------------------------------------------------------------------------------------------------
# Per-dtype decoders. Each gets exactly the bytes that `numel` elements occupy (a uint8 view of the caller's
# buffer) and returns a flat array of `numel` elements.

_ByteDecoder = Callable[[np.ndarray, int], np.ndarray]


def _view_as(dtype: np.dtype) -> _ByteDecoder:
    """Zero-copy reinterpretation; works on unaligned buffers (numpy handles unaligned views)."""

    def decode(data: np.ndarray, numel: int) -> np.ndarray:
        return data.view(dtype)

    return decode


def _view_as_named(name: str) -> _ByteDecoder:
    """`_view_as` an ml_dtypes type, resolved at the first decode (ml_dtypes is imported then, not before)."""

    def decode(data: np.ndarray, numel: int) -> np.ndarray:
        return data.view(narrow_floats.dtype_named(name))

    return decode


def _decode_bool(data: np.ndarray, numel: int) -> np.ndarray:
    # Any nonzero byte is true; a plain view as bool would be undefined for bytes other than 0/1.
    return data != 0


def _decode_complex32(data: np.ndarray, numel: int) -> np.ndarray:
    # Interleaved (re, im) float16 pairs; numpy has no complex32, complex64 holds them exactly.
    return data.view("<f2").astype(np.float32).view(np.complex64)


_LOOKUP_CHUNK = 1 << 16


def _apply_table(table: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """`table[codes]` for a 256-entry table and uint8 codes of any shape. numpy converts uint8 indices to
    intp anyway; doing it in cache-sized chunks is ~2.5x faster than one fancy-indexing pass on large
    tensors and needs no full-size index temporary."""
    flat = np.ascontiguousarray(codes).reshape(-1)
    out = np.empty(flat.size, dtype=table.dtype)
    for start in range(0, flat.size, _LOOKUP_CHUNK):
        stop = start + _LOOKUP_CHUNK
        np.take(table, flat[start:stop].astype(np.intp), out=out[start:stop])
    return out.reshape(codes.shape)


def _lookup(table: np.ndarray) -> _ByteDecoder:
    def decode(data: np.ndarray, numel: int) -> np.ndarray:
        return _apply_table(table, data)

    return decode


def _decode_int4(data: np.ndarray, numel: int) -> np.ndarray:
    # Low nibble is element 0 (unverified: docs/formats.md, "dtypes"). Arithmetic right shifts of int8 sign-extend.
    out = np.empty((data.size, 2), dtype=np.int8)
    out[:, 0] = np.left_shift(data, 4).view(np.int8) >> 4
    out[:, 1] = data.view(np.int8) >> 4
    return out.reshape(-1)[:numel]


def _decode_int2(data: np.ndarray, numel: int) -> np.ndarray:
    # Bits 1..0 are element 0 (unverified). Move each field to the top of the byte, then shift it back
    # down arithmetically to sign-extend.
    out = np.empty((data.size, 4), dtype=np.int8)
    for slot in range(4):
        out[:, slot] = np.left_shift(data, 6 - 2 * slot).view(np.int8) >> 6
    return out.reshape(-1)[:numel]


def _decode_uint2(data: np.ndarray, numel: int) -> np.ndarray:
    out = np.empty((data.size, 4), dtype=np.uint8)
    for slot in range(4):
        out[:, slot] = (data >> (2 * slot)) & 0x03
    return out.reshape(-1)[:numel]


def _decode_uint1(data: np.ndarray, numel: int) -> np.ndarray:
    # Bit 0 is element 0 (unverified; the peer's unpackbits is MSB-first). unpackbits yields only 0/1.
    return np.unpackbits(data, count=numel, bitorder="little").view(np.bool_)


@dataclass(frozen=True)
class _Rule:
    """How one dtype is decoded: element size in bits, the decoder, and a note for the user."""

    bits: int
    decode: _ByteDecoder
    note: Optional[str] = None


_SUB_BYTE_NOTE = "{} order unverified: {} first"
_Q_NOTE = "{} read as plain {} (unverified)"

_DT = DataType
_RULES: dict[int, _Rule] = {
    _DT.DT_FLOAT: _Rule(32, _view_as(np.dtype("<f4"))),
    _DT.DT_FLOAT16: _Rule(16, _view_as(np.dtype("<f2"))),
    _DT.DT_INT8: _Rule(8, _view_as(np.dtype("i1"))),
    _DT.DT_UINT8: _Rule(8, _view_as(np.dtype("u1"))),
    _DT.DT_INT16: _Rule(16, _view_as(np.dtype("<i2"))),
    _DT.DT_UINT16: _Rule(16, _view_as(np.dtype("<u2"))),
    _DT.DT_INT32: _Rule(32, _view_as(np.dtype("<i4"))),
    _DT.DT_INT64: _Rule(64, _view_as(np.dtype("<i8"))),
    _DT.DT_UINT32: _Rule(32, _view_as(np.dtype("<u4"))),
    _DT.DT_UINT64: _Rule(64, _view_as(np.dtype("<u8"))),
    _DT.DT_BOOL: _Rule(8, _decode_bool),
    _DT.DT_DOUBLE: _Rule(64, _view_as(np.dtype("<f8"))),
    _DT.DT_COMPLEX64: _Rule(64, _view_as(np.dtype("<c8"))),
    _DT.DT_COMPLEX128: _Rule(128, _view_as(np.dtype("<c16"))),
    _DT.DT_QINT8: _Rule(8, _view_as(np.dtype("i1")), _Q_NOTE.format("DT_QINT8", "int8")),
    _DT.DT_QINT16: _Rule(16, _view_as(np.dtype("<i2")), _Q_NOTE.format("DT_QINT16", "int16")),
    _DT.DT_QINT32: _Rule(32, _view_as(np.dtype("<i4")), _Q_NOTE.format("DT_QINT32", "int32")),
    _DT.DT_QUINT8: _Rule(8, _view_as(np.dtype("u1")), _Q_NOTE.format("DT_QUINT8", "uint8")),
    _DT.DT_QUINT16: _Rule(16, _view_as(np.dtype("<u2")), _Q_NOTE.format("DT_QUINT16", "uint16")),
    _DT.DT_RESOURCE: _Rule(64, _view_as(np.dtype("<i8"))),
    # ml_dtypes views assume a little-endian host, like every machine GE dumps are read on.
    _DT.DT_BF16: _Rule(16, _view_as_named(narrow_floats.BFLOAT16)),
    _DT.DT_INT4: _Rule(4, _decode_int4, _SUB_BYTE_NOTE.format("int4 nibble", "low nibble")),
    _DT.DT_UINT1: _Rule(1, _decode_uint1, _SUB_BYTE_NOTE.format("uint1 bit", "least significant bit")),
    _DT.DT_INT2: _Rule(2, _decode_int2, _SUB_BYTE_NOTE.format("int2 bit", "lowest bits")),
    _DT.DT_UINT2: _Rule(2, _decode_uint2, _SUB_BYTE_NOTE.format("uint2 bit", "lowest bits")),
    _DT.DT_COMPLEX32: _Rule(32, _decode_complex32),
    _DT.DT_HIFLOAT8: _Rule(8, _lookup(HIFLOAT8_TABLE)),
    # ml_dtypes' float8_e4m3fn already decodes 0x7F/0xFF as NaN (the peer wrongly gives ±480).
    _DT.DT_FLOAT8_E5M2: _Rule(8, _view_as_named(narrow_floats.FLOAT8_E5M2)),
    _DT.DT_FLOAT8_E4M3FN: _Rule(8, _view_as_named(narrow_floats.FLOAT8_E4M3FN)),
    _DT.DT_FLOAT8_E8M0: _Rule(8, _lookup(E8M0_TABLE)),
}

# Dtypes kept as raw bytes. The value is the element size in bits where GE documents one (GE's
# GetSizeByDataType), None where it has none (variable-length or meaningless).
_RAW_BITS: dict[int, Optional[int]] = {
    _DT.DT_UNDEFINED: None,
    _DT.DT_STRING: None,
    _DT.DT_DUAL_SUB_INT8: 8,
    _DT.DT_DUAL_SUB_UINT8: 8,
    _DT.DT_STRING_REF: None,
    _DT.DT_DUAL: 40,
    _DT.DT_VARIANT: 64,
    _DT.DT_FLOAT6_E3M2: 6,
    _DT.DT_FLOAT6_E2M3: 6,
    _DT.DT_FLOAT4_E2M1: 4,
    _DT.DT_FLOAT4_E1M2: 4,
    _DT.DT_HIFLOAT4: 4,
    _DT.DT_HIFLOAT4_SCALE: None,
}


def bits_per_element(code: int) -> Optional[int]:
    """Element size in bits (4 for DT_INT4, 16 for DT_FLOAT16); None when unknown or variable."""
    rule = _RULES.get(code)
    if rule is not None:
        return rule.bits
    return _RAW_BITS.get(code)


def payload_nbytes(code: int, numel: int) -> Optional[int]:
    """Bytes that `numel` elements occupy, rounded up for sub-byte types (as GE's GetSizeInBytes)."""
    bits = bits_per_element(code)
    if bits is None:
        return None
    return -(-operator.index(numel) * bits // 8)


def _as_bytes(buf: object) -> np.ndarray:
    """A flat uint8 view of any bytes-like object (bytes, memoryview, mmap, ndarray), without copying."""
    if isinstance(buf, np.ndarray):
        return np.ascontiguousarray(buf).reshape(-1).view(np.uint8)
    return np.frombuffer(buf, dtype=np.uint8)  # type: ignore[call-overload]


def _raw(data: np.ndarray, code: int) -> Decoded:
    what = dtype_name(code) if code in _RAW_BITS else f"unknown dtype {code}"
    note = f"{what} kept as raw bytes"
    return Decoded(array=data, raw=True, note=note)


def decode_payload(buf: object, code: int, numel: int) -> Decoded:
    """Decode one tensor payload of dtype `code` into a flat array of exactly `numel` elements.

    Trailing bytes beyond what `numel` elements need are ignored (GE payloads may carry device padding).
    Raises PayloadTooShort when the payload is too short for a decodable dtype. Never raises for an
    unsupported or unknown dtype: those come back raw (see `Decoded`).
    """
    numel = operator.index(numel)
    if numel < 0:
        raise ValueError(f"negative element count {numel}")
    data = _as_bytes(buf)
    rule = _RULES.get(code)
    if rule is None:
        return _raw(data, code)
    needed = -(-numel * rule.bits // 8)
    if data.size < needed:
        raise PayloadTooShort(code, numel, needed, data.size)
    array = rule.decode(data[:needed], numel)
    return Decoded(array=array, raw=False, note=rule.note)


# ---------------------------------------------------------------------------------------------------------
# Canonical float32 form of the ml_dtypes float types.


@functools.cache
def _float8_table(name: str) -> np.ndarray:
    table = np.arange(256, dtype=np.uint8).view(narrow_floats.dtype_named(name)).astype(np.float32)
    table.flags.writeable = False
    return table


def _bf16_to_float32(array: np.ndarray) -> np.ndarray:
    # bf16 is the top half of a float32: shifting the bits into place is exact, keeps NaN payloads, and
    # casts in chunks into a single output buffer.
    out = np.empty(array.shape, dtype=np.uint32)
    np.left_shift(array.view(np.uint16), np.uint32(16), out=out, dtype=np.uint32)
    return out.view(np.float32)


def to_float32(array: np.ndarray) -> np.ndarray:
    """Exact float32 widening of bfloat16 / float8 (ml_dtypes) arrays, the canonical form tcmp writes and
    hashes; any other array is returned unchanged. Keeps the shape."""
    if not narrow_floats.is_narrow_float(array.dtype):
        return array
    if array.dtype.name == narrow_floats.BFLOAT16:
        return _bf16_to_float32(array)
    return _apply_table(_float8_table(array.dtype.name), array.view(np.uint8))
