"""The page read at a glance (issue 27): at 1,600 x 1,000 the table's first screen shows a row's name with its
verdict (API Name, Result, Cosine), API Name stays on screen when the table is scrolled sideways, and the chart
tells its tokens apart (a colour each in the legend) and can show one alone. What is on screen is asked of the
browser (the element at a point), the expected columns and tokens come from the CSV written beside the page."""

from __future__ import annotations

import csv

import pytest
from test_report_page import CSP_WATCH, browser, wait_for  # noqa: F401  (browser: a fixture)

from tcmp.compare.execute.run import run_compare
from tcmp.compare.report.outcome import CompareOptions
from tcmp.schemas.synth.faults import Fault, FaultKind
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

TOKENS = 6
# the columns a verdict comes from, named independently of the page's code
VERDICT_COLUMNS = ("Result", "Accuracy Reached or Not", "Cosine", "MaxRelativeErr")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("layout")
    faults = (Fault("layers.0/MatMul_1", FaultKind.REL_ERROR, magnitude=0.03),)
    config = ScenarioConfig(model=ModelConfig(layers=1), tokens=TOKENS, faults=faults, write_fusion_off=False)
    scenario = write_scenario(root / "dump", config)
    assert scenario.golden_fx is not None
    result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx), root / "report")
    written = result.ranks[0].report
    assert written is not None and written.html is not None
    with written.csv.open(newline="") as handle:
        header, *rows = list(csv.reader(handle))
    return written, header, rows


@pytest.fixture(scope="module")
def page(browser, report):  # noqa: F811
    tab = browser.new_page()
    tab.set_viewport_size({"width": 1600, "height": 1000})
    tab.errors = []
    tab.on("pageerror", lambda error: tab.errors.append(str(error)))
    tab.add_init_script(CSP_WATCH)
    tab.goto(report[0].html.as_uri())
    wait_for(tab, "document.body.dataset.state !== 'loading'", 60)
    assert tab.evaluate("document.body.dataset.state") == "ready", tab.inner_text("#status")
    tab.evaluate("document.getElementById('table-section').scrollIntoView()")
    return tab


HEADS = "[...document.querySelectorAll('#table-section .dt-scroll-head th')].map((th) => th.textContent)"
# For a column title: whether its header cell and the first rows' cells in that column are what the browser shows
# at their own centre (not scrolled out of the table's box or the window, not covered by another cell).
VISIBLE = """(title) => {
    const heads = [...document.querySelectorAll("#table-section .dt-scroll-head th")];
    const k = heads.findIndex((th) => th.textContent === title);
    if (k < 0) return { found: false };
    const box = document.querySelector("#table-section .dt-scroll-body").getBoundingClientRect();
    const seen = (cell) => {
        const r = cell.getBoundingClientRect();
        const x = r.left + Math.min(r.width / 2, 20), y = r.top + r.height / 2;
        if (x < Math.max(box.left, 0) || x > Math.min(box.right, window.innerWidth) || y < 0 ||
            y > window.innerHeight) return false;
        const top = document.elementFromPoint(x, y);
        return top === cell || cell.contains(top);
    };
    const body = [...document.querySelectorAll("#rows tbody tr")].slice(0, 3).map((tr) => tr.cells[k]);
    return { found: true, head: seen(heads[k]), rows: body.map(seen), texts: body.map((td) => td.textContent) };
}"""


def test_the_first_screen_shows_a_rows_name_with_its_verdict(page, report):
    _, header, rows = report
    for title in ("API Name", "Result", "Cosine"):
        shown = page.evaluate(VISIBLE, title)
        assert shown["found"] and shown["head"] and shown["rows"] == [True] * 3, (title, shown)
        assert shown["texts"] == [r[header.index(title)] for r in rows[:3]]  # the CSV's first rows, in its order
    heads = page.evaluate(HEADS)
    assert heads[0] == "API Name" and tuple(heads[1:5]) == VERDICT_COLUMNS
    assert sorted(heads) == sorted(header)  # every column, each once
    assert header[:3] == ["Token", "Rank", "API Name"] and header.index("Result") > header.index("Cosine")  # the CSV


def test_api_name_stays_on_screen_when_the_table_scrolls_right(page, report):
    _, header, rows = report
    scrolled = page.evaluate("""() => {
        const body = document.querySelector("#table-section .dt-scroll-body");
        body.scrollLeft = body.scrollWidth;
        body.dispatchEvent(new Event("scroll"));
        return body.scrollLeft;
    }""")
    assert scrolled > 200  # the table is wider than the screen: it did scroll
    page.wait_for_timeout(200)
    shown = page.evaluate(VISIBLE, "API Name")
    assert shown["head"] and shown["rows"] == [True] * 3, shown
    assert shown["texts"] == [r[header.index("API Name")] for r in rows[:3]]
    assert page.evaluate(VISIBLE, "Err_message")["rows"] == [True] * 3  # the last column came into view
    assert not page.evaluate(VISIBLE, "Result")["rows"][0]  # and the first ones after API Name went out of it
    page.evaluate("document.querySelector('#table-section .dt-scroll-body').scrollLeft = 0")


def test_tokens_have_distinct_colours_in_the_legend_and_one_can_be_shown_alone(page, report):
    _, header, rows = report
    tokens = sorted({int(r[header.index("Token")]) for r in rows})
    assert len(tokens) == TOKENS
    legend = page.evaluate("""() => [...document.querySelectorAll("#chart .legend .traces")].map((item) => ({
        name: item.querySelector(".legendtext").textContent,
        colour: getComputedStyle(item.querySelector("path.js-line")).stroke }))""")
    colours = {item["name"]: item["colour"] for item in legend if item["name"].startswith("token ")}
    assert sorted(colours) == sorted(f"token {t}" for t in tokens)
    assert len(set(colours.values())) == len(tokens), colours
    page.select_option("#chart-token", str(tokens[2]))
    page.wait_for_timeout(300)
    visible = page.evaluate("""() => document.getElementById("chart").data.filter((t) => t.name.startsWith("token "))
        .map((t) => [t.name, t.visible])""")
    assert [name for name, v in visible if v is True or v is None] == [f"token {tokens[2]}"], visible
    page.select_option("#chart-token", "")
    page.wait_for_timeout(300)
    visible = page.evaluate("""() => document.getElementById("chart").data.filter((t) => t.name.startsWith("token "))
        .map((t) => t.visible)""")
    assert all(v is True for v in visible), visible
    assert page.errors == [] and page.evaluate("window.cspViolations") == []
