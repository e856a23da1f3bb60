"""The SQLite index of a watched dump tree: its schema, the batched writes of the daemon, and the reader API.

One index per watched root (`<root>/.tcmp/index.sqlite`, or one shared `--db`). The daemon is its only writer;
`tcmp compare` and `tcmp status` read it while the daemon writes (WAL: readers and the writer never block each
other). Tables:

- `files`: one row per file the daemon looked at, keyed by path, with the (inode, size, mtime_ns) it read, what
  the path says (side, kind, rank, token, model, run, op type/name, io/index for FX), the GE header's unsanitized
  op name, a state (summarized | incomplete | error), the error text, how often it was examined and summarized,
  and whether the daemon deleted the raw file.
- `tensors`: the summary of each tensor of a summarized dump file (dtype, ND and device shape, device format,
  numel, min, max, mean, L2 norm, NaN/inf counts, CRC-32 of the canonical ND bytes, notes).
- `graphs` + `graph_ops`: each parsed graph text file, op by op, enough to rebuild a `Graph` without parsing
  the (slow to parse) text again.
- `roots`, `commits`, `daemon_state`: the watched roots (so a moved tree still resolves), one row per committed
  batch (rates, and the commit a deletion followed), and the daemon's last heartbeat for `tcmp status`.

The schema version is `PRAGMA user_version`. Tables are created with sqlite-utils; the hot batched writes use
sqlite3's executemany directly (several times faster per row). SQLite stores NaN as NULL, so float columns that
held NaN (or -0.0, which it stores as 0.0) are flagged in `float_flags`.
"""

from __future__ import annotations

import enum
import functools
import json
import math
import os
import socket
import sqlite3
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union
from urllib.parse import quote

from .errors import DumpError
from .fx_dump import FxFileName, parse_fx_file_name
from .ge_names import GeFileName, is_hashed_name, parse_ge_file_name, resolve_ge_file_name
from .graph import Graph, GraphOp, InputEdge, OutputDesc, parse_graph_file_name
from .layout import INDEX_DIR, DumpFile, FileKind, GraphFile
from .records import IO, FileSummary, Side, Summary, TensorKind, TensorSummary

__all__ = [
    "INDEX_FILE",
    "SCHEMA_VERSION",
    "CommitResult",
    "DaemonState",
    "DaemonStatus",
    "FileKey",
    "FileState",
    "ForgetRow",
    "GraphRow",
    "IndexError_",
    "IndexReader",
    "IndexStatus",
    "IndexWriter",
    "IndexedFile",
    "IndexedProblem",
    "KnownFile",
    "ProblemRow",
    "RawFlagRow",
    "SummaryRow",
    "daemon_state_now",
    "default_index_path",
    "find_index",
    "open_index",
]

SCHEMA_VERSION = 1
INDEX_FILE = "index.sqlite"
BUSY_TIMEOUT_S = 10.0  # readers
WRITER_BUSY_TIMEOUT_S = 5.0  # the daemon retries a locked index itself, and says so in its log
_IN_CHUNK = 500  # host parameters per IN (...) query; old SQLite builds allow 999


class IndexError_(Exception):
    """The index cannot be used: missing, written by a newer tcmp, or not writable."""


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

    @classmethod
    def of(cls, stat: os.stat_result) -> FileKey:
        return cls(stat.st_ino, stat.st_size, stat.st_mtime_ns)


# ----------------------------------------------------------------------------------------------------------------
# Schema


def _create_schema(conn: sqlite3.Connection) -> None:
    import sqlite_utils  # 130 ms to import: only writers create schemas

    db = sqlite_utils.Database(conn)
    db["roots"].create({"path": str, "added_ns": int}, pk="path", if_not_exists=True)
    db["files"].create(
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
        },
        pk="id",
        not_null=["path", "state", "attempts", "summaries", "raw_deleted", "indexed_ns"],
        defaults={"attempts": 0, "summaries": 0, "raw_deleted": 0},
        if_not_exists=True,
    )
    db["files"].create_index(["path"], index_name="files_path", unique=True, if_not_exists=True)
    db["tensors"].create(
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
        },
        pk=("file_id", "position"),
        foreign_keys=[("file_id", "files", "id")],
        not_null=["io", "io_index", "kind", "has_summary", "float_flags"],
        defaults={"float_flags": 0},
        if_not_exists=True,
    )
    db["graphs"].create(
        {"file_id": int, "name": str, "warnings": str, "op_count": int},
        pk="file_id",
        foreign_keys=[("file_id", "files", "id")],
        if_not_exists=True,
    )
    db["graph_ops"].create(
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
        if_not_exists=True,
    )
    db["commits"].create(
        {"seq": int, "committed_ns": int, "files": int, "bytes": int, "raw_deleted": int, "raw_deleted_bytes": int},
        pk="seq",
        if_not_exists=True,
    )
    db["daemon_state"].create(
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
        if_not_exists=True,
    )
    # status lists problems; a partial index keeps that cheap without slowing the common (summarized) writes
    conn.execute("CREATE INDEX IF NOT EXISTS files_problems ON files(state, indexed_ns) WHERE state != 'summarized'")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    conn.commit()


