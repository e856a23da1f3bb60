"""The line view of graph text (graph_text): the one-field-per-line layout every protobuf printer writes, read
for all lines at once with numpy. A file in any other layout raises NotLineShaped; graph_tokens reads it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import numpy as np

from tcmp.schemas.graph_text import (
    FIELD_CODES,
    LINE_VALUE,
    ROOT,
    STRING_LITERAL,
    Damage,
    Entry,
    NotLineShaped,
    position,
)
from tcmp.schemas.graph_words import WordReader, name_codes

__all__ = ["LineClasses", "LineView", "classify_lines", "empty_view", "forest_view", "line_view"]

_ATTR_CODE, _KEY_CODE, _VALUE_CODE = FIELD_CODES[b"attr"], FIELD_CODES[b"key"], FIELD_CODES[b"value"]
# The blocks whose fields the semantic layer can ask for (-1: the top level).
_READ_BLOCKS = np.array(
    [-1, *(FIELD_CODES[n] for n in (b"graph", b"op", b"output_desc", b"shape", b"attr", b"value", b"list", b"func",
                                    b"na"))]
)  # fmt: skip


# Inside a string literal, blanked out before lines are classified; leaves every line where it was.
_STRING_BLANK = b"$"
_OPEN_LINE = re.compile(rb"[^\s:{}]+[ \t]*:?[ \t]*\{")
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
        out: list[Entry] = []
        for k in range(lo, hi):
            if is_open[k]:
                out.append((codes[k], True, k, self._at[k]))
                continue
            value = raw[self._value_start[k] : self._value_end[k]]
            if not checked[k] and not LINE_VALUE.fullmatch(value):
                value = value.strip()
                if not LINE_VALUE.fullmatch(value):
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
        return position(self.raw, offset)


def line_view(raw: bytes, wanted_keys: tuple[bytes, ...] = ()) -> LineView:
    """Classify every line of `raw` and pair blocks with their closes; NotLineShaped if any line is not exactly
    one `name {`, `}` or `name: value` (then only the tokenizer can be trusted to see what protobuf sees).
    `attr` map entries whose key is not among `wanted_keys` are never yielded."""
    if not raw.strip():
        return empty_view(raw, wanted_keys)
    lines = classify_lines(raw, 0, len(raw))
    if lines.depth_after.min() < 0 or lines.depth_after[-1] != 0:
        raise NotLineShaped(0)  # unbalanced: let the tokenizer say where
    return forest_view(raw, lines, len(lines.starts), wanted_keys)


def empty_view(raw: bytes, wanted_keys: tuple[bytes, ...]) -> LineView:
    return LineView(raw, wanted_keys, [], [], [], [], [], [], [], [], [], (0, 0))


@dataclass
class LineClasses:
    """What every line of a span of the text is (window-relative offsets, added to `base` for the file's), and
    the per-line counts of the bytes the fields' reading needs."""

    base: int
    text: np.ndarray  # the span's bytes (a view of the file's)
    words: WordReader
    starts: np.ndarray
    ends: np.ndarray
    first: np.ndarray  # a line's first non-space byte
    is_open: np.ndarray
    is_close: np.ndarray
    is_scalar: np.ndarray
    depth_after: np.ndarray  # blocks open after each line, from the span's start
    colons: np.ndarray
    first_colon: np.ndarray  # the line's end when it has none
    backslashes: np.ndarray
    quotes: np.ndarray
    specials: np.ndarray
    separators: np.ndarray


def classify_lines(raw: bytes, lo: int, hi: int) -> LineClasses:
    """Classify the lines of raw[lo:hi] (whole lines): NotLineShaped if any is not exactly one `name {`, `}` or
    `name: value`."""
    carriage_return = raw.find(b"\r", lo, hi)
    if carriage_return >= 0:
        raise NotLineShaped(carriage_return)
    text = np.frombuffer(raw, dtype=np.uint8, count=hi - lo, offset=lo)
    # One pass marks the bytes that matter, by kind (bits), plus the first byte of each word after a space; all
    # per-line facts then come from the marked bytes only (a few per line), not from every byte.
    kinds = _BYTE_KIND[text]
    marked = np.flatnonzero(kinds)
    marked_kinds = kinds[marked]
    del kinds
    is_newline = (marked_kinds & _NEWLINE) != 0
    line_of = np.cumsum(is_newline) - is_newline  # the line each marked byte is on (a newline ends its line)
    newlines = marked[is_newline]
    starts = np.concatenate(([0], newlines + 1))
    ends = np.concatenate((newlines, [len(text)]))
    n_lines = len(starts)

    def of_kind(kind: int) -> tuple[np.ndarray, np.ndarray]:
        """The positions of the bytes of one kind, and their lines."""
        chosen = (marked_kinds & kind) != 0
        return marked[chosen], line_of[chosen]

    def count(kind: int) -> np.ndarray:
        return np.bincount(of_kind(kind)[1], minlength=n_lines)

    words = WordReader(text)
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
        inner = STRING_LITERAL.sub(_STRING_BLANK, raw[lo + starts[line] : lo + ends[line]]).strip()
        if any(mark in inner for mark in (b'"', b"'", b"#", b"<", b">")):
            raise NotLineShaped(lo + int(starts[line]))  # a comment, an angle block, a quote left open
        inner_braces = inner.count(b"{") + inner.count(b"}")
        if inner_braces == 0:
            is_scalar[line] = True
        elif inner_braces == 1 and _OPEN_LINE.fullmatch(inner):
            is_open[line] = True
        elif inner == b"}":
            is_close[line] = True
        else:
            raise NotLineShaped(lo + int(starts[line]))
    odd = ~blank & ~(is_open | is_close | is_scalar)
    if odd.any():
        raise NotLineShaped(lo + int(starts[np.argmax(odd)]))
    colon_at, colon_lines = of_kind(_COLON)
    first_colon = ends.copy()
    first_colon[colon_lines[::-1]] = colon_at[::-1]  # written last to first: the first on each line stays
    return LineClasses(
        base=lo,
        text=text,
        words=words,
        starts=starts,
        ends=ends,
        first=first,
        is_open=is_open,
        is_close=is_close,
        is_scalar=is_scalar,
        depth_after=np.cumsum(is_open.astype(np.int64) - is_close),
        colons=np.bincount(colon_lines, minlength=n_lines),
        first_colon=first_colon,
        backslashes=count(_BACKSLASH),
        quotes=quote_count,
        specials=special_count,
        separators=count(_SEPARATOR),
    )


def forest_view(raw: bytes, lines: LineClasses, stop: int, wanted_keys: tuple[bytes, ...]) -> LineView:
    """The view of the fields on lines [0, stop) of `lines`, which must be whole fields (no block open before
    line 0 or after line `stop`), as the top level."""
    is_open, is_scalar, depth_after = lines.is_open[:stop], lines.is_scalar[:stop], lines.depth_after[:stop]
    if not (is_open | is_scalar).any():
        return empty_view(raw, wanted_keys)
    text, words, base, n_lines = lines.text, lines.words, lines.base, stop
    ends = lines.ends[:stop]
    level = depth_after - is_open
    # Fields (opens and scalars) grouped by level, in file order within a level: a block's children are the
    # fields one level down between its open and its close, a contiguous run, and the field numbers of their
    # parents never decrease along this order.
    field_lines = np.flatnonzero(is_open | is_scalar)
    field_level = level[field_lines]
    keys = field_level * n_lines + field_lines
    order = np.argsort(keys, kind="stable")
    field_lines, keys, field_level = field_lines[order], keys[order], field_level[order]
    del order
    opens = is_open[field_lines]
    open_fields = np.flatnonzero(opens)
    # a field's parent: the last open one level up before it
    at_parent = np.searchsorted(keys[open_fields], (field_level - 1) * n_lines + field_lines) - 1
    parent = np.where(field_level > 0, np.concatenate((open_fields, [-1]))[np.maximum(at_parent, 0)], -1)
    del keys, at_parent
    # Names and values (a name never holds a literal: the first colon on its line ends it).
    name_start, line_end = lines.first[field_lines], ends[field_lines]
    open_at, scalar_at = open_fields, np.flatnonzero(~opens)
    name_end = np.empty(len(field_lines), dtype=np.int64)
    name_end[open_at] = _open_name_ends(text, line_end[open_at] - 1, name_start[open_at])
    # an open line is one name (and an optional colon) before its brace: `a: x b {` is two fields
    open_lines = field_lines[open_at]
    colons_on_line = lines.colons[open_lines]
    one_name = (colons_on_line == 0) | ((colons_on_line == 1) & (lines.first_colon[open_lines] >= name_end[open_at]))
    one_name &= words.no_space(name_start[open_at], name_end[open_at])
    for at in open_at[~one_name].tolist():  # a name of more than 24 bytes, or not one name: look at the line
        if not _OPEN_LINE.fullmatch(raw[base + name_start[at] : base + line_end[at]]):
            raise NotLineShaped(base + int(name_start[at]))
    # a scalar without a colon gets its whole line as name and an empty value, which never fits a value
    scalar_lines = field_lines[scalar_at]
    name_end[scalar_at] = np.minimum(lines.first_colon[scalar_lines], line_end[scalar_at])
    value_start = line_end.copy()
    after_colon = np.minimum(name_end[scalar_at] + 1, line_end[scalar_at])
    after_colon += (after_colon < line_end[scalar_at]) & (text[np.minimum(after_colon, len(text) - 1)] == 32)
    value_start[scalar_at] = after_colon
    value_end = line_end
    codes = name_codes(text, name_start, name_end)
    # Scalars whose value is certainly one value need no look: one literal without escapes, or one word.
    unescaped = lines.backslashes[scalar_lines] == 0
    quotes = lines.quotes[scalar_lines]
    first_byte = text[np.minimum(after_colon, len(text) - 1)]
    last_byte = text[np.maximum(value_end[scalar_at] - 1, 0)]
    length = value_end[scalar_at] - after_colon
    plain = np.zeros(len(field_lines), dtype=bool)
    plain[scalar_at] = unescaped & (quotes == 2) & (length >= 2) & (first_byte == _QUOTE) & (last_byte == _QUOTE)
    word_like = (
        unescaped & (quotes == 0) & (lines.specials[scalar_lines] == 0) & (length > 0)
        & (lines.separators[scalar_lines] == 0) & (lines.colons[scalar_lines] == 1)
    )  # fmt: skip
    candidates = scalar_at[word_like]
    one_word = np.zeros(len(field_lines), dtype=bool)
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
        _at=(name_start[kept] + base).tolist(),
        _value_start=(value_start[kept] + base).tolist(),
        _value_end=(value_end[kept] + base).tolist(),
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
