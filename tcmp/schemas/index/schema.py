"""The index's tables (created with sqlite-utils), its version, where an index lives, and how it is opened."""

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

# 2: tensors.original_op / original_op_index (a GE output's `original_op`); 3: files.dev (st_dev of the file read);
# 4: files.ffts_attr (an FFTS+ slice file's slicing attribute, to merge slices' summaries as raw slices merge) and
# tensors.element (rows summarizing one element of an FX output that may stack a list). An index of an earlier
# version is read as it is (the missing columns NULL: not recorded; its FFTS+ ops then compared by their first
# slice, its stacked elements listed by design) and upgraded in place by the first writer that opens it (UPGRADES).
SCHEMA_VERSION = 4
SLICES_AND_ELEMENTS_VERSION = 4  # the version that added files.ffts_attr and tensors.element
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
    import sqlite_utils  # 130 ms to import: only writers create schemas

    db = sqlite_utils.Database(conn)

    def table(name: str, columns: dict, **options) -> None:
        # sqlite-utils writes the statement, the connection runs it: its `Table.create` commits (`with conn:` in
        # 3.x, the last line on Python 3.9), which would publish the schema table by table
        conn.execute(db.create_table_sql(name, columns, if_not_exists=True, **options))

    conn.execute("BEGIN IMMEDIATE")
    table("roots", {"path": str, "added_ns": int}, pk="path")
    table(
        "files",
        {
            "id": int,
            "path": str,
            "inode": int,
            "size": int,
            "mtime_ns": int,
            "side": str,
            "kind": str,
            "rank": int,
            "token": int,
            "model": str,
            "run": str,
            "device": int,
            "model_id": int,
            "op_type": str,
            "op_name": str,
            "header_op_name": str,
            "io": str,
            "io_index": int,
            "io_sub_index": int,
            "timestamp": str,  # FX timestamps have 20 digits: beyond SQLite's int64
            "dump_time": str,
            "mapped_name": str,
            "state": str,
            "error": str,
            "attempts": int,
            "summaries": int,
            "raw_deleted": int,
            "bytes": int,
            "commit_seq": int,
            "indexed_ns": int,
            "dev": int,
            "ffts_attr": str,
        },
        pk="id",
        not_null=["path", "state", "attempts", "summaries", "raw_deleted", "indexed_ns"],
        defaults={"attempts": 0, "summaries": 0, "raw_deleted": 0},
    )
    conn.execute("CREATE UNIQUE INDEX IF NOT EXISTS files_path ON files(path)")
    table(
        "tensors",
        {
            "file_id": int,
            "position": int,
            "io": str,
            "io_index": int,
            "io_sub_index": int,
            "kind": str,
            "dtype": str,
            "shape": str,
            "device_format": str,
            "device_shape": str,
            "has_summary": int,
            "numel": int,
            "min": float,
            "max": float,
            "mean": float,
            "l2norm": float,
            "nan_count": int,
            "inf_count": int,
            "crc32": int,
            "float_flags": int,
            "notes": str,
            "original_op": str,
            "original_op_index": int,
            "element": int,
        },
        pk=("file_id", "position"),
        foreign_keys=[("file_id", "files", "id")],
        not_null=["io", "io_index", "kind", "has_summary", "float_flags"],
        defaults={"float_flags": 0},
    )
    table(
        "graphs",
        {"file_id": int, "name": str, "warnings": str, "op_count": int},
        pk="file_id",
        foreign_keys=[("file_id", "files", "id")],
    )
    table(
        "graph_ops",
        {
            "file_id": int,
            "op_order": int,
            "name": str,
            "type": str,
            "inputs": str,
            "control_inputs": str,
            "outputs": str,
            "original_op_names": str,
            "stack_info": str,
        },
        pk=("file_id", "op_order"),
        foreign_keys=[("file_id", "files", "id")],
        not_null=["name", "type", "inputs", "control_inputs", "outputs", "original_op_names"],
    )
    table(
        "commits",
        {"seq": int, "committed_ns": int, "files": int, "bytes": int, "raw_deleted": int, "raw_deleted_bytes": int},
        pk="seq",
    )
    table(
        "daemon_state",
        {
            "id": int,
            "pid": int,
            "host": str,
            "started_ns": int,
            "heartbeat_ns": int,
            "stopped_ns": int,
            "roots": str,
            "queued": int,
            "in_flight": int,
            "pending": int,
        },
        pk="id",
    )
    # status lists problems; a partial index keeps that cheap without slowing the common (summarized) writes
    conn.execute("CREATE INDEX IF NOT EXISTS files_problems ON files(state, indexed_ns) WHERE state != 'summarized'")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    conn.commit()


# What each version added, as statements that bring an index of the version before up to it.
UPGRADES = {
    2: (
        "ALTER TABLE tensors ADD COLUMN original_op TEXT",
        "ALTER TABLE tensors ADD COLUMN original_op_index INTEGER",
    ),
    3: ("ALTER TABLE files ADD COLUMN dev INTEGER",),
    SLICES_AND_ELEMENTS_VERSION: (
        "ALTER TABLE files ADD COLUMN ffts_attr TEXT",
        "ALTER TABLE tensors ADD COLUMN element INTEGER",
    ),
}
OLDEST_READABLE_VERSION = 1


def upgrade_schema(conn: sqlite3.Connection, version: int) -> None:
    """Bring an index of `version` up to SCHEMA_VERSION in one transaction (readers see it before or after)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for step in range(version + 1, SCHEMA_VERSION + 1):
            for statement in UPGRADES[step]:
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except BaseException:
        conn.rollback()
        raise
    conn.commit()


def tensor_columns(version: int) -> tuple[str, ...]:
    """The columns to select from the tensors table of an index of `version`, in TENSOR_COLUMNS order: NULL for
    those it does not have."""
    missing = {"original_op", "original_op_index"} if version < 2 else set()
    if version < SLICES_AND_ELEMENTS_VERSION:
        missing.add("element")
    return tuple("NULL" if c in missing else c for c in TENSOR_COLUMNS)


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


FILE_COLUMNS = (
    "path", "inode", "size", "mtime_ns", "side", "kind", "rank", "token", "model", "run", "device", "model_id",
    "op_type", "op_name", "header_op_name", "io", "io_index", "io_sub_index", "timestamp", "dump_time",
    "mapped_name", "state", "error", "attempts", "summaries", "raw_deleted", "bytes", "commit_seq", "indexed_ns",
    "dev",
    "ffts_attr",
)  # fmt: skip
TENSOR_COLUMNS = (
    "file_id", "position", "io", "io_index", "io_sub_index", "kind", "dtype", "shape", "device_format",
    "device_shape", "has_summary", "numel", "min", "max", "mean", "l2norm", "nan_count", "inf_count", "crc32",
    "float_flags", "notes", "original_op", "original_op_index", "element",
)  # fmt: skip
FILES_SELECT = (
    "SELECT id, path, inode, size, mtime_ns, side, kind, rank, token, model, run, device, model_id, op_type, "
    "op_name, header_op_name, state, error, raw_deleted, dump_time, mapped_name, indexed_ns, {dev} FROM files"
)
