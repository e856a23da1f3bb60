"""The block-wise copy that writes a logical tensor from its device view: the logical C axis lies split over two
device axes (C1, C0) that no view can merge, so it is written as a partial head block, one assignment for all whole
blocks, and a partial tail block (`copy_split_axis`); big whole-block copies with C0 last run as tiles of C0-element
runs on two threads."""

from __future__ import annotations

import os
import threading
from typing import Any, Optional

import numpy as np


def _split_axis(a: np.ndarray, axis: int, outer: int, inner: int) -> np.ndarray:
    """Writable view of `a` with `axis` (length outer*inner) split into (outer, inner); never a copy."""
    stride = a.strides[axis]
    return np.lib.stride_tricks.as_strided(
        a,
        shape=(*a.shape[:axis], outer, inner, *a.shape[axis + 1 :]),
        strides=(*a.strides[:axis], stride * inner, stride, *a.strides[axis + 1 :]),
    )


def copy_split_axis(dst: np.ndarray, src: np.ndarray, axis: int, start: int, c0: int) -> None:
    """dst[..., j, ...] = src[..., (start+j)//c0, (start+j)%c0, ...] for every j along dst's `axis`.

    src has the (C1, C0) pair at (axis, axis+1) and otherwise the same axes as dst. Done as a partial head
    block, one assignment for all whole blocks, and a partial tail block.
    """
    length = dst.shape[axis]
    lead: tuple[Any, ...] = (slice(None),) * axis
    j = 0
    while j < length:
        block, offset = divmod(start + j, c0)
        if offset == 0 and length - j >= c0:
            whole = (length - j) // c0
            target = _split_axis(dst[(*lead, slice(j, j + whole * c0))], axis, whole, c0)
            _copy_blocks(target, src[(*lead, slice(block, block + whole))])
            j += whole * c0
        else:
            take = min(c0 - offset, length - j)
            dst[(*lead, slice(j, j + take))] = src[(*lead, block, slice(offset, offset + take))]
            j += take


# The whole-block copy of a FRACTAL_NZ tensor is a transpose of C0-element runs (32 bytes for every dtype GE
# packs): element-wise, numpy moves them at ~0.6 GB/s (a 16-element inner loop, and every run of one output
# row sits in another 4-KiB page of the source). Viewing each run as one opaque element, copying in tiles of
# 256 destination rows x 8 runs (source reads 8 streams, destination writes stay in L2), and splitting big
# copies over two threads (numpy releases the GIL for plain copies) measured 3.3-3.8 GB/s for 64 MiB with two
# idle cores, 2.0-2.5 GB/s with one (bench/bench_decode.py).
_TILE_ROWS, _TILE_RUNS = 256, 8
_TILED_MIN_BYTES = 1 << 20  # below this one assignment is as fast as tiles
_PARALLEL_MIN_BYTES = 8 << 20  # below this a thread costs more than it saves
_COPY_THREADS = min(2, os.cpu_count() or 1)  # beyond two the copy is memory-bound


def _as_runs(a: np.ndarray) -> Optional[np.ndarray]:
    """`a` with its (contiguous) last axis viewed as one opaque element; None when that is not possible."""
    if a.ndim == 0 or a.size == 0 or a.strides[-1] != a.itemsize:
        return None
    try:
        return a.view(np.dtype((np.void, a.shape[-1] * a.itemsize)))[..., 0]
    except (TypeError, ValueError):
        return None  # numpy < 1.23 cannot re-view an array that is not C-contiguous


def _assign_tiled(dst: np.ndarray, src: np.ndarray) -> None:
    """dst[...] = src (same shape), tile by tile over the last two axes when those are large."""
    if dst.ndim < 2 or dst.nbytes < _TILED_MIN_BYTES or dst.shape[-1] <= _TILE_RUNS or dst.shape[-2] <= _TILE_ROWS:
        dst[...] = src
        return
    rows, runs = dst.shape[-2:]
    for lead in np.ndindex(*dst.shape[:-2]):
        d, s = dst[lead], src[lead]
        for i in range(0, rows, _TILE_ROWS):
            for j in range(0, runs, _TILE_RUNS):
                d[i : i + _TILE_ROWS, j : j + _TILE_RUNS] = s[i : i + _TILE_ROWS, j : j + _TILE_RUNS]


def _copy_runs(dst: np.ndarray, src: np.ndarray) -> None:
    """_assign_tiled, split along the first axis long enough into `_COPY_THREADS` parts for big copies."""
    axis = next((a for a, n in enumerate(dst.shape[:-1]) if n >= _COPY_THREADS), None)
    if dst.nbytes < _PARALLEL_MIN_BYTES or _COPY_THREADS < 2 or axis is None:
        _assign_tiled(dst, src)
        return
    lead = (slice(None),) * axis
    cuts = [dst.shape[axis] * k // _COPY_THREADS for k in range(_COPY_THREADS + 1)]
    parts = [(dst[(*lead, slice(a, b))], src[(*lead, slice(a, b))]) for a, b in zip(cuts, cuts[1:])]
    errors: list[BaseException] = []

    def copy(d: np.ndarray, s: np.ndarray) -> None:
        try:
            _assign_tiled(d, s)
        except BaseException as exc:  # re-raised in the caller's thread below
            errors.append(exc)

    # plain threads, not a pool: a pool's threads do not survive fork() and would leave its queue unserved
    helpers = [threading.Thread(target=copy, args=part, daemon=True) for part in parts[1:]]
    for thread in helpers:
        thread.start()
    copy(*parts[0])
    for thread in helpers:
        thread.join()
    if errors:
        raise errors[0]


def _copy_blocks(target: np.ndarray, source: np.ndarray) -> None:
    """target[...] = source for the whole C0 blocks of one conversion; fast when C0 is the last axis of both."""
    runs = (_as_runs(target), _as_runs(source)) if target.shape == source.shape else (None, None)
    if runs[0] is None or runs[1] is None:
        target[...] = source
        return
    _copy_runs(runs[0], runs[1])
