"""The token view of graph text (graph_text): any protobuf text format, tokenized with protobuf's own token
grammar and parsed by recursive descent; a grammar error damages only the block it is in."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional, Union

from tcmp.schemas.graph_text import FIELD_CODES, ROOT, Damage, Entry, position

__all__ = ["TokenView", "token_view"]

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
        return position(self.raw, offset)


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
