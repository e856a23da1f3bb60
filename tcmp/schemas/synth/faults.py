"""The faults a synthetic scenario can inject into a target dump, and what a value fault does to a tensor."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Optional

import numpy as np


class FaultKind(str, enum.Enum):
    REL_ERROR = "rel_error"  # every output element off by `magnitude` (relative)
    NAN = "nan"  # some output elements NaN
    INF = "inf"  # some output elements +inf
    SHAPE = "shape"  # output 0 has an extra row
    TRUNCATE = "truncate"  # the file is cut short (never completes)
    CORRUPT_HEADER = "corrupt_header"  # the protobuf header is garbled


VALUE_FAULTS = (FaultKind.REL_ERROR, FaultKind.NAN, FaultKind.INF, FaultKind.SHAPE)


@dataclass(frozen=True)
class Fault:
    """A fault injected into the target dump of GE op `op` (a fused op's name, or an unfused op's)."""

    op: str
    kind: FaultKind
    magnitude: float = 0.05
    tokens: Optional[tuple[int, ...]] = None  # None: every token
    ranks: Optional[tuple[int, ...]] = None

    def applies(self, rank: int, token: int) -> bool:
        return (self.tokens is None or token in self.tokens) and (self.ranks is None or rank in self.ranks)


def apply_fault(fault: Fault, value: np.ndarray) -> np.ndarray:
    if value.dtype.kind != "f":
        return value
    value = np.array(value, dtype=np.float64, copy=True)
    flat = value.reshape(-1)
    if fault.kind is FaultKind.REL_ERROR:
        value *= 1.0 + fault.magnitude
    elif fault.kind is FaultKind.NAN:
        flat[:: max(1, flat.size // 4)] = np.nan
    elif fault.kind is FaultKind.INF:
        flat[:: max(1, flat.size // 4)] = np.inf
    elif fault.kind is FaultKind.SHAPE:
        value = np.concatenate([value, np.zeros_like(value[:1])]) if value.ndim else np.array([value, 0.0])
    return value
