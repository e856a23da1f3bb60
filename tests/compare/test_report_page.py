"""The HTML report (issue 17) in a real browser: headless Chromium (Debian's `chromium`, which `make test` installs)
driven by Playwright opens the page of the e2e dump from a file:// URL with the network off. Expectations come
from the scenario's manifest (which op has the injected fault) and from the CSV written beside the page, never
from the page's own code.
"""

from __future__ import annotations

import base64
import csv
import gzip
import hashlib
import io
import json
import os
import re
import sys
import time
import tracemalloc
from pathlib import Path

import pytest
from e2e_faults import FAULTS

from tcmp.compare.execute.run import run_compare
from tcmp.compare.report import page_assets
from tcmp.compare.report.outcome import CompareOptions, DataMode
from tcmp.compare.report.page import write_page
from tcmp.compare.report.page_graph import TableOp, page_graph
from tcmp.schemas.graph import Graph, GraphOp, InputEdge
from tcmp.schemas.synth.faults import VALUE_FAULTS, Fault, FaultKind
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

CHROMIUM = Path("/usr/bin/chromium")
# as the brief of the issue gives them: no GPU, and none of Chromium's own connections (this machine has no network)
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip


# every Content-Security-Policy violation of the page, as the browser reports them (a blocked script or eval)
CSP_WATCH = """window.cspViolations = [];
document.addEventListener("securitypolicyviolation",
    (e) => window.cspViolations.push(`${e.violatedDirective}: ${e.blockedURI} ${e.sample}`));"""


def wait_for(page, expression: str, seconds: float = 30) -> None:
    """Until `expression` is true in the page. (Playwright's wait_for_function evaluates its predicate with eval
    inside the page, which the page's CSP forbids; `evaluate` runs outside it.)"""
    deadline = time.monotonic() + seconds
    while not page.evaluate(expression):
        if time.monotonic() > deadline:
            raise AssertionError(f"not true after {seconds} s: {expression}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("page")
    scenario = write_scenario(root / "dump", ScenarioConfig(model=ModelConfig(layers=2), tokens=2, faults=FAULTS))
    result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx), root / "report")
    written = result.ranks[0].report
    with written.csv.open(newline="") as handle:
        header, *rows = list(csv.reader(handle))
    first_faulty = {}  # token -> the first op with an injected value fault, in execution order (the manifest's)
    for op in scenario.target_ops:
        if op.fault in VALUE_FAULTS:
            first_faulty.setdefault(op.token, op.op_name)
    return written, header, rows, first_faulty


def api_names(rows, header, keep=lambda cells: True) -> list[tuple[str, str]]:
    token, api = header.index("Token"), header.index("API Name")
    return sorted((r[token], r[api]) for r in rows if keep(r))


def rows_of_op(op: str):
    pattern = re.compile(re.escape(op) + r"\.(input|output)\.\d+( #\d+)?")
    return lambda api: pattern.fullmatch(api) is not None


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from playwright import sync_api  # the dev extra's

    if not CHROMIUM.is_file():
        pytest.fail(f"no {CHROMIUM}: install Debian's chromium (`apt-get install chromium`, as `make test` does)")
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=str(CHROMIUM), args=CHROMIUM_ARGS,
            offline=True, viewport={"width": 1400, "height": 1000},
        )  # fmt: skip
        yield context
        context.close()


@pytest.fixture(scope="module")
def page(browser, report):
    """The report opened once; `page.requests` and `page.errors`: what it asked for and what it threw."""
    written = report[0]
    tab = browser.new_page()
    tab.requests, tab.errors = [], []
    tab.on("request", lambda request: tab.requests.append(request.url))
    tab.on("pageerror", lambda error: tab.errors.append(str(error)))
    tab.on("console", lambda message: tab.errors.append(message.text) if message.type == "error" else None)
    tab.add_init_script(CSP_WATCH)
    tab.goto(written.html.as_uri())
    wait_for(tab, "document.body.dataset.state !== 'loading'", 60)
    return tab


def shown_rows(page) -> list[tuple[str, str]]:
    """(Token, API Name) of every row the table's filters let through (not only those in the DOM)."""
    rows = page.evaluate("""() => {
        const m = window.tcmpReport.model;
        return window.tcmpReport.table.rows({ search: "applied" }).data().toArray()
            .map((cells) => [cells[m.col.Token], cells[m.col["API Name"]]]);
    }""")
    return sorted(tuple(r) for r in rows)


