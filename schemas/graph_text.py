"""The structure of protobuf text format, read fast and tolerantly, for GE IR graph files.

Graph text files are `str(GraphDef)` (torchair) or a printed `ModelDef` (GE's own dumps): protobuf text format.
protobuf's own `text_format` parser is pure Python (~4 MB/s) and refuses a whole file for one value tcmp never
reads (an enum name its schema lacks, a number where an identifier stands). This module gives the semantic layer
(`graph_records`) a view of the text's fields — name, scalar value text or nested block, and source position —
in two ways that yield the same fields:

- **Lines** (`line_view`): every protobuf printer (Python's text_format, upb's and C++'s) writes one field per
  line: `name {`, `}`, or `name: value`, and a string literal never spans lines. When every line of a file is one
  of those, the nesting is found for all lines at once with numpy (the few lines where a brace may stand inside a
  string literal are looked at one by one), field names become codes for all lines at once, and a block — an
  input desc, an attribute whose key tcmp does not read — is skipped without looking at its lines. That is what
  makes the reader fast: most of a graph file is attributes tcmp never reads.
- **Tokens** (`token_view`): anything else (several fields on a line, comments, `<…>` blocks, `[a, b]` lists)
  goes through a tokenizer with protobuf's own token grammar and a recursive descent. A grammar error inside a
  block marks that block damaged and skips to its matching close; the semantic layer decides whether the damage
  matters (it does inside an op's structure, it does not inside an attribute tcmp never reads).

Scalar values stay undecoded text until the semantic layer asks for one; `string_value`/`int_value` decode them
with protobuf's own rules (`text_encoding.CUnescape`, `text_format.ParseInteger`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional, Union

import numpy as np
from google.protobuf import text_encoding, text_format

__all__ = [
    "ROOT",
    "Damage",
    "Entry",
    "LineView",
    "NotLineShaped",
    "TokenView",
    "int_value",
    "line_view",
    "string_value",
    "token_view",
]

# An entry: (FIELD_CODES of its name, is it a block, the block's handle or the scalar's value text, byte offset of
# its name). Fields whose names the semantic layer does not read are parsed (for structure) but not listed.
Entry = tuple[int, bool, object, int]
ROOT = -1  # the handle of the top-level message in both views


class NotLineShaped(Exception):
    """The text is not one field per line; read it with `token_view` instead."""


@dataclass(frozen=True)
class Damage:
    """Where a block stopped parsing and why (token view only)."""

    offset: int
    reason: str


# ----------------------------------------------------------------------------------------------------------------
# Scalar values

# One or more adjacent string literals (protobuf concatenates them), or one bare token.
_QUOTED = rb'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\''
_LINE_VALUE = re.compile(rb"(?:(?:" + _QUOTED + rb")(?:[ \t]*(?:" + _QUOTED + rb"))*|[^\s\"',;:\[\]{}<>#]+)")
_LITERAL = re.compile(_QUOTED)


def string_value(text: bytes) -> Optional[bytes]:
    """The bytes of a string value (`"a\\n"` or `'a' "b"`), unescaped as protobuf does; None if it is not one."""
    if len(text) >= 2 and text[0] == 34 and text[-1] == 34 and text.count(b'"') == 2 and b"\\" not in text:
        return text[1:-1]  # the common case: one plain literal
    parts = []
    position = 0
    for match in _LITERAL.finditer(text):
        if text[position : match.start()].strip():
            return None
        parts.append(match.group()[1:-1])
        position = match.end()
    if not parts or text[position:].strip():
        return None
    joined = b"".join(parts)
    if b"\\" not in joined:
        return joined
    return b"".join(text_encoding.CUnescape(part.decode("utf-8", "replace")) for part in parts)


def int_value(text: bytes) -> Optional[int]:
    """A signed 64-bit integer value by protobuf's rules (`-3`, `0x1f`, C octal `017`); None if it is not one."""
    if text.isdigit() and len(text) < 19:
        return int(text)
    try:
        return text_format.ParseInteger(text.decode("ascii"), is_signed=True, is_long=True)
    except (ValueError, UnicodeDecodeError):
        return None


# ----------------------------------------------------------------------------------------------------------------
# Field names

