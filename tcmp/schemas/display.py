"""Names shown to people as data, never as terminal control or markup.

Op names, file names and paths come from dumps that other users' jobs wrote. Printed raw, an ESC sequence in one
clears the screen, a newline starts a forged line (in a journal too), a bidi override (U+202E) shows text reversed,
and rich markup (`[bold]`) is taken as styling. `shown` writes every such character as its Python escape (`\\x1b`,
`\\n`, `\\u202e`), a backslash as `\\\\` so that no name can look like an escaped one; `escape` adds rich's markup
escape for text printed through rich; `DataFormatter` does the same for log lines. `quoted` quotes a path as a
shell would need it.
"""

from __future__ import annotations

import logging
import re
import shlex
from os import PathLike
from typing import Union

from rich.markup import escape as escape_markup

# C0 and C1 controls, DEL; the bidi embeddings, overrides, isolates and marks; line and paragraph separators; the
# backslash (see the module docstring). Tab and newline are controls like the others: inside a name they are data.
_CONTROLS = "\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff"
_UNSAFE = re.compile(f"[\\\\\n{_CONTROLS}]")
_UNSAFE_KEEP_NEWLINES = re.compile(f"[{_CONTROLS}]")
_SHORT = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(match: re.Match) -> str:
    char = match.group()
    if char in _SHORT:
        return _SHORT[char]
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def shown(text: str) -> str:
    """`text` with every control, bidi and separator character (and the backslash) written as its escape."""
    return _UNSAFE.sub(_escaped, text)


def escape(text: str) -> str:
    """`text` for a rich markup string: `shown`, then rich's markup escape."""
    return escape_markup(shown(text))


def quoted(path: Union[str, PathLike]) -> str:
    """A path as a shell reads it back: quoted when it needs it (a space, a quote, a non-ASCII name), so that a
    printed path can be pasted into a command line."""
    return shlex.quote(str(path))


class DataFormatter(logging.Formatter):
    """Log lines whose message is one line of data: the message `shown`; a traceback keeps its line breaks (it is
    tcmp's own) but no other control character."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        message = record.message
        record.message = shown(message)
        try:
            return super().formatMessage(record)
        finally:
            record.message = message

    def formatException(self, ei) -> str:
        return _UNSAFE_KEEP_NEWLINES.sub(_escaped, super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return _UNSAFE_KEEP_NEWLINES.sub(_escaped, super().formatStack(stack_info))
