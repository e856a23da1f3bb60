"""Listing a watched tree: the start-up scan and the reconcile scans that catch what inotify missed.

inotify loses events (queue overflow, files written into a directory before its watch existed, watches that
could not be added), so the daemon lists the tree too. Listing is `os.scandir` with the kernel's d_type, no stat
per name (0.4 µs an entry); only dump-like names are stat'ed, by the caller. A reconcile lists only directories
whose mtime changed since they were last listed (adding, removing or renaming an entry changes it), so an idle
daemon over a big tree stats each directory once per reconcile and lists nothing. A directory whose mtime is very
recent when listed is not trusted to stay unchanged (coarse timestamps) and is listed again next time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Optional

from tcmp.schemas.layout import INDEX_DIR, classify_name

_RECENT_NS = 2_000_000_000  # a directory modified this recently may change again within the same timestamp tick


@dataclass(frozen=True)
class Listed:
    """A dump-like name found in a directory listing; `symlink` when the entry is a symbolic link."""

    path: str
    symlink: bool


@dataclass(frozen=True)
class DirectoryListing:
    directory: str
    files: tuple[Listed, ...]


class TreeScanner:
    """Lists one root; remembers each directory's mtime between scans (symlinked directories are never entered)."""

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/") or "/"
        self._listed_mtime: dict[str, int] = {}

    def forget(self) -> None:
        self._listed_mtime.clear()

    @property
    def directories(self) -> int:
        return len(self._listed_mtime)

    def scan(self, *, full: bool) -> Iterator[DirectoryListing]:
        """Listings of the directories to look at: every directory (`full`), or only changed and new ones. Lazy:
        the caller pulls directories as it has room for more work."""
        if full:
            self._listed_mtime.clear()
            stack = [self.root]
        else:
            stack = list(self._changed_directories())
            if not self._listed_mtime and not stack:
                stack = [self.root]
        seen: set[str] = set()
        while stack:
            directory = stack.pop()
            if directory in seen:
                continue
            seen.add(directory)
            listing = self._list(directory, stack)
            if listing is not None and listing.files:
                yield listing

    def _changed_directories(self) -> Iterator[str]:
        for directory, mtime in list(self._listed_mtime.items()):
            try:
                current = os.stat(directory).st_mtime_ns
            except OSError:
                self._listed_mtime.pop(directory, None)  # gone (or unreadable): its files went with it
                continue
            if current != mtime:
                yield directory

    def _list(self, directory: str, stack: list[str]) -> Optional[DirectoryListing]:
        try:
            mtime = os.stat(directory).st_mtime_ns
            with os.scandir(directory) as entries:
                found = list(entries)
        except OSError:
            self._listed_mtime.pop(directory, None)
            return None
        files: list[Listed] = []
        for entry in found:
            name = entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if name != INDEX_DIR and entry.path not in self._listed_mtime:
                        stack.append(entry.path)
                    continue
                if classify_name(name) is None:
                    continue
                files.append(Listed(entry.path, entry.is_symlink()))
            except OSError:
                continue
        if time.time_ns() - mtime > _RECENT_NS:
            self._listed_mtime[directory] = mtime
        else:
            self._listed_mtime[directory] = -1  # listed, but look again next time
        return DirectoryListing(directory, tuple(files))
