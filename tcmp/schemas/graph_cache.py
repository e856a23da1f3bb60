"""A cache of parsed graph text files, in the user's cache directory (`$XDG_CACHE_HOME/tcmp/graphs`, by default
`~/.cache/tcmp/graphs`), never in the dump: a compare leaves the dump tree as it found it, a read-only dump is
cached as well, and nobody who can write the dump can plant a cache entry.

Reading a graph file is fast (tens of MB/s), but a compare that is re-run with other options need not even pay
that. The parsed `Graph` is stored as JSON (our own records, no pickle) under a name made of the file's identity
(device, inode, size, mtime) and this cache's version; the entry records the file's content hash, checked on
every use (a file rewritten in place within one mtime tick is parsed again). The bytes hashed are the bytes
parsed: the graph file is read once. The cache directories are created 0700 and never followed when they are
symlinks; an entry is read and written without following symlinks (`schemas.files`). A stale or unreadable
entry is ignored and rewritten; a cache that cannot be used is skipped, never an error.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Optional

from tcmp.schemas.errors import GraphParseError
from tcmp.schemas.files import Directory, write_atomically
from tcmp.schemas.graph import Graph, GraphOp

CACHE_VERSION = 4  # 3: keyed by the file's identity, checked by its content hash, out of the dump tree; 4: subgraphs


def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tcmp"


def _open_cache() -> Optional[Directory]:
    """`cache_root()/graphs`, created 0700; None when it cannot be used (not ours, a symlink, not writable)."""
    base = cache_root().parent
    try:
        base.mkdir(parents=True, exist_ok=True, mode=0o700)
        with Directory(base) as parent, Directory.child(parent, "tcmp", 0o700) as tcmp:
            graphs = Directory.child(tcmp, "graphs", 0o700)
        info = os.fstat(graphs.fd)
        if info.st_uid != os.geteuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            graphs.close()
            return None
        return graphs
    except OSError:
        return None


def _entry_name(info: os.stat_result) -> str:
    text = f"{info.st_dev}|{info.st_ino}|{info.st_size}|{info.st_mtime_ns}|{CACHE_VERSION}"
    return hashlib.sha256(text.encode()).hexdigest()[:32] + ".json"


def _to_json(graph: Graph, content: str) -> dict:
    return {
        "content_sha256": content,
        "name": graph.name,
        "warnings": list(graph.warnings),
        "ops": [op.as_fields() for op in graph.ops],
    }


def _from_json(data: dict, path: Path) -> Graph:
    ops = tuple(GraphOp.from_fields(*fields) for fields in data["ops"])
    return Graph(name=data["name"], path=path, ops=ops, warnings=tuple(data["warnings"]))


def _read_cached(cache: Directory, entry: str, content: str, path: Path) -> Optional[Graph]:
    try:
        with cache.open_regular(entry) as handle:
            data = json.loads(handle.read().decode("utf-8"))
        if data.get("content_sha256") != content:
            return None
        return _from_json(data, path)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _read_file(path: Path) -> tuple[os.stat_result, bytes]:
    """The file's identity and bytes, from one descriptor."""
    try:
        with open(path, "rb") as handle:
            return os.fstat(handle.fileno()), handle.read()
    except OSError as exc:
        raise GraphParseError(path, f"cannot read: {exc.strerror or exc}") from exc


def parse_graph_bytes(raw: bytes, path: Path) -> Graph:
    """The graph reader's parse, imported here: a graph served from the cache needs no reader (20 ms of each
    start, with the protobuf attribute code it imports)."""
    from tcmp.schemas.graph_reader import parse_graph_bytes as parse

    return parse(raw, path)


def load_graph(path: Path, use_cache: bool = True) -> Graph:
    """`read_graph`, served from the cache when the file has not changed since it was parsed."""
    path = Path(path)
    if not use_cache:
        from tcmp.schemas.graph_reader import read_graph

        return read_graph(path)
    info, raw = _read_file(path)
    content = hashlib.sha256(raw).hexdigest()
    entry = _entry_name(info)
    cache = _open_cache()
    try:
        cached = _read_cached(cache, entry, content, path) if cache is not None else None
        if cached is not None:
            return cached
        graph = parse_graph_bytes(raw, path)
        if cache is not None:
            text = json.dumps(_to_json(graph, content), separators=(",", ":"))
            with contextlib.suppress(OSError):  # a full or read-only cache: the next compare parses again
                write_atomically(cache.path / entry, text, cache)
        return graph
    finally:
        if cache is not None:
            cache.close()
