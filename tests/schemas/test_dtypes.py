"""GE dtype table, payload decoding, float32 widening, and the synthetic writer's dtype encoder.

Expected values come from the writers' OutputDataType numbers (dump_task.proto), hand-worked bytes, GE's own size
unit tests, a bit-string HiFloat8 decoder written here from the format definition, and the independent
forward encoder in tcmp.schemas.synth.dtype_encode.
"""

from __future__ import annotations

import math
import mmap
import struct

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tcmp.schemas.dtypes import (
    DataType,
    Decoded,
    PayloadTooShort,
    bits_per_element,
    decode_payload,
    dtype_name,
    payload_nbytes,
    to_float32,
)
from tcmp.schemas.synth.dtype_encode import SUPPORTED_ENCODE_DTYPES, EncodedPayload, encode_values

DT = DataType

# OutputDataType, transcribed from dump_task.proto's enum.
SPEC_TABLE = {
    0: "DT_UNDEFINED",
    1: "DT_FLOAT",
    2: "DT_FLOAT16",
    3: "DT_INT8",
    4: "DT_UINT8",
    5: "DT_INT16",
    6: "DT_UINT16",
    7: "DT_INT32",
    8: "DT_INT64",
    9: "DT_UINT32",
    10: "DT_UINT64",
    11: "DT_BOOL",
    12: "DT_DOUBLE",
    13: "DT_STRING",
    14: "DT_DUAL_SUB_INT8",
    15: "DT_DUAL_SUB_UINT8",
    16: "DT_COMPLEX64",
    17: "DT_COMPLEX128",
    18: "DT_QINT8",
    19: "DT_QINT16",
    20: "DT_QINT32",
    21: "DT_QUINT8",
    22: "DT_QUINT16",
    23: "DT_RESOURCE",
    24: "DT_STRING_REF",
    25: "DT_DUAL",
    26: "DT_VARIANT",
    27: "DT_BF16",
    28: "DT_INT4",
    29: "DT_UINT1",
    30: "DT_INT2",
    31: "DT_UINT2",
    32: "DT_COMPLEX32",
    33: "DT_HIFLOAT8",
    34: "DT_FLOAT8_E5M2",
    35: "DT_FLOAT8_E4M3FN",
    36: "DT_FLOAT8_E8M0",
    37: "DT_FLOAT6_E3M2",
    38: "DT_FLOAT6_E2M3",
    39: "DT_FLOAT4_E2M1",
    40: "DT_FLOAT4_E1M2",
    41: "DT_HIFLOAT4",
    42: "DT_HIFLOAT4_SCALE",
}

RAW_CODES = [0, 13, 14, 15, 24, 25, 26, 37, 38, 39, 40, 41, 42]
PLAIN_VIEW_CODES = {
    DT.DT_FLOAT: "<f4",
    DT.DT_FLOAT16: "<f2",
    DT.DT_INT8: "i1",
    DT.DT_UINT8: "u1",
    DT.DT_INT16: "<i2",
    DT.DT_UINT16: "<u2",
    DT.DT_INT32: "<i4",
    DT.DT_INT64: "<i8",
    DT.DT_UINT32: "<u4",
    DT.DT_UINT64: "<u8",
    DT.DT_DOUBLE: "<f8",
    DT.DT_COMPLEX64: "<c8",
    DT.DT_COMPLEX128: "<c16",
    DT.DT_RESOURCE: "<i8",
    DT.DT_QINT8: "i1",
    DT.DT_QINT16: "<i2",
    DT.DT_QINT32: "<i4",
    DT.DT_QUINT8: "u1",
    DT.DT_QUINT16: "<u2",
}


