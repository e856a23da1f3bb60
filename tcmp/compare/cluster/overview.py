"""The view of a cluster compare across its ranks (`…_cluster_summary.json` and the console lines): per rank its
counts and first divergence per token, and the earliest divergence of all ranks — by token, then execution order
in the token, then dump time — with the ranks whose first divergence in that token is the same op. In a
collective-communication bug that is the rank to look at first."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tcmp.compare.execute.executor import NotCompared
from tcmp.compare.report.outcome import CompareResult, Divergence, RankResult
from tcmp.schemas.files import write_atomically


@dataclass(frozen=True)
class Earliest:
    divergence: Divergence
    same_op: tuple[Optional[int], ...]  # the ranks whose first divergence in that token is this op, itself too


def _order(d: Divergence) -> int:
    return min((r.pair.order for r in d.rows), default=2**62)


def earliest_divergence(ranks: Sequence[RankResult]) -> Optional[Earliest]:
    """The first divergence that comes first (token, execution order, dump time; then the lower rank)."""
    found = [d for rank in ranks for d in rank.divergences if d.op_name is not None]
    if not found:
        return None
    first = min(found, key=lambda d: (d.token, _order(d), d.timestamp, -1 if d.rank is None else d.rank))
    same = tuple(
        d.rank for d in found if d.token == first.token and (d.op_name, d.op_type) == (first.op_name, first.op_type)
    )
    return Earliest(first, same)


def _divergence(d: Divergence) -> dict:
    return {
        "token": d.token,
        "op": d.op_name,
        "op_type": d.op_type,
        "execution_order": _order(d) if d.rows else None,
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


def cluster_lines(result: CompareResult, summary: dict) -> list[str]:
    """The console's cluster view: a line per rank (tokens with the same first divergence on one line's part, as
    the local console groups them), the not-compared ranks, the earliest divergence."""
    from tcmp.compare.report.console import group_divergences, token_ranges  # console builds on this package's records

    lines = ["cluster: rank  rows  PASS  FAIL  unmatched  first divergence per token"]
    for r in result.ranks:
        c = r.counts
        firsts = "; ".join(f"tokens {token_ranges(g.tokens)}: {g.first.op_name or g.first.note}"
                           for g in group_divergences(r.divergences)) or "none"  # fmt: skip
        unmatched = c.unmatched_target + c.unmatched_golden
        lines.append(f"  rank {r.rank}  {c.rows}  {c.passed}  {c.failed}  {unmatched}  {firsts}")
    for n in summary["not_compared"]:
        lines.append(f"  rank {n['rank']} NOT COMPARED: {n['why']}")
    e = summary["earliest_divergence"]
    if e is not None:
        same = ", ".join(str(r) for r in e["same_op_ranks"])
        lines.append(f"earliest divergence: rank {e['rank']}, token {e['token']}, op {e['op']} ({e['op_type']}), "
                     f"execution order {e['execution_order']}; first divergence there on ranks {same}")  # fmt: skip
    return lines
