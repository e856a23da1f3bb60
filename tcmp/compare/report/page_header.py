"""The static parts of the HTML report, written as HTML here so they show even where the page's script cannot run:
the header (counts, data mode and why, golden type, first divergence per token), the unmatched items by kind
(collapsed), and what wrote the page (tcmp version, command line, libraries)."""

from __future__ import annotations

import shlex
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from html import escape
from pathlib import Path
from typing import Callable, Optional

from tcmp import __version__
from tcmp.compare.judge.metrics import Mode
from tcmp.compare.records import UnmatchedKind
from tcmp.compare.report.console import group_divergences, token_ranges
from tcmp.compare.report.outcome import CompareResult, Counts, RankResult
from tcmp.compare.report.table import UNMATCHED_COLUMNS
from tcmp.compare.rules.ulp import RULE

ITEMS_SHOWN = 500  # unmatched items listed per kind; the unmatched CSV has every one
REASONS_KEPT = 50  # distinct reasons counted per kind; the others are counted together
_KIND = UNMATCHED_COLUMNS.index("Kind")
_REASON = UNMATCHED_COLUMNS.index("Reason")
_SHOWN_COLUMNS = ("Side", "Token", "Op Name", "Op Type", "IO", "Index", "Reason", "Path")
_KIND_ADVICE = {
    UnmatchedKind.BY_DESIGN.value: "nothing to pair them with exists (fused-op members, FX input copies, arguments, "
    "torchair's own passes)",
    UnmatchedKind.OUT_OF_SCOPE.value: "their token, rank, run or graph is not in the other dump, or GE was not told "
    "to dump them (dump_layer), or their branch did not run there",
    UnmatchedKind.NO_PARTNER.value: "a partner should exist and was not found: look at these",
    UnmatchedKind.UNREADABLE.value: "their file or name could not be read",
}
NodeOf = Callable[[Optional[str], str], Optional[int]]  # (graph label, op name) -> the page's node


class UnmatchedKept:
    """Unmatched items as the page lists them: counted by kind and reason, the first ITEMS_SHOWN of a kind kept."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.reasons: dict[str, Counter[str]] = {}
        self.items: dict[str, list[list[str]]] = {}

    def add(self, rows: Iterable[list[str]]) -> None:
        for cells in rows:
            kind, reason = cells[_KIND], cells[_REASON]
            self.counts[kind] += 1
            reasons = self.reasons.setdefault(kind, Counter())
            reasons[reason if reason in reasons or len(reasons) < REASONS_KEPT else "(other reasons)"] += 1
            kept = self.items.setdefault(kind, [])
            if len(kept) < ITEMS_SHOWN:
                kept.append(cells)


def _command_line() -> str:
    """The process's command line, its program by name (`tcmp compare …`)."""
    return shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv else ""


def _counts(c: Counts, rank: RankResult, items: str = "GE ops") -> str:
    parts = [f'<b class="c-g">{c.passed} PASS</b>', f'<b class="c-r">{c.failed} FAIL</b>']
    if c.not_compared:
        unreadable = f" ({c.rows_unreadable} for a file that could not be read)" if c.rows_unreadable else ""
        parts.append(f'<b class="c-y">{c.not_compared} not compared{unreadable}</b>')
    source = f"; {c.rows_from_raw} from raw data, {c.rows_from_index} from the tcmp index" if c.rows_from_index else ""
    return (
        f"<dt>rows</dt><dd>{c.rows}: {', '.join(parts)}{source}</dd>"
        f"<dt>{items}</dt><dd>{rank.target_ops} ({rank.ops_in_rows} in the table, {rank.ops_unmatched_only} only "
        "unmatched)</dd>"
        f"<dt>unmatched</dt><dd>{c.unmatched_target} target, {c.unmatched_golden} golden (by design "
        f"{c.unmatched_by_design}, out of scope {c.unmatched_out_of_scope}, no partner {c.unmatched_no_partner}, "
        f'unreadable {c.unmatched_unreadable}: <a href="#unmatched">below</a>)</dd>'
    )


