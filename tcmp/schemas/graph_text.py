"""The structure of protobuf text format, read fast and tolerantly, for GE IR graph files.

Graph text files are `str(GraphDef)` (torchair) or a printed `ModelDef` (GE's own dumps): protobuf text format.
protobuf's own `text_format` parser is pure Python (~4 MB/s) and refuses a whole file for one value tcmp never
reads (an enum name its schema lacks, a number where an identifier stands). The semantic layer (`graph`) reads a
view of the text's fields — name code, scalar value text or nested block, source position — given two ways that
yield the same fields:

- **Lines** (`graph_lines.line_view`): every protobuf printer (Python's text_format, upb's and C++'s) writes one
  field per line: `name {`, `}`, or `name: value`, and a string literal never spans lines. When every line of a
  file is one of those, the nesting is found for all lines at once with numpy (the few lines where a brace may
  stand inside a string literal are looked at one by one), field names become codes for all lines at once, and a
  block — an input desc, an attribute whose key tcmp does not read — is skipped without looking at its lines.
  That is what makes the reader fast: most of a graph file is attributes tcmp never reads.
- **Tokens** (`graph_tokens.token_view`): anything else (several fields on a line, comments, `<…>` blocks,
  `[a, b]` lists) goes through a tokenizer with protobuf's own token grammar and a recursive descent. A grammar
  error inside a block marks that block damaged and skips to its matching close; the semantic layer decides
  whether the damage matters (it does inside an op's structure, not inside an attribute tcmp never reads).

This module holds what both share. Scalar values stay undecoded text until the semantic layer asks for one;
`string_value`/`int_value` decode them with protobuf's own rules (`text_encoding.CUnescape`,
`text_format.ParseInteger`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from google.protobuf import text_encoding, text_format

__all__ = [
    "FIELD_CODES",
    "LINE_VALUE",
    "ROOT",
    "STRING_LITERAL",
    "Damage",
    "Entry",
    "NotLineShaped",
    "int_value",
    "position",
    "string_value",
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
LINE_VALUE = re.compile(rb"(?:(?:" + _QUOTED + rb")(?:[ \t]*(?:" + _QUOTED + rb"))*|[^\s\"',;:\[\]{}<>#]+)")
STRING_LITERAL = re.compile(_QUOTED)


def string_value(text: bytes) -> Optional[bytes]:
    """The bytes of a string value (`"a\\n"` or `'a' "b"`), unescaped as protobuf does; None if it is not one."""
    if len(text) >= 2 and text[0] == 34 and text[-1] == 34 and text.count(b'"') == 2 and b"\\" not in text:
        return text[1:-1]  # the common case: one plain literal
    parts = []
    position = 0
    for match in STRING_LITERAL.finditer(text):
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
    "expression", "subgraph_name", "na",
)  # fmt: skip
FIELD_CODES = {name.encode(): code for code, name in enumerate(FIELD_NAMES, start=1)}


def position(raw: bytes, offset: int) -> tuple[int, int]:
    """1-based line and column of a byte offset (columns count characters, as protobuf's do)."""
    line_start = raw.rfind(b"\n", 0, offset) + 1
    line = raw.count(b"\n", 0, offset) + 1
    return line, len(raw[line_start:offset].decode("utf-8", "replace")) + 1
