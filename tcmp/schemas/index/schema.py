"""Creating and migrating the index (its tables are declared in `columns`), where an index lives, and how it is
opened."""

from __future__ import annotations

import enum
import os
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union
from urllib.parse import quote

from tcmp.schemas.dump_tree import INDEX_DIR
from tcmp.schemas.errors import TcmpError
from tcmp.schemas.index.columns import FILES, SCHEMA_VERSION, TENSORS, create_statements, migration

# An index of an earlier version is read as it is (the missing columns NULL: not recorded; its FFTS+ ops then
# compared by their first slice, its stacked elements listed by design) and migrated in place by the first writer
# that opens it (`migrate_schema`); one of a later version is refused by both.
INDEX_FILE = "index.sqlite"
BUSY_TIMEOUT_S = 10.0  # readers
WRITER_BUSY_TIMEOUT_S = 5.0  # the daemon retries a locked index itself, and says so in its log
IN_CHUNK = 500  # host parameters per IN (...) query; old SQLite builds allow 999


def rows_in(conn: sqlite3.Connection, query: str, values: Sequence) -> Iterator[tuple]:
    """The rows of `query` for every value, IN_CHUNK values per statement: `{placeholders}` in the query's
    `IN (...)` stands for one chunk's `?, ?, …`."""
    for start in range(0, len(values), IN_CHUNK):
        chunk = list(values[start : start + IN_CHUNK])
        yield from conn.execute(query.format(placeholders=", ".join("?" * len(chunk))), chunk)


class IndexUnusable(TcmpError):
    """The index cannot be used: missing, written by a newer tcmp, or not writable."""


class IndexLocked(IndexUnusable):
    """Another process holds the index's write lock (an open transaction): wait for it."""


class IndexReadOnly(IndexUnusable):
    """The index (or its -wal/-shm files, or their file system) cannot be written now."""


class IndexDamaged(IndexUnusable):
    """The file is no SQLite database, or a page of it is garbled: no retry makes it readable."""


def unusable_because(path: Path, exc: sqlite3.Error) -> IndexUnusable:
    """The IndexUnusable that says what an SQLite error of `path` means for whoever uses the index."""
    text = str(exc)
    if "locked" in text or "busy" in text:
        return IndexLocked(f"{path}: {text}")
    if "readonly" in text or "read-only" in text:
        return IndexReadOnly(f"{path}: {text}")
    if not isinstance(exc, sqlite3.OperationalError) or "malformed" in text or "not a database" in text:
        return IndexDamaged(f"{path}: damaged ({text})")
    return IndexUnusable(f"{path}: {text}")


def unwritable_reason(path: Path) -> Optional[str]:
    """Why the index at `path` cannot be written right now (None: it can, as far as can be told).

    Asked before every write because SQLite keeps the WAL index (`-shm`) memory-mapped: writing to that mapping
    once the file is immutable, or its file system read-only, is a SIGBUS that kills the process without a line
    (and so would closing the connection, which writes there too). An SQLite error is only returned for the
    database file itself. Asked by path only (statvfs, access): opening and closing any of these files here
    would drop every POSIX lock SQLite holds on it in this process."""
    try:
        if os.statvfs(path.parent).f_flag & os.ST_RDONLY:
            return f"{path.parent} is on a read-only file system"
    except OSError:
        pass
    for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        if os.access(name, os.W_OK) or not os.path.lexists(name):  # one not there yet: SQLite creates it, or says
            continue
        return f"{name} cannot be written (immutable, chattr +i, or its mode)"
    return None


class FileState(str, enum.Enum):
    SUMMARIZED = "summarized"
    INCOMPLETE = "incomplete"  # shorter than its header promises (still being written, or truncated)
    ERROR = "error"  # corrupt, unreadable, unrecognized, or truncated for good


@dataclass(frozen=True)
class FileKey:
    """What identifies the content the daemon read: a rewrite or a rename-over changes one of these."""

    inode: int
    size: int
    mtime_ns: int
    dev: Optional[int] = None  # st_dev: an inode number names a file only on its device (None: a schema-1 row)

    @classmethod
    def of(cls, stat: os.stat_result) -> FileKey:
        return cls(stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_dev)


def create_schema(conn: sqlite3.Connection) -> None:
    """Every table, index and the version in one transaction, so a reader never sees a half-created index."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in create_statements():
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except BaseException:
        conn.rollback()
        raise
    conn.commit()


def migrate_schema(conn: sqlite3.Connection, version: int) -> None:
    """Bring an index of `version` up to SCHEMA_VERSION, step by step, in one transaction (readers see it before
    or after); a failing step leaves the file as it was."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for step in range(version + 1, SCHEMA_VERSION + 1):
            for statement in migration(step):
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except BaseException:
        conn.rollback()
        raise
    conn.commit()


def tensor_columns(version: int) -> str:
    """Every column of the tensors table as a SELECT list for an index of `version`, in TENSORS order: NULL for
    those it does not have."""
    return TENSORS.select_list(TENSORS.names, version)


def schema_version_of(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def default_index_path(root: Union[str, Path]) -> Path:
    return Path(root) / INDEX_DIR / INDEX_FILE


def find_index(path: Union[str, Path]) -> Optional[Path]:
    """The index of the watched root that contains `path`: `.tcmp/index.sqlite` in `path` or its parents."""
    start = Path(os.path.abspath(path))
    if not start.is_dir():
        start = start.parent
    for directory in (start, *start.parents):
        candidate = directory / INDEX_DIR / INDEX_FILE
        if candidate.is_file():
            return candidate
    return None


def connect(
    path: Path, *, readonly: bool, immutable: bool = False, busy_timeout: float = BUSY_TIMEOUT_S
) -> sqlite3.Connection:
    if readonly:
        mode = "immutable=1" if immutable else "mode=ro"
        conn = sqlite3.connect(f"file:{quote(str(path))}?{mode}", uri=True, timeout=busy_timeout)
    else:
        conn = sqlite3.connect(str(path), timeout=busy_timeout)
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
    return conn


def prefix_range(directory: str) -> tuple[str, str]:
    """[low, high) bounds of every path strictly below `directory` ('0' sorts right after '/')."""
    directory = directory.rstrip("/")
    return directory + "/", directory + "0"


FILE_COLUMNS = FILES.names[1:]  # what the writer writes: every column but the row id
TENSOR_COLUMNS = TENSORS.names
# what the reader selects of a files row (IndexReader._indexed_file unpacks it)
FILES_SELECTED = (
    "id", "path", "inode", "size", "mtime_ns", "side", "kind", "rank", "token", "model", "run", "device",
    "model_id", "op_type", "op_name", "header_op_name", "state", "error", "raw_deleted", "dump_time",
    "mapped_name", "indexed_ns", "dev",
)  # fmt: skip


def files_select(version: int) -> str:
    return f"SELECT {FILES.select_list(FILES_SELECTED, version)} FROM files"
