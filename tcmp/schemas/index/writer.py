"""The daemon's side of the index: the records it commits in batches, one transaction each, and its heartbeat."""

from __future__ import annotations

import ctypes
import json
import os
import socket
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from tcmp.schemas.dump_records import FileSummary
from tcmp.schemas.dump_tree import RAW_TENSOR_KINDS, DumpFile, GraphFile
from tcmp.schemas.graph import Graph
from tcmp.schemas.index.codec import file_row, graph_op_row, json_or_none, tensor_rows
from tcmp.schemas.index.columns import GRAPH_OPS, SCHEMA_VERSION
from tcmp.schemas.index.schema import (
    FILE_COLUMNS,
    TENSOR_COLUMNS,
    WRITER_BUSY_TIMEOUT_S,
    FileKey,
    FileState,
    IndexReadOnly,
    IndexUnusable,
    connect,
    create_schema,
    migrate_schema,
    prefix_range,
    rows_in,
    schema_version_of,
    unusable_because,
    unwritable_reason,
)

_ABANDONED: list[sqlite3.Connection] = []  # connections to an index that became unwritable (see IndexWriter.close)


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
    """Correct a raw_deleted flag: the deletion failed, or retention is off now. With `key`, only while the row
    still describes that content: a deletion that failed because the file changed must not touch the flag of
    the summary of its new content, which may be committed first."""

    path: Path
    deleted: bool
    key: Optional[FileKey] = None


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
    """The running daemon as it records itself in the index (its heartbeat), and as `tcmp status` reads it."""

    pid: int
    host: str
    started_ns: int
    heartbeat_ns: int
    stopped_ns: Optional[int]
    roots: tuple[str, ...]
    queued: int
    in_flight: int
    pending: int


