"""The console summary of a compare (rich): counts, the first divergence per token, the worst rows, and what the
verdicts and colours mean.

Names are never cut: a line is wrapped only between words, and only on a terminal; a word longer than the room
(a long fused op name, a path) is printed whole and left to the terminal, and output that is not a terminal
(rich gives it 80 columns) gets every line whole, so that an API name can be copied into grep.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.text import Text

from tcmp.compare.collect.inputs import CompareInputs
from tcmp.compare.judge.metrics import Mode
from tcmp.compare.judge.rows import Row, TensorStats
from tcmp.compare.judge.verdict import Colour
from tcmp.compare.report.divergences import Uncompared, group_divergences, ranks_lines, token_ranges
from tcmp.compare.report.legend import legend
from tcmp.compare.report.outcome import CompareResult, Counts, RankResult
from tcmp.compare.report.table import message, number
from tcmp.schemas.display import escape, quoted

WORST_SHOWN = 5
GROUPS_SHOWN = 10  # first-divergence lines per rank; every token is in the summary JSON
_HANG = 4  # continuation lines of a wrapped line are indented this much more than its first line
_STYLES = {Colour.RED: "bold red", Colour.YELLOW: "yellow", Colour.GREEN: "green"}


def say(console: Console, markup: str, indent: int = 0) -> None:
    """One logical line (rich markup), indented: wrapped between words on a terminal, else printed whole."""
    text = Text.from_markup(markup)
    room = console.width - indent - _HANG
    if not console.is_terminal or any(len(word) > room for word in text.plain.split()) or room < 20:
        console.print(Text(" " * indent) + text, soft_wrap=True)
        return
    lines = text.wrap(console, room)
    for k, line in enumerate(lines):
        line.rstrip()
        console.print(Text(" " * (indent + (_HANG if k else 0))) + line, soft_wrap=True)


def _nan_inf(stats: TensorStats) -> str:
    if stats.nan_count is None and stats.inf_count is None:
        return "NaN/inf not recorded"
    said = [f"{n} {what}" for n, what in ((stats.nan_count, "NaN"), (stats.inf_count, "inf")) if n]
    return " ".join(said) if said else "no NaN/inf"


def _metric(row: Row) -> str:
    if row.nan_inf_one_side:
        return f"NPU {_nan_inf(row.npu)}, bench {_nan_inf(row.bench)}"
    if row.tensor is not None:
        return f"cos {number(row.tensor.cosine)}  maxrel {number(row.tensor.max_relative_err)}"
    if row.statistics is not None:
        return f"normrel {number(row.statistics.l2norm.relative)}  maxrel {number(row.statistics.max.relative)}"
    return f"CRC-32 {row.npu.crc32} vs {row.bench.crc32}"


def _verdict(row: Row) -> str:
    return f"{row.result.value}/{'Yes' if row.accuracy_reached else 'No'}"


def _worst(console: Console, rows: Sequence[Row], mode: Mode, one_sided: int) -> None:
    order = {Mode.TENSOR: "lowest Cosine", Mode.STATISTICS: "largest NormRelativeErr", Mode.MD5: "CRC-32"}[mode]
    first = f"NaN/inf on one side first ({one_sided} row{'s' if one_sided != 1 else ''})" if one_sided else ""
    say(console, f"  worst rows ({first + ', then ' if first else 'by '}{order}):")
    api_width = max(len(r.pair.api_name) for r in rows)
    token_width = max(len(str(r.pair.token)) for r in rows)
    for row in rows:
        style = _STYLES[row.colour]
        token, api = str(row.pair.token).rjust(token_width), row.pair.api_name
        verdict, metric, why = f"[{style}]{_verdict(row)}[/]", escape(_metric(row)), escape(message(row))
        one_line = f"    {token}  {api.ljust(api_width)}  {_verdict(row):8}  {_metric(row)}  {message(row)}".rstrip()
        if len(one_line) <= console.width:  # a table row
            pad = " " * (8 - len(_verdict(row)))
            say(console, f"    {token}  {escape(api.ljust(api_width))}  {verdict}{pad}  {metric}  {why}".rstrip())
            continue
        head = f"    {token}  {api}  {_verdict(row)}  {_metric(row)}"
        if len(head) <= console.width:
            say(console, f"    {token}  {escape(api)}  {verdict}  {metric}")
        else:  # the name on a line of its own, whole
            say(console, f"    {token}  {escape(api)}")
            say(console, f"{verdict}  {metric}", indent=6 + token_width)
        if why:
            say(console, why, indent=6 + token_width)


def _unmatched_kinds(c: Counts) -> str:
    kinds = (
        (c.unmatched_by_design, "by design"),
        (c.unmatched_out_of_scope, "out of scope"),
        (c.unmatched_no_partner, "[yellow]without the partner they should have[/]"),
        (c.unmatched_unreadable, "[yellow]unreadable[/]"),
    )
    said = [f"{n} {what}" for n, what in kinds if n]
    return f" ({', '.join(said)})" if said else ""


def _divergences(console: Console, rank: RankResult) -> None:
    groups = group_divergences(rank.divergences)
    for group in groups[:GROUPS_SHOWN]:
        d = group.first
        tokens = f"token{'s' if len(group.tokens) > 1 else ''} {token_ranges(group.tokens)}"
        if d.op_name is not None:
            op = f"[bold red]{escape(d.op_name)}[/] ({escape(d.op_type or '')})"
            say(console, f"  first divergence in {tokens}: {op}: {escape(', '.join(group.failing))}")
        else:
            say(console, f"  {tokens}: {escape(d.note)}")
    if len(groups) > GROUPS_SHOWN:
        rest = len(groups) - GROUPS_SHOWN
        say(console, f"  ... {rest} more first divergence{'s' if rest > 1 else ''} (every token in the summary JSON)")


def _unreadable(console: Console, rank: RankResult) -> None:
    """What could not be read (why the compare exits 1): the first items with their reason, and where the rest are."""
    c = rank.counts
    for item in rank.unreadable:
        reason = item.reason if item.reason.startswith("unreadable") else f"unreadable: {item.reason}"
        what = quoted(item.path) if item.path else item.op_name
        say(console, f"  [yellow]{item.role.value} {escape(what)}[/]: {escape(reason)}")
    rest = c.unmatched_unreadable - len(rank.unreadable)
    report = rank.report
    where = f" in {escape(quoted(report.unmatched))}" if report is not None else " in the unmatched report"
    if rest > 0:
        say(console, f"  ... {rest} more unreadable item{'s' if rest > 1 else ''}{where} (kind `unreadable`)")
    elif rank.unreadable and report is not None:
        say(console, f"  (listed{where}, kind `unreadable`)")
    if c.rows_unreadable:
        rows = f"{c.rows_unreadable} row{'s' if c.rows_unreadable > 1 else ''}"
        say(console, f"  {rows} not compared for a file that could not be read: why in their Err_message")


def _rank(console: Console, rank: RankResult, mode: Mode, items: str = "GE ops") -> None:
    c = rank.counts
    title = "" if rank.rank is None else f"rank {rank.rank}: "
    say(
        console,
        f"[bold]{title}{c.rows} rows compared[/]: [green]{c.passed} PASS[/], [red]{c.failed} FAIL[/]"
        + (f", {c.not_compared} not compared" if c.not_compared else "")
        + (f" ([yellow]{c.rows_unreadable} for a file that could not be read[/])" if c.rows_unreadable else "")
        + f"; unmatched: {c.unmatched_target} target, {c.unmatched_golden} golden{_unmatched_kinds(c)}"
        + f"; {items} {rank.target_ops} ({rank.ops_in_rows} in the table, {rank.ops_unmatched_only} only unmatched)",
    )
    if c.rows_from_index:
        say(console, f"  rows from raw data: {c.rows_from_raw}, from the tcmp index: {c.rows_from_index}")
    _unreadable(console, rank)
    _divergences(console, rank)
    if rank.worst:
        _worst(console, rank.worst[:WORST_SHOWN], mode, c.nan_inf_one_side)
    report = rank.report
    if report is not None:
        xlsx = f" (+ {escape(quoted(report.xlsx.name))})" if report.xlsx else ""
        say(console, f"  report: {escape(quoted(report.csv))}{xlsx}")
        say(console, f"  unmatched: {escape(quoted(report.unmatched))}")
        say(console, f"  summary: {escape(quoted(report.summary))}")
        if report.html is not None:
            say(console, f"  page: {escape(quoted(report.html))}")


def print_plan(console: Console, inputs: CompareInputs, seconds: float, jobs: int) -> None:
    """What `--verbose` adds to a compare: what each rank's graphs were bound to, and the time it took."""
    for source, role in ((inputs.target, "target"), (inputs.golden, "golden")):
        index = f", index {quoted(source.index)}" if source.index is not None else ""
        say(console, f"{role}: {escape(quoted(source.root))}{escape(index)}")
    for b in inputs.bindings:
        rank = "" if b.rank is None else f"rank {b.rank}, "
        graph = b.graph.path.name if b.graph is not None else "no graph file"
        golden = b.golden_label or "no golden directory"
        tokens = token_ranges(sorted({d.token or 0 for d in b.target_dirs}))
        say(console, f"  {rank}model {escape(b.model)}: graph {escape(graph)}, golden {escape(golden)}, "
                     f"tokens {tokens}")  # fmt: skip
    say(console, f"compared in {seconds:.2f} s with {jobs} process{'es' if jobs > 1 else ''}")


def print_outcome(console: Console, result: CompareResult, not_compared: Sequence[Uncompared] = ()) -> None:
    """The compare's summary; a compare of several ranks (or one with ranks not compared, on a cluster) ends with
    a line per rank and the earliest divergence across ranks."""
    say(console, f"golden: {result.golden_description}; data mode: {result.mode.value} ({escape(result.mode_reason)})")
    for note in result.notes:
        say(console, f"[yellow]note:[/] {escape(note)}")
    for rank in result.ranks:
        _rank(console, rank, result.mode, result.target_items)
    if any(rank.counts.failed or rank.counts.not_compared for rank in result.ranks):
        for line in legend(result.mode, result.options.thresholds):
            say(console, line)
    if len(result.ranks) > 1 or not_compared:
        for line in ranks_lines(result.ranks, not_compared):
            say(console, escape(line))