def test_the_page_draws_offline_without_any_request_leaving_it(page, report):
    written = report[0]
    assert page.evaluate("document.body.dataset.state") == "ready", page.inner_text("#status")
    assert page.errors == []
    # the page itself, and the blob: URLs it makes of its own inline bytes (DataTables' module, the inflating worker)
    assert page.requests[0] == written.html.as_uri()
    assert all(url.startswith("blob:") for url in page.requests[1:]), page.requests
    csp = page.get_attribute('meta[http-equiv="Content-Security-Policy"]', "content")
    assert "default-src 'none'" in csp and "connect-src 'none'" in csp
    scripts = next(d for d in csp.split(";") if d.strip().startswith("script-src")).split()
    assert "'unsafe-inline'" not in scripts and "'unsafe-eval'" not in scripts
    assert sum(s.startswith("'sha256-") for s in scripts) == 2  # the page's script and plotly.js, by their hashes
    assert page.evaluate("window.cspViolations") == []
    # where the run keeps its artifacts: build/test-artifacts of the checkout (or $TCMP_TEST_ARTIFACTS), kept after
    # the run for a person to look at, unlike pytest's temporary directories
    artifacts = Path(
        os.environ.get("TCMP_TEST_ARTIFACTS", Path(__file__).resolve().parents[2] / "build" / "test-artifacts")
    )
    artifacts.mkdir(parents=True, exist_ok=True)
    shot = artifacts / "html_report.png"
    shot.unlink(missing_ok=True)
    page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000
    print(f"screenshot: {shot}")


def test_the_table_holds_every_row_of_the_csv_cell_for_cell_and_only_the_rows_in_view_are_in_the_dom(page, report):
    _, header, rows, _ = report
    cells = page.evaluate("() => window.tcmpReport.table.rows().data().toArray()")
    assert page.evaluate("() => window.tcmpReport.model.columns") == header
    assert cells == rows
    in_dom = page.locator("#rows tbody tr").count()
    assert 0 < in_dom < len(rows)  # virtualized (Scroller)


def test_the_chart_holds_one_point_per_output_row(page, report):
    _, header, rows, _ = report
    api, token = header.index("API Name"), header.index("Token")
    outputs = sorted((r[token], r[api]) for r in rows if ".output." in r[api])
    tokens = sorted({r[token] for r in rows})
    drawn = page.evaluate(
        """(tokens) => {
            const traces = [...document.querySelectorAll("#chart .scatterlayer .trace")].slice(0, tokens);
            return traces.map((trace) => trace.querySelectorAll("path.point").length);
        }""",
        len(tokens),
    )
    data = page.evaluate("""() => {
        const m = window.tcmpReport.model;
        return document.getElementById("chart").data.filter((t) => t.name.startsWith("token "))
            .map((t) => [t.name, t.customdata.map((i) => [m.rows[i][m.col.Token], m.rows[i][m.col["API Name"]]])]);
    }""")
    assert [name for name, _ in data] == [f"token {t}" for t in tokens]
    assert sorted(tuple(p) for _, points in data for p in points) == outputs
    assert drawn == [len(points) for _, points in data]  # each a point in the SVG


def test_the_first_divergence_is_marked_at_the_injected_op(page, report):
    _, _, _, first_faulty = report
    marked = page.evaluate("""() => {
        const m = window.tcmpReport.model;
        const trace = document.getElementById("chart").data.find((t) => t.name === "first divergence");
        return trace.customdata.map((i) => [m.token[i], m.rows[i][m.col["API Name"]]]);
    }""")
    assert {token for token, _ in marked} == set(first_faulty)
    for token, api in marked:
        assert rows_of_op(first_faulty[token])(api) and ".output." in api
    labels = page.evaluate("() => [...document.querySelectorAll('#chart .annotation-text')].map((e) => e.textContent)")
    assert {f"first divergence: {op}" for op in first_faulty.values()} <= set(labels)