def same_values(actual: np.ndarray, expected: np.ndarray) -> bool:
    """Equal element by element, NaN matching NaN, and the sign of zero ignored."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if actual.shape != expected.shape:
        return False
    return bool(np.array_equal(actual, expected, equal_nan=actual.dtype.kind in "fc"))


def decode_floats(payload: bytes, code: int, numel: int) -> np.ndarray:
    return to_float32(decode_payload(payload, code, numel).array).astype(np.float64)


# --- the table -----------------------------------------------------------------------------------------


def test_enum_matches_spec_table() -> None:
    assert {member.value: member.name for member in DataType} == SPEC_TABLE


@pytest.mark.parametrize(("code", "name"), [(2, "DT_FLOAT16"), (27, "DT_BF16"), (42, "DT_HIFLOAT4_SCALE")])
def test_dtype_name_known(code: int, name: str) -> None:
    assert dtype_name(code) == name


@pytest.mark.parametrize("code", [77, 43, -1])
def test_dtype_name_unknown(code: int) -> None:
    assert dtype_name(code) == f"DT_UNKNOWN({code})"


# Sizes from GE's own unit test of GetSizeInBytes (graph_metadef types tests), plus the plain types.
@pytest.mark.parametrize(
    ("code", "numel", "nbytes"),
    [
        (DT.DT_FLOAT, 10, 40),
        (DT.DT_FLOAT16, 3, 6),
        (DT.DT_COMPLEX128, 2, 32),
        (DT.DT_COMPLEX32, 3, 12),
        (DT.DT_INT4, 10, 5),
        (DT.DT_INT4, 9, 5),
        (DT.DT_INT2, 10, 3),
        (DT.DT_INT2, 9, 3),
        (DT.DT_UINT1, 10, 2),
        (DT.DT_UINT1, 9, 2),
        (DT.DT_HIFLOAT8, 10, 10),
        (DT.DT_FLOAT8_E8M0, 10, 10),
        (DT.DT_FLOAT6_E3M2, 10, 8),
        (DT.DT_FLOAT4_E2M1, 10, 5),
        (DT.DT_DUAL, 2, 10),
        (DT.DT_INT4, 0, 0),
    ],
)
def test_payload_nbytes(code: int, numel: int, nbytes: int) -> None:
    assert payload_nbytes(code, numel) == nbytes


@pytest.mark.parametrize("code", [DT.DT_UNDEFINED, DT.DT_STRING, DT.DT_STRING_REF, 77, -3])
def test_unknown_element_size_is_none(code: int) -> None:
    assert bits_per_element(code) is None
    assert payload_nbytes(code, 4) is None


def test_bits_per_element_sub_byte() -> None:
    assert [bits_per_element(c) for c in (DT.DT_UINT1, DT.DT_INT2, DT.DT_INT4, DT.DT_BF16)] == [1, 2, 4, 16]


# --- hand-worked bytes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "payload", "expected"),
    [
        (DT.DT_FLOAT16, b"\x00\x3c\x00\xc0", [1.0, -2.0]),
        (DT.DT_FLOAT, b"\x00\x00\x80\x3f\x00\x00\xc0\xff", [1.0, math.nan]),
        (DT.DT_DOUBLE, b"\x00\x00\x00\x00\x00\x00\xf0\x3f", [1.0]),
        (DT.DT_BF16, b"\x80\x3f\x00\xc0\x80\x7f", [1.0, -2.0, math.inf]),
        (DT.DT_FLOAT8_E4M3FN, b"\x38\x7e\x7f\xff\x01", [1.0, 448.0, math.nan, math.nan, 2.0**-9]),
        (DT.DT_FLOAT8_E5M2, b"\x3c\x7c\xfc\x7d", [1.0, math.inf, -math.inf, math.nan]),
        (DT.DT_FLOAT8_E8M0, b"\x7f\x80\x7e\xff\x00\xfe", [1.0, 2.0, 0.5, math.nan, 2.0**-127, 2.0**127]),
        (
            DT.DT_HIFLOAT8,
            b"\x08\x09\x10\x18\x88\x6e\x6f\xef\x80\x00\x01\x07",
            [1.0, 1.125, 2.0, 0.5, -1.0, 32768.0, math.inf, -math.inf, math.nan, 0.0, 2.0**-22, 2.0**-16],
        ),
    ],
)
def test_float_bytes(code: int, payload: bytes, expected: list) -> None:
    assert same_values(decode_floats(payload, code, len(expected)), np.array(expected))


@pytest.mark.parametrize(
    ("code", "payload", "expected"),
    [
        (DT.DT_INT16, b"\xfe\xff\x01\x00", [-2, 1]),
        (DT.DT_UINT16, b"\xfe\xff", [65534]),
        (DT.DT_INT32, b"\xff\xff\xff\x7f", [2**31 - 1]),
        (DT.DT_UINT64, b"\xff" * 8, [2**64 - 1]),
        (DT.DT_RESOURCE, b"\xfe" + b"\xff" * 7, [-2]),
        (DT.DT_INT4, b"\x9f", [-1, -7]),  # low nibble 0xF = -1 first, then 0x9 = -7
        (DT.DT_INT4, b"\x78\x03", [-8, 7, 3]),
        (DT.DT_INT2, bytes([0b11100100]), [0, 1, -2, -1]),
        (DT.DT_UINT2, bytes([0b11100100, 0b00000010]), [0, 1, 2, 3, 2]),
        (DT.DT_UINT1, bytes([0b00000101]), [1, 0, 1, 0, 0, 0, 0, 0]),
        (DT.DT_UINT1, bytes([0b00000101, 0b10000010]), [1, 0, 1, 0, 0, 0, 0, 0, 0, 1]),
        (DT.DT_BOOL, b"\x00\x01\x02\xff", [0, 1, 1, 1]),
        (DT.DT_QINT8, b"\xff", [-1]),
        (DT.DT_QUINT16, b"\xff\xff", [65535]),
    ],
)
def test_integer_bytes(code: int, payload: bytes, expected: list) -> None:
    decoded = decode_payload(payload, code, len(expected))
    assert decoded.raw is False
    assert decoded.array.tolist() == expected


def test_complex_bytes() -> None:
    c64 = decode_payload(struct.pack("<ffff", 1.5, -2.0, 0.0, 3.0), DT.DT_COMPLEX64, 2).array
    assert c64.tolist() == [1.5 - 2j, 3j]
    c32 = decode_payload(struct.pack("<eeee", 1.5, -2.0, 0.25, 65504.0), DT.DT_COMPLEX32, 2).array
    assert c32.dtype == np.complex64
    assert c32.tolist() == [1.5 - 2j, 0.25 + 65504j]


def test_result_dtypes() -> None:
    assert decode_payload(b"\x00", DT.DT_INT4, 2).array.dtype == np.int8
    assert decode_payload(b"\x00", DT.DT_INT2, 4).array.dtype == np.int8
    assert decode_payload(b"\x00", DT.DT_UINT2, 4).array.dtype == np.uint8
    assert decode_payload(b"\x00", DT.DT_UINT1, 8).array.dtype == np.bool_
    assert decode_payload(b"\x00", DT.DT_BOOL, 1).array.dtype == np.bool_
    assert decode_payload(b"\x00\x00", DT.DT_BF16, 1).array.dtype == ml_dtypes.bfloat16
    assert decode_payload(b"\x00", DT.DT_FLOAT8_E4M3FN, 1).array.dtype == ml_dtypes.float8_e4m3fn
    assert decode_payload(b"\x00", DT.DT_FLOAT8_E5M2, 1).array.dtype == ml_dtypes.float8_e5m2
    assert decode_payload(b"\x00", DT.DT_HIFLOAT8, 1).array.dtype == np.float32
    assert decode_payload(b"\x00", DT.DT_FLOAT8_E8M0, 1).array.dtype == np.float32


def test_e4m3fn_nan_bytes_in_ml_dtypes() -> None:
    # The peer decodes 0x7F/0xFF as ±480; e4m3fn has no infinity and these two bytes are its NaNs.
    decoded = decode_payload(b"\x7f\xff\x7e\xfe", DT.DT_FLOAT8_E4M3FN, 4).array.astype(np.float64)
    assert np.isnan(decoded[:2]).all()
    assert decoded[2:].tolist() == [448.0, -448.0]


# --- notes -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "fragment"),
    [
        (DT.DT_INT4, "int4 nibble order unverified: low nibble first"),
        (DT.DT_INT2, "unverified"),
        (DT.DT_UINT2, "unverified"),
        (DT.DT_UINT1, "unverified"),
        (DT.DT_QINT8, "read as plain int8 (unverified)"),
        (DT.DT_QUINT16, "read as plain uint16 (unverified)"),
    ],
)
def test_unverified_decodings_are_flagged(code: int, fragment: str) -> None:
    note = decode_payload(b"\x00" * 8, code, 1).note
    assert note is not None and fragment in note


@pytest.mark.parametrize("code", [DT.DT_FLOAT, DT.DT_BF16, DT.DT_HIFLOAT8, DT.DT_FLOAT8_E4M3FN])
def test_plain_decodings_have_no_note(code: int) -> None:
    assert decode_payload(b"\x00" * 8, code, 1).note is None


# --- raw fallback ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", RAW_CODES)
def test_unsupported_dtypes_kept_as_raw_bytes(code: int) -> None:
    payload = bytes([1, 2, 250, 0, 7])
    decoded = decode_payload(payload, code, 3)
    assert decoded.raw is True
    assert decoded.array.dtype == np.uint8
    assert decoded.array.tolist() == list(payload)  # the whole payload, whatever numel says
    assert decoded.note == f"{SPEC_TABLE[code]} kept as raw bytes"


def test_string_note() -> None:
    assert decode_payload(b"abc", DT.DT_STRING, 1).note == "DT_STRING kept as raw bytes"


@pytest.mark.parametrize("code", [77, 43, -1, 1000])
def test_unknown_dtype_kept_as_raw_bytes(code: int) -> None:
    decoded = decode_payload(b"\x01\x02", code, 100)
    assert decoded == Decoded(array=decoded.array, raw=True, note=f"unknown dtype {code} kept as raw bytes")
    assert decoded.array.tolist() == [1, 2]


def test_raw_dtype_with_empty_payload() -> None:
    decoded = decode_payload(b"", DT.DT_STRING, 5)
    assert decoded.raw and decoded.array.size == 0


# --- lengths, short payloads, padding ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "numel", "available", "needed"),
    [
        (DT.DT_FLOAT, 3, 11, 12),
        (DT.DT_FLOAT16, 1, 0, 2),
        (DT.DT_INT4, 3, 1, 2),
        (DT.DT_UINT1, 9, 1, 2),
        (DT.DT_COMPLEX32, 1, 3, 4),
        (DT.DT_HIFLOAT8, 5, 4, 5),
    ],
)
def test_payload_too_short(code: int, numel: int, available: int, needed: int) -> None:
    with pytest.raises(PayloadTooShort) as caught:
        decode_payload(b"\x00" * available, code, numel)
    assert isinstance(caught.value, ValueError)
    message = str(caught.value)
    assert SPEC_TABLE[code] in message and f"{needed} bytes" in message and f"{available}" in message
    assert (caught.value.needed, caught.value.available) == (needed, available)


def test_negative_numel_is_an_error() -> None:
    with pytest.raises(ValueError, match="negative"):
        decode_payload(b"\x00" * 4, DT.DT_FLOAT, -1)


def test_trailing_padding_is_ignored() -> None:
    payload = struct.pack("<3f", 1.0, 2.0, 3.0) + b"\xaa" * 29
    decoded = decode_payload(payload, DT.DT_FLOAT, 3)
    assert decoded.array.tolist() == [1.0, 2.0, 3.0]
    int4 = decode_payload(b"\x21\x43\x65", DT.DT_INT4, 3).array
    assert int4.tolist() == [1, 2, 3]


@pytest.mark.parametrize("code", sorted(set(range(1, 37)) - set(RAW_CODES)))
def test_zero_elements(code: int) -> None:
    decoded = decode_payload(b"\x11" * 3, code, 0)
    assert decoded.raw is False and decoded.array.shape == (0,)


# --- zero copy --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [*PLAIN_VIEW_CODES, DT.DT_BF16, DT.DT_FLOAT8_E5M2, DT.DT_FLOAT8_E4M3FN])
def test_plain_dtypes_are_zero_copy_views(code: int) -> None:
    source = np.arange(64, dtype=np.uint8)
    itemsize = bits_per_element(code) // 8
    numel = 32 // itemsize
    decoded = decode_payload(source[3:], code, numel)  # odd offset: an unaligned view
    assert decoded.array.size == numel
    assert np.shares_memory(decoded.array, source)
    if code in PLAIN_VIEW_CODES:
        expected = np.frombuffer(source[3:].tobytes()[: numel * itemsize], PLAIN_VIEW_CODES[code])
        assert same_values(decoded.array, expected)


def test_zero_copy_from_bytes_memoryview_and_mmap() -> None:
    payload = bytearray(struct.pack("<4f", 1.0, 2.0, 3.0, 4.0))
    for buffer in (payload, memoryview(payload)):
        array = decode_payload(buffer, DT.DT_FLOAT, 4).array
        assert array.tolist() == [1.0, 2.0, 3.0, 4.0]
        payload[0:4] = struct.pack("<f", 9.0)  # writes through: the array is a view
        assert array[0] == 9.0
        payload[0:4] = struct.pack("<f", 1.0)
    with mmap.mmap(-1, 16) as mapped:
        mapped[:] = bytes(payload)
        array = decode_payload(mapped, DT.DT_FLOAT, 4).array
        assert array.tolist() == [1.0, 2.0, 3.0, 4.0]
        mapped[12:16] = struct.pack("<f", 7.0)
        assert array[3] == 7.0
        del array


def test_non_uint8_ndarray_input_is_read_as_its_bytes() -> None:
    source = np.array([1.5, -2.0], dtype=np.float32)
    decoded = decode_payload(source, DT.DT_FLOAT, 2).array
    assert decoded.tolist() == [1.5, -2.0] and np.shares_memory(decoded, source)


# --- to_float32 -------------------------------------------------------------------------------------------


def test_bf16_to_float32_matches_ml_dtypes_for_every_bit_pattern() -> None:
    bits = np.arange(65536, dtype=np.uint16).reshape(256, 256)  # shape must survive
    bf16 = bits.view(ml_dtypes.bfloat16)
    ours = to_float32(bf16)
    theirs = bf16.astype(np.float32)
    assert ours.dtype == np.float32 and ours.shape == (256, 256)
    nan = np.isnan(theirs)
    assert np.array_equal(np.isnan(ours), nan)
    assert np.array_equal(ours.view(np.uint32)[~nan], theirs.view(np.uint32)[~nan])  # incl. ±0, ±inf
    # The widening is the bf16 bits in the top half of a float32: NaN payloads survive too.
    assert np.array_equal(ours.view(np.uint32), bits.astype(np.uint32) << 16)


def test_bf16_to_float32_of_non_contiguous_view() -> None:
    bf16 = np.array([1.0, 2.0, 3.0, 4.0], dtype=ml_dtypes.bfloat16)[::2]
    assert to_float32(bf16).tolist() == [1.0, 3.0]


@pytest.mark.parametrize("dtype", [ml_dtypes.float8_e5m2, ml_dtypes.float8_e4m3fn])
def test_float8_to_float32_matches_ml_dtypes(dtype: type) -> None:
    fp8 = np.arange(256, dtype=np.uint8).reshape(16, 16).view(dtype)
    ours = to_float32(fp8)
    assert ours.dtype == np.float32 and ours.shape == (16, 16)
    assert same_values(ours, fp8.astype(np.float32))


def test_to_float32_leaves_other_dtypes_alone() -> None:
    for array in (np.zeros(3, np.float16), np.zeros(3, np.int8), np.zeros(3, np.float64)):
        assert to_float32(array) is array


# --- HiFloat8 ---------------------------------------------------------------------------------------------


def hifloat8_by_bit_string(byte: int) -> float:
    """HiFloat8 from its definition, one byte at a time: sign | dot prefix (11, 10, 01, 001, 0001 or the
    denormal 0000) | D exponent bits (sign, then magnitude below an implicit leading 1) | the remaining bits
    are the mantissa. 0x80 is NaN, 0x6F/0xEF are ±inf."""
    if byte == 0x80:
        return math.nan
    bits = f"{byte:08b}"
    sign = -1.0 if bits[0] == "1" else 1.0
    if bits[1:] == "1101111":
        return sign * math.inf
    rest = bits[1:]
    for prefix, exp_width in (("11", 4), ("10", 3), ("01", 2), ("001", 1), ("0001", 0)):
        if rest.startswith(prefix):
            fields = rest[len(prefix) :]
            exp_field, mantissa = fields[:exp_width], fields[exp_width:]
            exponent = 0
            if exp_width:
                exponent = int("1" + exp_field[1:], 2) * (-1 if exp_field[0] == "1" else 1)
            return sign * 2.0**exponent * (1 + int(mantissa, 2) / 2 ** len(mantissa))
    denormal = int(rest[4:], 2)  # prefix 0000
    return 0.0 if denormal == 0 else sign * 2.0 ** (denormal - 23)


HIF8_REFERENCE = np.array([hifloat8_by_bit_string(b) for b in range(256)])


def test_hifloat8_table_against_bit_string_decoder() -> None:
    decoded = decode_payload(bytes(range(256)), DT.DT_HIFLOAT8, 256).array
    assert same_values(decoded.astype(np.float64), HIF8_REFERENCE)


def test_lookup_decoding_spans_chunks() -> None:
    # More bytes than one lookup chunk, starting at an odd offset.
    payload = b"\x00" + bytes(range(256)) * 300
    decoded = decode_payload(memoryview(payload)[1:], DT.DT_HIFLOAT8, 256 * 300).array
    assert same_values(decoded.astype(np.float64), np.tile(HIF8_REFERENCE, 300))
    e8m0 = decode_payload(payload[1:], DT.DT_FLOAT8_E8M0, 256 * 300).array.reshape(300, 256)
    assert np.isnan(e8m0[:, 255]).all() and (e8m0[:, 127] == 1.0).all()
    fp8 = np.frombuffer(payload[1:], dtype=ml_dtypes.float8_e4m3fn).reshape(300, 256)[::3, 1::2]
    assert same_values(to_float32(fp8), fp8.astype(np.float32))


def test_hifloat8_range_and_precision() -> None:
    finite = HIF8_REFERENCE[np.isfinite(HIF8_REFERENCE)]
    assert finite.max() == 2.0**15 and finite[finite > 0].min() == 2.0**-22
    assert len(set(finite.tolist())) == 253  # 256 minus NaN and two infinities, all distinct
    # Tapered precision: 8 values per binade near 1, 4 around 2**5, 2 around 2**10.
    for low, count in ((1.0, 8), (2.0**5, 4), (2.0**10, 2)):
        assert int(((finite >= low) & (finite < 2 * low)).sum()) == count


# --- encoder: round trips -------------------------------------------------------------------------------

RNG = np.random.default_rng(20260)
FLOAT_SPECIALS = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-30, -1e30, 0.1, 65504.0])
INT_RANGES = {
    DT.DT_INT8: (-128, 127),
    DT.DT_UINT8: (0, 255),
    DT.DT_INT16: (-(2**15), 2**15 - 1),
    DT.DT_UINT16: (0, 2**16 - 1),
    DT.DT_INT32: (-(2**31), 2**31 - 1),
    DT.DT_UINT32: (0, 2**32 - 1),
    DT.DT_INT64: (-(2**63), 2**63 - 1),
    DT.DT_UINT64: (0, 2**64 - 1),
    DT.DT_RESOURCE: (-(2**63), 2**63 - 1),
    DT.DT_QINT8: (-128, 127),
    DT.DT_QINT16: (-(2**15), 2**15 - 1),
    DT.DT_QINT32: (-(2**31), 2**31 - 1),
    DT.DT_QUINT8: (0, 255),
    DT.DT_QUINT16: (0, 2**16 - 1),
    DT.DT_INT4: (-8, 7),
    DT.DT_INT2: (-2, 1),
    DT.DT_UINT2: (0, 3),
    DT.DT_UINT1: (0, 1),
    DT.DT_BOOL: (0, 1),
}
COMPLEX_CODES = {DT.DT_COMPLEX32, DT.DT_COMPLEX64, DT.DT_COMPLEX128}


def sample_values(code: int, count: int) -> np.ndarray:
    if code in INT_RANGES:
        low, high = INT_RANGES[code]
        ends = np.array([low, high], dtype=np.int64 if low < 0 else np.uint64)
        middle = RNG.integers(low, high, size=count, endpoint=True, dtype=ends.dtype)
        return np.concatenate([ends, middle])
    spread = RNG.standard_normal(count) * np.exp2(RNG.integers(-30, 20, size=count))
    floats = np.concatenate([FLOAT_SPECIALS, spread])
    if code in COMPLEX_CODES:
        pairs = np.empty(floats.size, dtype=np.complex128)  # not re + 1j*im: 1j*inf would give NaN
        pairs.real = floats
        pairs.imag = RNG.permutation(floats)
        return pairs
    return floats


def test_encoder_covers_every_decodable_dtype() -> None:
    decodable = {c for c in range(43) if not decode_payload(b"\x00" * 16, c, 1).raw}
    assert decodable == set(SUPPORTED_ENCODE_DTYPES)


@pytest.mark.parametrize("code", sorted(SUPPORTED_ENCODE_DTYPES))
@pytest.mark.parametrize("count", [0, 1, 7, 200])
def test_round_trip(code: int, count: int) -> None:
    values = sample_values(code, count)
    encoded = encode_values(values, code)
    assert isinstance(encoded, EncodedPayload)
    assert len(encoded.payload) == payload_nbytes(code, values.size)
    decoded = decode_payload(encoded.payload, code, values.size)
    assert decoded.raw is False
    result = to_float32(decoded.array)
    if result.dtype.kind == "f":
        result = result.astype(np.float64)
    assert same_values(result, encoded.values), SPEC_TABLE[code]


def test_round_trip_keeps_the_input_shape_in_values() -> None:
    encoded = encode_values(np.arange(6, dtype=np.int64).reshape(2, 3) - 3, DT.DT_INT4)
    assert encoded.values.shape == (2, 3)
    assert decode_payload(encoded.payload, DT.DT_INT4, 6).array.tolist() == [-3, -2, -1, 0, 1, 2]


def test_encoder_packs_sub_byte_values_low_bits_first() -> None:
    assert encode_values(np.array([-1, -7]), DT.DT_INT4).payload == b"\x9f"
    assert encode_values(np.array([0, 1, -2, -1, 1]), DT.DT_INT2).payload == bytes([0b11100100, 0b01])
    assert encode_values(np.array([1, 0, 1]), DT.DT_UINT1).payload == bytes([0b101])


@pytest.mark.parametrize(
    ("code", "values"),
    [
        (DT.DT_INT4, [8]),
        (DT.DT_UINT2, [-1]),
        (DT.DT_INT8, [1.5]),
        (DT.DT_UINT8, [256]),
        (DT.DT_INT16, [np.nan]),
    ],
)
def test_encoder_rejects_unrepresentable_integers(code: int, values: list) -> None:
    with pytest.raises(ValueError):
        encode_values(np.array(values), code)


@pytest.mark.parametrize("code", [DT.DT_STRING, DT.DT_FLOAT4_E2M1, 77])
def test_encoder_rejects_unsupported_dtypes(code: int) -> None:
    with pytest.raises(ValueError):
        encode_values(np.zeros(2), code)


def test_bf16_encoder_rounds_like_ml_dtypes() -> None:
    values = np.array([1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, 3.14159, -1e38, 1e39])
    with np.errstate(over="ignore"):
        expected = values.astype(ml_dtypes.bfloat16).astype(np.float64)
    assert same_values(encode_values(values, DT.DT_BF16).values, expected)
    assert encode_values(np.array([1.0 + 2.0**-8]), DT.DT_BF16).values.tolist() == [1.0]  # tie to even


# --- encoder: nearest-value properties --------------------------------------------------------------------

HIF8_FINITE = np.unique(HIF8_REFERENCE[np.isfinite(HIF8_REFERENCE)])


def nearest_hifloat8(x: float) -> float:
    """Nearest HiFloat8 value by brute force over the 253 finite values, ties away from zero; magnitudes that
    reach 1.25 * 2**15 (the midpoint towards the reserved inf pattern 1.5 * 2**15) overflow to inf."""
    if abs(x) >= 1.25 * 2.0**15:
        return math.copysign(math.inf, x)
    distance = np.abs(HIF8_FINITE - x)
    ties = HIF8_FINITE[distance == distance.min()]
    return float(ties[np.argmax(np.abs(ties))])


@settings(max_examples=300, deadline=None)
@given(
    st.floats(min_value=-60000, max_value=60000, allow_nan=False)
    | st.floats(min_value=-(2.0**-14), max_value=2.0**-14)
    | st.sampled_from([float(v) for v in HIF8_FINITE])
)
def test_hifloat8_encoder_rounds_to_nearest(x: float) -> None:
    encoded = encode_values(np.array([x]), DT.DT_HIFLOAT8)
    expected = nearest_hifloat8(x)
    assert encoded.values.tolist() == [expected]
    assert hifloat8_by_bit_string(encoded.payload[0]) == expected


def test_hifloat8_encoder_specials() -> None:
    encoded = encode_values(np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 2.0**-24]), DT.DT_HIFLOAT8)
    assert encoded.payload == b"\x80\x6f\xef\x00\x00\x00"


def test_hifloat8_encoder_ties() -> None:
    # Midpoints go away from zero: 1 + 1/16 between 1 and 1.125; 2**-23 between 0 and 2**-22.
    values = np.array([1.0 + 2.0**-4, -(1.0 + 2.0**-4), 2.0**-23, 3 * 2.0**-17])
    assert encode_values(values, DT.DT_HIFLOAT8).values.tolist() == [1.125, -1.125, 2.0**-22, 2.0**-15]


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=2.0**-140, max_value=2.0**140))
def test_e8m0_encoder_picks_nearest_power_of_two(x: float) -> None:
    encoded = encode_values(np.array([x]), DT.DT_FLOAT8_E8M0)
    below = 2.0 ** math.floor(math.log2(x))
    candidates = [below, 2 * below]
    expected = min(candidates, key=lambda c: (abs(c - x), -c))
    expected = min(max(expected, 2.0**-127), 2.0**127)
    assert encoded.values.tolist() == [expected]
    assert encoded.payload[0] == round(math.log2(expected)) + 127


def test_e8m0_encoder_non_positive_is_nan() -> None:
    assert encode_values(np.array([0.0, -1.0, np.nan, np.inf]), DT.DT_FLOAT8_E8M0).payload == b"\xff" * 4


# --- robustness -------------------------------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(
    code=st.integers(min_value=0, max_value=60),
    numel=st.integers(min_value=0, max_value=70),
    extra=st.integers(min_value=0, max_value=9),
    data=st.data(),
)
def test_random_payloads_never_break_decoding(code: int, numel: int, extra: int, data: st.DataObject) -> None:
    needed = payload_nbytes(code, numel)
    size = (needed if needed is not None else numel) + extra
    payload = data.draw(st.binary(min_size=size, max_size=size))
    decoded = decode_payload(payload, code, numel)
    if decoded.raw:
        assert decoded.array.dtype == np.uint8 and decoded.array.tobytes() == payload
        assert decoded.note is not None
    else:
        assert decoded.array.shape == (numel,)
        to_float32(decoded.array)  # every numeric result can be widened


@settings(max_examples=200, deadline=None)
@given(code=st.integers(min_value=0, max_value=60), numel=st.integers(min_value=1, max_value=40))
def test_short_payloads_raise_only_for_decodable_dtypes(code: int, numel: int) -> None:
    needed = payload_nbytes(code, numel)
    payload = b"\x5a" * ((needed or 1) - 1)
    try:
        decoded = decode_payload(payload, code, numel)
    except PayloadTooShort:
        assert code in SUPPORTED_ENCODE_DTYPES
    else:
        assert decoded.raw and code not in SUPPORTED_ENCODE_DTYPES
