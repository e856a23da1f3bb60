"""The console summary of a compare (rich): counts, the first divergence per token, the worst rows."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from .records import Row
from .run import CompareResult, Counts, RankResult
from .table import number


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


def _unmatched_kinds(c: Counts) -> str:
    kinds = (
        (c.unmatched_by_design, "by design"),
        (c.unmatched_out_of_scope, "out of scope"),
        (c.unmatched_no_partner, "[yellow]without the partner they should have[/]"),
        (c.unmatched_unreadable, "[yellow]unreadable[/]"),
    )
    said = [f"{n} {what}" for n, what in kinds if n]
    return f" ({', '.join(said)})" if said else ""


def _rank(console: Console, rank: RankResult) -> None:
    c = rank.counts
    title = "" if rank.rank is None else f"rank {rank.rank}: "
    console.print(
        f"[bold]{title}{c.rows} rows compared[/]: [green]{c.passed} PASS[/], [red]{c.failed} FAIL[/]"
        + (f", {c.not_compared} not compared" if c.not_compared else "")
        + f"; unmatched: {c.unmatched_target} target, {c.unmatched_golden} golden{_unmatched_kinds(c)}"
        + f"; GE ops {rank.target_ops} ({rank.ops_in_rows} in the table, {rank.ops_unmatched_only} only unmatched)"
    )
    if c.rows_from_index:
        console.print(f"  rows from raw data: {c.rows_from_raw}, from the tcmp index: {c.rows_from_index}")
    for d in rank.divergences:
        if d.op_name is not None:
            failing = ", ".join(r.pair.api_name for r in d.rows if r.result.value == "FAIL")
            console.print(f"  first divergence in token {d.token}: [bold red]{d.op_name}[/] ({d.op_type}): {failing}")
        else:
            console.print(f"  token {d.token}: {d.note}")
    if rank.worst:
        console.print(_worst_table(rank.worst[:5]))
    report = rank.report
    if report is not None:
        console.print(f"  report: {report.csv}" + (f" (+ {report.xlsx.name})" if report.xlsx else ""))
        console.print(f"  unmatched: {report.unmatched}\n  summary: {report.summary}")


def print_summary(console: Console, result: CompareResult) -> None:
    kind = "FX dump" if result.golden_kind.value == "fx" else "fusion-off GE dump"
    console.print(f"golden: {kind}; data mode: {result.mode.value} ({result.mode_reason})")
    for note in result.notes:
        console.print(f"[yellow]note:[/] {note}")
    for rank in result.ranks:
        _rank(console, rank)
