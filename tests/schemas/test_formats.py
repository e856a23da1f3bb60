"""to_nd (device layout → ND) against the forward packer and hand-worked device positions.

Expected values come from: the writers' enum numbers, hand-computed device indices (the formulas of
docs/formats.md, "Device formats",
worked out in the comments), a per-element transcription of GE's grouped FRACTAL_Z loop, and
tcmp.schemas.synth.pack (a forward scatter written independently of to_nd).
"""

from __future__ import annotations

import math
import tracemalloc

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tcmp.schemas.device_layouts import UNCONVERTED_PREFIX, NdTensor
from tcmp.schemas.formats import Format, format_name, to_nd
from tcmp.schemas.synth.pack import pack

DTYPES = [np.float16, np.float32, ml_dtypes.bfloat16, np.int8]


def _random(shape, dtype, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype) == np.int8:
        return rng.integers(-128, 128, size=shape, dtype=np.int8)
    # Non-zero values everywhere, so a misplaced element cannot hide behind padding zeros.
    return (rng.standard_normal(shape) + 5.0).astype(dtype)


def _round_trip(nd: np.ndarray, fmt: int, **kwargs) -> NdTensor:
    packed = pack(nd, fmt, **kwargs)
    assert packed.device.shape == packed.device_shape
    return to_nd(packed.device.reshape(-1), fmt, packed.sub_format, packed.device_shape, packed.original_shape)


def _assert_same(result: NdTensor, nd: np.ndarray) -> None:
    assert result.flag is None, result.flag
    assert result.converted
    assert result.array.shape == nd.shape
    assert result.array.dtype == nd.dtype
    assert result.array.flags.c_contiguous
    assert result.array.tobytes() == nd.tobytes()


def _one_hot_device(device_shape, position, dtype=np.float16, value=7.0) -> np.ndarray:
    device = np.zeros(device_shape, dtype=dtype)
    device[position] = value
    return device


# ---------------------------------------------------------------------------------------------------------
# Enum
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("member", "value"),
    [
        (Format.NCHW, 0),
        (Format.ND, 2),
        (Format.NC1HWC0, 3),
        (Format.FRACTAL_Z, 4),
        (Format.NC1HWC0_C04, 12),
        (Format.HWCN, 16),
        (Format.C1HWNCoC0, 25),
        (Format.FRACTAL_ZZ, 28),
        (Format.FRACTAL_NZ, 29),
        (Format.NCDHW, 30),
        (Format.DHWCN, 31),
        (Format.NDC1HWC0, 32),
        (Format.FRACTAL_Z_3D, 33),
        (Format.NC, 35),
        (Format.NYUV_A, 46),
        (Format.NCL, 47),
        (Format.C1HWC0, 49),
        (Format.FRACTAL_NZ_C0_16, 50),
        (Format.FRACTAL_NZ_C0_32, 51),
        (Format.FRACTAL_NZ_C0_2, 52),
        (Format.FRACTAL_NZ_C0_4, 53),
        (Format.FRACTAL_NZ_C0_8, 54),
        (Format.MAX, 255),
    ],
)
def test_format_values_match_spec_table(member, value):
    assert int(member) == value


def test_format_enum_covers_0_to_54_without_gaps():
    assert sorted(int(f) for f in Format) == [*range(55), 255]


def test_format_name():
    assert format_name(29) == "FRACTAL_NZ"
    assert format_name(Format.DHWCN) == "DHWCN"
    assert format_name(77) == "FORMAT_UNKNOWN(77)"
    assert format_name(-1) == "FORMAT_UNKNOWN(-1)"


# ---------------------------------------------------------------------------------------------------------
# Hand-worked device positions (pack puts the element there; to_nd reads it back from there)
# ---------------------------------------------------------------------------------------------------------

