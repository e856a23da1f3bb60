"""`tcmp compare --cluster`: every alive node's inventory, one place per rank, the units as Ray tasks
(ray_executor.RayExecutor) run by the one driver (execute/driver.py), which streams their rows into the same report
files a local compare writes; then the cluster summary and page. A rank that could not be finished gets no report
files; the result says so."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import tcmp
from tcmp.compare.cluster.inventory import check_versions, plan_cluster
from tcmp.compare.cluster.overview import cluster_overview, write_cluster_overview
from tcmp.compare.cluster.page import cluster_page_html, write_cluster_page
from tcmp.compare.cluster.ray_executor import (
    RayExecutor,
    RemoteUnit,
    alive_nodes,
    connected,
    rank_bindings,
    take_inventories,
)
from tcmp.compare.execute.driver import PlannedCompare, drive
from tcmp.compare.execute.executor import NotCompared
from tcmp.compare.execute.progress import ProgressCallback
from tcmp.compare.records import CompareError
from tcmp.compare.report.outcome import CompareOptions, CompareResult
from tcmp.compare.report.writers import DEFAULT_FORMATS, PREFIX, HtmlPage, ReportFile
from tcmp.schemas.source_hash import code_hash


@dataclass(frozen=True)
class ClusterCompare:
    result: CompareResult  # of the ranks compared completely
    not_compared: tuple[NotCompared, ...]
    summary: dict
    overview_path: Optional[Path]
    nodes: tuple[str, ...]  # that answered the inventory
    nodes_lost: tuple[str, ...] = ()  # that died during the compare
    retried: int = 0  # units run again on another node after their node died
    units_by_node: tuple[tuple[str, int], ...] = ()  # units each node compared
    page_path: Optional[Path] = None  # the cluster's HTML page (cluster_page.py), unless html was off

    @property
    def complete(self) -> bool:
        return not self.not_compared


def run_cluster_compare(
    options: CompareOptions,
    address: str,
    output_dir: Optional[Path] = None,
    *,
    formats: Sequence[type[ReportFile]] = DEFAULT_FORMATS,
    progress: Optional[ProgressCallback] = None,
    keep_rows: bool = False,
) -> ClusterCompare:
    """Compare on the Ray cluster at `address` (cluster.connected). Raises CompareError when it cannot run at all
    (no node can compare, two copies of a rank differ, a node runs another tcmp)."""
    with connected(address):
        nodes = alive_nodes()
        compare_id = uuid.uuid4().hex
        inventories = take_inventories(options, nodes, compare_id)
        if not inventories:
            raise CompareError(f"--cluster {address}: no alive node answered")
        check_versions(inventories, tcmp.__version__, code_hash())
        plan = plan_cluster(inventories, compare_id)
        units = [RemoteUnit(place.rank, k) for place in plan.ranks for k in range(place.units)]
        html = HtmlPage in formats
        bindings = rank_bindings(options, plan) if html and output_dir is not None else ()
        planned = PlannedCompare(tuple(p.rank for p in plan.ranks), plan.golden_kind, plan.golden_fused, plan.notes,
                                 plan.directory_items, bindings, plan.summary_only_dirs, plan.dirs)  # fmt: skip
        executor = RayExecutor(plan, nodes, options)
        done = drive(planned, units, executor, options, output_dir, formats=formats, progress=progress,
                     keep_rows=keep_rows)  # fmt: skip
    result = done.result
    not_compared = (*(NotCompared(None, why) for why in plan.uncompared), *done.unfinished)
    placed = {p.rank: [plan.names.get(n, n) for n in p.nodes] for p in plan.ranks}
    lost = tuple(executor.names.get(n, n) for n in executor.dead)
    summary = cluster_overview(result, placed, not_compared, lost)
    path = page = None
    if output_dir is not None and done.report_stamp is not None:
        path = write_cluster_overview(Path(output_dir), f"{PREFIX}_{done.report_stamp}", summary)
        if html:
            text = cluster_page_html(result, placed, not_compared, lost, Path(output_dir))
            page = write_cluster_page(Path(output_dir), path, text)
    names = tuple(inv.name for inv in inventories)
    ran = tuple((executor.names.get(n, n), count) for n, count in executor.ran.items())
    return ClusterCompare(result, not_compared, summary, path, names, lost, executor.retried, ran, page)
