"""Files tcmp writes for people to read: created with the mode the umask gives (0644 under umask 022), so that
colleagues on a shared server can open a report or reuse a graph cache. `tempfile.mkstemp` would make them 0600
whatever the umask, and a later rename keeps that mode."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

_ATTEMPTS = 100


def create_temporary(directory: Path, prefix: str, suffix: str) -> tuple[int, Path]:
    """A new, empty file in `directory` under an unused random name, opened for writing: (descriptor, path).
    Its mode is 0666 less the umask, as for any file `open` creates."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(_ATTEMPTS):
        path = Path(directory) / f"{prefix}{secrets.token_hex(8)}{suffix}"
        try:
            return os.open(path, flags, 0o666), path
        except FileExistsError:
            continue
    raise FileExistsError(f"no unused temporary name in {directory} after {_ATTEMPTS} attempts")


def write_atomically(final: Path, text: str, prefix: str = ".tcmp-") -> None:
    """`text` as the file `final`, written under a temporary name beside it and renamed into place: a reader never
    sees it half written, and a failed write leaves nothing behind."""
    handle, temporary = create_temporary(final.parent, prefix, ".part")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, final)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
