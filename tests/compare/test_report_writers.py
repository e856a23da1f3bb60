"""The report files are writer objects in one list (issue 24): each declares its suffix and when it is written, and
the CLI and the driver choose from the list. A format added to the list is written, named in the summary's
"files" and kept from overwriting, with no other edit (a writer defined here shows it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tcmp.compare.execute.run import run_compare
from tcmp.compare.report import writers
from tcmp.compare.report.outcome import CompareOptions
from tcmp.compare.report.table import RenderedRows
from tcmp.compare.report.writers import (
    DEFAULT_FORMATS,
    FORMATS,
    RankEnd,
    ReportChoice,
    ReportFile,
    chosen_formats,
)
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    config = ScenarioConfig(model=ModelConfig(layers=1), tokens=1, write_fusion_off=False)
    return write_scenario(tmp_path_factory.mktemp("report_writers"), config)


def test_every_writer_has_its_own_suffix_and_key():
    assert len({f.suffix for f in FORMATS}) == len(FORMATS) == len({f.key for f in FORMATS})
    assert [(f.key, f.suffix) for f in FORMATS] == [
        ("csv", ".csv"), ("unmatched", "_unmatched.csv"), ("summary", "_summary.json"), ("xlsx", ".xlsx"),
        ("html", "_report.html"),
    ]  # fmt: skip


@pytest.mark.parametrize("highlight", [False, True])
@pytest.mark.parametrize("html", [False, True])
def test_each_writer_is_chosen_by_its_flag(highlight, html):
    keys = [f.key for f in chosen_formats(ReportChoice(highlight=highlight, html=html))]
    expected = ["csv", "unmatched", "summary"] + ["xlsx"] * highlight + ["html"] * html
    assert keys == expected
    assert [f.key for f in DEFAULT_FORMATS] == ["csv", "unmatched", "summary", "html"]  # no --highlight, no --no-html


def test_the_cli_writes_the_files_its_flags_choose(cli, scenario, tmp_path):
    for flags, suffixes in ((["-hl", "--no-html"], [".csv", ".xlsx", "_summary.json", "_unmatched.csv"]),
                            ([], [".csv", "_report.html", "_summary.json", "_unmatched.csv"])):  # fmt: skip
        out = tmp_path / "-".join(flags or ["plain"])
        done = cli("compare", "-tp", scenario.target, "-gp", scenario.golden_fx, "-o", out, *flags)
        assert done.exit_code == 0, done.output
        names = sorted(p.name for p in out.iterdir())
        stem = names[0].removesuffix(".csv")
        assert names == sorted(stem + s for s in suffixes)


class LineCount(ReportFile):
    """A format a test adds: how many rows and unmatched lines went past."""

    key, suffix = "lines", "_lines.txt"

    def __init__(self, temp, mode) -> None:
        super().__init__(temp, mode)
        self.rows = self.unmatched = 0

    def add_rows(self, rows: RenderedRows) -> None:
        self.rows += len(rows.colours)

    def add_unmatched(self, csv_text: str) -> None:
        self.unmatched += csv_text.count("\n")

    def finish(self, end: RankEnd) -> None:
        with self.temp.text() as out:
            out.write(f"{self.rows} {self.unmatched}\n")


def test_a_writer_added_to_the_list_is_written_and_named_in_the_summary(scenario, tmp_path, monkeypatch):
    monkeypatch.setattr(writers.time, "strftime", lambda form: "20000101000000")  # both compares in one second
    formats = (*DEFAULT_FORMATS, LineCount)
    options = CompareOptions(scenario.target, scenario.golden_fx)
    result, _ = run_compare(options, tmp_path / "first", formats=formats, keep_rows=True)
    rank = result.ranks[0]
    summary = json.loads(rank.report.summary.read_text(encoding="utf-8"))
    assert list(summary["files"]) == ["csv", "unmatched", "summary", "html", "lines"]
    lines = Path(summary["files"]["lines"])
    stem = rank.report.csv.name.removesuffix(".csv")
    assert lines.name == stem + "_lines.txt" and len(list(lines.parent.iterdir())) == 5
    unmatched_lines = len(rank.report.unmatched.read_text(encoding="utf-8").splitlines()) - 1  # its header
    assert lines.read_text() == f"{len(rank.rows)} {unmatched_lines}\n"
    # a file of the added format under that name is not overwritten: the next compare takes another stem
    (tmp_path / "second").mkdir()
    (tmp_path / "second" / lines.name).write_text("earlier\n")
    again, _ = run_compare(options, tmp_path / "second", formats=formats)
    assert again.ranks[0].report.csv.name == f"{stem}_1.csv"
    assert (tmp_path / "second" / lines.name).read_text() == "earlier\n"
