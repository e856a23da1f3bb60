"""Shapes compared as equal: the same values in the same order, whatever their dimensions of size 1."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional


def squeezed(shape: Sequence[int]) -> tuple[int, ...]:
    """The shape without its 1s: shapes equal but for them hold the same values in the same order."""
    return tuple(d for d in shape if d != 1)


def squeeze_note(npu: Optional[Sequence[int]], bench: Optional[Sequence[int]]) -> Optional[str]:
    """What a row says when its sides' shapes differ only in dimensions of size 1 (its verdict is unchanged: the
    values are the same in the same order), else None."""
    if npu is None or bench is None or tuple(npu) == tuple(bench) or squeezed(npu) != squeezed(bench):
        return None
    return (
        f"Shapes of NPU {list(npu)} and bench {list(bench)} differ only in dimensions of size 1: compared after "
        "squeezing them."
    )
