"""The console summary of a compare (rich): counts, the first divergence per token, the worst rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from rich.console import Console
from rich.table import Table

from .records import Role, Row
from .report import WrittenReport, number
from .run import CompareResult, RankResult


def _worst_table(rows: Sequence[Row]) -> Table:
    table = Table(title="worst rows", title_justify="left", show_edge=False)
    for column in ("token", "API name", "metric", "message"):
        table.add_column(column, overflow="fold")
    for row in rows:
        if row.tensor is not None:
            metric = f"cos {number(row.tensor.cosine)}  maxrel {number(row.tensor.max_relative_err)}"
        elif row.statistics is not None:
            metric = f"normrel {number(row.statistics.l2norm.relative)}  maxrel {number(row.statistics.max.relative)}"
        else:
            metric = f"{row.npu.crc32} vs {row.bench.crc32}"
        table.add_row(str(row.pair.token), row.pair.api_name, metric, " ".join(row.messages)[:160])
    return table


def _rank(console: Console, result: CompareResult, rank: RankResult, report: Optional[WrittenReport]) -> None:
    c = rank.counts
    title = "" if rank.rank is None else f"rank {rank.rank}: "
    target_unmatched = sum(u.role is Role.TARGET for u in rank.unmatched)
    console.print(
        f"[bold]{title}{c['rows']} rows compared[/]: [green]{c['pass']} PASS[/], [red]{c['fail']} FAIL[/]"
        + (f", {c['not_compared']} not compared" if c["not_compared"] else "")
        + f"; unmatched: {target_unmatched} target, {len(rank.unmatched) - target_unmatched} golden"
        + f"; GE ops {rank.target_ops} ({rank.ops_in_rows} in the table, {rank.ops_unmatched_only} only unmatched)"
    )
    if c["rows_from_index"]:
        console.print(f"  rows from raw data: {c['rows_from_raw']}, from the tcmp index: {c['rows_from_index']}")
    for d in rank.divergences:
        if d.op_name is not None:
            failing = ", ".join(r.pair.api_name for r in d.rows if r.result.value == "FAIL")
            console.print(f"  first divergence in token {d.token}: [bold red]{d.op_name}[/] ({d.op_type}): {failing}")
        else:
            console.print(f"  token {d.token}: {d.note}")
    if rank.worst:
        console.print(_worst_table(rank.worst[:5]))
    if report is not None:
        console.print(f"  report: {report.csv}" + (f" (+ {report.xlsx.name})" if report.xlsx else ""))
        console.print(f"  unmatched: {report.unmatched}\n  summary: {report.summary}")


def print_summary(console: Console, result: CompareResult, reports: Sequence[WrittenReport]) -> None:
    kind = "FX dump" if result.golden_kind.value == "fx" else "fusion-off GE dump"
    console.print(f"golden: {kind}; data mode: {result.mode.value} ({result.mode_reason})")
    for note in result.notes:
        console.print(f"[yellow]note:[/] {note}")
    by_rank = {r.rank: r for r in reports}
    for rank in result.ranks:
        _rank(console, result, rank, by_rank.get(rank.rank))
