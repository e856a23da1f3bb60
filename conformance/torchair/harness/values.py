"""When two arrays hold the same tensor: the one rule of the harness's judgements, in either of its environments
(numpy only: it runs in tcmp's and in the torch venv)."""

from __future__ import annotations

import numpy as np


def tolerance(dtype) -> float:
    return 2e-2 if np.dtype(dtype).itemsize <= 2 else 1e-4


def values_match(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays hold the same tensor, up to the rounding of the coarser dtype."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.size == 0:
        return True
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if not (np.isfinite(a64).all() and np.isfinite(b64).all()):
        return bool(np.array_equal(a64, b64, equal_nan=True))
    scale = max(float(np.abs(b64).max()), float(np.abs(a64).max()), 1e-6)
    return float(np.abs(a64 - b64).max()) <= max(tolerance(a.dtype), tolerance(b.dtype)) * scale


def same_elements(a: np.ndarray, b: np.ndarray) -> bool:
    """The same elements in another shape: a view torchair's pattern fusion folded into the fused op (the golden
    computed the fused output on a view of it)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.shape != b.shape and a.size == b.size and values_match(a, b.reshape(a.shape))