def _schema_version(conn: sqlite3.Connection) -> int:
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


# ----------------------------------------------------------------------------------------------------------------
# Encoding helpers


def _shape_text(shape: Optional[tuple[int, ...]]) -> Optional[str]:
    return None if shape is None else ",".join(str(d) for d in shape)


@functools.lru_cache(maxsize=4096)  # tensors of one model share few shapes; tuples are immutable
def _shape_of(text: Optional[str]) -> Optional[tuple[int, ...]]:
    if text is None:
        return None
    return tuple(int(d) for d in text.split(",")) if text else ()


_FLOAT_FIELDS = ("min", "max", "mean", "l2norm")
# Enum(value) costs ~2 µs; reading 300k rows makes that seconds. Plain dict lookups instead.
_SIDES = {m.value: m for m in Side}
_KINDS = {m.value: m for m in FileKind}
_STATES = {m.value: m for m in FileState}
_IOS = {m.value: m for m in IO}
_TENSOR_KINDS = {m.value: m for m in TensorKind}


_NEGATIVE_ZERO_BIT = len(_FLOAT_FIELDS)  # bits 0-3: the field was NaN; bits 4-7: it was -0.0


def _floats(summary: Summary) -> tuple[tuple[Optional[float], ...], int]:
    """The four float fields for SQLite and the flags of what SQLite would lose: NaN (stored as NULL) and the
    sign of a zero (stored as 0.0)."""
    values: list[Optional[float]] = []
    flags = 0
    for bit, name in enumerate(_FLOAT_FIELDS):
        value = getattr(summary, name)
        if value is not None and math.isnan(value):
            flags |= 1 << bit
            value = None
        elif value == 0.0 and math.copysign(1.0, value) < 0:
            flags |= 1 << (bit + _NEGATIVE_ZERO_BIT)
        values.append(value)
    return tuple(values), flags


def _float_field(value: Optional[float], flags: int, bit: int) -> Optional[float]:
    if flags & (1 << bit):
        return math.nan
    if flags & (1 << (bit + _NEGATIVE_ZERO_BIT)):
        return -0.0
    return value


def _json_or_none(items: Sequence[str]) -> Optional[str]:
    return json.dumps(list(items)) if items else None


def _text(value: Optional[int]) -> Optional[str]:
    return None if value is None else str(value)


def _int(text: Optional[str]) -> Optional[int]:
    return None if text is None else int(text)


def _enum_value(value: Optional[enum.Enum]) -> Optional[str]:
    return None if value is None else value.value


# ----------------------------------------------------------------------------------------------------------------
# Write side (the daemon)


@dataclass(frozen=True)
class SummaryRow:
    """A dump file summarized. `mapped_name` is the mapping.csv name of a hashed GE file name."""

    file: DumpFile
    key: FileKey
    summary: FileSummary
    raw_deleted: bool = False
    mapped_name: Optional[str] = None


@dataclass(frozen=True)
class GraphRow:
    file: GraphFile
    key: FileKey
    graph: Graph


@dataclass(frozen=True)
class ProblemRow:
    """A file that could not be summarized (yet): state incomplete or error, with the reason."""

    path: Path
    state: FileState
    error: str
    key: Optional[FileKey] = None
    file: Union[DumpFile, GraphFile, None] = None


@dataclass(frozen=True)
class RawFlagRow:
    """Correct a raw_deleted flag: the deletion failed, or retention is off now."""

    path: Path
    deleted: bool


@dataclass(frozen=True)
class ForgetRow:
    """An incomplete file vanished before it was finished: drop its row (if it is still 'incomplete')."""

    path: Path


IndexRecord = Union[SummaryRow, GraphRow, ProblemRow, RawFlagRow, ForgetRow]


@dataclass(frozen=True)
class CommitResult:
    seq: int
    committed_ns: int
    files: int
    bytes: int
    raw_deleted: int
    raw_deleted_bytes: int


@dataclass(frozen=True)
class DaemonState:
    pid: int
    host: str
    started_ns: int
    heartbeat_ns: int
    stopped_ns: Optional[int]
    roots: tuple[str, ...]
    queued: int
    in_flight: int
    pending: int


