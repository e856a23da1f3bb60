"""Typed errors of the readers, and the base of every error tcmp tells its user. Each carries a message a user can
act on (the readers': with the path)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Union


class TcmpError(Exception):
    """An error that stops a tcmp command with one line for its user (`line`): a mistake in the command line when
    `usage` (an option, or a path that is not what it must be: exit code 2), else the command could not run (3).
    The command line maps every one to its exit code in one place (tcmp/cli/errors.py)."""

    def __init__(self, message: str, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage

    def line(self) -> str:
        """The one line the user gets: the message, and what to do about it where the class knows."""
        return str(self)


class DumpError(Exception):
    """A dump-tree file that tcmp cannot use (yet, or at all)."""

    def __init__(self, path: Union[str, Path, None], message: str) -> None:
        self.path = Path(path) if path is not None else None
        self.message = message
        super().__init__(f"{self.path}: {message}" if self.path is not None else message)


class DumpIncomplete(DumpError):
    """The file is smaller than its header says: the writer has not finished it. Retry later."""


class DumpCorrupt(DumpError):
    """The file can never be read: unparsable header, sizes larger than the file, impossible shapes."""


class TensorNotDumped(DumpError):
    """A tensor the writer skipped (device address 0, e.g. an unconnected optional input): its header entry is
    there, its payload is not. A known state of a complete file, not damage."""


class NameParseError(DumpError):
    """A file name that does not follow any known dump naming scheme."""


class GraphParseError(DumpError):
    """A graph text file that protobuf's text format cannot parse."""


def describe(exc: BaseException, path: Optional[Path] = None) -> str:
    """One line for logs and error tables: the error class and its message."""
    if isinstance(exc, DumpError):
        return f"{type(exc).__name__}: {exc.message}"
    where = f" ({path})" if path is not None else ""
    return f"{type(exc).__name__}: {exc}{where}"


def unreadable_reason(exc: OSError) -> str:
    """What an unmatched list says of a file or directory the system would not let tcmp read:
    `unreadable: permission denied`."""
    return f"unreadable: {(exc.strerror or str(exc)).lower()}"