# On conflict everything is replaced, except the counters, which accumulate over the file's history.
_UPSERT_FILE = (
    f"INSERT INTO files ({', '.join(FILE_COLUMNS)}) VALUES ({', '.join('?' * len(FILE_COLUMNS))}) "
    "ON CONFLICT(path) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in FILE_COLUMNS if c not in ("path", "attempts", "summaries"))
    + ", attempts = files.attempts + excluded.attempts, summaries = files.summaries + excluded.summaries"
)
_INSERT_TENSOR = f"INSERT INTO tensors ({', '.join(TENSOR_COLUMNS)}) VALUES ({', '.join('?' * len(TENSOR_COLUMNS))})"
_INSERT_GRAPH_OP = (
    f"INSERT INTO graph_ops ({', '.join(GRAPH_OPS.names)}) VALUES ({', '.join('?' * len(GRAPH_OPS.names))})"
)


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
            self._refuse_unwritable()
            self.conn = connect(self.path, readonly=False, busy_timeout=WRITER_BUSY_TIMEOUT_S)
            self.conn.execute("PRAGMA mmap_size = 0")  # the database file through read/write, never a mapping
            version = schema_version_of(self.conn)
            if version > SCHEMA_VERSION:
                raise IndexUnusable(f"{self.path}: written by a newer tcmp (schema {version} > {SCHEMA_VERSION})")
            if self.conn.execute("PRAGMA journal_mode = WAL").fetchone()[0].lower() != "wal":
                raise IndexUnusable(f"{self.path}: cannot switch the index to WAL mode")
            self.conn.execute(f"PRAGMA synchronous = {'FULL' if durable else 'NORMAL'}")
            if version == 0:
                create_schema(self.conn)
            elif version < SCHEMA_VERSION:
                migrate_schema(self.conn, version)
            self.conn.isolation_level = None  # explicit BEGIN IMMEDIATE / COMMIT from here on
            row = self.conn.execute("SELECT max(seq) FROM commits").fetchone()
        except sqlite3.Error as exc:
            raise unusable_because(self.path, exc) from exc
        except OSError as exc:
            raise IndexUnusable(f"{self.path}: {exc.strerror or exc}") from exc
        self._seq = int(row[0] or 0)

    def _refuse_unwritable(self) -> None:
        """IndexReadOnly before SQLite touches a file it could not write (see `unwritable_reason`: a SIGBUS)."""
        reason = unwritable_reason(self.path)
        if reason is not None:
            raise IndexReadOnly(f"{self.path}: read-only: {reason}")

    def __enter__(self) -> IndexWriter:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        if unwritable_reason(self.path) is None:
            self.conn.close()
            return
        # closing checkpoints and writes the mapped -shm file: a SIGBUS once it cannot be written. The connection
        # is kept, unused, for the life of the process (one reference more than anything drops, so not even the
        # interpreter's exit closes it); the kernel releases its files and locks when the process ends.
        _ABANDONED.append(self.conn)
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(self.conn))

    def add_root(self, root: Path) -> None:
        self._refuse_unwritable()
        self.conn.execute(
            "INSERT INTO roots (path, added_ns) VALUES (?, ?) ON CONFLICT(path) DO NOTHING", (str(root), time.time_ns())
        )

    def kept_raw_bytes(self, root: Path) -> int:
        """Bytes of summarized raw dump files under `root` that the daemon has not deleted (retention budget)."""
        low, high = prefix_range(str(root))
        row = self.conn.execute(
            "SELECT sum(size) FROM files WHERE path >= ? AND path < ? AND state = 'summarized' AND raw_deleted = 0 "
            f"AND kind IN ({', '.join('?' * len(RAW_TENSOR_KINDS))})",
            (low, high, *(k.value for k in RAW_TENSOR_KINDS)),
        ).fetchone()
        return int(row[0] or 0)

    def write(self, records: Sequence[IndexRecord]) -> CommitResult:
        """All records in one transaction; the returned commit is on disk when this returns (per `durable`)."""
        self._refuse_unwritable()
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
                    file_row(
                        record.file.path, record.key, record.file, state=FileState.SUMMARIZED, error=None,
                        summarized=True, header_op_name=record.summary.op_name, dump_time=record.summary.dump_time,
                        mapped_name=record.mapped_name, raw_deleted=record.raw_deleted, seq=seq, now_ns=now_ns,
                        ffts_attr=record.summary.slicing,
                    )
                )  # fmt: skip
                summaries.append(record)
            elif isinstance(record, GraphRow):
                file_rows.append(
                    file_row(record.file.path, record.key, record.file, state=FileState.SUMMARIZED, error=None,
                              summarized=True, seq=seq, now_ns=now_ns)
                )  # fmt: skip
                graphs.append(record)
            elif isinstance(record, ProblemRow):
                file_rows.append(
                    file_row(record.path, record.key, record.file, state=record.state, error=record.error,
                              summarized=False, seq=seq, now_ns=now_ns)
                )  # fmt: skip
                problems.append(str(record.path))
        # a path summarized twice in one batch (its file changed between two reads): the later summary is the one
        # kept, while its counter says it was summarized twice
        summaries = list({str(r.file.path): r for r in summaries}.values())
        graphs = list({str(r.file.path): r for r in graphs}.values())
        cur = self.conn.cursor()
        cur.executemany(_UPSERT_FILE, file_rows)
        ids = self._ids([str(r.file.path) for r in summaries] + [str(r.file.path) for r in graphs] + problems)
        stale = [(ids[p],) for p in ids]
        cur.executemany("DELETE FROM tensors WHERE file_id = ?", stale)
        cur.executemany("DELETE FROM graph_ops WHERE file_id = ?", stale)
        cur.executemany("DELETE FROM graphs WHERE file_id = ?", stale)
        cur.executemany(
            _INSERT_TENSOR,
            (row for r in summaries for row in tensor_rows(ids[str(r.file.path)], r.summary.tensors)),
        )
        for record in graphs:
            if record.graph.has_subgraphs:
                # graph_ops has no place for an op's subgraph: such a graph is parsed from its file by the
                # compare (and kept in the graph cache), never served from here without its subgraphs
                continue
            file_id = ids[str(record.file.path)]
            cur.execute(
                "INSERT INTO graphs (file_id, name, warnings, op_count) VALUES (?, ?, ?, ?)",
                (file_id, record.graph.name, json_or_none(record.graph.warnings), len(record.graph.ops)),
            )
            cur.executemany(_INSERT_GRAPH_OP, (graph_op_row(file_id, op) for op in record.graph.ops))
        for record in records:
            if isinstance(record, RawFlagRow) and record.key is None:
                cur.execute("UPDATE files SET raw_deleted = ? WHERE path = ?", (int(record.deleted), str(record.path)))
            elif isinstance(record, RawFlagRow) and record.key is not None:  # (the branch above took key None)
                key = record.key
                cur.execute(
                    "UPDATE files SET raw_deleted = ? WHERE path = ? AND inode = ? AND size = ? AND mtime_ns = ?",
                    (int(record.deleted), str(record.path), key.inode, key.size, key.mtime_ns),
                )
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
        return dict(rows_in(self.conn, "SELECT path, id FROM files WHERE path IN ({placeholders})", paths))

    def write_daemon_state(self, state: DaemonState) -> None:
        self._refuse_unwritable()
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
        self._refuse_unwritable()
        self.conn.execute("DELETE FROM commits WHERE seq <= ?", (self._seq - keep,))

    def checkpoint(self) -> None:
        """Fold the WAL into the database file (when idle), so the -wal file does not keep growing."""
        self._refuse_unwritable()
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