# The field names the semantic layer reads; every other name is code 0 and never reaches it.
FIELD_NAMES = (
    "op", "name", "graph", "type", "input", "attr", "output_desc", "key", "value", "dtype", "shape", "layout", "dim",
    "list", "s", "i", "f", "b", "bt", "func", "td", "t", "g", "list_list_int", "dt", "list_list_float",
    "expression",
)  # fmt: skip
FIELD_CODES = {name.encode(): code for code, name in enumerate(FIELD_NAMES, start=1)}
_ATTR_CODE, _KEY_CODE, _VALUE_CODE = FIELD_CODES[b"attr"], FIELD_CODES[b"key"], FIELD_CODES[b"value"]
# The blocks whose fields the semantic layer can ask for (-1: the top level).
_READ_BLOCKS = np.array(
    [-1, *(FIELD_CODES[n] for n in (b"graph", b"op", b"output_desc", b"shape", b"attr", b"value", b"list"))]
)


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


def _name_codes(text: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
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


# ----------------------------------------------------------------------------------------------------------------
# Line view

# Inside a string literal, blanked out before lines are classified; leaves every line where it was.
_STRING_BLANK = b"$"
_OPEN, _CLOSE, _QUOTE = ord("{"), ord("}"), ord('"')
# The bytes whose places line_view needs, by kind (one bit each): a byte that may stand in a literal or start a
# comment or an angle block (`#<>'`), a separator a single value never holds outside a literal (`,;[]`).
_NEWLINE, _BRACE, _SPECIAL, _QUOTE_KIND, _COLON, _BACKSLASH, _SEPARATOR = (1 << bit for bit in range(7))
_BYTE_KIND = np.zeros(256, dtype=np.uint8)
for _kind, _bytes in zip(
    (_NEWLINE, _BRACE, _SPECIAL, _QUOTE_KIND, _COLON, _BACKSLASH, _SEPARATOR),
    (b"\n", b"{}", b"#<>'", b'"', b":", b"\\", b",;[]"),
):
    _BYTE_KIND[list(_bytes)] = _kind
# Map keys tcmp reads; every other attr entry in the printers' layout (`key: "…"` then `value {`) is skipped
# without being looked at.
_NOT_CANONICAL, _UNWANTED = -1, 0


class _WordReader:
    """Questions about short runs of bytes at many places at once, answered 8 bytes at a time through a stride-1
    view of unaligned little-endian words (no per-byte pass over the text)."""

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


@dataclass
class LineView:
    """The fields of a one-field-per-line text that entries() lists, numbered by nesting level, then file order,
    so a block's children are one contiguous range; a block's handle is its number."""

    raw: bytes
    wanted_keys: tuple[bytes, ...]
    _code: list  # per field: its FIELD_CODES code, 0 for other names
    _is_open: list  # per field: it opens a block
    _at: list  # per field: offset of its name
    _value_start: list  # per field: its value text (scalars)
    _value_end: list
    _checked: list  # per field: its value is certainly one value (one literal without escapes, or one word)
    _lo: list  # per field that opens a block: its children's range
    _hi: list
    _key: list  # per `attr` field: 1 + index in wanted_keys, _UNWANTED, or _NOT_CANONICAL
    _root: tuple[int, int]

    def entries(self, block: int) -> list[Entry]:
        lo, hi = self._root if block == ROOT else (self._lo[block], self._hi[block])
        raw, codes, is_open, checked = self.raw, self._code, self._is_open, self._checked
        out = []
        for k in range(lo, hi):
            if is_open[k]:
                out.append((codes[k], True, k, self._at[k]))
                continue
            value = raw[self._value_start[k] : self._value_end[k]]
            if not checked[k] and not _LINE_VALUE.fullmatch(value):
                value = value.strip()
                if not _LINE_VALUE.fullmatch(value):
                    raise NotLineShaped(self._at[k])  # `a: 1 b: 2`, `a: [1, 2]`, `a: 1,` …: the tokenizer knows
            if codes[k]:
                out.append((codes[k], False, value, self._at[k]))
        return out

    def small_ints(self, block: int, code: int) -> Optional[list[int]]:
        """The values of a block whose fields are all `<code's name>: <digits>` (a shape's dims), or None when any
        field is anything else (read its entries instead)."""
        lo, hi = self._lo[block], self._hi[block]
        raw, starts, ends = self.raw, self._value_start, self._value_end
        values = [raw[starts[k] : ends[k]] for k in range(lo, hi)]
        if (
            not all(self._checked[lo:hi]) or any(self._is_open[lo:hi]) or any(c != code for c in self._code[lo:hi])
            or not all(v.isdigit() and len(v) < 19 for v in values)
        ):  # fmt: skip
            return None
        return [int(v) for v in values]

    def attr_key(self, block: int) -> Optional[tuple[bytes, int, int]]:
        """(key, value block, its offset) of an `attr` entry in the printers' layout whose key is one of
        wanted_keys; None for any other entry (read its entries instead)."""
        key = self._key[block]
        if key <= 0:
            return None
        value = self._lo[block] + 1
        return self.wanted_keys[key - 1], value, self._at[value]

    def damage(self, block: int) -> Optional[Damage]:
        return None

    @property
    def damages(self) -> tuple[Damage, ...]:
        return ()

    def position(self, offset: int) -> tuple[int, int]:
        return _position(self.raw, offset)


def line_view(raw: bytes, wanted_keys: tuple[bytes, ...] = ()) -> LineView:
    """Classify every line of `raw` and pair blocks with their closes; NotLineShaped if any line is not exactly
    one `name {`, `}` or `name: value` (then only the tokenizer can be trusted to see what protobuf sees).
    `attr` map entries whose key is not among `wanted_keys` are never yielded."""
    if not raw.strip():
        return LineView(raw, wanted_keys, [], [], [], [], [], [], [], [], [], (0, 0))
    if b"\r" in raw:
        raise NotLineShaped(raw.index(b"\r"))
    text = np.frombuffer(raw, dtype=np.uint8)
    # One pass marks the bytes that matter, by kind (bits), plus the first byte of each word after a space; all
    # per-line facts then come from the marked bytes only (a few per line), not from every byte.
    kinds = _BYTE_KIND[text]
    marked = np.flatnonzero(kinds != 0)
    marked_kinds = kinds[marked]
    is_newline = (marked_kinds & _NEWLINE) != 0
    line_of = np.cumsum(is_newline) - is_newline  # the line each marked byte is on (a newline ends its line)
    newlines = marked[is_newline]
    starts = np.concatenate(([0], newlines + 1))
    ends = np.concatenate((newlines, [len(text)]))
    n_lines = len(starts)

    chosen_kinds: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def of_kind(kind: int) -> tuple[np.ndarray, np.ndarray]:
        """The positions of the bytes of one kind, and their lines."""
        if kind not in chosen_kinds:
            chosen = (marked_kinds & kind) != 0
            chosen_kinds[kind] = marked[chosen], line_of[chosen]
        return chosen_kinds[kind]

    def count(kind: int) -> np.ndarray:
        return np.bincount(of_kind(kind)[1], minlength=n_lines)

    def first_on_line(kind: int, default: np.ndarray) -> np.ndarray:
        positions, lines = of_kind(kind)
        found = default.copy()
        found[lines[::-1]] = positions[::-1]  # written last to first: the first on each line stays
        return found

    def last_on_line(kind: int, default: np.ndarray) -> np.ndarray:
        positions, lines = of_kind(kind)
        found = default.copy()
        found[lines] = positions
        return found

    words = _WordReader(text)
    first = np.minimum(starts + words.leading_spaces(starts), ends)  # a line's first non-space byte
    blank = (first >= ends) | (text[np.minimum(first, len(text) - 1)] == 10)
    last = text[np.maximum(ends - 1, 0)]
    brace_count, special_count, quote_count = count(_BRACE), count(_SPECIAL), count(_QUOTE_KIND)
    is_open = ~blank & (brace_count == 1) & (last == _OPEN)
    is_close = ~blank & (brace_count == 1) & (text[np.minimum(first, len(text) - 1)] == _CLOSE) & (first == ends - 1)
    is_scalar = ~blank & (brace_count == 0)
    # A brace, `#`, `<`, `>` or `'` on a line with a literal may stand inside it: those lines are classified on
    # their text with the literals blanked out, one at a time (there are few: `s: "<class 'int'>"`, bytes).
    mixed = ~blank & (special_count > 0) | ((brace_count > 0) & (quote_count > 0))
    is_open &= ~mixed
    is_close &= ~mixed
    is_scalar &= ~mixed
    for line in np.flatnonzero(mixed).tolist():
        inner = _LITERAL.sub(_STRING_BLANK, raw[starts[line] : ends[line]]).strip()
        if any(mark in inner for mark in (b'"', b"'", b"#", b"<", b">")):
            raise NotLineShaped(int(starts[line]))  # a comment, an angle block, a quote left open
        inner_braces = inner.count(b"{") + inner.count(b"}")
        if inner_braces == 0:
            is_scalar[line] = True
        elif inner_braces == 1 and inner.endswith(b"{"):
            is_open[line] = True
        elif inner == b"}":
            is_close[line] = True
        else:
            raise NotLineShaped(int(starts[line]))
    odd = ~blank & ~(is_open | is_close | is_scalar)
    if odd.any():
        raise NotLineShaped(int(starts[np.argmax(odd)]))
    depth_after = np.cumsum(is_open.astype(np.int64) - is_close.astype(np.int64))
    if depth_after.min() < 0 or depth_after[-1] != 0:
        raise NotLineShaped(0)  # unbalanced: let the tokenizer say where
    level = depth_after - is_open
    # Fields (opens and scalars) grouped by level, in file order within a level: a block's children are the
    # fields one level down between its open and its close, a contiguous run, and the field numbers of their
    # parents never decrease along this order.
    lines = np.flatnonzero(is_open | is_scalar)
    field_level = level[lines]
    keys = field_level * n_lines + lines
    order = np.argsort(keys, kind="stable")
    lines, keys, field_level = lines[order], keys[order], field_level[order]
    opens = is_open[lines]
    open_fields = np.flatnonzero(opens)
    # a field's parent: the last open one level up before it
    at_parent = np.searchsorted(keys[open_fields], (field_level - 1) * n_lines + lines) - 1
    parent = np.where(field_level > 0, np.concatenate((open_fields, [-1]))[np.maximum(at_parent, 0)], -1)
    # Names and values (a name never holds a literal: the first colon on its line ends it).
    name_start, line_end = first[lines], ends[lines]
    open_at, scalar_at = np.flatnonzero(opens), np.flatnonzero(~opens)
    name_end = np.empty(len(lines), dtype=np.int64)
    name_end[open_at] = _open_name_ends(text, line_end[open_at] - 1, name_start[open_at])
    # a scalar without a colon gets its whole line as name and an empty value, which never fits a value
    name_end[scalar_at] = np.minimum(first_on_line(_COLON, ends)[lines[scalar_at]], line_end[scalar_at])
    value_start = line_end.copy()
    after_colon = np.minimum(name_end[scalar_at] + 1, line_end[scalar_at])
    after_colon += (after_colon < line_end[scalar_at]) & (text[np.minimum(after_colon, len(text) - 1)] == 32)
    value_start[scalar_at] = after_colon
    value_end = line_end
    codes = _name_codes(text, name_start, name_end)
    # Scalars whose value is certainly one value need no look: one literal without escapes, or one word.
    scalar_lines = lines[scalar_at]
    unescaped = count(_BACKSLASH)[scalar_lines] == 0
    first_byte = text[np.minimum(after_colon, len(text) - 1)]
    last_byte = text[np.maximum(value_end[scalar_at] - 1, 0)]
    length = value_end[scalar_at] - after_colon
    plain = np.zeros(len(lines), dtype=bool)
    plain[scalar_at] = (
        unescaped & (quote_count[scalar_lines] == 2) & (length >= 2) & (first_byte == _QUOTE) & (last_byte == _QUOTE)
    )
    word_like = (
        unescaped & (quote_count[scalar_lines] == 0) & (special_count[scalar_lines] == 0) & (length > 0)
        & (count(_SEPARATOR)[scalar_lines] == 0) & (count(_COLON)[scalar_lines] == 1)
    )  # fmt: skip
    candidates = scalar_at[word_like]
    one_word = np.zeros(len(lines), dtype=bool)
    one_word[candidates] = words.no_space(value_start[candidates], value_end[candidates])
    key = _attr_keys(text, codes, opens, plain, parent, value_start, value_end, wanted_keys)
    unwanted = opens & (codes == _ATTR_CODE) & (key == _UNWANTED)
    # The fields entries() lists: in blocks the semantic layer can read (nested in read blocks from the top),
    # the named ones it reads — minus attr entries whose key it does not want — and every scalar that needs a
    # look (in a block that is read, `id: 5 name: "x"` is two fields).
    reads_children = opens & np.isin(codes, _READ_BLOCKS) & ~unwanted
    readable = field_level == 0
    bounds = np.searchsorted(field_level, np.arange(int(field_level.max()) + 2))
    for depth in range(1, len(bounds) - 1):
        span = slice(bounds[depth], bounds[depth + 1])
        readable[span] = readable[parent[span]] & reads_children[parent[span]]
    listed = readable & (((codes != 0) & ~unwanted) | (~opens & ~plain & ~one_word))
    kept = np.flatnonzero(listed)
    kept_opens = kept[opens[kept]]
    kept_parent = parent[kept]
    kept_lo = np.zeros(len(kept), dtype=np.int64)
    kept_hi = np.zeros(len(kept), dtype=np.int64)
    open_at = np.flatnonzero(opens[kept])
    kept_lo[open_at] = np.searchsorted(kept_parent, kept_opens, side="left")
    kept_hi[open_at] = np.searchsorted(kept_parent, kept_opens, side="right")
    return LineView(
        raw=raw,
        wanted_keys=wanted_keys,
        _code=codes[kept].tolist(),
        _is_open=opens[kept].tolist(),
        _at=name_start[kept].tolist(),
        _value_start=value_start[kept].tolist(),
        _value_end=value_end[kept].tolist(),
        _checked=(plain | one_word)[kept].tolist(),
        _lo=kept_lo.tolist(),
        _hi=kept_hi.tolist(),
        _key=key[kept].tolist(),
        _root=(0, int(np.searchsorted(kept_parent, -1, side="right"))),
    )


def _attr_keys(raw, codes, opens, plain, parent, value_start, value_end, wanted_keys) -> np.ndarray:
    """For each `attr` entry laid out as the printers write it — `key: "…"` (one plain literal), then
    `value {`, nothing else — 1 + the index of its key in wanted_keys, or _UNWANTED; _NOT_CANONICAL otherwise."""
    key = np.full(len(codes), _NOT_CANONICAL, dtype=np.int64)
    entries = np.flatnonzero(opens & (codes == _ATTR_CODE))
    first = np.searchsorted(parent, entries, side="left")  # parents never decrease along the field order
    entries = entries[np.searchsorted(parent, entries, side="right") - first == 2]
    if not len(entries):
        return key
    first = np.searchsorted(parent, entries, side="left")
    second = first + 1
    canonical = (codes[first] == _KEY_CODE) & plain[first] & opens[second] & (codes[second] == _VALUE_CODE)
    entries, first = entries[canonical], first[canonical]
    key[entries] = _UNWANTED
    start, length = value_start[first] + 1, value_end[first] - value_start[first] - 2
    padded = np.concatenate((raw, np.zeros(64, dtype=np.uint8)))
    for index, wanted in enumerate(wanted_keys, start=1):
        same_length = np.flatnonzero(length == len(wanted))
        if not len(same_length):
            continue
        grid = padded[start[same_length][:, None] + np.arange(len(wanted))]
        match = (grid == np.frombuffer(wanted, dtype=np.uint8)).all(axis=1)
        key[entries[same_length[match]]] = index
    return key


def _open_name_ends(text: np.ndarray, brace: np.ndarray, name_start: np.ndarray) -> np.ndarray:
    """Where the name of each `name {` / `name: {` line ends: before the spaces and the optional colon that
    precede the brace. The printers write `name {`; other spellings step back one character at a time."""
    before = text[np.maximum(brace - 2, 0)]
    end = np.where((text[np.maximum(brace - 1, 0)] == 32) & (before != 32) & (before != ord(":")), brace - 1, brace)
    odd = np.flatnonzero(end == brace)
    if len(odd):
        stepped = brace[odd].copy()
        for skip in (32, ord(":"), 32):
            while True:
                back = (stepped > name_start[odd]) & (text[np.maximum(stepped - 1, 0)] == skip)
                if not back.any():
                    break
                stepped = stepped - back
        end[odd] = stepped
    return np.maximum(end, name_start)


# ----------------------------------------------------------------------------------------------------------------
# Token view

# protobuf's Tokenizer grammar (text_format.Tokenizer): whitespace and `#` comments, identifiers, numbers, quoted
# strings (an unclosed one runs to the end of its line), any other single character.
# (Whitespace and comments are tokens of their own, dropped after matching: as a skipped prefix, a regex would
# give back the end of a comment to match a token when nothing follows it.)
_TOKEN = re.compile(
    rb"(?P<word>[a-zA-Z_][0-9a-zA-Z_+-]*|(?:[0-9+-]|\.[0-9])[0-9a-zA-Z_.+-]*)"
    rb"|(?P<string>\"[^\"\n\\]*(?:(?:\\.)+[^\"\n\\]*)*(?:\"|\\?$)|'[^'\n\\]*(?:(?:\\.)+[^'\n\\]*)*(?:'|\\?$))"
    rb"|(?P<symbol>[^\s#])"
    rb"|(?P<gap>(?:\s+|#[^\n]*)+)",
    re.MULTILINE,
)
_WORD, _STRING, _SYMBOL, _GAP = 1, 2, 3, 4
_OPENERS = {b"{": b"}", b"<": b">"}


@dataclass
class _Block:
    entries: list = field(default_factory=list)
    damage: Optional[Damage] = None


class _GrammarError(Exception):
    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(reason)
        self.offset = offset
        self.reason = reason


@dataclass
class TokenView:
    """The fields of any text-format text, from a full parse; blocks that did not parse carry their damage."""

    raw: bytes
    root: _Block
    damages: tuple[Damage, ...]  # every damaged block, in file order

    def entries(self, block: Union[int, _Block]) -> Sequence[Entry]:
        return (self.root if block == ROOT else block).entries  # type: ignore[union-attr]

    def attr_key(self, block: _Block) -> None:
        return None  # the semantic layer reads the entry's fields

    def small_ints(self, block: _Block, code: int) -> None:
        return None

    def damage(self, block: Union[int, _Block]) -> Optional[Damage]:
        return (self.root if block == ROOT else block).damage  # type: ignore[union-attr]

    def position(self, offset: int) -> tuple[int, int]:
        return _position(self.raw, offset)


def token_view(raw: bytes) -> TokenView:
    """Parse `raw` into blocks of entries. A grammar error at the top level is the root's damage (nothing after
    it can be placed); inside a block it damages that block only."""
    tokens = [(m.lastindex, m.start(), m.end()) for m in _TOKEN.finditer(raw) if m.lastindex != _GAP]
    parser = _TokenParser(raw, tokens)
    root = parser.root()
    return TokenView(raw, root, tuple(sorted(parser.damages, key=lambda d: d.offset)))


class _TokenParser:
    def __init__(self, raw: bytes, tokens: list) -> None:
        self.raw = raw
        self.tokens = tokens
        self.i = 0
        self.damages: list[Damage] = []

    def _text(self, i: int) -> bytes:
        _, start, end = self.tokens[i]
        return self.raw[start:end]

    def _is(self, i: int, symbol: bytes) -> bool:
        return i < len(self.tokens) and self.tokens[i][0] == _SYMBOL and self._text(i) == symbol

    def _offset(self, i: int) -> int:
        return self.tokens[i][1] if i < len(self.tokens) else len(self.raw)

    def root(self) -> _Block:
        block = _Block()
        try:
            while self.i < len(self.tokens):
                self._field(block)
        except _GrammarError as error:
            block.damage = Damage(error.offset, error.reason)
        return block

    def _block(self, closer: bytes, opened_at: int) -> _Block:
        block = _Block()
        try:
            while not self._is(self.i, closer):
                if self.i >= len(self.tokens):
                    raise _GrammarError(opened_at, f"block opened here is never closed with {closer.decode()!r}")
                if self.tokens[self.i][0] == _SYMBOL and self._text(self.i) in (b"}", b">"):
                    raise _GrammarError(self._offset(self.i), f"expected {closer.decode()!r}")
                self._field(block)
            self.i += 1
        except _GrammarError as error:
            block.damage = Damage(error.offset, error.reason)
            self.damages.append(block.damage)
            self._skip_past_close(opened_at)
        return block

    def _skip_past_close(self, opened_at: int) -> None:
        """After damage, move past the close of the block being parsed (brackets of any kind counted)."""
        depth = 1
        while self.i < len(self.tokens):
            kind, start, end = self.tokens[self.i]
            self.i += 1
            if kind != _SYMBOL:
                continue
            symbol = self.raw[start:end]
            if symbol in (b"{", b"<", b"["):
                depth += 1
            elif symbol in (b"}", b">", b"]"):
                depth -= 1
                if depth == 0:
                    return
        raise _GrammarError(opened_at, "block opened here is never closed")

    def _field(self, block: _Block) -> None:
        name, offset = self._field_name()
        colon = self._is(self.i, b":")
        if colon:
            self.i += 1
        code = FIELD_CODES.get(name, 0)
        if self.i < len(self.tokens) and self.tokens[self.i][0] == _SYMBOL and self._text(self.i) in _OPENERS:
            nested = self._nested()
            if code:
                block.entries.append((code, True, nested, offset))
        elif self._is(self.i, b"["):
            self._list(block, code, offset)
        elif colon:
            value = self._scalar()
            if code:
                block.entries.append((code, False, value, offset))
        else:
            raise _GrammarError(self._offset(self.i), f"expected ':' or '{{' after field name {name.decode()!r}")
        if self._is(self.i, b",") or self._is(self.i, b";"):
            self.i += 1

    def _field_name(self) -> tuple[bytes, int]:
        offset = self._offset(self.i)
        if self._is(self.i, b"["):  # an extension or Any type URL: read to the closing ']'
            start = self.i
            while not self._is(self.i, b"]"):
                if self.i >= len(self.tokens):
                    raise _GrammarError(offset, "'[' of a field name is never closed")
                self.i += 1
            self.i += 1
            return b"".join(self._text(k) for k in range(start, self.i)), offset
        if (
            self.i >= len(self.tokens)
            or self.tokens[self.i][0] != _WORD
            or not re.fullmatch(rb"\w+", self._text(self.i))
        ):
            found = self._text(self.i).decode("utf-8", "replace") if self.i < len(self.tokens) else "end of file"
            raise _GrammarError(offset, f"expected a field name, found {found!r}")
        self.i += 1
        return self._text(self.i - 1), offset

    def _nested(self) -> _Block:
        opened_at = self._offset(self.i)
        closer = _OPENERS[self._text(self.i)]
        self.i += 1
        return self._block(closer, opened_at)

    def _scalar(self) -> bytes:
        if self.i >= len(self.tokens):
            raise _GrammarError(len(self.raw), "expected a value, found end of file")
        kind = self.tokens[self.i][0]
        if kind == _WORD:
            self.i += 1
            return self._text(self.i - 1)
        if kind == _STRING:
            parts = []
            while self.i < len(self.tokens) and self.tokens[self.i][0] == _STRING:
                literal = self._text(self.i)
                if len(literal) < 2 or literal[-1] != literal[0]:
                    raise _GrammarError(self._offset(self.i), "string is missing its closing quote")
                parts.append(literal)
                self.i += 1
            return b" ".join(parts)
        raise _GrammarError(self._offset(self.i), f"expected a value, found {self._text(self.i).decode()!r}")

    def _list(self, block: _Block, code: int, offset: int) -> None:
        """`name: [a, b]` / `name [{…}, {…}]`: one entry per element, as if the field were repeated."""
        self.i += 1  # '['
        if self._is(self.i, b"]"):
            self.i += 1
            return
        while True:
            if self.i < len(self.tokens) and self.tokens[self.i][0] == _SYMBOL and self._text(self.i) in _OPENERS:
                element: tuple = (code, True, self._nested(), offset)
            else:
                element = (code, False, self._scalar(), offset)
            if code:
                block.entries.append(element)
            if self._is(self.i, b"]"):
                self.i += 1
                return
            if not self._is(self.i, b","):
                raise _GrammarError(self._offset(self.i), "expected ',' or ']' in a list")
            self.i += 1


# ----------------------------------------------------------------------------------------------------------------


def _position(raw: bytes, offset: int) -> tuple[int, int]:
    """1-based line and column of a byte offset (columns count characters, as protobuf's do)."""
    line_start = raw.rfind(b"\n", 0, offset) + 1
    line = raw.count(b"\n", 0, offset) + 1
    return line, len(raw[line_start:offset].decode("utf-8", "replace")) + 1
