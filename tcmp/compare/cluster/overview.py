"""The cluster summary of a cluster compare (`…_cluster_summary.json`): per rank its nodes, counts and first
divergence per token, the ranks not compared, and the earliest divergence of all ranks (report.divergences, whose
lines the console prints for a local multi-rank compare too)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Optional

from tcmp.compare.execute.executor import NotCompared
from tcmp.compare.report.divergences import Earliest, earliest_divergence, execution_order
from tcmp.compare.report.outcome import CompareResult, Divergence
from tcmp.schemas.files import write_atomically


def _divergence(d: Divergence) -> dict:
    return {
        "token": d.token,
        "op": d.op_name,
        "op_type": d.op_type,
        "execution_order": execution_order(d) if d.rows else None,
        "timestamp": d.timestamp if d.op_name is not None else None,
        "note": d.note,
    }


def cluster_overview(
    result: CompareResult,
    placed: Mapping[Optional[int], Sequence[str]],
    not_compared: Sequence[NotCompared],
    nodes_lost: Sequence[str] = (),
) -> dict:
    """`placed`: the nodes that held each rank (names); `nodes_lost`: that died during the compare."""
    earliest = earliest_divergence(result.ranks)
    return {
        "complete": not not_compared,
        "target_path": str(result.options.target),
        "golden_path": str(result.options.golden),
        "data_mode": result.mode.value,
        "ranks": [
            {
                "rank": r.rank,
                "nodes": list(placed.get(r.rank, ())),
                "rows": r.counts.rows,
                "pass": r.counts.passed,
                "fail": r.counts.failed,
                "unmatched": r.counts.unmatched_target + r.counts.unmatched_golden,
                "first_divergence": [_divergence(d) for d in r.divergences],
                "report": str(r.report.csv) if r.report is not None else None,
            }
            for r in result.ranks
        ],
        "not_compared": [{"rank": n.rank, "why": n.why} for n in not_compared],
        "nodes_lost": list(nodes_lost),
        "earliest_divergence": _earliest(earliest),
    }


def _earliest(earliest: Optional[Earliest]) -> Optional[dict]:
    if earliest is None:
        return None
    d = earliest.divergence
    return {"rank": d.rank, **_divergence(d), "same_op_ranks": list(earliest.same_op)}


def write_cluster_overview(directory: Path, stem: str, summary: dict) -> Path:
    """`{stem}_cluster_summary.json`, written under a temporary name and renamed (never over an earlier one)."""
    final = directory / f"{stem}_cluster_summary.json"
    n = 0
    while final.exists():
        n += 1
        final = directory / f"{stem}_{n}_cluster_summary.json"
    write_atomically(final, json.dumps(summary, indent=2, ensure_ascii=False))
    return final
