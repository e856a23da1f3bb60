"""Questions about short runs of bytes at many places of a text at once, for the line view (graph_lines): field
name codes, leading spaces, spaces inside a run; 8 bytes at a time through a stride-1 view of unaligned
little-endian words (no per-byte pass over the text)."""

from __future__ import annotations

import numpy as np

from tcmp.schemas.graph_text import FIELD_CODES

__all__ = ["WordReader", "name_codes"]


def _words(text: np.ndarray, start: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bytes 0-7 and 8-15 of each name as little-endian integers, zero past the name's end: with the length they
    tell every name of up to 16 bytes apart. Read as unaligned 8-byte words through a stride-1 view."""
    padded = np.concatenate((text, np.zeros(16, dtype=np.uint8)))
    words = np.ndarray(shape=(len(padded) - 7,), dtype="<u8", buffer=padded, strides=(1,))
    keep_first = np.where(
        length >= 8, ~np.uint64(0), (np.uint64(1) << (np.minimum(length, 7) * 8).astype(np.uint64)) - 1
    )
    second_bits = (np.clip(length - 8, 0, 7) * 8).astype(np.uint64)
    keep_second = np.where(length >= 16, ~np.uint64(0), (np.uint64(1) << second_bits) - 1)
    return words[start] & keep_first, words[start + 8] & keep_second


_KNOWN_NAMES = list(FIELD_CODES)
_KNOWN_FIRST, _KNOWN_SECOND = _words(
    np.frombuffer(b"".join(_KNOWN_NAMES), dtype=np.uint8),
    np.cumsum([0] + [len(n) for n in _KNOWN_NAMES])[:-1],
    np.array([len(n) for n in _KNOWN_NAMES]),
)
_KNOWN_LENGTH = np.array([len(n) for n in _KNOWN_NAMES])
_BY_FIRST = np.argsort(_KNOWN_FIRST, kind="stable")


def name_codes(text: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """FIELD_CODES of each name (0 for names the semantic layer does not read), for all fields at once."""
    length = end - start
    first, second = _words(text, start, length)
    codes = np.zeros(len(start), dtype=np.int64)
    sorted_first = _KNOWN_FIRST[_BY_FIRST]
    # two known names share their first 8 bytes (list_list_int, list_list_float): try the two nearest
    for step in (0, 1):
        at = np.minimum(np.searchsorted(sorted_first, first) + step, len(_BY_FIRST) - 1)
        known = _BY_FIRST[at]
        hit = (
            (codes == 0) & (_KNOWN_FIRST[known] == first) & (_KNOWN_SECOND[known] == second)
            & (_KNOWN_LENGTH[known] == length)
        )  # fmt: skip
        codes[hit] = known[hit] + 1
    return codes


class WordReader:
    """Spaces at many places of one text at once, read 8 bytes at a time."""

    _SPACES = np.uint64(0x2020202020202020)
    _LOW = np.uint64(0x0101010101010101)
    _HIGH = np.uint64(0x8080808080808080)
    _BYTE_BITS = np.array([np.uint64(0x80) << np.uint64(8 * k) for k in range(8)], dtype=np.uint64)

    def __init__(self, text: np.ndarray) -> None:
        self._length = len(text)
        padded = np.concatenate((text, np.full(64, 10, dtype=np.uint8)))  # newlines past the end: never a space
        self._words = np.ndarray(shape=(len(padded) - 7,), dtype="<u8", buffer=padded, strides=(1,))

    def _space_bytes(self, at: np.ndarray) -> np.ndarray:
        """A word whose byte k is 0x80 where the byte at `at + k` is a space, else 0."""
        spaces = self._words[at] ^ self._SPACES  # a space becomes a zero byte
        return (spaces - self._LOW) & ~spaces & self._HIGH

    def leading_spaces(self, at: np.ndarray) -> np.ndarray:
        """How many spaces follow each position (the indentation of a line, from its start)."""
        count = np.zeros(len(at), dtype=np.int64)
        todo = np.arange(len(at))
        while len(todo):
            position = np.minimum(at[todo] + count[todo], self._length)
            not_space = ~self._space_bytes(position) & self._HIGH
            # the lowest non-space byte: isolate its bit, its index is log2 / 8 (exact for powers of two)
            lowest = not_space & (~not_space + np.uint64(1))
            run = np.where(lowest == 0, 8, np.searchsorted(self._BYTE_BITS, lowest))  # that bit's byte; 8: none
            count[todo] += run
            todo = todo[run == 8]
        return count

    def no_space(self, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Whether [start, end) holds no space, for runs of up to 24 bytes (longer ones: False)."""
        clear = (end - start) <= 24
        for offset in (0, 8, 16):
            inside = np.clip(end - start - offset, 0, 8).astype(np.uint64) * np.uint64(8)
            mask = np.where(inside >= 64, ~np.uint64(0), (np.uint64(1) << np.minimum(inside, 63)) - np.uint64(1))
            clear &= (self._space_bytes(np.minimum(start + offset, self._length)) & mask) == 0
        return clear