def _divergences(rank: RankResult, node_of: NodeOf) -> str:
    groups = group_divergences(rank.divergences)
    if not groups:
        return '<p id="divergences">No op output FAILs: no first divergence.</p>'
    lines = []
    for group in groups:
        d = group.first
        tokens = escape(token_ranges(group.tokens))
        if d.op_name is None:
            lines.append(f"<tr><td>{tokens}</td><td colspan=2>{escape(d.note)}</td></tr>")
            continue
        node = node_of(d.rows[0].pair.graph if d.rows else None, d.op_name)
        link = (
            f'<a href="#" class="select" data-token="{group.tokens[0]}" data-node="{node}">{escape(d.op_name)}</a>'
            if node is not None
            else escape(d.op_name)
        )
        failing = escape(", ".join(group.failing))
        lines.append(f"<tr><td>{tokens}</td><td>{link} ({escape(d.op_type or '')})</td><td>{failing}</td></tr>")
    return (
        '<table id="divergences"><caption>First divergence per token: the earliest op whose output FAILs while '
        "its compared inputs PASS</caption><tr><th>tokens</th><th>op</th><th>failing rows</th></tr>"
        + "".join(lines)
        + "</table>"
    )


def header_html(result: CompareResult, rank: RankResult, node_of: NodeOf) -> str:
    title = "tcmp compare" + ("" if rank.rank is None else f" · rank {rank.rank}")
    notes = "".join(f'<p class="note">note: {escape(n)}</p>' for n in result.notes)
    rule = f'<p class="rule" id="ulp-rule">{escape(RULE.text())}</p>' if result.mode is not Mode.MD5 else ""
    return (
        f"<header><h1>{escape(title)}</h1><dl>"
        f"<dt>target</dt><dd>{escape(str(result.options.target))}</dd>"
        f"<dt>golden</dt><dd>{escape(str(result.options.golden))} ({escape(result.golden_description)})</dd>"
        f"<dt>data mode</dt><dd>{result.mode.value} ({escape(result.mode_reason)})</dd>"
        f"{_counts(rank.counts, rank, result.target_items)}</dl>{_divergences(rank, node_of)}{rule}{notes}</header>"
    )


def unmatched_html(kept: UnmatchedKept, csv_name: str) -> str:
    if not kept.counts:
        return '<section id="unmatched"><h2>Unmatched</h2><p>Every item has a partner.</p></section>'
    order = [k.value for k in UnmatchedKind]
    blocks = []
    for kind in sorted(kept.counts, key=lambda k: order.index(k) if k in order else len(order)):
        count, items = kept.counts[kind], kept.items[kind]
        reasons = "".join(f"<li>{n} × {escape(reason)}</li>" for reason, n in kept.reasons[kind].most_common())
        index = [UNMATCHED_COLUMNS.index(c) for c in _SHOWN_COLUMNS]
        rows = "".join("<tr>" + "".join(f"<td>{escape(cells[i])}</td>" for i in index) + "</tr>" for cells in items)
        more = f"<p>{count - len(items)} more in {escape(csv_name)}.</p>" if count > len(items) else ""
        blocks.append(
            f'<details class="kind"><summary><b>{escape(kind)}</b>: {count} '
            f"({escape(_KIND_ADVICE.get(kind, ''))})</summary><ul>{reasons}</ul>"
            f"<table><tr>{''.join(f'<th>{c}</th>' for c in _SHOWN_COLUMNS)}</tr>{rows}</table>{more}</details>"
        )
    return f'<section id="unmatched"><h2>Unmatched, by kind</h2>{"".join(blocks)}</section>'


def about_html(libraries: Mapping[str, str]) -> str:
    used = ", ".join(f"{escape(name)} {escape(version)}" for name, version in libraries.items())
    return (
        f'<footer id="about">Written by tcmp {escape(__version__)} at {time.strftime("%Y-%m-%d %H:%M:%S")} '
        f"from <code>{escape(_command_line())}</code>. Inline: {used}.</footer>"
    )