def test_a_click_on_a_point_filters_the_table_to_its_op_and_shows_its_neighbourhood(page, report):
    _, header, rows, first_faulty = report
    token, op = max(first_faulty.items())  # the top trace: the same op of an earlier token may lie under it
    trace, point = page.evaluate(
        """([token, op]) => {
            const m = window.tcmpReport.model;
            const traces = document.getElementById("chart").data;
            const trace = traces.findIndex((t) => t.name === `token ${token}`);
            const point = traces[trace].customdata.findIndex((i) => m.nodes.names[m.node[i]] === op);
            return [trace, point];
        }""",
        [token, op],
    )
    target = page.locator("#chart .scatterlayer .trace").nth(trace).locator("path.point").nth(point)
    box = target.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_selector("#f-op:not([hidden])")
    expected = api_names(rows, header, lambda r: r[0] == str(token) and rows_of_op(op)(r[header.index("API Name")]))
    assert shown_rows(page) == expected and expected
    hood = page.inner_text("#hood")
    assert op in hood and "FAIL" in hood and "producers" in hood and "PASS" in hood
    assert page.locator("#hood .self li.c-r").count() >= 1  # its failing output, in red
    page.click("#f-op-clear")
    assert len(shown_rows(page)) == len(rows)


def test_the_result_filter_shows_exactly_the_fail_rows(page, report):
    _, header, rows, _ = report
    result = header.index("Result")
    page.evaluate("() => window.tcmpReport.select(null, null)")
    page.select_option("#f-result", "FAIL")
    expected = api_names(rows, header, lambda r: r[result] == "FAIL")
    assert shown_rows(page) == expected and 0 < len(expected) < len(rows)
    info = page.inner_text("#rows_info")
    assert info.startswith(f"Showing 1 to {len(expected)} of {len(expected)} entries") and str(len(rows)) in info
    page.select_option("#f-result", "")
    page.fill("#f-text", "gelu")
    wait_for(page, f"window.tcmpReport.table.rows({{search: 'applied'}}).count() < {len(rows)}")
    assert shown_rows(page) == api_names(rows, header, lambda r: any("gelu" in c.lower() for c in r))
    page.fill("#f-text", "")
    wait_for(page, f"window.tcmpReport.table.rows({{search: 'applied'}}).count() === {len(rows)}")


# --- without a browser ------------------------------------------------------------------------------------------


def payload(html: Path) -> dict:
    """The page's data block, inflated and decoded as the page decodes it (tcmp/compare/report/page.py's docstring)."""
    block = re.search(r'<script type="application/x-tcmp-base64" id="tcmp-data">([^<]*)</script>', html.read_text())
    data = json.loads(gzip.decompress(base64.b64decode(block.group(1))))
    data["rows"] = [[words[c] if isinstance(c, int) else c for words, c in zip(data["words"], r)] for r in data["rows"]]
    return data


def test_the_payload_holds_the_csv_rows_with_their_colours_and_ops(report):
    written, header, rows, first_faulty = report
    data = payload(written.html)
    assert data["columns"] == header and data["rows"] == rows
    api, result = header.index("API Name"), header.index("Result")
    assert data["out"] == "".join("1" if ".output." in r[api] else "0" for r in rows)
    for cells, colour, node in zip(rows, data["colour"], data["node"]):
        assert data["nodes"]["names"][node] == re.sub(r"\.(input|output)\.\d+( #\d+)?$", "", cells[api])
        if cells[result] == "PASS":
            assert colour in "gy"
    assert {d["op"] for d in data["meta"]["divergences"]} == set(first_faulty.values())


@pytest.mark.parametrize(("mode", "axis"), [(DataMode.STATISTICS, "NormRelativeErr"), (DataMode.MD5, "CRC-32")])
def test_the_statistics_and_md5_pages_draw_their_own_error(browser, report, tmp_path, mode, axis):
    written = report[0]
    dump = written.csv.parent.parent / "dump"
    target, golden = dump / "target" / "msprobe_ge_dump", dump / "golden_fx" / "msprobe_fx_dump"
    result, _ = run_compare(CompareOptions(target, golden, mode=mode), tmp_path)
    page = result.ranks[0].report.html
    with result.ranks[0].report.csv.open(newline="") as handle:
        header, *rows = list(csv.reader(handle))
    assert payload(page)["meta"]["mode"] == mode.value
    tab = browser.new_page()
    errors = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    tab.goto(page.as_uri())
    wait_for(tab, "document.body.dataset.state !== 'loading'", 60)
    assert tab.evaluate("document.body.dataset.state") == "ready" and errors == []
    layout = tab.evaluate("() => document.getElementById('chart').layout.yaxis")
    assert layout["title"]["text"] == axis and layout["type"] == ("log" if mode is DataMode.STATISTICS else "linear")
    points = tab.evaluate("""() => document.getElementById("chart").data.filter((t) => t.name.startsWith("token "))
        .reduce((n, t) => n + t.x.length, 0)""")
    assert points == sum(".output." in r[header.index("API Name")] for r in rows)
    tab.close()


