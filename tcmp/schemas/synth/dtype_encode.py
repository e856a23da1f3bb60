"""Forward side of the synthetic GE dump writer: numbers → payload bytes for one dtype.

Written independently of `tcmp.schemas.dtypes.decode_payload` (it only shares the dtype numbers) so that
round-trip tests check one implementation against the other. Besides the bytes, every encoding reports the
exact values the payload holds after rounding to the dtype: what a correct reader must return.

Rounding: float32/float16/float64 and complex use numpy's round-to-nearest-even casts; bfloat16 and float8
use ml_dtypes' casts (also round-to-nearest-even; float8_e4m3fn turns out-of-range values into NaN);
HiFloat8 rounds to nearest with ties away from zero, like GE's hif8_t encoder; FLOAT8_E8M0 rounds to the
nearest power of two. Integer dtypes do not round: values must be integral and in range, else ValueError.
Sub-byte integers are packed least significant bits first (the order tcmp assumes; unverified;
docs/formats.md, "dtypes").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import ml_dtypes
import numpy as np
from numpy.typing import DTypeLike

from tcmp.schemas.dtypes import DataType


@dataclass(frozen=True)
class EncodedPayload:
    """`payload`: the little-endian bytes of the tensor (C order). `values`: what they represent, in the
    shape of the input: float64 / complex128 for float types, bool for bool and uint1, and the reader's
    integer type for integers (int8 for int4 / int2, uint8 for uint2)."""

    payload: bytes
    values: np.ndarray


_Encoder = Callable[[np.ndarray], tuple[bytes, np.ndarray]]


def _float_cast(dtype: DTypeLike) -> _Encoder:
    def encode(values: np.ndarray) -> tuple[bytes, np.ndarray]:
        with np.errstate(over="ignore", invalid="ignore"):
            stored = np.asarray(values, dtype=np.float64).astype(dtype)
        return stored.tobytes(), stored.astype(np.float64)

    return encode


def _complex_cast(dtype: str) -> _Encoder:
    def encode(values: np.ndarray) -> tuple[bytes, np.ndarray]:
        with np.errstate(over="ignore", invalid="ignore"):
            stored = np.asarray(values, dtype=np.complex128).astype(dtype)
        return stored.tobytes(), stored.astype(np.complex128)

    return encode


def _encode_complex32(values: np.ndarray) -> tuple[bytes, np.ndarray]:
    as_complex = np.asarray(values, dtype=np.complex128)
    pairs = np.empty((*as_complex.shape, 2), dtype="<f2")
    with np.errstate(over="ignore", invalid="ignore"):
        pairs[..., 0] = as_complex.real
        pairs[..., 1] = as_complex.imag
    stored = np.empty(as_complex.shape, dtype=np.complex128)  # not re + 1j*im: 1j*inf would give NaN
    stored.real = pairs[..., 0]
    stored.imag = pairs[..., 1]
    return pairs.tobytes(), stored


def _checked_integers(values: np.ndarray, low: int, high: int) -> np.ndarray:
    """`values`, after checking they are integral and in [low, high]: anything else is a caller error, not
    something to round."""
    array = np.asarray(values)
    if array.dtype.kind == "f" and not np.all(np.isfinite(array) & (array == np.round(array))):
        raise ValueError("integer dtypes need integral, finite values")
    if array.dtype.kind not in "biuf":
        raise ValueError(f"cannot encode {array.dtype} values as an integer dtype")
    if array.size and (array.min() < low or array.max() > high):
        raise ValueError(f"values outside [{low}, {high}]")
    return array


def _integer_cast(dtype: str) -> _Encoder:
    info = np.iinfo(np.dtype(dtype))

    def encode(values: np.ndarray) -> tuple[bytes, np.ndarray]:
        stored = _checked_integers(values, int(info.min), int(info.max)).astype(dtype)
        return stored.tobytes(), stored.astype(np.dtype(dtype).newbyteorder("="))

    return encode


def _encode_bool(values: np.ndarray) -> tuple[bytes, np.ndarray]:
    truth = np.asarray(values) != 0
    return truth.astype(np.uint8).tobytes(), truth


def _pack_fields(fields: np.ndarray, width: int) -> bytes:
    """Pack unsigned `width`-bit fields, element 0 in the lowest bits of byte 0; the last byte is
    zero-padded."""
    per_byte = 8 // width
    flat = fields.reshape(-1).astype(np.uint8)
    padded = np.zeros(-(-flat.size // per_byte) * per_byte, dtype=np.uint8)
    padded[: flat.size] = flat
    slots = padded.reshape(-1, per_byte)
    packed = np.zeros(slots.shape[0], dtype=np.uint8)
    for slot in range(per_byte):
        packed |= slots[:, slot] << np.uint8(slot * width)
    return packed.tobytes()


def _sub_byte(width: int, signed: bool) -> _Encoder:
    low, high = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
    value_dtype = np.int8 if signed else np.uint8

    def encode(values: np.ndarray) -> tuple[bytes, np.ndarray]:
        integers = _checked_integers(values, low, high).astype(np.int64)
        fields = integers & ((1 << width) - 1)  # two's complement in `width` bits
        return _pack_fields(fields, width), integers.astype(value_dtype)

    return encode


def _encode_uint1(values: np.ndarray) -> tuple[bytes, np.ndarray]:
    truth = np.asarray(values) != 0
    return _pack_fields(truth.astype(np.uint8), 1), truth


def _encode_e8m0(values: np.ndarray) -> tuple[bytes, np.ndarray]:
    """Nearest power of two 2**e, e in [-127, 127] (saturating); NaN, ±inf and values <= 0, which E8M0
    cannot hold, become its NaN byte 0xFF."""
    x = np.asarray(values, dtype=np.float64)
    representable = np.isfinite(x) & (x > 0)
    fraction, exponent = np.frexp(np.where(representable, x, 1.0))  # x = fraction * 2**exponent
    # fraction in [0.5, 1): 2**(exponent-1) or 2**exponent, whichever is nearer (the midpoint goes up).
    nearest = np.where(fraction >= 0.75, exponent, exponent - 1)
    nearest = np.clip(nearest, -127, 127)
    codes = np.where(representable, nearest + 127, 0xFF).astype(np.uint8)
    stored = np.where(representable, np.ldexp(1.0, nearest), np.nan)
    return codes.tobytes(), stored


# HiFloat8 layout, per |exponent|: (dot prefix, its width in bits, exponent field width, mantissa width).
_HIF8_MAX_EXPONENT = 15
_HIF8_MIN_DENORMAL_EXPONENT = -22
_HIF8_MIN_NORMAL_EXPONENT = -15


def _hif8_mantissa_width(magnitude: np.ndarray) -> np.ndarray:
    return np.select([magnitude <= 3, magnitude <= 7], [3, 2], default=1)


def _hif8_pack_normal(exponent: np.ndarray, mantissa: np.ndarray) -> np.ndarray:
    """Bits 6..0 of a normal HiFloat8 number 2**exponent * (1 + mantissa / 2**width)."""
    magnitude = np.abs(exponent)
    negative = (exponent < 0).astype(np.int64)
    width = _hif8_mantissa_width(magnitude)
    # dot prefix ("0001", "001", "01", "10", "11") followed by the sign-magnitude exponent whose leading 1
    # is implicit: the exponent field is [sign, magnitude without its top bit].
    dot_code = np.select(
        [magnitude == 0, magnitude == 1, magnitude <= 3, magnitude <= 7], [0b0001, 0b001, 0b01, 0b10], 0b11
    )
    exp_bits = np.select([magnitude == 0, magnitude == 1, magnitude <= 3, magnitude <= 7], [0, 1, 2, 3], 4)
    top = np.where(exp_bits > 0, 1 << np.maximum(exp_bits - 1, 0), 0)
    exp_field = np.where(exp_bits > 0, (negative * top) | (magnitude - top), 0)
    return (dot_code << (exp_bits + width)) | (exp_field << width) | mantissa


def _encode_hifloat8(values: np.ndarray) -> tuple[bytes, np.ndarray]:
    x = np.asarray(values, dtype=np.float64)
    sign_bit = np.where(np.signbit(x), 0x80, 0)
    a = np.abs(x)
    finite = np.isfinite(a) & (a > 0)
    fraction, exponent = np.frexp(np.where(finite, a, 1.0))
    exponent = exponent - 1  # a = (1 + m) * 2**exponent with m in [0, 1)
    m = 2.0 * fraction - 1.0

    # Mantissa bits available at this exponent: 3/2/1 for normals, 0 for denormals (pure powers of two).
    width = np.where(exponent < _HIF8_MIN_NORMAL_EXPONENT, 0, _hif8_mantissa_width(np.abs(exponent)))
    steps = np.floor(m * (1 << width) + 0.5).astype(np.int64)  # ties away from zero (a > 0 here)
    carry = steps >= (1 << width)
    # Below the smallest denormal 2**-22 the choice is 2**-22 or zero: the midpoint 2**-23 and above round
    # up, anything smaller is zero (decided on the unrounded exponent).
    below_zero_midpoint = exponent < _HIF8_MIN_DENORMAL_EXPONENT - 1
    tiny = exponent < _HIF8_MIN_DENORMAL_EXPONENT
    exponent = np.where(tiny, _HIF8_MIN_DENORMAL_EXPONENT, np.where(carry, exponent + 1, exponent))
    steps = np.where(tiny | carry, 0, steps)
    # 1.5 * 2**15 would be the bit pattern reserved for infinity, so it overflows too.
    overflow = (exponent > _HIF8_MAX_EXPONENT) | ((exponent == _HIF8_MAX_EXPONENT) & (steps > 0))

    denormal = exponent < _HIF8_MIN_NORMAL_EXPONENT
    safe_exponent = np.clip(exponent, -_HIF8_MAX_EXPONENT, _HIF8_MAX_EXPONENT)
    normal_bits = _hif8_pack_normal(safe_exponent, np.where(denormal, 0, steps))
    denormal_bits = exponent + 23
    bits = np.where(denormal, denormal_bits, normal_bits)
    magnitude = np.ldexp(1.0 + steps / (1 << width).astype(np.float64), exponent)

    is_zero = (a == 0) | (finite & below_zero_midpoint)
    is_inf = np.isinf(a) | (finite & overflow)
    is_nan = np.isnan(a)
    codes = np.select([is_nan, is_zero, is_inf], [0x80, 0x00, sign_bit | 0x6F], sign_bit | bits)
    stored = np.select(
        [is_nan, is_zero, is_inf],
        [np.nan, 0.0, np.where(sign_bit != 0, -np.inf, np.inf)],
        np.where(sign_bit != 0, -magnitude, magnitude),
    )
    return codes.astype(np.uint8).tobytes(), stored


_DT = DataType
_ENCODERS: dict[int, _Encoder] = {
    _DT.DT_FLOAT: _float_cast("<f4"),
    _DT.DT_FLOAT16: _float_cast("<f2"),
    _DT.DT_DOUBLE: _float_cast("<f8"),
    _DT.DT_BF16: _float_cast(ml_dtypes.bfloat16),
    _DT.DT_FLOAT8_E5M2: _float_cast(ml_dtypes.float8_e5m2),
    _DT.DT_FLOAT8_E4M3FN: _float_cast(ml_dtypes.float8_e4m3fn),
    _DT.DT_FLOAT8_E8M0: _encode_e8m0,
    _DT.DT_HIFLOAT8: _encode_hifloat8,
    _DT.DT_COMPLEX64: _complex_cast("<c8"),
    _DT.DT_COMPLEX128: _complex_cast("<c16"),
    _DT.DT_COMPLEX32: _encode_complex32,
    _DT.DT_INT8: _integer_cast("i1"),
    _DT.DT_UINT8: _integer_cast("u1"),
    _DT.DT_INT16: _integer_cast("<i2"),
    _DT.DT_UINT16: _integer_cast("<u2"),
    _DT.DT_INT32: _integer_cast("<i4"),
    _DT.DT_UINT32: _integer_cast("<u4"),
    _DT.DT_INT64: _integer_cast("<i8"),
    _DT.DT_UINT64: _integer_cast("<u8"),
    _DT.DT_RESOURCE: _integer_cast("<i8"),
    # Quantized types written as their plain storage integers: the same (unverified) reading as tcmp's.
    _DT.DT_QINT8: _integer_cast("i1"),
    _DT.DT_QINT16: _integer_cast("<i2"),
    _DT.DT_QINT32: _integer_cast("<i4"),
    _DT.DT_QUINT8: _integer_cast("u1"),
    _DT.DT_QUINT16: _integer_cast("<u2"),
    _DT.DT_BOOL: _encode_bool,
    _DT.DT_INT4: _sub_byte(4, signed=True),
    _DT.DT_INT2: _sub_byte(2, signed=True),
    _DT.DT_UINT2: _sub_byte(2, signed=False),
    _DT.DT_UINT1: _encode_uint1,
}

SUPPORTED_ENCODE_DTYPES: frozenset[int] = frozenset(int(code) for code in _ENCODERS)
"""The dtype codes `encode_values` can write."""


def encode_values(values: np.ndarray, code: int) -> EncodedPayload:
    """Encode `values` as a GE payload of dtype `code` (C order). ValueError for an unsupported code or
    integer values that the dtype cannot hold."""
    encoder = _ENCODERS.get(code)
    if encoder is None:
        raise ValueError(f"cannot encode dtype {code}")
    payload, stored = encoder(np.asarray(values))
    return EncodedPayload(payload=payload, values=stored)
