"""`tcmp status --cluster`: every alive Ray node's `tcmp watch` state, as `tcmp status` computes it on the node
(status.py), in one table: files indexed, pending and failed, bytes freed, and whether its daemon runs."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tcmp.compare.cluster.inventory import node_name
from tcmp.compare.cluster.ray_executor import alive_nodes, connected, import_ray, on_each_node
from tcmp.daemon.retention import format_size
from tcmp.daemon.status import daemon_line, locate_index, watch_status
from tcmp.schemas.index import IndexUnusable

COLUMNS = ("node", "indexed", "pending", "failed", "bytes freed", "daemon", "index")
STATUS_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class NodeWatch:
    """One node's index state; `error` when it has none there (or it is unreadable)."""

    node: str
    index: str = ""
    indexed: int = 0
    pending: int = 0
    failed: int = 0
    bytes_freed: int = 0
    daemon: str = ""
    error: str = ""

    def cells(self) -> tuple[str, ...]:
        if self.error:
            return (self.node, "-", "-", "-", "-", "-", self.error)
        freed = format_size(self.bytes_freed)
        return (self.node, str(self.indexed), str(self.pending), str(self.failed), freed, self.daemon, self.index)


def node_watch(directory: Optional[Path], db: Optional[Path]) -> NodeWatch:
    """Runs on a node: its index's state (the one of `directory` or `db`, found as `tcmp status` finds it)."""
    import ray

    name = node_name(ray.util.get_node_ip_address(), ray.get_runtime_context().get_node_id())
    try:
        watch = watch_status(locate_index(directory, db))
    except (IndexUnusable, OSError) as exc:
        return NodeWatch(name, error=str(exc))
    s = watch.index
    line = daemon_line(watch, time.time_ns())
    return NodeWatch(name, str(s.path), s.summarized, s.incomplete, s.failed, s.bytes_freed, line)


def cluster_status(address: str, directory: Optional[Path], db: Optional[Path]) -> list[NodeWatch]:
    with connected(address):
        ray = import_ray()
        found = []
        for node, ref in on_each_node(node_watch, alive_nodes(), directory, db):
            try:
                found.append(ray.get(ref, timeout=STATUS_TIMEOUT_S))
            except ray.exceptions.RayError as exc:
                found.append(NodeWatch(node.name, error=f"no answer: {type(exc).__name__}"))
        return found


def table(rows: Sequence[NodeWatch]) -> list[str]:
    """Aligned text lines, a header and a line per node."""
    cells = [COLUMNS, *(r.cells() for r in rows)]
    widths = [max(len(c[k]) for c in cells) for k in range(len(COLUMNS) - 1)]
    return ["  ".join([*(c[k].ljust(widths[k]) for k in range(len(widths))), c[-1]]).rstrip() for c in cells]
