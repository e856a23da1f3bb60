"""Shapes compared as equal: the same values in the same order, whatever their dimensions of size 1."""

from __future__ import annotations

from collections.abc import Sequence


def squeezed(shape: Sequence[int]) -> tuple[int, ...]:
    """The shape without its 1s: shapes equal but for them hold the same values in the same order."""
    return tuple(d for d in shape if d != 1)
