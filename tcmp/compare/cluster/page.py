"""The HTML page of a cluster compare (`…_cluster_report.html`, beside the cluster summary): which rank went wrong
first. One static, self-contained page (no script, no request): the earliest divergence across ranks, a map of
every rank's first divergence per token (the earliest op marked wherever it is a rank's first divergence), a line
per rank with its counts, nodes and a link to its own page, and the ranks that were not compared, with why."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Optional

from tcmp.compare.execute.executor import NotCompared
from tcmp.compare.report import page_assets
from tcmp.compare.report.divergences import Earliest, earliest_divergence, group_divergences, token_ranges
from tcmp.compare.report.outcome import CompareResult, Divergence, RankResult
from tcmp.schemas.files import write_atomically

_STYLE = """
table.map td { min-width: 2.2em; text-align: center; }
table.map caption { white-space: nowrap; text-align: left; }
td.first { background: #d62728; color: #fff; font-weight: bold; }
td.other { background: #ffbf00; }
td.none { background: #2ca02c33; }
td.c-r { color: #b00; }
td.c-g { color: #1a7f37; }
p.incomplete { background: #d62728; color: #fff; padding: .4em .8em; font-weight: bold; }
"""


def _rank(rank: Optional[int]) -> str:
    return "-" if rank is None else str(rank)


def _earliest(earliest: Optional[Earliest]) -> str:
    if earliest is None:
        return '<p id="earliest">No rank\'s op output FAILs: no divergence on any rank.</p>'
    d = earliest.divergence
    same = ", ".join(_rank(r) for r in earliest.same_op)
    return (
        f'<p id="earliest"><b>Earliest divergence across ranks</b>: rank {_rank(d.rank)}, token {d.token}, op '
        f"<code>{escape(d.op_name or '')}</code> ({escape(d.op_type or '')}); the first divergence of that token "
        f"on ranks {escape(same)}.</p>"
    )


def _is_earliest(d: Divergence, earliest: Optional[Earliest]) -> bool:
    e = None if earliest is None else earliest.divergence
    return e is not None and (d.op_name, d.op_type) == (e.op_name, e.op_type)


def _map(ranks: Sequence[RankResult], earliest: Optional[Earliest]) -> str:
    """Ranks down, tokens across: each rank's first divergence per token; red where it is the earliest op."""
    tokens = sorted({d.token for r in ranks for d in r.divergences})
    if not tokens:
        return ""
    head = "".join(f"<th>{t}</th>" for t in tokens)
    lines = []
    for r in ranks:
        by_token = {d.token: d for d in r.divergences if d.op_name is not None}
        cells = []
        for t in tokens:
            d = by_token.get(t)
            if d is None:
                cells.append('<td class="none" title="no divergence">·</td>')
                continue
            kind = "first" if _is_earliest(d, earliest) else "other"
            title = escape(f"{d.op_name} ({d.op_type})", quote=True)
            cells.append(f'<td class="{kind}" title="{title}">{"●" if kind == "first" else "○"}</td>')
        lines.append(f"<tr><th>rank {_rank(r.rank)}</th>{''.join(cells)}</tr>")
    return (
        '<table class="map" id="map"><caption>First divergence per rank and token: ● the earliest op, ○ another '
        f"op, · none</caption><tr><th></th>{head}</tr>{''.join(lines)}</table>"
    )


def _ranks(result: CompareResult, placed: Mapping[Optional[int], Sequence[str]], directory: Path) -> str:
    lines = []
    for r in result.ranks:
        c = r.counts
        firsts = "; ".join(
            f"tokens {token_ranges(g.tokens)}: " + escape(g.first.op_name or g.first.note)
            for g in group_divergences(r.divergences)
        )
        page = r.report.html if r.report is not None else None
        link = f'<a href="{escape(os.path.relpath(page, directory), quote=True)}">page</a>' if page else ""
        nodes = escape(", ".join(placed.get(r.rank, ())))
        lines.append(
            f'<tr id="rank-{_rank(r.rank)}"><td>{_rank(r.rank)}</td><td>{nodes}</td><td>{c.rows}</td>'
            f'<td class="c-g">{c.passed}</td><td class="c-r">{c.failed}</td>'
            f"<td>{c.unmatched_target + c.unmatched_golden}</td><td>{firsts or 'none'}</td><td>{link}</td></tr>"
        )
    return (
        '<table id="ranks"><tr><th>rank</th><th>nodes</th><th>rows</th><th>PASS</th><th>FAIL</th><th>unmatched</th>'
        f"<th>first divergence per token</th><th>report</th></tr>{''.join(lines)}</table>"
    )


def cluster_page_html(
    result: CompareResult,
    placed: Mapping[Optional[int], Sequence[str]],
    not_compared: Sequence[NotCompared],
    nodes_lost: Sequence[str],
    directory: Path,
) -> str:
    """The page's text; links to the ranks' pages are relative to `directory`, where the page is written."""
    earliest = earliest_divergence(result.ranks)
    missing = "".join(f"<li>rank {_rank(n.rank)}: {escape(n.why)}</li>" for n in not_compared)
    incomplete = (
        f'<p class="incomplete">Incomplete: {len(not_compared)} not compared (below).</p>' if not_compared else ""
    )
    lost = f"<dt>nodes lost</dt><dd>{escape(', '.join(nodes_lost))}</dd>" if nodes_lost else ""
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        "<title>tcmp cluster compare</title>"
        + page_assets.style_element(page_assets.page_file("page.css") + _STYLE)
        + "</head><body><header><h1>tcmp cluster compare</h1><dl>"
        f"<dt>target</dt><dd>{escape(str(result.options.target))}</dd>"
        f"<dt>golden</dt><dd>{escape(str(result.options.golden))} ({escape(result.golden_description)})</dd>"
        f"<dt>data mode</dt><dd>{result.mode.value} ({escape(result.mode_reason)})</dd>"
        f"<dt>ranks</dt><dd>{len(result.ranks)} compared, {len(not_compared)} not</dd>{lost}</dl></header>"
        + incomplete
        + _earliest(earliest)
        + _map(result.ranks, earliest)
        + "<h2>Ranks</h2>"
        + _ranks(result, placed, directory)
        + (f'<h2>Not compared</h2><ul id="not-compared">{missing}</ul>' if missing else "")
        + "</body></html>"
    )


def write_cluster_page(directory: Path, overview_path: Path, html_text: str) -> Path:
    """Beside the cluster summary (`…_cluster_summary.json` → `…_cluster_report.html`), under a temporary name
    first."""
    final = directory / overview_path.name.replace("_cluster_summary.json", "_cluster_report.html")
    write_atomically(final, html_text)
    return final
