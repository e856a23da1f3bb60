"""One tolerance table (issue 24): the thresholds (`Thresholds`' fields, each naming what it bounds and in which
modes) and the rounding-noise rule with its ulp of each dtype (`ulp.RULE`). The console legend says every
threshold of its mode and every dtype's ulp, the HTML page carries the rule and every threshold, and the README
holds the tables exactly as `python -m tcmp.compare.report.legend --markdown` renders them, so none can drift
from the code; a threshold or a dtype added to the table is checked here without editing these tests."""

from __future__ import annotations

import html
import inspect
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
from test_report_page import payload

from tcmp.compare.execute.run import run_compare
from tcmp.compare.judge.metrics import Mode
from tcmp.compare.judge.verdict import Thresholds
from tcmp.compare.report.legend import MARKDOWN_BEGIN, MARKDOWN_END, legend, markdown
from tcmp.compare.report.outcome import CompareOptions
from tcmp.compare.rules.ulp import RULE
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

README = Path(__file__).resolve().parents[2] / "README.md"
THRESHOLDS = fields(Thresholds)
# a value of its own for each threshold (none a default, none a prefix of another when printed with :g)
ODD = Thresholds(**{f.name: round(0.0101 + 0.1013 * k, 4) for k, f in enumerate(THRESHOLDS)})


def test_the_readme_holds_the_tolerance_tables_the_code_renders():
    generated = subprocess.run([sys.executable, "-m", "tcmp.compare.report.legend", "--markdown"], check=True,
                               capture_output=True, text=True).stdout  # fmt: skip
    assert generated == markdown() and generated.startswith(MARKDOWN_BEGIN)
    readme = README.read_text(encoding="utf-8")
    begin, end = readme.index(MARKDOWN_BEGIN), readme.index(MARKDOWN_END) + len(MARKDOWN_END) + 1
    assert readme[begin:end] == generated, "README.md: paste `python -m tcmp.compare.report.legend --markdown`"


def test_every_row_of_the_tolerance_table_is_in_the_readme_table():
    table = markdown()
    for f in THRESHOLDS:
        assert f"| `{f.name}` | {f.default:g} |" in table
    for unit in RULE.table:
        assert f"| {unit.name} | {unit.mantissa_bits} | 2^-{unit.mantissa_bits} | {unit.min_exponent} |" in table


@pytest.mark.parametrize("mode", [Mode.TENSOR, Mode.STATISTICS])
def test_the_console_legend_says_every_threshold_of_its_mode_and_every_dtypes_ulp(mode):
    said = " ".join(legend(mode, ODD))
    for f in THRESHOLDS:
        value = f"{getattr(ODD, f.name):g}"
        assert (value in said) == (mode in f.metadata["modes"]), f.name
    for unit in RULE.table:
        assert f"{unit.name}: 2^-{unit.mantissa_bits}" in said


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("legend")
    scenario = write_scenario(root, ScenarioConfig(model=ModelConfig(layers=1), tokens=1, write_fusion_off=False))
    result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx, thresholds=ODD), root / "report")
    return result.ranks[0].report.html


def test_the_page_carries_the_rule_with_every_dtype_and_every_threshold(page):
    text = page.read_text(encoding="utf-8")
    assert html.escape(RULE.text(), quote=False) in text or html.escape(RULE.text()) in text
    for unit in RULE.table:
        assert f"{unit.name}: 2^-{unit.mantissa_bits}" in text
    assert payload(page)["meta"]["thresholds"] == {f.name: getattr(ODD, f.name) for f in THRESHOLDS}


def test_each_threshold_with_an_option_has_its_default_on_the_command_line():
    from tcmp import cli

    defaults = {name: p.default for name, p in inspect.signature(cli.compare).parameters.items()}
    with_option = [f for f in THRESHOLDS if f.metadata["option"]]
    assert [f.metadata["option"] for f in with_option] == ["--cosine", "--max-rel-err", "--stats-rel-err"]
    for f in with_option:
        assert defaults[f.metadata["option"].removeprefix("--").replace("-", "_")] == f.default, f.name
