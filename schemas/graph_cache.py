"""A cache of parsed graph text files.

Reading a graph file is fast (tens of MB/s), but a compare that is re-run with other options need not even pay
that. The parsed `Graph` is
stored as JSON (our own records, no pickle) under a key of the file's real path, size, mtime and this cache's
version: beside the dump (`<dir>/.tcmp/graphs/`) when that is writable, else in the user's cache directory.
A stale or unreadable cache entry is ignored and rewritten.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Optional

from .files import write_atomically
from .graph import Graph, GraphOp, read_graph
from .layout import INDEX_DIR

CACHE_VERSION = 2  # 2: the tolerant reader (records of files protobuf refused)


def _key(path: Path) -> str:
    stat = path.stat()
    text = f"{os.path.realpath(path)}|{stat.st_size}|{stat.st_mtime_ns}|{CACHE_VERSION}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _directories(path: Path) -> list[Path]:
    user = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tcmp" / "graphs"
    return [path.parent / INDEX_DIR / "graphs", user]


def _to_json(graph: Graph) -> dict:
    return {
        "name": graph.name,
        "warnings": list(graph.warnings),
        "ops": [op.as_fields() for op in graph.ops],
    }


def _from_json(data: dict, path: Path) -> Graph:
    ops = tuple(GraphOp.from_fields(*fields) for fields in data["ops"])
    return Graph(name=data["name"], path=path, ops=ops, warnings=tuple(data["warnings"]))


def _read_cached(path: Path, key: str) -> Optional[Graph]:
    for directory in _directories(path):
        entry = directory / f"{key}.json"
        try:
            return _from_json(json.loads(entry.read_text(encoding="utf-8")), path)
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return None


def _write_cached(path: Path, key: str, graph: Graph) -> None:
    text = json.dumps(_to_json(graph), separators=(",", ":"))
    for directory in _directories(path):
        try:
            directory.mkdir(parents=True, exist_ok=True)
            write_atomically(directory / f"{key}.json", text, ".graph-")  # readable as the umask allows
            return
        except OSError:
            continue  # read-only dump directory: try the user's cache


def load_graph(path: Path, use_cache: bool = True) -> Graph:
    """`read_graph`, served from the cache when the file has not changed since it was parsed."""
    path = Path(path)
    if not use_cache:
        return read_graph(path)
    key = _key(path)
    cached = _read_cached(path, key)
    if cached is not None:
        return cached
    graph = read_graph(path)
    _write_cached(path, key, graph)
    return graph