# (format, logical shape, logical index, expected device shape, expected device index, pack kwargs,
#  sub_format)
HAND_WORKED = [
    # NZ (20, 5), C0=16: C1=1, N1=2; (n=17, c=3) -> [3//16, 17//16, 17%16, 3%16] = [0, 1, 1, 3]
    (Format.FRACTAL_NZ, (20, 5), (17, 3), (1, 2, 16, 16), (0, 1, 1, 3), {}, 0),
    # NZ batch (2, 3, 40, 20), C0=8: C1=3, N1=3; (b0=1, b1=2, n=35, c=19) -> [1, 2, 2, 2, 3, 3]
    (Format.FRACTAL_NZ, (2, 3, 40, 20), (1, 2, 35, 19), (2, 3, 3, 3, 16, 8), (1, 2, 2, 2, 3, 3), {"c0": 8}, 0),
    # NZ 1-D [40] as [1, 40], C0=16: device (3, 1, 16, 16); c=37 -> [2, 0, 0, 5]
    (Format.FRACTAL_NZ, (40,), (37,), (3, 1, 16, 16), (2, 0, 0, 5), {}, 0),
    # NZ_C0_4 (5, 9): C1=3, N1=1; (n=4, c=6) -> [1, 0, 4, 2]
    (Format.FRACTAL_NZ_C0_4, (5, 9), (4, 6), (3, 1, 16, 4), (1, 0, 4, 2), {}, 0),
    # NC1HWC0 NCHW (2, 20, 3, 4), C0=16: (n=1, c=18, h=2, w=0) -> [1, 1, 2, 0, 2]
    (Format.NC1HWC0, (2, 20, 3, 4), (1, 18, 2, 0), (2, 2, 3, 4, 16), (1, 1, 2, 0, 2), {}, 0),
    # NC1HWC0_C04 NCHW (1, 6, 2, 2): C0=4, (n=0, c=5, h=1, w=1) -> [0, 1, 1, 1, 1]
    (Format.NC1HWC0_C04, (1, 6, 2, 2), (0, 5, 1, 1), (1, 2, 2, 2, 4), (0, 1, 1, 1, 1), {}, 0),
    # FRACTAL_Z NCHW (20, 20, 3, 2), C0=16: C1=2, N1=2;
    # (n=17, c=18, h=2, w=1) -> [(18//16*3 + 2)*2 + 1, 17//16, 17%16, 18%16] = [11, 1, 1, 2]
    (Format.FRACTAL_Z, (20, 20, 3, 2), (17, 18, 2, 1), (12, 2, 16, 16), (11, 1, 1, 2), {}, 0),
    # FRACTAL_Z 2-D (K=40, N=20), C0=16: (k=35, n=18) -> [35//16, 18//16, 18%16, 35%16] = [2, 1, 2, 3]
    (Format.FRACTAL_Z, (40, 20), (35, 18), (3, 2, 16, 16), (2, 1, 2, 3), {}, 0),
    # Grouped FRACTAL_Z, groups=2, NCHW (6, 5, 1, 1), C0=16: cout=3, cin=5,
    # e = min(lcm(lcm(5,16)/5, lcm(3,16)/3), 2) = min(16, 2) = 2; C1 = ceil(10/16) = 1, N1 = ceil(6/16) = 1,
    # g_dim = 1. (n=4, c=2): g=1, n'=1, r=1, ci=1*5+2=7, co=1*3+1=4 -> [0, 0, 4, 7]
    (Format.FRACTAL_Z, (6, 5, 1, 1), (4, 2, 0, 0), (1, 1, 16, 16), (0, 0, 4, 7), {"groups": 2}, 2),
    # Grouped, groups=4, NCHW (64, 8, 1, 1), C0=16: cout=16, cin=8, e = min(lcm(2, 1), 4) = 2, C1 = 1,
    # N1 = 2, g_dim = 2. (n=53, c=6): g=3, n'=5, r=1, ci=14, co=21 -> [(3//2)*1 + 14//16, 1, 5, 14]
    (Format.FRACTAL_Z, (64, 8, 1, 1), (53, 6, 0, 0), (2, 2, 16, 16), (1, 1, 5, 14), {"groups": 4}, 4),
    # NDC1HWC0 NCDHW (2, 20, 3, 2, 2), C0=16: (n=1, c=17, d=2, h=0, w=1) -> [1, 2, 1, 0, 1, 1]
    (Format.NDC1HWC0, (2, 20, 3, 2, 2), (1, 17, 2, 0, 1), (2, 3, 2, 2, 2, 16), (1, 2, 1, 0, 1, 1), {}, 0),
    # FRACTAL_Z_3D DHWCN (2, 2, 3, 20, 5), C0=16: C1=2; (d=1, h=1, w=2, c=17, n=3)
    # -> [((1*2 + 1)*2 + 1)*3 + 2, 0, 3, 1] = [23, 0, 3, 1]
    (Format.FRACTAL_Z_3D, (2, 2, 3, 20, 5), (1, 1, 2, 17, 3), (24, 1, 16, 16), (23, 0, 3, 1), {}, 0),
]


