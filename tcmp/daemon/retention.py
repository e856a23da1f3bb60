"""Raw retention: which summarized raw dump files to delete, and the thread that deletes them after the commit.

The writer thread decides *before* committing a summary whether its raw file goes (the decision is stored in the
row's raw_deleted flag, in the same transaction), and hands the deletion to `Deleter` only *after* the commit
returned. So a raw file is never deleted before its summary is durable; a crash between the commit and the unlink
leaves the file on disk with raw_deleted set, and the next start-up scan deletes it then.

Only raw tensor dumps (GE binary dumps, FX `.npy` tensors) that are regular files inside the watched root (reached
from it without following a symlink), and still exactly the file that was summarized (same device, inode, size,
mtime), are ever deleted. Graph files, stats CSVs,
`_min_max` files, mapping.csv and anything else are never touched. Empty directories are left alone: torchair
creates a step directory right before writing into it, and removing one under its feet would break the dump.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import queue
import re
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from tcmp.daemon.threads import OwnThread
from tcmp.schemas.dump_tree import RAW_TENSOR_KINDS, DumpFile, classify_name
from tcmp.schemas.index import FileKey
from tcmp.schemas.under_root import DirectoryUnder, LeftTheRoot, names_below

log = logging.getLogger(__name__)

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(?:i?b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}


def parse_size(text: str) -> int:
    """'50G', '1.5T', '500MiB', '4096' -> bytes (binary units)."""
    match = _SIZE.match(text)
    if match is None:
        raise ValueError(f"not a size: {text!r} (examples: 4096, 500M, 50G, 1.5T)")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def format_size(n: int) -> str:
    """Bytes for people: '512 B', '1.5 MiB'."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class RetentionPolicy:
    """`drop_raw`: delete raw dump files once summarized; `raw_budget`: but keep the first that many bytes of
    them (per watched root); `keep_raw_ops`: glob patterns of op names or types whose raw files are always kept."""

    drop_raw: bool = False
    raw_budget: int = 0
    keep_raw_ops: tuple[str, ...] = ()

    def keeps_op(self, file: DumpFile, header_op_name: Optional[str]) -> bool:
        names = [n for n in (file.op_name, header_op_name, file.op_type) if n]
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.keep_raw_ops for name in names)


class RawBudget:
    """Running total of kept raw bytes under one root; decides deletions in commit order (writer thread only)."""

    def __init__(self, policy: RetentionPolicy, kept_bytes: int) -> None:
        self.policy = policy
        self.kept_bytes = kept_bytes

    def should_delete(self, file: DumpFile, header_op_name: Optional[str], size: int) -> bool:
        if not self.policy.drop_raw or file.kind not in RAW_TENSOR_KINDS:
            return False
        if self.policy.keeps_op(file, header_op_name):
            return False
        if self.kept_bytes + size <= self.policy.raw_budget:
            self.kept_bytes += size
            return False
        return True


@dataclass(frozen=True)
class Deletion:
    """Delete `path` (summarized as `key`, committed in commit `seq` of `index`; seq None: an earlier run's)."""

    path: str
    root: str
    index: Path
    key: FileKey
    seq: Optional[int]


@dataclass(frozen=True)
class DeletionFailed:
    deletion: Deletion
    reason: str


class Deleter(OwnThread):
    """Unlinks raw files after their commit (unlink costs ~80 µs, more than summarizing a small file, so it gets
    its own thread). `on_failed` hears about files that were kept after all, so the index can say so."""

    def __init__(self, on_failed: Callable[[DeletionFailed], None]) -> None:
        self._thread = threading.Thread(target=self._run, name="tcmp-deleter", daemon=True)
        self._inbox: queue.SimpleQueue[Optional[Deletion]] = queue.SimpleQueue()
        self._on_failed = on_failed
        self._lock = threading.Lock()
        self.deleted_files = 0
        self.deleted_bytes = 0

    def put(self, deletion: Deletion) -> None:
        self._inbox.put(deletion)

    def stop(self) -> None:
        """Finish the deletions already handed over, then end."""
        self._inbox.put(None)

    def _run(self) -> None:
        while True:
            deletion = self._inbox.get()
            if deletion is None:
                return
            try:
                reason = self._unlink(deletion)
            except Exception as exc:  # never let one file end the thread
                reason = f"unexpected {type(exc).__name__}: {exc}"
            if reason is not None:
                log.warning("kept raw file %s: %s", deletion.path, reason)
                self._on_failed(DeletionFailed(deletion, reason))

    def _unlink(self, deletion: Deletion) -> Optional[str]:
        """None when deleted (or already gone), else why the file was kept.

        The directory is opened from the root down without following a symlink (under_root.py), the file is
        checked and unlinked relative to that descriptor; right before the unlink the walk from the root is done
        again, and must reach the same directory (st_dev, st_ino), and the name must still be the file that was
        summarized (st_dev, st_ino, size, mtime). So a directory swapped for a symlink at any moment leads the
        deletion nowhere outside the tree."""
        path = deletion.path
        if classify_name(os.path.basename(path)) not in RAW_TENSOR_KINDS:
            return "not a raw dump file"
        try:
            names = names_below(deletion.root, path)
            with DirectoryUnder.open(deletion.root, path.rpartition("/")[0]) as directory:
                reason = self._still_the_file(directory, names[-1], deletion)
                if reason is not None:
                    return reason
                _pause_for_tests(path)
                if not directory.still_at_its_path():
                    return "its directory was replaced since it was checked (a symlink is not followed)"
                reason = self._still_the_file(directory, names[-1], deletion)
                if reason is not None:
                    return reason
                # logged before the unlink, so that no deletion ever goes unlogged (a kill right after it included)
                after = "an earlier run's commit" if deletion.seq is None else f"commit {deletion.seq}"
                log.debug("deleting raw %s (%d bytes; summary in %s of %s)", path, deletion.key.size, after,
                          deletion.index)  # fmt: skip
                os.unlink(names[-1], dir_fd=directory.fd)
        except LeftTheRoot as exc:
            return f"not a file of the watched root {deletion.root} ({exc.reason})"
        except FileNotFoundError:
            return None
        except OSError as exc:
            return f"cannot delete: {exc.strerror or exc}"
        with self._lock:
            self.deleted_files += 1
            self.deleted_bytes += deletion.key.size
        return None

    @staticmethod
    def _still_the_file(directory: DirectoryUnder, name: str, deletion: Deletion) -> Optional[str]:
        current = directory.lstat(name)  # FileNotFoundError: gone already
        if not stat.S_ISREG(current.st_mode):
            return "not a regular file"
        if FileKey.of(current) != deletion.key:
            return "changed since it was summarized"
        return None


# A test's hook between deciding a deletion and doing it (a race test swaps a directory for a symlink there): the
# deleter writes the path into PAUSE_DIR/paused and waits until PAUSE_DIR/resume exists. Unset outside tests.
PAUSE_ENV = "TCMP_TEST_DELETE_PAUSE_DIR"
_PAUSE_DIR = os.environ.get(PAUSE_ENV)


def _pause_for_tests(path: str) -> None:
    if not _PAUSE_DIR:
        return
    pause = Path(_PAUSE_DIR)
    (pause / "paused.part").write_text(path)
    os.replace(pause / "paused.part", pause / "paused")
    deadline = time.monotonic() + 60
    while not (pause / "resume").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    (pause / "resume").unlink(missing_ok=True)