def test_a_name_with_quotes_tags_and_entities_shows_as_it_is_in_the_hover_and_the_marker(browser, tmp_path):
    scope = 'q"<b>x</b>&amp;<img src=x onerror=alert(1)>/'  # quotes, a tag, an entity, a script in an attribute
    model = ModelConfig(layers=1, first_scope=scope)
    fault = Fault(scope + "MatMul_0", FaultKind.REL_ERROR, magnitude=0.05)
    scenario = write_scenario(tmp_path / "dump", ScenarioConfig(model=model, tokens=1, faults=(fault,)))
    result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx), tmp_path / "report")
    tab = browser.new_page()
    errors = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    tab.on("dialog", lambda dialog: errors.append(f"dialog: {dialog.message}"))
    tab.add_init_script(CSP_WATCH)
    tab.goto(result.ranks[0].report.html.as_uri())
    wait_for(tab, "document.body.dataset.state !== 'loading'", 60)
    assert tab.evaluate("document.body.dataset.state") == "ready" and errors == []
    name = scope + "MatMul_0.output.0"
    hovered = tab.evaluate(
        """(name) => {
        const chart = document.getElementById("chart");
        for (let c = 0; c < chart.data.length; c++) {
            const p = (chart.data[c].text || []).findIndex((t) => typeof t === "string" && t.includes("MatMul_0"));
            if (p >= 0 && chart.data[c].name.startsWith("token ")) {
                Plotly.Fx.hover(chart, [{ curveNumber: c, pointNumber: p }]);
                return document.querySelector(".hoverlayer").textContent;
            }
        }
        return null;
    }""",
        name,
    )
    assert hovered is not None and name in hovered, hovered  # plotly's own hover label, as a person sees it
    marker = tab.evaluate("() => [...document.querySelectorAll('.annotation-text')].map((a) => a.textContent)")
    assert f"first divergence: {scope}MatMul_0" in marker
    assert tab.evaluate("document.querySelectorAll('img').length") == 0  # no markup of the name became an element
    assert tab.evaluate("window.cspViolations") == [] and errors == []
    tab.close()


def test_only_a_chart_drawn_with_webgl_lets_the_page_evaluate_code(browser, report, tmp_path, monkeypatch):
    from tcmp.compare.report import page as page_module

    written = report[0]
    dump = written.csv.parent.parent / "dump"
    target, golden = dump / "target" / "msprobe_ge_dump", dump / "golden_fx" / "msprobe_fx_dump"
    monkeypatch.setattr(page_module, "SVG_POINTS", 10)  # this dump's outputs are more: WebGL where there is one
    result, _ = run_compare(CompareOptions(target, golden), tmp_path)
    tab = browser.new_page()
    errors = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    tab.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    tab.add_init_script(CSP_WATCH)
    tab.goto(result.ranks[0].report.html.as_uri())
    wait_for(tab, "document.body.dataset.state !== 'loading'", 60)
    csp = tab.get_attribute('meta[http-equiv="Content-Security-Policy"]', "content")
    scripts = next(d for d in csp.split(";") if d.strip().startswith("script-src")).split()
    assert "'unsafe-eval'" in scripts and "'unsafe-inline'" not in scripts
    assert tab.evaluate("document.body.dataset.state") == "ready" and errors == []
    kinds = tab.evaluate("() => document.getElementById('chart').data.map((t) => t.type)")
    has_webgl = tab.evaluate("() => !!document.createElement('canvas').getContext('webgl')")
    assert ("scattergl" in kinds) == has_webgl, (kinds, has_webgl)
    assert tab.evaluate("window.cspViolations") == []
    tab.close()