@pytest.mark.parametrize(("fmt", "shape", "index", "device_shape", "device_index", "kwargs", "sub_format"), HAND_WORKED)
def test_pack_puts_element_at_hand_worked_position(fmt, shape, index, device_shape, device_index, kwargs, sub_format):
    nd = np.zeros(shape, dtype=np.float16)
    nd[index] = 7.0
    packed = pack(nd, fmt, **kwargs)
    assert packed.device_shape == device_shape
    assert packed.sub_format == sub_format
    assert [tuple(int(i) for i in p) for p in np.argwhere(packed.device)] == [device_index]


@pytest.mark.parametrize(("fmt", "shape", "index", "device_shape", "device_index", "kwargs", "sub_format"), HAND_WORKED)
def test_to_nd_reads_element_from_hand_worked_position(
    fmt, shape, index, device_shape, device_index, kwargs, sub_format
):
    device = _one_hot_device(device_shape, device_index)
    result = to_nd(device.reshape(-1), fmt, sub_format, device_shape, shape)
    assert result.flag is None, result.flag
    assert result.array.shape == shape
    assert [tuple(int(i) for i in p) for p in np.argwhere(result.array)] == [index]
    assert result.array[index] == 7.0


def _ge_grouped_fractal_z_loop(nd_nchw: np.ndarray, groups: int, c0: int) -> np.ndarray:
    """Per-element transcription of the index arithmetic in GE's TransFormatHwcnToFzWithGroups
    (hicann/ge base/formats/format_transfers/format_transfer_fractal_z.cc), flat destination index."""
    n_dim, cin, h_dim, w_dim = nd_nchw.shape
    cout = n_dim // groups
    e = min(math.lcm(math.lcm(cin, c0) // cin, math.lcm(cout, 16) // cout), groups)
    cin_opt = -(-(e * cin) // c0) * c0
    cout_opt = -(-(e * cout) // 16) * 16
    c1 = cin_opt // c0
    g_dim = -(-groups // e)
    flat = np.zeros(g_dim * c1 * h_dim * w_dim * cout_opt * c0, dtype=nd_nchw.dtype)
    for g in range(groups):
        for c in range(cin):
            for h in range(h_dim):
                for w in range(w_dim):
                    for n in range(cout):
                        e_val = g % e
                        dst_ci = e_val * cin + c
                        dst_co = e_val * cout + n
                        dst = (
                            (g // e) * c1 * h_dim * w_dim * cout_opt * c0
                            + (dst_ci // c0) * h_dim * w_dim * cout_opt * c0
                            + h * w_dim * cout_opt * c0
                            + w * cout_opt * c0
                            + dst_co * c0
                            + dst_ci % c0
                        )
                        flat[dst] = nd_nchw[g * cout + n, c, h, w]
    return flat


@pytest.mark.parametrize(
    ("shape", "groups", "c0"),
    [
        ((6, 5, 2, 1), 2, 16),
        ((12, 3, 1, 2), 4, 16),
        ((64, 8, 1, 1), 4, 16),
        ((10, 7, 2, 2), 5, 8),
        ((4, 1, 3, 3), 4, 16),
    ],
)
def test_grouped_fractal_z_matches_ge_loop(shape, groups, c0):
    nd = _random(shape, np.float32, seed=3)
    expected = _ge_grouped_fractal_z_loop(nd, groups, c0)
    packed = pack(nd, Format.FRACTAL_Z, c0=c0, groups=groups)
    assert packed.device.reshape(-1).tobytes() == expected.tobytes()
    result = to_nd(expected, Format.FRACTAL_Z, groups, packed.device_shape, shape)
    _assert_same(result, nd)


# ---------------------------------------------------------------------------------------------------------
# Round trips: every format × C0 × dtype
# ---------------------------------------------------------------------------------------------------------

ROUND_TRIP_CASES = [
    (Format.FRACTAL_NZ, (37, 21), {}),
    (Format.FRACTAL_NZ, (2, 3, 17, 33), {}),
    (Format.FRACTAL_NZ, (2, 1, 2, 2, 5, 40), {}),
    (Format.FRACTAL_NZ, (45,), {}),
    (Format.NC1HWC0, (2, 37, 3, 5), {}),
    (Format.NC1HWC0, (2, 3, 5, 37), {"layout": Format.NHWC}),
    (Format.FRACTAL_Z, (19, 37, 3, 2), {}),
    (Format.FRACTAL_Z, (3, 2, 37, 19), {"layout": Format.HWCN}),
    (Format.FRACTAL_Z, (19, 3, 2, 37), {"layout": Format.NHWC}),
    (Format.FRACTAL_Z, (37, 19), {}),
    (Format.FRACTAL_Z, (12, 5, 3, 3), {"groups": 3}),
    (Format.FRACTAL_Z, (3, 3, 5, 12), {"groups": 3, "layout": Format.HWCN}),
    (Format.NDC1HWC0, (2, 37, 2, 3, 2), {}),
    (Format.NDC1HWC0, (2, 2, 3, 2, 37), {"layout": Format.NDHWC}),
    (Format.FRACTAL_Z_3D, (2, 3, 2, 37, 19), {}),
    (Format.FRACTAL_Z_3D, (19, 37, 2, 3, 2), {"layout": Format.NCDHW}),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("c0", [2, 4, 8, 16, 32])
@pytest.mark.parametrize(("fmt", "shape", "kwargs"), ROUND_TRIP_CASES)
def test_round_trip(fmt, shape, kwargs, c0, dtype):
    nd = _random(shape, dtype, seed=c0)
    _assert_same(_round_trip(nd, fmt, c0=c0, **kwargs), nd)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize(
    ("fmt", "c0"),
    [
        (Format.FRACTAL_NZ_C0_2, 2),
        (Format.FRACTAL_NZ_C0_4, 4),
        (Format.FRACTAL_NZ_C0_8, 8),
        (Format.FRACTAL_NZ_C0_16, 16),
        (Format.FRACTAL_NZ_C0_32, 32),
        (Format.NC1HWC0_C04, 4),
    ],
)
def test_fixed_c0_formats_round_trip(fmt, c0, dtype):
    shape = (3, 7, 5, 2) if fmt == Format.NC1HWC0_C04 else (3, 19, 37)
    nd = _random(shape, dtype)
    packed = pack(nd, fmt, c0=16)  # the format's own C0 wins over the argument
    assert packed.device_shape[-1] == c0
    _assert_same(to_nd(packed.device.reshape(-1), fmt, 0, packed.device_shape, shape), nd)


def test_nz_with_device_batch_dims_flattened_differently():
    # The device keeps prod(B) fixed but may group batch dims differently (B=(2,3) → device B=(6,)).
    nd = _random((2, 3, 20, 9), np.float16)
    packed = pack(nd.reshape(6, 20, 9), Format.FRACTAL_NZ)
    result = to_nd(packed.device.reshape(-1), Format.FRACTAL_NZ, 0, packed.device_shape, (2, 3, 20, 9))
    _assert_same(result, nd)


def test_composite_format_int_is_split():
    nd = _random((12, 5, 3, 3), np.float32)
    packed = pack(nd, Format.FRACTAL_Z, groups=3)
    composite = int(Format.FRACTAL_Z) | (3 << 8) | (5 << 24)  # sub_format 3, C0 bits for 16
    result = to_nd(packed.device.reshape(-1), composite, 0, packed.device_shape, nd.shape)
    _assert_same(result, nd)


# ---------------------------------------------------------------------------------------------------------
# Layout choice and lower-rank originals
# ---------------------------------------------------------------------------------------------------------


def test_nc1hwc0_prefers_nchw_when_both_layouts_fit():
    # (2, 4, 4, 4) fits both NCHW (C=4, H=W=4) and NHWC (H=W=4, C=4) for device (2, 1, 4, 4, 16).
    nd = _random((2, 4, 4, 4), np.float32)
    packed = pack(nd, Format.NC1HWC0)
    result = to_nd(packed.device.reshape(-1), Format.NC1HWC0, 0, packed.device_shape, nd.shape)
    _assert_same(result, nd)


def test_nc1hwc0_gives_nhwc_when_only_nhwc_fits():
    nd = _random((2, 3, 5, 20), np.float32)  # NHWC: C=20, so C1=2 while NCHW would need C1=1
    packed = pack(nd, Format.NC1HWC0, layout=Format.NHWC)
    result = to_nd(packed.device.reshape(-1), Format.NC1HWC0, 0, packed.device_shape, nd.shape)
    _assert_same(result, nd)
    assert result.array[1, 2, 4, 19] == nd[1, 2, 4, 19]


@pytest.mark.parametrize(
    ("original", "expanded"),
    [((37,), (1, 37, 1, 1)), ((4, 37), (4, 37, 1, 1)), ((37, 3), (1, 37, 3, 1)), ((37, 3, 2), (1, 37, 3, 2))],
)
def test_nc1hwc0_lower_rank_original_is_expanded_in_order(original, expanded):
    # GE expands a rank<4 NCHW tensor by inserting 1-dims in order (transformer ExpandDimension).
    nd = _random(original, np.float16)
    packed = pack(nd.reshape(expanded), Format.NC1HWC0)
    result = to_nd(packed.device.reshape(-1), Format.NC1HWC0, 0, packed.device_shape, original)
    _assert_same(result, nd)


def test_nc1hwc0_lower_rank_original_matching_no_in_order_expansion_is_flagged():
    # Device: N=1, H=5, W=2, C1=1, so C = 30/10 = 3. NCHW is (1, 3, 5, 2), NHWC is (1, 5, 2, 3); an original
    # (2, 5, 3) is neither with 1-dims dropped, so reshaping would silently permute axes.
    device_shape = (1, 1, 5, 2, 16)
    flat = np.arange(160, dtype=np.float32)
    _assert_flagged_flat(to_nd(flat, Format.NC1HWC0, 0, device_shape, (2, 5, 3)), flat, "does not fit")


def test_ndc1hwc0_lower_rank_original():
    nd = _random((37,), np.float32)
    packed = pack(nd.reshape(1, 37, 1, 1, 1), Format.NDC1HWC0)
    _assert_same(to_nd(packed.device.reshape(-1), Format.NDC1HWC0, 0, packed.device_shape, (37,)), nd)


def test_fractal_z_3d_tie_break_prefers_ncdhw():
    # (4, 4, 4, 4, 4): NCDHW → (64, 1, 16, 16); DHWCN → D*C1*H*W = 4*1*4*4 = 64, N1 = 1: both fit.
    nd = _random((4, 4, 4, 4, 4), np.float32)
    packed = pack(nd, Format.FRACTAL_Z_3D, layout=Format.NCDHW)
    _assert_same(to_nd(packed.device.reshape(-1), Format.FRACTAL_Z_3D, 0, packed.device_shape, nd.shape), nd)


def test_fractal_z_3d_dhwcn_when_only_dhwcn_fits():
    nd = _random((2, 3, 2, 20, 5), np.float32)
    packed = pack(nd, Format.FRACTAL_Z_3D, layout=Format.DHWCN)
    _assert_same(to_nd(packed.device.reshape(-1), Format.FRACTAL_Z_3D, 0, packed.device_shape, nd.shape), nd)


def test_nz_1d_column_layout_from_ge_shape_inference():
    # GE's TransferShapeUtils makes a 1-D [L] NZ tensor [L, 1]: device (1, ceil(L/16), 16, C0).
    length, c0 = 40, 16
    device = np.zeros((1, 3, 16, c0), dtype=np.float32)
    values = np.arange(1, length + 1, dtype=np.float32)
    for i in range(length):
        device[0, i // 16, i % 16, 0] = values[i]  # [L, 1]: n = i, c = 0
    result = to_nd(device.reshape(-1), Format.FRACTAL_NZ, 0, device.shape, (length,))
    assert result.flag is None
    np.testing.assert_array_equal(result.array, values)


def test_nz_1d_ambiguous_shape_resolved_by_zero_padding():
    # L=5 ≤ 16 and ≤ C0: device (1, 1, 16, 16) for both [1, L] and [L, 1].
    values = np.array([1, 2, 3, 4, 5], dtype=np.float16)
    row = np.zeros((1, 1, 16, 16), dtype=np.float16)
    row[0, 0, 0, :5] = values
    column = np.zeros((1, 1, 16, 16), dtype=np.float16)
    column[0, 0, :5, 0] = values
    for device in (row, column):
        result = to_nd(device.reshape(-1), Format.FRACTAL_NZ, 0, device.shape, (5,))
        assert result.flag is None
        np.testing.assert_array_equal(result.array, values)
    both = row + column
    result = to_nd(both.reshape(-1), Format.FRACTAL_NZ, 0, both.shape, (5,))
    assert result.flag is not None and "ambiguous" in result.flag
    assert result.array.shape == (256,)


# ---------------------------------------------------------------------------------------------------------
# Plain layouts: reshape only
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", [Format.NHWC, Format.NCHW, Format.HWCN, Format.ND, Format.NCDHW, Format.NCL])
def test_plain_layout_is_never_transposed(fmt):
    nd = _random((2, 3, 4, 5), np.float32)  # the peer turns NHWC [2,3,4,5] into (2,3,3,4)
    result = to_nd(nd.reshape(-1), fmt, 0, nd.shape, nd.shape)
    assert result.flag is None
    assert not result.converted
    assert result.array.shape == (2, 3, 4, 5)
    assert result.array.tobytes() == nd.tobytes()


def test_plain_prefers_original_then_device_shape():
    flat = np.arange(24, dtype=np.int8)
    assert to_nd(flat, Format.ND, 0, (24,), (2, 3, 4)).array.shape == (2, 3, 4)
    fallback = to_nd(flat, Format.NCHW, 0, (4, 6), (5, 5))
    assert fallback.flag is None and fallback.array.shape == (4, 6)
    assert fallback.array.tobytes() == flat.tobytes()
    assert to_nd(np.array([3.5], np.float32), Format.ND, 0, (), ()).array.shape == ()


def test_plain_flags_when_nothing_fits():
    flat = np.arange(24, dtype=np.float32)
    result = to_nd(flat, Format.NHWC, 0, (5, 5), (2, 2))
    assert result.flag is not None and result.flag.startswith(UNCONVERTED_PREFIX)
    assert result.array.tobytes() == flat.tobytes() and result.array.ndim == 1


# ---------------------------------------------------------------------------------------------------------
# Flags: data kept flat
# ---------------------------------------------------------------------------------------------------------


def _assert_flagged_flat(result: NdTensor, flat: np.ndarray, reason: str) -> None:
    assert result.flag is not None
    assert result.flag.startswith(UNCONVERTED_PREFIX)
    assert reason in result.flag
    assert not result.converted
    assert result.array.ndim == 1
    assert result.array.tobytes() == flat.tobytes()


@pytest.mark.parametrize(
    "fmt", [Format.FRACTAL_ZZ, Format.C1HWNCoC0, Format.FRACTAL_Z_C04, Format.FRACTAL_ZN_RNN, 77, Format.MD]
)
def test_unknown_or_unsupported_format_is_flagged(fmt):
    flat = np.arange(64, dtype=np.float16)
    _assert_flagged_flat(to_nd(flat, fmt, 0, (4, 16), (4, 16)), flat, format_name(fmt))


@pytest.mark.parametrize(
    ("fmt", "device_shape", "original", "sub_format", "reason"),
    [
        # element count differs from the device shape
        (Format.FRACTAL_NZ, (1, 2, 16, 8), (20, 5), 0, "elements"),
        # C1 = 2 in the device but ceil(5/16) = 1
        (Format.FRACTAL_NZ, (2, 2, 16, 16), (20, 5), 0, "does not fit"),
        # N1 = 1 in the device but ceil(20/16) = 2
        (Format.FRACTAL_NZ, (1, 1, 16, 16), (20, 5), 0, "does not fit"),
        # batch product 3 vs 2
        (Format.FRACTAL_NZ, (3, 1, 2, 16, 16), (2, 20, 5), 0, "does not fit"),
        (Format.FRACTAL_NZ, (1, 2, 16, 16), (), 0, "no original shape"),
        (Format.NC1HWC0, (2, 2, 3, 4, 16), (2, 40, 3, 4), 0, "does not fit"),
        (Format.NC1HWC0, (2, 2, 3, 16), (2, 20, 3), 0, "not 5-D"),
        (Format.FRACTAL_Z, (12, 2, 16, 16), (20, 18, 3, 3), 0, "does not fit"),
        (Format.FRACTAL_Z, (12, 2, 16, 16), (20, 18, 3), 0, "2-D or 4-D"),
        (Format.FRACTAL_Z, (1, 1, 16, 16), (7, 5, 1, 1), 2, "does not fit"),  # 7 channels, 2 groups
        (Format.FRACTAL_Z_3D, (24, 1, 16, 16), (2, 2, 3, 20, 5), 2, "grouped"),
        (Format.NDC1HWC0, (2, 3, 3, 2, 2, 16), (2, 20, 3, 2, 2), 0, "does not fit"),
    ],
)
def test_inconsistent_sizes_are_flagged_and_kept_flat(fmt, device_shape, original, sub_format, reason):
    flat = np.arange(math.prod(device_shape) - (reason == "elements"), dtype=np.float32)
    _assert_flagged_flat(to_nd(flat, fmt, sub_format, device_shape, original), flat, reason)


def test_negative_dims_are_flagged():
    flat = np.zeros(4, np.float32)
    _assert_flagged_flat(to_nd(flat, Format.ND, 0, (4,), (-1, 4)), flat, "negative")


@pytest.mark.parametrize(
    ("device_shape", "reason"),
    [((2, -2), "negative"), ((4, 2**47, 4), "beyond any real tensor"), ((0, 2**50), "beyond any real tensor")],
)
def test_a_garbage_device_shape_is_flagged_even_where_the_original_fits(device_shape, reason):
    # a plain tensor whose original shape holds the payload exactly is the common case to_nd takes first;
    # the device shape beside it must still be checked
    flat = np.arange(4, dtype=np.float16)
    _assert_flagged_flat(to_nd(flat, Format.ND, 0, device_shape, (2, 2)), flat, reason)


# ---------------------------------------------------------------------------------------------------------
# Property tests
# ---------------------------------------------------------------------------------------------------------

# Layouts to_nd tries, in its order of preference (documented tie-breaks).
PREFERENCE = {
    Format.NC1HWC0: [Format.NCHW, Format.NHWC],
    Format.FRACTAL_Z: [Format.NCHW, Format.HWCN, Format.NHWC],
    Format.NDC1HWC0: [Format.NCDHW, Format.NDHWC],
    Format.FRACTAL_Z_3D: [Format.NCDHW, Format.DHWCN],
}


def _shadowed(shape, fmt, layout, c0, groups=1) -> bool:
    """True when a layout to_nd prefers over `layout` also explains the device shape. to_nd then (by design)
    reads the data in that other arrangement, so a round trip can only check flag and shape."""
    zeros = np.zeros(shape, np.int8)
    target = pack(zeros, fmt, c0=c0, groups=groups, layout=layout).device_shape
    for earlier in PREFERENCE[fmt][: PREFERENCE[fmt].index(layout)]:
        for candidate_groups in {groups, 1}:
            try:
                packed = pack(zeros, fmt, c0=c0, groups=candidate_groups, layout=earlier)
            except ValueError:
                continue
            if packed.device_shape == target:
                return True
    return False


def _check_round_trip(nd, fmt, layout, c0, groups=1) -> None:
    result = _round_trip(nd, fmt, c0=c0, groups=groups, layout=layout)
    if _shadowed(nd.shape, fmt, layout, c0, groups):
        assert result.flag is None and result.array.shape == nd.shape
    else:
        _assert_same(result, nd)


dims_c = st.integers(1, 40)
dims_small = st.integers(1, 4)
c0s = st.sampled_from([2, 4, 8, 16, 32])
dtypes = st.sampled_from(DTYPES)
seeds = st.integers(0, 2**32 - 1)


@settings(max_examples=60, deadline=None)
@given(batch=st.lists(st.integers(1, 3), max_size=3), n=dims_c, c=dims_c, c0=c0s, dtype=dtypes, seed=seeds)
def test_property_nz(batch, n, c, c0, dtype, seed):
    nd = _random((*batch, n, c), dtype, seed)
    _assert_same(_round_trip(nd, Format.FRACTAL_NZ, c0=c0), nd)


@settings(max_examples=30, deadline=None)
@given(length=st.integers(17, 80), c0=c0s, dtype=dtypes, seed=seeds)
def test_property_nz_1d(length, c0, dtype, seed):
    nd = _random((length,), dtype, seed)
    _assert_same(_round_trip(nd, Format.FRACTAL_NZ, c0=c0), nd)


@settings(max_examples=60, deadline=None)
@given(
    n=dims_small,
    c=dims_c,
    h=dims_small,
    w=dims_small,
    nhwc=st.booleans(),
    c0=c0s,
    dtype=dtypes,
    seed=seeds,
)
def test_property_nc1hwc0(n, c, h, w, nhwc, c0, dtype, seed):
    shape = (n, h, w, c) if nhwc else (n, c, h, w)
    nd = _random(shape, dtype, seed)
    _check_round_trip(nd, Format.NC1HWC0, Format.NHWC if nhwc else Format.NCHW, c0)


@settings(max_examples=60, deadline=None)
@given(
    n=dims_c,
    c=dims_c,
    h=dims_small,
    w=dims_small,
    layout=st.sampled_from([Format.NCHW, Format.HWCN, Format.NHWC]),
    c0=c0s,
    dtype=dtypes,
    seed=seeds,
)
def test_property_fractal_z(n, c, h, w, layout, c0, dtype, seed):
    shape = tuple({"N": n, "C": c, "H": h, "W": w}[letter] for letter in layout.name)
    nd = _random(shape, dtype, seed)
    _check_round_trip(nd, Format.FRACTAL_Z, layout, c0)


@settings(max_examples=60, deadline=None)
@given(
    groups=st.integers(2, 9),
    cout=st.integers(1, 20),
    cin=st.integers(1, 20),
    h=dims_small,
    w=dims_small,
    layout=st.sampled_from([Format.NCHW, Format.HWCN, Format.NHWC]),
    c0=c0s,
    dtype=dtypes,
    seed=seeds,
)
def test_property_fractal_z_grouped(groups, cout, cin, h, w, layout, c0, dtype, seed):
    sizes = {"N": groups * cout, "C": cin, "H": h, "W": w}
    nd = _random(tuple(sizes[letter] for letter in layout.name), dtype, seed)
    _check_round_trip(nd, Format.FRACTAL_Z, layout, c0, groups)


@settings(max_examples=40, deadline=None)
@given(k=dims_c, n=dims_c, c0=c0s, dtype=dtypes, seed=seeds)
def test_property_fractal_z_2d(k, n, c0, dtype, seed):
    nd = _random((k, n), dtype, seed)
    _assert_same(_round_trip(nd, Format.FRACTAL_Z, c0=c0), nd)


@settings(max_examples=40, deadline=None)
@given(
    n=dims_small,
    c=dims_c,
    d=dims_small,
    h=dims_small,
    w=dims_small,
    ndhwc=st.booleans(),
    c0=c0s,
    dtype=dtypes,
    seed=seeds,
)
def test_property_ndc1hwc0(n, c, d, h, w, ndhwc, c0, dtype, seed):
    shape = (n, d, h, w, c) if ndhwc else (n, c, d, h, w)
    nd = _random(shape, dtype, seed)
    layout = Format.NDHWC if ndhwc else Format.NCDHW
    _check_round_trip(nd, Format.NDC1HWC0, layout, c0)


@settings(max_examples=40, deadline=None)
@given(
    n=dims_c,
    c=dims_c,
    d=dims_small,
    h=dims_small,
    w=dims_small,
    layout=st.sampled_from([Format.DHWCN, Format.NCDHW]),
    c0=c0s,
    dtype=dtypes,
    seed=seeds,
)
def test_property_fractal_z_3d(n, c, d, h, w, layout, c0, dtype, seed):
    sizes = {"N": n, "C": c, "D": d, "H": h, "W": w}
    nd = _random(tuple(sizes[letter] for letter in layout.name), dtype, seed)
    _check_round_trip(nd, Format.FRACTAL_Z_3D, layout, c0)


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(1, 6), min_size=0, max_size=5), dtype=dtypes, seed=seeds)
def test_property_plain_layouts_are_byte_identical(shape, dtype, seed):
    nd = _random(tuple(shape), dtype, seed)
    for fmt in (Format.ND, Format.NHWC, Format.NCHW, Format.HWCN):
        result = to_nd(nd.reshape(-1), fmt, 0, nd.shape, nd.shape)
        assert result.flag is None and not result.converted
        assert result.array.shape == nd.shape
        assert result.array.tobytes() == nd.tobytes()


# ---------------------------------------------------------------------------------------------------------
# One copy
# ---------------------------------------------------------------------------------------------------------


def _nz_device_index(n: int, c: int, c0: int) -> tuple[int, int, int, int]:
    return (c // c0, n // 16, n % 16, c % c0)


def test_to_nd_makes_at_most_one_copy():
    n, c, c0 = 2047, 4095, 16  # fp16 output ≈ 16 MB; both dims padded
    device_shape = (-(-c // c0), -(-n // 16), 16, c0)
    device = np.random.default_rng(1).standard_normal(math.prod(device_shape), dtype=np.float32)
    flat = device.astype(np.float16)
    del device
    tracemalloc.start()
    try:
        result = to_nd(flat, Format.FRACTAL_NZ, 0, device_shape, (n, c))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.flag is None
    assert result.array.flags.c_contiguous
    assert not np.shares_memory(result.array, flat)
    assert peak < 1.5 * result.array.nbytes
    cube = flat.reshape(device_shape)
    rng = np.random.default_rng(2)
    for i, j in zip(rng.integers(0, n, 50), rng.integers(0, c, 50)):
        assert result.array[i, j] == cube[_nz_device_index(int(i), int(j), c0)]
