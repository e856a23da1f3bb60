"""Counts for people: "1 file", "2 files", "1 directory"."""

from __future__ import annotations

_IRREGULAR = {"directory": "directories"}


def counted(n: int, noun: str) -> str:
    return f"{n} {noun if n == 1 else _IRREGULAR.get(noun, noun + 's')}"
