"""Reading an index: `tcmp compare` (files and their summaries, graphs), `tcmp status`, and the daemon's resume
check. Readers never block the daemon's writes (WAL)."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional, Union

from tcmp.schemas.dump_outline import DumpDir
from tcmp.schemas.dump_records import FileSummary, Side, Summary, TensorSummary
from tcmp.schemas.dump_tree import INDEX_DIR, DumpFile, GraphFile
from tcmp.schemas.errors import DumpError
from tcmp.schemas.graph import Graph
from tcmp.schemas.graph_names import parse_graph_file_name
from tcmp.schemas.index.codec import (
    KINDS,
    SIDES,
    STATES,
    graph_op,
    int_or_none,
    rebuild_dump_file,
    row_element,
    row_summary,
    tensor_summary,
)
from tcmp.schemas.index.columns import FILES, OLDEST_READABLE_VERSION, SCHEMA_VERSION, TENSORS
from tcmp.schemas.index.schema import (
    INDEX_FILE,
    FileKey,
    FileState,
    IndexUnusable,
    connect,
    files_select,
    find_index,
    prefix_range,
    rows_in,
    schema_version_of,
    tensor_columns,
    unusable_because,
)
from tcmp.schemas.index.writer import DaemonState


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
    daemon: Optional[DaemonState]
    immutable: bool  # opened with immutable=1 (read-only directory and no running writer)
    skipped: int = 0  # of the failed: not read at all (a path past PATH_MAX), their error starts "skipped:"


class IndexReader:
    """Read access to one index. Open with `open_index`."""

    def __init__(self, path: Path, conn: sqlite3.Connection, *, immutable: bool) -> None:
        self.path = path
        self.conn = conn
        self.immutable = immutable
        self.schema_version = schema_version_of(conn)
        if not OLDEST_READABLE_VERSION <= self.schema_version <= SCHEMA_VERSION:
            conn.close()
            if self.schema_version == 0:  # the schema is created in one transaction, just after the file
                raise IndexUnusable(f"{path}: an empty index (a daemon starting right now creates its tables)")
            raise IndexUnusable(f"{path}: index schema {self.schema_version}, this tcmp reads {SCHEMA_VERSION}")
        self._files_select = files_select(self.schema_version)
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
            return self.conn.execute(f"{self._files_select} WHERE {where} ORDER BY path", params).fetchall()
        low, high = prefix_range(stored)
        query = f"{self._files_select} WHERE path >= ? AND path < ? AND {where} ORDER BY path"
        return self.conn.execute(query, (low, high, *params)).fetchall()

    # -- dump files

    def files_under(self, root: Union[str, Path]) -> tuple[IndexedFile, ...]:
        """Every dump file (GE and FX, in every state) the index holds below `root`, in path order."""
        rows = self._rows_under(root, "side IN (?, ?, ?)", (Side.GE.value, Side.FX.value, Side.ACL.value))
        return tuple(f for f in (self._indexed_file(row) for row in rows) if f is not None)

    def deleted_dirs_under(self, root: Union[str, Path]) -> tuple[DumpDir, ...]:
        """The directories below `root` holding files whose raw data the daemon deleted once their summaries were
        committed, placed as the index placed their files (the directory may be gone from the disk). Rows are
        streamed: what this holds grows with the directories, not the files."""
        stored = self._to_stored(os.path.realpath(root))
        low, high = prefix_range(stored) if stored != "/" else ("", "\U0010ffff")
        rows = self.conn.execute(
            "SELECT path, side, kind, rank, token, model, run FROM files WHERE path >= ? AND path < ? "
            "AND raw_deleted = 1 AND state = ? AND side IN (?, ?, ?)",
            (low, high, FileState.SUMMARIZED.value, Side.GE.value, Side.FX.value, Side.ACL.value),
        )
        places: dict[
            tuple[str, str, Optional[int]], tuple[Optional[int], Optional[int], Optional[str], Optional[str]]
        ] = {}
        kinds: dict[tuple[str, str, Optional[int]], set] = {}
        for path, side, kind, rank, token, model, run in rows:
            # an aclgraph directory holds every token (its files' save counters): one DumpDir per token, as on disk
            key = (self._to_actual(path).rpartition("/")[0], side, token if side == Side.ACL.value else None)
            if key not in places:
                places[key], kinds[key] = (rank, token, model, run), set()
            kinds[key].add(KINDS[kind])
        return tuple(
            DumpDir(SIDES[side], Path(directory or "/"), *places[(directory, side, token)],
                    frozenset(kinds[(directory, side, token)]), on_disk=False, indexed=True)
            for directory, side, token in sorted(places, key=lambda k: (k[0], k[1], -1 if k[2] is None else k[2]))
        )  # fmt: skip

    def deleted_in(self, directory: Union[str, Path]) -> tuple[IndexedFile, ...]:
        """The summarized files directly in `directory` whose raw data the daemon deleted, in path order."""
        stored = self._to_stored(os.path.realpath(directory))
        rows = self._rows_under(
            directory, "raw_deleted = 1 AND state = ? AND side IN (?, ?, ?)",
            (FileState.SUMMARIZED.value, Side.GE.value, Side.FX.value, Side.ACL.value),
        )  # fmt: skip
        direct = (row for row in rows if row[1].rpartition("/")[0] == stored.rstrip("/"))
        return tuple(f for f in (self._indexed_file(row) for row in direct) if f is not None)

    def _indexed_file(self, row: tuple) -> Optional[IndexedFile]:
        file_id, stored_path, inode, size, mtime_ns, side, kind = row[:7]
        rank, token, model, run, device, model_id, op_type, op_name, header_op_name = row[7:16]
        state, error, raw_deleted, dump_time, mapped_name, indexed_ns, dev = row[16:]
        path = self._path(stored_path)
        placed = (rank, token, model, run, device, model_id, op_type, op_name)
        try:
            dump_file = rebuild_dump_file(path, SIDES[side], KINDS[kind], mapped_name, placed)
        except (DumpError, ValueError):
            return None  # a name this tcmp no longer parses; the row cannot be placed
        key = FileKey(inode, size, mtime_ns, dev) if inode is not None else None
        return IndexedFile(
            dump_file,
            file_id,
            STATES[state],
            error,
            bool(raw_deleted),
            header_op_name,
            key,
            int_or_none(dump_time),
            indexed_ns,
        )

    def summaries(self, file: IndexedFile) -> FileSummary:
        """The stored summary of one file (no tensors unless its state is summarized)."""
        return self.summaries_of((file,))[0]

    def summaries_of(self, files: Sequence[IndexedFile]) -> tuple[FileSummary, ...]:
        """Stored summaries of many files at once (batched queries), in the order given."""
        by_id: dict[int, list[TensorSummary]] = {f.id: [] for f in files}
        elements: dict[tuple[int, int], list[Summary]] = {}  # (file id, position in by_id's list) -> elements
        query = (
            f"SELECT {tensor_columns(self.schema_version)} FROM tensors WHERE file_id IN ({{placeholders}}) "
            "ORDER BY file_id, position"
        )
        for row in rows_in(self.conn, query, list(by_id)):
            tensors = by_id[row[0]]
            if row_element(row) is None:
                tensors.append(tensor_summary(row))
            elif tensors:  # an element of the tensor just read
                summary = row_summary(row)
                if summary is not None:
                    elements.setdefault((row[0], len(tensors) - 1), []).append(summary)
        for (file_id, position), items in elements.items():
            by_id[file_id][position] = replace(by_id[file_id][position], elements=tuple(items))
        slicing: dict[int, str] = {}
        if FILES.has("ffts_attr", self.schema_version):
            query = "SELECT id, ffts_attr FROM files WHERE ffts_attr IS NOT NULL AND id IN ({placeholders})"
            slicing = dict(rows_in(self.conn, query, list(by_id)))
        return tuple(
            FileSummary(
                path=f.path,
                op_name=f.header_op_name or f.file.op_name,
                dump_time=f.dump_time if f.dump_time is not None else f.file.timestamp,
                tensors=tuple(by_id[f.id]),
                slicing=slicing.get(f.id),
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
            graph_op(r)
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
        selected = ("path", "inode", "size", "mtime_ns", "state", "raw_deleted", "summaries", "dev")
        columns = FILES.select_list(selected, self.schema_version)
        query = f"SELECT {columns} FROM files WHERE path IN ({{placeholders}})"
        for path, inode, size, mtime_ns, state, raw_deleted, summaries, dev in rows_in(self.conn, query, paths):
            key = FileKey(inode, size, mtime_ns, dev) if inode is not None else None
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
        own_rows = " WHERE element IS NULL" if TENSORS.has("element", self.schema_version) else ""  # no elements
        tensors = self.conn.execute(f"SELECT count(*) FROM tensors{own_rows}").fetchone()[0]
        freed = self.conn.execute("SELECT sum(size) FROM files WHERE raw_deleted = 1").fetchone()[0] or 0
        files_minute, bytes_minute = self.committed_since(time.time_ns() - 60_000_000_000)
        last_commit = self.conn.execute("SELECT max(committed_ns) FROM commits WHERE files > 0").fetchone()[0]
        errors = tuple(
            IndexedProblem(Path(self._to_actual(p)), FileState(s), e)
            for p, s, e in self.conn.execute(
                "SELECT path, state, error FROM files WHERE state = ? ORDER BY indexed_ns DESC LIMIT ?",
                (FileState.ERROR.value, recent_errors),
            )
        )
        skipped = self.conn.execute(
            "SELECT count(*) FROM files WHERE state = ? AND error LIKE 'skipped:%'", (FileState.ERROR.value,)
        ).fetchone()[0]
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
            files_last_minute=files_minute,
            bytes_last_minute=bytes_minute,
            last_commit_ns=last_commit,
            recent_errors=errors,
            daemon=self._daemon_status(),
            immutable=self.immutable,
            skipped=skipped,
        )

    def committed_since(self, since_ns: int) -> tuple[int, int]:
        """Files and bytes committed since `since_ns` (wall clock)."""
        files, size = self.conn.execute(
            "SELECT sum(files), sum(bytes) FROM commits WHERE committed_ns >= ?", (since_ns,)
        ).fetchone()
        return int(files or 0), int(size or 0)

    def _daemon_status(self) -> Optional[DaemonState]:
        row = self.conn.execute(
            "SELECT pid, host, started_ns, heartbeat_ns, stopped_ns, roots, queued, in_flight, pending "
            "FROM daemon_state WHERE id = 1"
        ).fetchone()
        if row is None:
            return None
        pid, host, started, heartbeat, stopped, roots, queued, in_flight, pending = row
        return DaemonState(pid, host, started, heartbeat, stopped, tuple(json.loads(roots)), queued, in_flight, pending)


def open_index(path: Union[str, Path]) -> IndexReader:
    """Open an index file (or the index of the watched root containing a directory) for reading.

    Read-only opening works on a read-only directory too: SQLite needs to create the `-shm` file to read a WAL
    database, which fails there once the daemon has exited (its clean shutdown removes `-wal` and `-shm`); the
    reader then falls back to `immutable=1`, which is exact while no writer runs (and none can, in a directory
    nobody may write to). Raises IndexUnusable when there is no usable index.
    """
    target = Path(path)
    if target.is_dir():
        found = find_index(target)
        if found is None:
            raise IndexUnusable(f"no {INDEX_DIR}/{INDEX_FILE} in {target} or its parents")
        target = found
    if not target.is_file():
        raise IndexUnusable(f"{target}: no such index file")
    conn = None
    try:
        conn = connect(target, readonly=True)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return IndexReader(target, conn, immutable=False)
    except sqlite3.OperationalError:
        if conn is not None:
            conn.close()
    except sqlite3.DatabaseError as exc:  # no database, or a garbled one: no other way of opening it helps
        if conn is not None:
            conn.close()
        raise unusable_because(target, exc) from exc
    try:
        conn = connect(target, readonly=True, immutable=True)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        raise unusable_because(target, exc) from exc
    return IndexReader(target, conn, immutable=True)
