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

from tcmp.schemas.dump_tree import INDEX_DIR, classify_name
from tcmp.schemas.under_root import DirectoryUnder, LeftTheRoot

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
                with DirectoryUnder.open(self.root, directory) as opened:
                    current = os.fstat(opened.fd).st_mtime_ns
            except (OSError, LeftTheRoot):
                self._listed_mtime.pop(directory, None)  # gone, unreadable or now a symlink: its files went with it
                continue
            if current != mtime:
                yield directory

    def _list(self, directory: str, stack: list[str]) -> Optional[DirectoryListing]:
        """Listed through a descriptor reached from the root without following a symlink (a directory swapped for
        a link since it was found is not listed), so paths past PATH_MAX are listed too."""
        prefix = directory.rstrip("/") + "/"
        files: list[Listed] = []
        try:
            with DirectoryUnder.open(self.root, directory) as opened:
                mtime = os.fstat(opened.fd).st_mtime_ns
                with os.scandir(opened.fd) as entries:
                    for entry in entries:
                        self._take_entry(entry, prefix, stack, files)
        except (OSError, LeftTheRoot):
            self._listed_mtime.pop(directory, None)
            return None
        if time.time_ns() - mtime > _RECENT_NS:
            self._listed_mtime[directory] = mtime
        else:
            self._listed_mtime[directory] = -1  # listed, but look again next time
        return DirectoryListing(directory, tuple(files))

    def _take_entry(self, entry: os.DirEntry, prefix: str, stack: list[str], files: list[Listed]) -> None:
        name = entry.name
        path = prefix + name
        try:
            if entry.is_dir(follow_symlinks=False):
                if name != INDEX_DIR and path not in self._listed_mtime:
                    stack.append(path)
                return
            if classify_name(name) is None:
                return
            files.append(Listed(path, entry.is_symlink()))
        except OSError:
            return