def test_page_graph_joins_fused_members_and_drops_control_and_inner_edges():
    def op(order, name, kind, inputs=(), control=()):
        edges = tuple(InputEdge(*i) for i in inputs)
        return GraphOp(order, name, kind, edges, tuple(control), (), (), None)

    graph = Graph("g", Path("g.txt"), (
        op(0, "x", "Data"),
        op(1, "w", "Const"),
        op(2, "mm", "MatMul", [("x", 0), ("w", 0)]),
        op(3, "add", "Add", [("mm", 0), ("x", 0)], control=["w"]),
        op(4, "relu", "Relu", [("add", 0)], control=["x"]),
        op(5, "out", "NetOutput", [("relu", 0)]),
    ))  # fmt: skip
    table = [TableOp("g", "mmadd", "FusedMatMulAdd"), TableOp("g", "relu", "Relu"), TableOp("g", "TransData_9", "T")]
    got = page_graph(table, [graph, None])
    names = list(got.names)
    assert names[:3] == ["mmadd", "relu", "TransData_9"]  # the table's ops first, in their order
    assert set(names[3:]) == {"x", "w", "out"}  # then the graph ops no table op holds
    producers = {names[v]: {names[u] for u in got.producers[v]} for v in range(len(names))}
    # mm -> add is inside the fused op; add's control edge from w and relu's from x are no data edges
    assert producers == {"mmadd": {"x", "w"}, "relu": {"mmadd"}, "TransData_9": set(), "x": set(), "w": set(),
                         "out": {"relu"}}  # fmt: skip
    assert got.found == (True, True, False)  # TransData_9 (inserted by GE) is not in the graph


def test_inline_scripts_and_styles_cannot_end_their_element():
    assert page_assets.script_element("let a = 1;", "s") == '<script id="s">let a = 1;</script>'
    hidden = page_assets.script_element("x = '</SCRIPT>'", "s", run=False)
    assert "</SCRIPT>" not in hidden and page_assets.BASE64_TYPE in hidden
    assert base64.b64decode(re.search(r">([^<]*)</script>$", hidden).group(1)) == b"x = '</SCRIPT>'"
    with pytest.raises(ValueError):
        page_assets.script_element("a <!-- b", "s")
    assert page_assets.style_element('a{content:"</style>"}') == '<style>a{content:"<\\/style>"}</style>'


def test_an_inline_script_is_refused_as_the_html_tokenizer_reads_it():
    # the tokenizer folds ASCII letters only: `</ſcript` (a long s) does not end a script element
    for text in ("</ScRiPt", "a<!--b", "</script\u00e9"):
        assert page_assets.BASE64_TYPE in page_assets.script_element(text, "s", run=False)
    assert page_assets.script_element("</\u017fcript", "s") == '<script id="s"></\u017fcript</script>'
    text = "\u00e9\u4e2d" * 700_000  # over one slice of the hash: slices' UTF-8 joined is the whole's
    expected = base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")
    assert page_assets.script_hash(text) == f"'sha256-{expected}'"


def test_writing_the_page_costs_less_memory_than_one_more_copy_of_plotly_js():
    # plotly.js is ~5 MB (~10 MB as a str): lowered, formatted into its element and encoded whole, it cost ~68 MB
    plotly = page_assets.plotly_js().text
    for name in ("page.js", "page.html", "page.css"):
        page_assets.page_file(name)
    page_assets.datatables_js(), page_assets.datatables_css()
    out = io.StringIO()
    tracemalloc.start()
    try:
        write_page(io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), {"header": "", "unmatched": ""}, b"{}", False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < sys.getsizeof(plotly), (peak, sys.getsizeof(plotly))
    write_page(out, {"header": "", "unmatched": ""}, b"{}", False)
    assert plotly in out.getvalue()  # written whole, inline


def test_the_libraries_come_from_the_installed_packages_not_from_the_repository():
    for library in (page_assets.plotly_js(), page_assets.datatables_js(), page_assets.datatables_css()):
        assert "site-packages" in library.path.parts or "dist-packages" in library.path.parts
        assert len(library.text) > 50_000
    own = {p.name for p in page_assets.PAGE_FILES.iterdir()}
    assert own == {"page.html", "page.js", "page.css"}
