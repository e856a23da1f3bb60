"""The baseline every benchmark here is a ratio to: each file read start to end with 1 MiB `readinto` calls into
one reused buffer, the least any tool does to see every byte. One definition, so the ratios stay comparable; and
one way to make a run cold (the file dropped from the page cache)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Optional, Union

CHUNK = 1 << 20


def read_plainly(paths: Iterable[Union[str, Path]], buffer: Optional[memoryview] = None) -> int:
    """Bytes read; `buffer` (CHUNK bytes) lets a timed loop reuse one, else one is made per call."""
    view = buffer if buffer is not None else memoryview(bytearray(CHUNK))
    total = 0
    for path in paths:
        with open(path, "rb", buffering=0) as handle:
            while True:
                n = handle.readinto(view)
                if not n:
                    break
                total += n
    return total


def drop_cache(path: Union[str, Path]) -> None:
    """Drop a file's pages from the page cache (POSIX_FADV_DONTNEED), so the next read comes from the disk; where
    the kernel ignores it (tmpfs, dirty pages) the read stays warm, which callers check."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