_FILE_COLUMNS = (
    "path", "inode", "size", "mtime_ns", "side", "kind", "rank", "token", "model", "run", "device", "model_id",
    "op_type", "op_name", "header_op_name", "io", "io_index", "io_sub_index", "timestamp", "dump_time",
    "mapped_name", "state", "error", "attempts", "summaries", "raw_deleted", "bytes", "commit_seq", "indexed_ns",
)  # fmt: skip
# On conflict everything is replaced, except the counters, which accumulate over the file's history.
_UPSERT_FILE = (
    f"INSERT INTO files ({', '.join(_FILE_COLUMNS)}) VALUES ({', '.join('?' * len(_FILE_COLUMNS))}) "
    "ON CONFLICT(path) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _FILE_COLUMNS if c not in ("path", "attempts", "summaries"))
    + ", attempts = files.attempts + excluded.attempts, summaries = files.summaries + excluded.summaries"
)
_TENSOR_COLUMNS = (
    "file_id", "position", "io", "io_index", "io_sub_index", "kind", "dtype", "shape", "device_format",
    "device_shape", "has_summary", "numel", "min", "max", "mean", "l2norm", "nan_count", "inf_count", "crc32",
    "float_flags", "notes",
)  # fmt: skip
_INSERT_TENSOR = f"INSERT INTO tensors ({', '.join(_TENSOR_COLUMNS)}) VALUES ({', '.join('?' * len(_TENSOR_COLUMNS))})"
_INSERT_GRAPH_OP = (
    "INSERT INTO graph_ops (file_id, op_order, name, type, inputs, control_inputs, outputs, original_op_names, "
    "stack_info) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _dump_file_columns(file: DumpFile) -> tuple:
    return (
        file.side.value,
        file.kind.value,
        file.rank,
        file.token,
        file.model,
        file.run,
        file.device,
        file.model_id,
        file.op_type,
        file.op_name,
    )


def _fx_columns(file: DumpFile) -> tuple:
    return (_enum_value(file.io), file.index, getattr(file.name, "sub_index", None))


def _file_row(
    path: Path,
    key: Optional[FileKey],
    located: Union[DumpFile, GraphFile, None],
    *,
    state: FileState,
    error: Optional[str],
    summarized: bool,
    header_op_name: Optional[str] = None,
    dump_time: Optional[int] = None,
    mapped_name: Optional[str] = None,
    raw_deleted: bool = False,
    seq: int,
    now_ns: int,
) -> tuple:
    if isinstance(located, DumpFile):
        described = (*_dump_file_columns(located), header_op_name, *_fx_columns(located), _text(located.timestamp))
    elif isinstance(located, GraphFile):
        described = (Side.GRAPH.value, FileKind.GRAPH.value, located.name.rank) + (None,) * 12
    else:
        described = (None,) * 15
    inode, size, mtime_ns = (key.inode, key.size, key.mtime_ns) if key is not None else (None, None, None)
    return (
        str(path),
        inode,
        size,
        mtime_ns,
        *described,
        _text(dump_time),
        mapped_name,
        state.value,
        error,
        1,
        int(summarized),
        int(raw_deleted),
        size if summarized else None,
        seq,
        now_ns,
    )


def _tensor_rows(file_id: int, tensors: Sequence[TensorSummary]) -> Iterator[tuple]:
    for position, tensor in enumerate(tensors):
        summary = tensor.summary
        if summary is None:
            numbers: tuple = (0, None, None, None, None, None, None, None, None, 0)
        else:
            (low, high, mean, l2), flags = _floats(summary)
            numbers = (1, summary.numel, low, high, mean, l2, summary.nan_count, summary.inf_count, summary.crc32)
            numbers += (flags,)
        yield (
            file_id,
            position,
            tensor.io.value,
            tensor.index,
            tensor.sub_index,
            tensor.kind.value,
            tensor.dtype,
            _shape_text(tensor.shape),
            tensor.device_format,
            _shape_text(tensor.device_shape),
            *numbers,
            _json_or_none(tensor.notes),
        )


def _graph_op_row(file_id: int, op: GraphOp) -> tuple:
    outputs = [
        [o.index, o.fx_tensor_name, o.dtype, list(o.shape), o.layout, o.origin_name, o.origin_output_index]
        for o in op.outputs
    ]
    return (
        file_id,
        op.order,
        op.name,
        op.type,
        json.dumps([[edge.producer, edge.index] for edge in op.inputs]),
        json.dumps(list(op.control_inputs)),
        json.dumps(outputs),
        json.dumps(list(op.original_op_names)),
        op.stack_info,
    )


def _connect(
    path: Path, *, readonly: bool, immutable: bool = False, busy_timeout: float = BUSY_TIMEOUT_S
) -> sqlite3.Connection:
    if readonly:
        mode = "immutable=1" if immutable else "mode=ro"
        conn = sqlite3.connect(f"file:{quote(str(path))}?{mode}", uri=True, timeout=busy_timeout)
    else:
        conn = sqlite3.connect(str(path), timeout=busy_timeout)
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
    return conn


class IndexWriter:
    """The daemon's connection to one index: creates it, writes batches in one transaction each.

    `durable` makes every commit fsync the WAL (synchronous=FULL): needed when raw files are deleted after a
    commit, because with synchronous=NORMAL a power loss may roll back the last commits — and the raw file would
    be gone with its summary. Without deletions NORMAL is enough (a crash of the process loses nothing).
    """

    def __init__(self, path: Union[str, Path], *, durable: bool = False) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(exist_ok=True)  # never its parents: a deleted root must stay deleted
            self.conn = _connect(self.path, readonly=False, busy_timeout=WRITER_BUSY_TIMEOUT_S)
            version = _schema_version(self.conn)
            if version > SCHEMA_VERSION:
                raise IndexError_(f"{self.path}: written by a newer tcmp (schema {version} > {SCHEMA_VERSION})")
            if self.conn.execute("PRAGMA journal_mode = WAL").fetchone()[0].lower() != "wal":
                raise IndexError_(f"{self.path}: cannot switch the index to WAL mode")
            self.conn.execute(f"PRAGMA synchronous = {'FULL' if durable else 'NORMAL'}")
            if version < SCHEMA_VERSION:
                _create_schema(self.conn)
            self.conn.isolation_level = None  # explicit BEGIN IMMEDIATE / COMMIT from here on
            row = self.conn.execute("SELECT max(seq) FROM commits").fetchone()
        except sqlite3.Error as exc:
            raise IndexError_(f"{self.path}: {exc}") from exc
        except OSError as exc:
            raise IndexError_(f"{self.path}: {exc.strerror or exc}") from exc
        self._seq = int(row[0] or 0)

    def __enter__(self) -> IndexWriter:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        self.conn.close()

    def add_root(self, root: Path) -> None:
        self.conn.execute(
            "INSERT INTO roots (path, added_ns) VALUES (?, ?) ON CONFLICT(path) DO NOTHING", (str(root), time.time_ns())
        )

    def kept_raw_bytes(self, root: Path) -> int:
        """Bytes of summarized raw dump files under `root` that the daemon has not deleted (retention budget)."""
        low, high = _prefix_range(str(root))
        row = self.conn.execute(
            "SELECT sum(size) FROM files WHERE path >= ? AND path < ? AND state = 'summarized' AND raw_deleted = 0 "
            "AND kind IN (?, ?)",
            (low, high, FileKind.GE_BINARY.value, FileKind.FX_NPY.value),
        ).fetchone()
        return int(row[0] or 0)

    def write(self, records: Sequence[IndexRecord]) -> CommitResult:
        """All records in one transaction; the returned commit is on disk when this returns (per `durable`)."""
        now_ns = time.time_ns()
        seq = self._seq + 1
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            result = self._write(records, seq, now_ns)
            self.conn.execute(
                "INSERT INTO commits (seq, committed_ns, files, bytes, raw_deleted, raw_deleted_bytes) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (seq, now_ns, result.files, result.bytes, result.raw_deleted, result.raw_deleted_bytes),
            )
            self.conn.execute("COMMIT")
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise
        self._seq = seq
        return result

    def _write(self, records: Sequence[IndexRecord], seq: int, now_ns: int) -> CommitResult:
        file_rows: list[tuple] = []
        problems: list[str] = []
        summaries: list[SummaryRow] = []
        graphs: list[GraphRow] = []
        for record in records:
            if isinstance(record, SummaryRow):
                file_rows.append(
                    _file_row(
                        record.file.path, record.key, record.file, state=FileState.SUMMARIZED, error=None,
                        summarized=True, header_op_name=record.summary.op_name, dump_time=record.summary.dump_time,
                        mapped_name=record.mapped_name, raw_deleted=record.raw_deleted, seq=seq, now_ns=now_ns,
                    )
                )  # fmt: skip
                summaries.append(record)
            elif isinstance(record, GraphRow):
                file_rows.append(
                    _file_row(record.file.path, record.key, record.file, state=FileState.SUMMARIZED, error=None,
                              summarized=True, seq=seq, now_ns=now_ns)
                )  # fmt: skip
                graphs.append(record)
            elif isinstance(record, ProblemRow):
                file_rows.append(
                    _file_row(record.path, record.key, record.file, state=record.state, error=record.error,
                              summarized=False, seq=seq, now_ns=now_ns)
                )  # fmt: skip
                problems.append(str(record.path))
        cur = self.conn.cursor()
        cur.executemany(_UPSERT_FILE, file_rows)
        ids = self._ids([str(r.file.path) for r in summaries] + [str(r.file.path) for r in graphs] + problems)
        stale = [(ids[p],) for p in ids]
        cur.executemany("DELETE FROM tensors WHERE file_id = ?", stale)
        cur.executemany("DELETE FROM graph_ops WHERE file_id = ?", stale)
        cur.executemany("DELETE FROM graphs WHERE file_id = ?", stale)
        cur.executemany(
            _INSERT_TENSOR,
            (row for r in summaries for row in _tensor_rows(ids[str(r.file.path)], r.summary.tensors)),
        )
        for record in graphs:
            file_id = ids[str(record.file.path)]
            cur.execute(
                "INSERT INTO graphs (file_id, name, warnings, op_count) VALUES (?, ?, ?, ?)",
                (file_id, record.graph.name, _json_or_none(record.graph.warnings), len(record.graph.ops)),
            )
            cur.executemany(_INSERT_GRAPH_OP, (_graph_op_row(file_id, op) for op in record.graph.ops))
        for record in records:
            if isinstance(record, RawFlagRow):
                cur.execute("UPDATE files SET raw_deleted = ? WHERE path = ?", (int(record.deleted), str(record.path)))
            elif isinstance(record, ForgetRow):
                cur.execute("DELETE FROM files WHERE path = ? AND state = 'incomplete'", (str(record.path),))
        deleted = [r for r in summaries if r.raw_deleted]
        return CommitResult(
            seq=seq,
            committed_ns=now_ns,
            files=len(summaries) + len(graphs),
            bytes=sum(r.key.size for r in summaries) + sum(r.key.size for r in graphs),
            raw_deleted=len(deleted),
            raw_deleted_bytes=sum(r.key.size for r in deleted),
        )

    def _ids(self, paths: list[str]) -> dict[str, int]:
        ids: dict[str, int] = {}
        for start in range(0, len(paths), _IN_CHUNK):
            chunk = paths[start : start + _IN_CHUNK]
            query = f"SELECT path, id FROM files WHERE path IN ({', '.join('?' * len(chunk))})"
            ids.update(self.conn.execute(query, chunk).fetchall())
        return ids

    def write_daemon_state(self, state: DaemonState) -> None:
        self.conn.execute(
            "INSERT INTO daemon_state (id, pid, host, started_ns, heartbeat_ns, stopped_ns, roots, queued, "
            "in_flight, pending) VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET "
            "pid = excluded.pid, host = excluded.host, started_ns = excluded.started_ns, "
            "heartbeat_ns = excluded.heartbeat_ns, stopped_ns = excluded.stopped_ns, roots = excluded.roots, "
            "queued = excluded.queued, in_flight = excluded.in_flight, pending = excluded.pending",
            (
                state.pid, state.host, state.started_ns, state.heartbeat_ns, state.stopped_ns,
                json.dumps(list(state.roots)), state.queued, state.in_flight, state.pending,
            ),
        )  # fmt: skip

    def prune_commits(self, keep: int = 20_000) -> None:
        self.conn.execute("DELETE FROM commits WHERE seq <= ?", (self._seq - keep,))

    def checkpoint(self) -> None:
        """Fold the WAL into the database file (when idle), so the -wal file does not keep growing."""
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def daemon_state_now(
    roots: Sequence[Path], started_ns: int, *, queued: int, in_flight: int, pending: int, stopped: bool = False
) -> DaemonState:
    now = time.time_ns()
    return DaemonState(
        pid=os.getpid(),
        host=socket.gethostname(),
        started_ns=started_ns,
        heartbeat_ns=now,
        stopped_ns=now if stopped else None,
        roots=tuple(str(r) for r in roots),
        queued=queued,
        in_flight=in_flight,
        pending=pending,
    )


# ----------------------------------------------------------------------------------------------------------------
# Read side (compare, status, and the daemon's resume check)


@dataclass(frozen=True)
class KnownFile:
    """What the index remembers of one path (the daemon's resume check)."""

    path: str
    key: Optional[FileKey]
    state: FileState
    raw_deleted: bool
    summaries: int


@dataclass(frozen=True)
class IndexedFile:
    """A dump file as the index knows it. `file` is rebuilt from the row, exactly as `layout.locate` gave it to
    the daemon (at the path the file has now, if the tree was moved with its index)."""

    file: DumpFile
    id: int
    state: FileState
    error: Optional[str]
    raw_deleted: bool
    header_op_name: Optional[str]  # GE: the header's unsanitized op name (None until summarized)
    key: Optional[FileKey]
    dump_time: Optional[int]
    indexed_ns: int

    @property
    def path(self) -> Path:
        return self.file.path


@dataclass(frozen=True)
class IndexedProblem:
    """A row for a file whose name could not be placed in a dump tree (no DumpFile), with the reason."""

    path: Path
    state: FileState
    error: Optional[str]


@dataclass(frozen=True)
class DaemonStatus:
    pid: int
    host: str
    started_ns: int
    heartbeat_ns: int
    stopped_ns: Optional[int]
    roots: tuple[str, ...]
    queued: int
    in_flight: int
    pending: int


@dataclass(frozen=True)
class IndexStatus:
    """Counters for `tcmp status`."""

    path: Path
    schema_version: int
    summarized: int
    incomplete: int
    failed: int
    graphs: int
    tensors: int
    bytes_read: int  # size of every summarized file
    bytes_freed: int  # size of the raw files the daemon deleted
    files_last_minute: int
    bytes_last_minute: int
    last_commit_ns: Optional[int]
    recent_errors: tuple[IndexedProblem, ...]
    daemon: Optional[DaemonStatus]
    immutable: bool  # opened with immutable=1 (read-only directory and no running writer)


def _prefix_range(directory: str) -> tuple[str, str]:
    """[low, high) bounds of every path strictly below `directory` ('0' sorts right after '/')."""
    directory = directory.rstrip("/")
    return directory + "/", directory + "0"


_FILES_SELECT = (
    "SELECT id, path, inode, size, mtime_ns, side, kind, rank, token, model, run, device, model_id, op_type, "
    "op_name, header_op_name, state, error, raw_deleted, dump_time, mapped_name, indexed_ns FROM files"
)


class IndexReader:
    """Read access to one index. Open with `open_index`."""

    def __init__(self, path: Path, conn: sqlite3.Connection, *, immutable: bool) -> None:
        self.path = path
        self.conn = conn
        self.immutable = immutable
        self.schema_version = _schema_version(conn)
        if self.schema_version != SCHEMA_VERSION:
            conn.close()
            raise IndexError_(f"{path}: index schema {self.schema_version}, this tcmp reads {SCHEMA_VERSION}")
        self._stored_root, self._actual_root = self._relocation()
        self._directories: dict[str, Path] = {}

    def __enter__(self) -> IndexReader:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        self.conn.close()

    # -- paths: a tree copied or moved together with its .tcmp/ directory still resolves

    def _relocation(self) -> tuple[Optional[str], Optional[str]]:
        if self.path.name != INDEX_FILE or self.path.parent.name != INDEX_DIR:
            return None, None
        actual = str(Path(os.path.realpath(self.path.parent.parent)))
        roots = [row[0] for row in self.conn.execute("SELECT path FROM roots")]
        if len(roots) != 1 or roots[0] == actual:
            return None, None
        return roots[0], actual

    def _to_stored(self, path: str) -> str:
        if self._actual_root is not None and (path == self._actual_root or path.startswith(self._actual_root + "/")):
            return self._stored_root + path[len(self._actual_root) :]  # type: ignore[operator]
        return path

    def _to_actual(self, path: str) -> str:
        if self._stored_root is not None and (path == self._stored_root or path.startswith(self._stored_root + "/")):
            return self._actual_root + path[len(self._stored_root) :]  # type: ignore[operator]
        return path

    def _path(self, stored: str) -> Path:
        """Path of a stored path string; directories are parsed once (Path() of a deep path costs ~25 µs)."""
        directory, _, name = self._to_actual(stored).rpartition("/")
        parent = self._directories.get(directory)
        if parent is None:
            if len(self._directories) > 65536:
                self._directories.clear()
            parent = self._directories[directory] = Path(directory or "/")
        return parent / name

    def _rows_under(self, root: Union[str, Path], where: str, params: tuple = ()) -> list[tuple]:
        stored = self._to_stored(os.path.realpath(root))
        if stored == "/":
            return self.conn.execute(f"{_FILES_SELECT} WHERE {where} ORDER BY path", params).fetchall()
        low, high = _prefix_range(stored)
        query = f"{_FILES_SELECT} WHERE path >= ? AND path < ? AND {where} ORDER BY path"
        return self.conn.execute(query, (low, high, *params)).fetchall()

    # -- dump files

    def files_under(self, root: Union[str, Path]) -> tuple[IndexedFile, ...]:
        """Every dump file (GE and FX, in every state) the index holds below `root`, in path order."""
        rows = self._rows_under(root, "side IN (?, ?)", (Side.GE.value, Side.FX.value))
        return tuple(f for f in (self._indexed_file(row) for row in rows) if f is not None)

    def problems_under(self, root: Union[str, Path]) -> tuple[IndexedProblem, ...]:
        """Rows of files that looked like dumps but whose names could not be placed (no side)."""
        rows = self._rows_under(root, "side IS NULL")
        return tuple(IndexedProblem(Path(self._to_actual(r[1])), FileState(r[16]), r[17]) for r in rows)

    def _indexed_file(self, row: tuple) -> Optional[IndexedFile]:
        file_id, stored_path, inode, size, mtime_ns, side, kind = row[:7]
        rank, token, model, run, device, model_id, op_type, op_name, header_op_name = row[7:16]
        state, error, raw_deleted, dump_time, mapped_name, indexed_ns = row[16:]
        path = self._path(stored_path)
        placed = (rank, token, model, run, device, model_id, op_type, op_name)
        try:
            dump_file = _rebuild_dump_file(path, _SIDES[side], _KINDS[kind], mapped_name, placed)
        except (DumpError, ValueError):
            return None  # a name this tcmp no longer parses; the row cannot be placed
        key = FileKey(inode, size, mtime_ns) if inode is not None else None
        return IndexedFile(
            dump_file,
            file_id,
            _STATES[state],
            error,
            bool(raw_deleted),
            header_op_name,
            key,
            _int(dump_time),
            indexed_ns,
        )

    def summaries(self, file: IndexedFile) -> FileSummary:
        """The stored summary of one file (no tensors unless its state is summarized)."""
        return self.summaries_of((file,))[0]

    def summaries_of(self, files: Sequence[IndexedFile]) -> tuple[FileSummary, ...]:
        """Stored summaries of many files at once (batched queries), in the order given."""
        by_id: dict[int, list[TensorSummary]] = {f.id: [] for f in files}
        ids = list(by_id)
        for start in range(0, len(ids), _IN_CHUNK):
            chunk = ids[start : start + _IN_CHUNK]
            query = (
                f"SELECT {', '.join(_TENSOR_COLUMNS)} FROM tensors WHERE file_id IN ({', '.join('?' * len(chunk))}) "
                "ORDER BY file_id, position"
            )
            for row in self.conn.execute(query, chunk):
                by_id[row[0]].append(_tensor_summary(row))
        return tuple(
            FileSummary(
                path=f.path,
                op_name=f.header_op_name or f.file.op_name,
                dump_time=f.dump_time if f.dump_time is not None else f.file.timestamp,
                tensors=tuple(by_id[f.id]),
            )
            for f in files
        )

    # -- graphs

    def graph_files_under(self, root: Union[str, Path]) -> tuple[GraphFile, ...]:
        rows = self._rows_under(root, "side = ? AND state = ?", (Side.GRAPH.value, FileState.SUMMARIZED.value))
        found = []
        for row in rows:
            path = Path(self._to_actual(row[1]))
            name = parse_graph_file_name(path.name)
            if name is not None:
                found.append(GraphFile(path, name))
        return tuple(found)

    def graph(self, path: Union[str, Path]) -> Optional[Graph]:
        """The parsed graph stored for `path`, if it is still what is on disk (same size and mtime) or the file is
        gone; None when the index has no parse of it or the file has changed since."""
        actual = os.path.realpath(path)
        row = self.conn.execute(
            "SELECT f.id, f.size, f.mtime_ns, g.name, g.warnings FROM files f JOIN graphs g ON g.file_id = f.id "
            "WHERE f.path = ? AND f.state = ?",
            (self._to_stored(actual), FileState.SUMMARIZED.value),
        ).fetchone()
        if row is None:
            return None
        file_id, size, mtime_ns, name, warnings = row
        try:
            stat = os.stat(actual)
        except FileNotFoundError:
            stat = None
        if stat is not None and (stat.st_size != size or stat.st_mtime_ns != mtime_ns):
            return None
        ops = tuple(
            _graph_op(r)
            for r in self.conn.execute(
                "SELECT op_order, name, type, inputs, control_inputs, outputs, original_op_names, stack_info "
                "FROM graph_ops WHERE file_id = ? ORDER BY op_order",
                (file_id,),
            )
        )
        return Graph(name=name, path=Path(actual), ops=ops, warnings=tuple(json.loads(warnings)) if warnings else ())

    # -- the daemon's resume check

    def lookup(self, paths: Sequence[str]) -> tuple[KnownFile, ...]:
        """What the index holds for these (stored) paths; paths it does not know are left out."""
        found: list[KnownFile] = []
        for start in range(0, len(paths), _IN_CHUNK):
            chunk = list(paths[start : start + _IN_CHUNK])
            query = (
                "SELECT path, inode, size, mtime_ns, state, raw_deleted, summaries FROM files "
                f"WHERE path IN ({', '.join('?' * len(chunk))})"
            )
            for path, inode, size, mtime_ns, state, raw_deleted, summaries in self.conn.execute(query, chunk):
                key = FileKey(inode, size, mtime_ns) if inode is not None else None
                found.append(KnownFile(path, key, FileState(state), bool(raw_deleted), summaries))
        return tuple(found)

    # -- status

    def status(self, recent_errors: int = 5) -> IndexStatus:
        counts = {state: 0 for state in FileState}
        bytes_read = 0
        for state, count, size in self.conn.execute(
            "SELECT state, count(*), sum(size) FROM files WHERE side IS NULL OR side != ? GROUP BY state",
            (Side.GRAPH.value,),
        ):
            counts[FileState(state)] = count
            if state == FileState.SUMMARIZED.value:
                bytes_read = int(size or 0)
        graphs = self.conn.execute("SELECT count(*) FROM graphs").fetchone()[0]
        tensors = self.conn.execute("SELECT count(*) FROM tensors").fetchone()[0]
        freed = self.conn.execute("SELECT sum(size) FROM files WHERE raw_deleted = 1").fetchone()[0] or 0
        now = time.time_ns()
        files_minute, bytes_minute = self.conn.execute(
            "SELECT sum(files), sum(bytes) FROM commits WHERE committed_ns >= ?", (now - 60_000_000_000,)
        ).fetchone()
        last_commit = self.conn.execute("SELECT max(committed_ns) FROM commits WHERE files > 0").fetchone()[0]
        errors = tuple(
            IndexedProblem(Path(self._to_actual(p)), FileState(s), e)
            for p, s, e in self.conn.execute(
                "SELECT path, state, error FROM files WHERE state = ? ORDER BY indexed_ns DESC LIMIT ?",
                (FileState.ERROR.value, recent_errors),
            )
        )
        return IndexStatus(
            path=self.path,
            schema_version=self.schema_version,
            summarized=counts[FileState.SUMMARIZED],
            incomplete=counts[FileState.INCOMPLETE],
            failed=counts[FileState.ERROR],
            graphs=graphs,
            tensors=tensors,
            bytes_read=bytes_read,
            bytes_freed=int(freed),
            files_last_minute=int(files_minute or 0),
            bytes_last_minute=int(bytes_minute or 0),
            last_commit_ns=last_commit,
            recent_errors=errors,
            daemon=self._daemon_status(),
            immutable=self.immutable,
        )

    def _daemon_status(self) -> Optional[DaemonStatus]:
        row = self.conn.execute(
            "SELECT pid, host, started_ns, heartbeat_ns, stopped_ns, roots, queued, in_flight, pending "
            "FROM daemon_state WHERE id = 1"
        ).fetchone()
        if row is None:
            return None
        pid, host, started, heartbeat, stopped, roots, queued, in_flight, pending = row
        return DaemonStatus(
            pid, host, started, heartbeat, stopped, tuple(json.loads(roots)), queued, in_flight, pending
        )


def _tensor_summary(row: tuple) -> TensorSummary:
    (_, _, io, index, sub_index, kind, dtype, shape, device_format, device_shape, has_summary, numel, low, high,
     mean, l2, nan_count, inf_count, crc32, flags, notes) = row  # fmt: skip
    summary = None
    if has_summary:
        summary = Summary(
            numel=numel,
            min=_float_field(low, flags, 0),
            max=_float_field(high, flags, 1),
            mean=_float_field(mean, flags, 2),
            l2norm=_float_field(l2, flags, 3),
            nan_count=nan_count,
            inf_count=inf_count,
            crc32=crc32,
        )
    return TensorSummary(
        io=_IOS[io],
        index=index,
        sub_index=sub_index,
        kind=_TENSOR_KINDS[kind],
        dtype=dtype,
        shape=_shape_of(shape),
        summary=summary,
        device_format=device_format,
        device_shape=_shape_of(device_shape),
        notes=tuple(json.loads(notes)) if notes else (),
    )


def _graph_op(row: tuple) -> GraphOp:
    order, name, op_type, inputs, control_inputs, outputs, original_op_names, stack_info = row
    return GraphOp(
        order=order,
        name=name,
        type=op_type,
        inputs=tuple(InputEdge(producer, index) for producer, index in json.loads(inputs)),
        control_inputs=tuple(json.loads(control_inputs)),
        outputs=tuple(
            OutputDesc(index, fx_name, dtype, tuple(shape), layout, origin, origin_index)
            for index, fx_name, dtype, shape, layout, origin, origin_index in json.loads(outputs)
        ),
        original_op_names=tuple(json.loads(original_op_names)),
        stack_info=stack_info,
    )


_HASHED_SUFFIXES = ("_min_max.npz", ".csv")


def _rebuild_dump_file(path: Path, side: Side, kind: FileKind, mapped_name: Optional[str], placed: tuple) -> DumpFile:
    """A DumpFile from its row: the name is parsed again (cheap, and exactly what locate parsed), everything the
    directories said comes from the columns, `placed` = (rank, token, model, run, device, model_id, op_type,
    op_name) as selected by _FILES_SELECT."""
    rank, token, model, run, device, model_id, op_type, op_name = placed
    name = path.name
    if side is Side.FX:
        fx_name = parse_fx_file_name(name)
        timestamp = int(fx_name.timestamp) if fx_name.timestamp.isdigit() else None
        parsed: Union[GeFileName, FxFileName] = fx_name
        io, index = fx_name.io, fx_name.index
    else:
        if mapped_name is not None and is_hashed_name(name):
            stem = next((name[: -len(s)] for s in _HASHED_SUFFIXES if name.endswith(s)), name)
            parsed = resolve_ge_file_name(name, {stem: mapped_name})
        else:
            parsed = parse_ge_file_name(name)
        timestamp, io, index = parsed.timestamp, None, None
    return DumpFile(
        side=side,
        kind=kind,
        path=path,
        rank=rank,
        token=token,
        model=model,
        run=run,
        op_type=op_type,
        op_name=op_name,
        io=io,
        index=index,
        timestamp=timestamp,
        name=parsed,
        device=device,
        model_id=model_id,
    )


def open_index(path: Union[str, Path], readonly: bool = True) -> IndexReader:
    """Open an index file (or the index of the watched root containing a directory) for reading.

    Read-only opening works on a read-only directory too: SQLite needs to create the `-shm` file to read a WAL
    database, which fails there once the daemon has exited (its clean shutdown removes `-wal` and `-shm`); the
    reader then falls back to `immutable=1`, which is exact while no writer runs (and none can, in a directory
    nobody may write to). Raises IndexError_ when there is no usable index.
    """
    target = Path(path)
    if target.is_dir():
        found = find_index(target)
        if found is None:
            raise IndexError_(f"no {INDEX_DIR}/{INDEX_FILE} in {target} or its parents")
        target = found
    if not target.is_file():
        raise IndexError_(f"{target}: no such index file")
    if not readonly:
        return IndexReader(target, _connect(target, readonly=False), immutable=False)
    conn = None
    try:
        conn = _connect(target, readonly=True)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return IndexReader(target, conn, immutable=False)
    except sqlite3.OperationalError:
        if conn is not None:
            conn.close()
    try:
        conn = _connect(target, readonly=True, immutable=True)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        raise IndexError_(f"{target}: {exc}") from exc
    return IndexReader(target, conn, immutable=True)
