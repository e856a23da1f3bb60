"""The watched roots as the dispatcher sees them: whether each is present and its index open (and readable, for
the resume check), and the scans that list them (see scan.py), pulled a little at a time so that a big tree does
not flood the work queue.
"""

from __future__ import annotations

import collections
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from tcmp.daemon.index_slots import RootIndex
from tcmp.daemon.scan import DirectoryListing, Listed, TreeScanner
from tcmp.daemon.wording import counted
from tcmp.schemas.index import IndexReader, IndexUnusable, KnownFile, open_index
from tcmp.schemas.index.schema import unwritable_reason
from tcmp.schemas.under_root import LeftTheRoot

log = logging.getLogger(__name__)

SCAN_SLICE_S = 0.05  # list directories for at most this long per dispatcher turn


@dataclass
class WatchedRoot:
    spec: RootIndex
    scanner: TreeScanner
    present: bool = True
    indexed: bool = False  # its index is open
    index_failed: bool = False  # its index could not be opened (once mode does not wait for it)
    scan: Optional[Iterator[DirectoryListing]] = None
    scan_full: bool = False
    rescan: Optional[bool] = None  # a scan requested while one runs: full (True) or incremental (False)


class WatchedRoots:
    """Owned by the dispatcher thread."""

    def __init__(self, roots: tuple[RootIndex, ...]) -> None:
        self._roots = {r.root: WatchedRoot(r, TreeScanner(r.root)) for r in roots}
        self._longest_first = sorted(self._roots.values(), key=lambda r: -len(r.spec.root))
        self._readers: dict[Path, IndexReader] = {}
        self._symlinks_reported: set[str] = set()

    def close(self) -> None:
        for reader in self._readers.values():
            reader.close()
        self._readers.clear()

    def root_of(self, path: str) -> Optional[WatchedRoot]:
        """The root `path` is in, if that root is served now (present, its index open)."""
        for root in self._longest_first:
            if path.startswith(root.spec.root + "/"):
                return root if root.present and root.indexed else None
        return None

    @property
    def scanning(self) -> bool:
        return any(r.scan is not None for r in self._roots.values())

    @property
    def waiting_for_an_index(self) -> bool:
        return any(r.present and not r.indexed and not r.index_failed for r in self._roots.values())

    # -- indexes

    def index_state(self, index: Path, up: bool) -> None:
        affected = [r for r in self._roots.values() if r.spec.index == index]
        if up:
            if index not in self._readers:
                try:
                    self._readers[index] = open_index(index)
                except IndexUnusable as exc:
                    log.error("cannot read the index %s: %s", index, exc)
                    return
            for root in affected:
                root.index_failed = False
                if not root.indexed:
                    root.indexed = True
                    self.request_scan(root.spec.root, full=True)
        else:
            reader = self._readers.pop(index, None)
            if reader is not None:
                reader.close()
            for root in affected:
                root.indexed = False
                root.index_failed = True
                root.scan = None

    def presence(self, root_path: str, present: bool) -> None:
        root = self._roots.get(root_path)
        if root is None or root.present == present:
            return
        root.present = present
        if not present:
            root.scan = None
            root.scanner.forget()
        elif root.indexed:
            self.request_scan(root.spec.root, full=True)

    def known(self, paths: list[str], roots: list[WatchedRoot]) -> dict[str, KnownFile]:
        """What the indexes hold for these paths, one query per index."""
        by_index: dict[Path, list[str]] = collections.defaultdict(list)
        for path, root in zip(paths, roots):
            by_index[root.spec.index].append(path)
        found: dict[str, KnownFile] = {}
        for index, group in by_index.items():
            reader = self._readers.get(index)
            if reader is None or unwritable_reason(index) is not None:  # a read marks the mapped -shm: SIGBUS
                continue
            try:
                found.update((k.path, k) for k in reader.lookup(group))
            except Exception as exc:  # a locked or vanished index: examine, the upsert is idempotent
                log.warning("index lookup in %s failed (%s): its files are read again", index, exc)
        return found

    # -- scans

    def request_scan(self, root_path: Optional[str], full: bool) -> None:
        """Scan one root (or all, `root_path` None) once it is served; a scan asked for during one follows it."""
        targets = [self._roots[root_path]] if root_path in self._roots else list(self._roots.values())
        for root in targets:
            if not (root.present and root.indexed):
                continue
            if root.scan is None:
                root.scan, root.scan_full = root.scanner.scan(full=full), full
            else:
                root.rescan = bool(root.rescan) or full

    def advance(self, has_room: Callable[[], bool], take: Callable[[WatchedRoot, DirectoryListing], None]) -> None:
        """List directories for a moment, while the work queue `has_room`, handing each listing to `take`."""
        deadline = time.monotonic() + SCAN_SLICE_S
        for root in self._roots.values():
            while root.scan is not None and has_room() and time.monotonic() < deadline:
                listing = next(root.scan, None)
                if listing is None:
                    self._scan_done(root)
                    break
                take(root, listing)

    def _scan_done(self, root: WatchedRoot) -> None:
        level = logging.INFO if root.scan_full else logging.DEBUG
        kind = "full scan" if root.scan_full else "reconcile"
        log.log(level, "%s of %s done (%s)", kind, root.spec.root, counted(root.scanner.directories, "directory"))
        root.scan = None
        if root.rescan is not None:
            root.scan, root.scan_full, root.rescan = root.scanner.scan(full=root.rescan), root.rescan, None

    def symlink(self, path: str, root: WatchedRoot) -> None:
        """Symlinks are never followed; each is reported once."""
        if path in self._symlinks_reported:
            return
        self._symlinks_reported.add(path)
        target = os.path.realpath(path)
        if not target.startswith(root.spec.root + "/"):
            log.warning("%s is a symlink to %s, outside the watched root %s: not followed", path, target,
                        root.spec.root)  # fmt: skip
        else:
            log.info("%s is a symlink (to %s): not followed, the target is indexed under its own path", path, target)

    def left_the_root(self, exc: LeftTheRoot, root: WatchedRoot) -> None:
        """A path whose way from the root passes a symlink: neither read nor summarized; reported once per path."""
        if exc.path in self._symlinks_reported:
            return
        self._symlinks_reported.add(exc.path)
        log.warning("%s: %s (it would leave the watched root %s)", exc.path, exc.reason, root.spec.root)

    def files_of(self, root: WatchedRoot, listing: DirectoryListing) -> list[Listed]:
        """The listing's regular candidates (its symlinks reported and left out)."""
        files = []
        for entry in listing.files:
            if entry.symlink:
                self.symlink(entry.path, root)
            else:
                files.append(entry)
        return files
