"""The one `Format -> converter` table (issue 24): `CONVERTIBLE_FORMATS` is its keys, and every format in it undoes a
small device tensor packed here by hand, element by element from the layout's index formula, so a format added to
the table without a worked example here fails `test_every_format_in_the_table_has_a_worked_example`."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tcmp.schemas.formats import CONVERTERS, CONVERTIBLE_FORMATS, NZ_FORMATS, PLAIN_FORMATS, Format, to_nd


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _nd(shape: tuple[int, ...]) -> np.ndarray:
    """1, 2, 3, ... in row-major order: every element distinct and none 0, so padding cannot stand in for one."""
    return np.arange(1, int(np.prod(shape)) + 1, dtype=np.float32).reshape(shape)


def _nc1hwc0(n: int, c: int, h: int, w: int, c0: int):
    nd = _nd((n, c, h, w))
    device = np.zeros((n, _ceil(c, c0), h, w, c0), np.float32)
    for i, j, k, m in itertools.product(range(n), range(c), range(h), range(w)):
        device[i, j // c0, k, m, j % c0] = nd[i, j, k, m]
    return device, nd


def _ndc1hwc0(n: int, c: int, d: int, h: int, w: int, c0: int):
    nd = _nd((n, c, d, h, w))
    device = np.zeros((n, d, _ceil(c, c0), h, w, c0), np.float32)
    for i, j, q, k, m in itertools.product(range(n), range(c), range(d), range(h), range(w)):
        device[i, q, j // c0, k, m, j % c0] = nd[i, j, q, k, m]
    return device, nd


def _fractal_z(n: int, c: int, h: int, w: int, c0: int, ni: int):
    nd = _nd((n, c, h, w))
    device = np.zeros((_ceil(c, c0) * h * w, _ceil(n, ni), ni, c0), np.float32)
    for i, j, k, m in itertools.product(range(n), range(c), range(h), range(w)):
        device[((j // c0) * h + k) * w + m, i // ni, i % ni, j % c0] = nd[i, j, k, m]
    return device, nd


def _fractal_z_3d(n: int, c: int, d: int, h: int, w: int, c0: int, ni: int):
    nd = _nd((n, c, d, h, w))
    c1 = _ceil(c, c0)
    device = np.zeros((d * c1 * h * w, _ceil(n, ni), ni, c0), np.float32)
    for i, j, q, k, m in itertools.product(range(n), range(c), range(d), range(h), range(w)):
        device[((q * c1 + j // c0) * h + k) * w + m, i // ni, i % ni, j % c0] = nd[i, j, q, k, m]
    return device, nd


def _nz(b: int, n: int, c: int, c0: int, ni: int):
    nd = _nd((b, n, c))
    device = np.zeros((b, _ceil(c, c0), _ceil(n, ni), ni, c0), np.float32)
    for z, i, j in itertools.product(range(b), range(n), range(c)):
        device[z, j // c0, i // ni, i % ni, j % c0] = nd[z, i, j]
    return device, nd


# Each with padding in its blocked axes (C not a multiple of C0, N not one of Ni).
EXAMPLES = {
    Format.NC1HWC0: _nc1hwc0(2, 5, 2, 3, c0=4),
    Format.NC1HWC0_C04: _nc1hwc0(1, 3, 2, 2, c0=4),
    Format.FRACTAL_Z: _fractal_z(3, 5, 2, 2, c0=4, ni=2),
    Format.NDC1HWC0: _ndc1hwc0(1, 3, 2, 2, 2, c0=2),
    Format.FRACTAL_Z_3D: _fractal_z_3d(3, 3, 2, 1, 2, c0=2, ni=2),
    Format.FRACTAL_NZ: _nz(2, 5, 7, c0=4, ni=4),
    Format.FRACTAL_NZ_C0_2: _nz(1, 3, 3, c0=2, ni=2),
    Format.FRACTAL_NZ_C0_4: _nz(1, 3, 5, c0=4, ni=2),
    Format.FRACTAL_NZ_C0_8: _nz(1, 3, 9, c0=8, ni=2),
    Format.FRACTAL_NZ_C0_16: _nz(2, 3, 17, c0=16, ni=2),
    Format.FRACTAL_NZ_C0_32: _nz(1, 2, 33, c0=32, ni=2),
}


def test_every_format_in_the_table_has_a_worked_example():
    assert set(CONVERTERS) == set(EXAMPLES)
    assert frozenset(CONVERTERS) == CONVERTIBLE_FORMATS
    assert NZ_FORMATS <= CONVERTIBLE_FORMATS and not (PLAIN_FORMATS & CONVERTIBLE_FORMATS)


@pytest.mark.parametrize("fmt", sorted(EXAMPLES), ids=lambda f: f.name)
def test_each_format_in_the_table_converts_its_worked_example(fmt):
    device, nd = EXAMPLES[fmt]
    result = to_nd(device.reshape(-1), int(fmt), 0, device.shape, nd.shape)
    assert result.flag is None and result.converted
    assert result.array.shape == nd.shape and np.array_equal(result.array, nd)


def test_a_format_outside_the_table_is_flagged_not_converted():
    device, nd = _nc1hwc0(1, 3, 1, 1, c0=4)
    outside = [f for f in Format if f not in CONVERTERS and f not in PLAIN_FORMATS]
    assert Format.C1HWNC0 in outside
    result = to_nd(device.reshape(-1), int(Format.C1HWNC0), 0, device.shape, nd.shape)
    assert result.flag == "layout_unconverted: no ND conversion for format C1HWNC0" and not result.converted
