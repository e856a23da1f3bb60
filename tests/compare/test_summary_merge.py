"""A whole tensor's summary from its pieces' (an FFTS+ op whose slice files only the index holds): checked against
zlib's CRC-32 of the concatenated bytes and numpy's statistics of the concatenated values."""

from __future__ import annotations

import math
import zlib

import ml_dtypes
import numpy as np
import pytest

from tcmp.summaries.merge import CRC_UNKNOWN, canonical_itemsize, crc32_combine, merge_summaries
from tcmp.summaries.summarize import summarize


@pytest.mark.parametrize("lengths", [(0, 5), (5, 0), (1, 1), (7, 1000), (4096, 3), (100_000, 77_777)])
def test_crc32_combine_is_the_crc_of_the_concatenation(lengths):
    rng = np.random.default_rng(sum(lengths))
    a, b = (rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in lengths)
    assert crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)


@pytest.mark.parametrize(
    ("dtype", "size"),
    [("DT_FLOAT16", 2), ("DT_FLOAT", 4), ("DT_BF16", 4), ("DT_INT8", 1), ("DT_BOOL", 1), ("DT_INT64", 8),
     ("float16", 2), ("bfloat16", 4), ("float64", 8), ("DT_STRING", None), (None, None)],
)  # fmt: skip
def test_canonical_itemsize(dtype, size):
    """bf16 and float8 hash as exact float32 (4 bytes), everything else in its own width; raw bytes: unknown."""
    assert canonical_itemsize(dtype) == size


@pytest.mark.parametrize("dtype", [np.float16, np.float32, ml_dtypes.bfloat16])
def test_pieces_along_the_first_axis_merge_to_the_whole(dtype):
    rng = np.random.default_rng(3)
    pieces = [rng.normal(size=(n, 5)).astype(dtype) for n in (3, 4, 1)]
    pieces[1][2, 1] = np.nan
    pieces[2][0, 0] = np.inf
    whole = np.concatenate(pieces)
    merged, notes = merge_summaries([summarize(p) for p in pieces], np.dtype(dtype).name, contiguous=True)
    values = whole.astype(np.float64)
    finite = values[np.isfinite(values)]
    assert notes == () and merged.numel == whole.size and merged.nan_count == 1 and merged.inf_count == 1
    assert merged.min == finite.min() and merged.max == math.inf and merged.mean == math.inf
    assert merged.crc32 == zlib.crc32(np.ascontiguousarray(whole.astype(np.float32) if dtype is ml_dtypes.bfloat16
                                                           else whole).tobytes())  # fmt: skip
    assert merged.l2norm == math.inf


def test_finite_pieces_mean_and_l2_and_a_cut_along_another_axis():
    rng = np.random.default_rng(4)
    pieces = [rng.normal(size=(2, n)).astype(np.float32) for n in (3, 5)]
    whole = np.concatenate(pieces, axis=1).astype(np.float64)
    merged, notes = merge_summaries([summarize(p) for p in pieces], "DT_FLOAT", contiguous=False)
    # summarize sums a chunk in float32: the pieces' means are good to ~1e-7, and so is theirs
    assert merged.mean == pytest.approx(whole.mean(), rel=1e-6)
    assert merged.l2norm == pytest.approx(math.sqrt((whole**2).sum()), rel=1e-6)
    assert (merged.min, merged.max) == (whole.min(), whole.max())
    assert merged.crc32 is None and len(notes) == 1 and notes[0].startswith(CRC_UNKNOWN)
