"""Benchmark of the HTML report (issue 17; not a test): a report of about 100,000 rows, its size against the CSV's,
and the time it takes headless Chromium to show it.

A synthetic dump pair (160 layers x 20 tokens of a small model: ~98,000 rows, ~60,000 GE files) is written once
into a work directory and compared (all cores) twice, with and without the page, which gives what writing the page
costs the compare: its share of the compare's wall time, (with - without) / with, against issue
26's target of 10 %. Then the page is opened from its file:// URL with the network off, each time in a new Chromium
with a new profile (nothing cached, as when a report is opened from a file manager), and the page's own clock
(ms since navigation start) says when

- the rows show: the header and the table's first screen drawn (`firstRender`, the target: < 2 s);
- the chart shows: plotly.js started (~1 s of it on this machine whatever the report) and the chart drawn;

with the table's DOM rows (virtualized: a few screens' worth, not 100,000), the JS heap, and how long a Result
filter and a click on an op take to redraw the table. Medians of the repetitions.

    python bench/bench_html.py [--work DIR] [--layers 160] [--tokens 20] [--repeat 5] [--keep]
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tcmp.compare.execute.run import run_compare
from tcmp.compare.report import page_assets
from tcmp.compare.report.outcome import CompareOptions
from tcmp.compare.report.writers import ReportChoice, chosen_formats
from tcmp.schemas.host import usable_cpus
from tcmp.schemas.synth.faults import Fault, FaultKind
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
TARGET_FIRST_RENDER_MS = 2000
TARGET_PAGE_SHARE = 0.10  # issue 26: (with page - without) / with page
MB = 1e6


def write_dump(work: Path, layers: int, tokens: int) -> tuple[Path, Path]:
    done = work / "dump" / "written"
    target, golden = work / "dump" / "target" / "msprobe_ge_dump", work / "dump" / "golden_fx" / "msprobe_fx_dump"
    if not done.exists():
        shutil.rmtree(work / "dump", ignore_errors=True)
        started = time.monotonic()
        faults = (Fault("layers.1/MatMul_1", FaultKind.REL_ERROR, magnitude=0.03),)
        config = ScenarioConfig(model=ModelConfig(layers=layers, hidden=32, seq=12), tokens=tokens, faults=faults,
                                propagate_faults=True, write_fusion_off=False)  # fmt: skip
        write_scenario(work / "dump", config)
        done.write_text("")
        print(f"dump written in {time.monotonic() - started:.0f} s", flush=True)
    return target, golden


def compare(target: Path, golden: Path, out: Path, html: bool):
    shutil.rmtree(out, ignore_errors=True)
    started = time.monotonic()
    result, _ = run_compare(
        CompareOptions(target, golden, jobs=usable_cpus()), out, formats=chosen_formats(ReportChoice(html=html))
    )
    return time.monotonic() - started, result.ranks[0]


def open_page(sync_api, page_path: Path, profile: Path) -> dict:
    """One opening in a new browser: the page's timings, what it holds, and two interactions."""
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, args=CHROMIUM_ARGS, offline=True,
            viewport={"width": 1400, "height": 1000},
        )  # fmt: skip
        try:
            tab = context.new_page()
            requests: list[str] = []
            tab.on("request", lambda request: requests.append(request.url))
            tab.goto(page_path.as_uri())
            deadline = time.monotonic() + 120  # polled from outside: the page's CSP forbids wait_for_function's eval
            while tab.evaluate("document.body.dataset.state") == "loading" and time.monotonic() < deadline:
                time.sleep(0.02)
            state = tab.evaluate("document.body.dataset.state")
            if state != "ready":
                raise RuntimeError(f"the page did not draw: {tab.inner_text('#status')}")
            measured = tab.evaluate("""async () => {
                const r = window.tcmpReport, m = r.model;
                const painted = () => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)));
                const domRows = document.querySelectorAll("#rows tbody tr").length;
                const chart = document.getElementById("chart").data;
                let t = performance.now();
                m.filters.result = "FAIL";
                r.table.draw();
                await painted();
                const filter = performance.now() - t;
                const failing = r.table.rows({ search: "applied" }).count();
                m.filters.result = "";
                const row = m.rows.findIndex((cells) => cells[m.col.Result] === "FAIL");
                t = performance.now();
                await r.select(m.token[row], m.node[row]);
                await painted();
                const select = performance.now() - t;
                await r.select(null, null);
                return { rows: r.table.rows().count(), domRows, failing, filter, select, phases: r.phases,
                         firstRender: r.firstRender, heap: performance.memory ? performance.memory.usedJSHeapSize : 0,
                         points: chart.filter((d) => d.name.startsWith("token ")).reduce((n, d) => n + d.x.length, 0),
                         hidden: chart.filter((d) => d.visible === "legendonly").length };
            }""")  # fmt: skip
            measured["requests"] = requests
            return measured
        finally:
            context.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, help="keeps the dump between runs (default: a temporary directory)")
    parser.add_argument("--layers", type=int, default=160)
    parser.add_argument("--tokens", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="keep the temporary work directory")
    args = parser.parse_args()
    from playwright import sync_api  # the dev extra's

    work = args.work or Path(tempfile.mkdtemp(prefix="tcmp-bench-html-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        target, golden = write_dump(work, args.layers, args.tokens)
        # alternated, the fastest of two each: one compare alone swings by more than the page costs here
        times: dict[bool, list[float]] = {False: [], True: []}
        for html in (False, True, False, True):
            seconds, rank = compare(target, golden, work / ("report" if html else "report-csv-only"), html=html)
            times[html].append(seconds)
        without, with_page = min(times[False]), min(times[True])
        report = rank.report
        csv_size, html_size = report.csv.stat().st_size, report.html.stat().st_size
        text = report.html.read_text()
        data = len(re.search(r'id="tcmp-data">([^<]*)<', text).group(1))
        libraries = sum(len(lib.text.encode()) for lib in (page_assets.plotly_js(), page_assets.datatables_css()))
        libraries += len(page_assets.base64_element(page_assets.datatables_js().text.encode(), "x"))
        runs = [open_page(sync_api, report.html, Path(tempfile.mkdtemp(dir=work))) for _ in range(args.repeat)]
    finally:
        if args.work is None and not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    def median(get) -> float:
        return statistics.median(get(r) for r in runs)

    first = median(lambda r: r["firstRender"])
    print(
        f"rows: {rank.counts.rows:,} ({runs[0]['rows']:,} in the table, {runs[0]['domRows']} of them in the DOM); "
        f"chart: {runs[0]['points']:,} output points, {runs[0]['hidden']} of {args.tokens} tokens start hidden"
    )
    print(
        f"CSV {csv_size / MB:.1f} MB; HTML {html_size / MB:.1f} MB = {html_size / csv_size:.2f}x the CSV "
        f"(rows {data / MB:.1f} MB as base64 of gzip, libraries {libraries / MB:.1f} MB, the rest "
        f"{(html_size - data - libraries) / MB:.2f} MB)"
    )
    share = (with_page - without) / with_page
    print(
        f"compare: {without:.1f} s without the page (--no-html), {with_page:.1f} s with it "
        f"({with_page / without:.2f}x; "
        "fastest of two each, alternated)"
    )
    print(
        f"  the page's share of the compare's wall time  {share:6.1%}   target <= {TARGET_PAGE_SHARE:.0%} "
        f"({share / TARGET_PAGE_SHARE:.2f}x the target)"
    )
    print(f"in headless Chromium, median of {len(runs)} openings (new browser and profile each), ms since navigation:")
    print(
        f"  rows shown (first render)  {first:7.0f}   target < {TARGET_FIRST_RENDER_MS} "
        f"({first / TARGET_FIRST_RENDER_MS:.2f}x the target)"
    )
    print(f"    payload inflated + parsed {median(lambda r: r['phases']['payload']):5.0f}")
    print(f"  chart shown                {median(lambda r: r['phases']['chart']):7.0f}")
    print(f"  Result = FAIL redraw       {median(lambda r: r['filter']):7.0f}   ({runs[0]['failing']:,} rows)")
    print(f"  select an op (click)       {median(lambda r: r['select']):7.0f}")
    print(f"  JS heap                    {median(lambda r: r['heap']) / MB:7.0f} MB")
    leaked = [url for r in runs for url in r["requests"][1:] if not url.startswith("blob:")]
    if leaked:
        print(f"requests that left the page: {leaked}")
        return 1
    return 0 if first < TARGET_FIRST_RENDER_MS and share <= TARGET_PAGE_SHARE else 1


if __name__ == "__main__":
    sys.exit(main())
