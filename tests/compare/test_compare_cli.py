"""`tcmp compare` through the command line: options, exit codes, report files, highlight colours."""

from __future__ import annotations

import csv
import json
import os
import sys

import openpyxl
import pytest

from tcmp.compare.records import UnmatchedKind
from tcmp.compare.report.table import text
from tcmp.schemas.synth.faults import Fault, FaultKind
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    faults = (
        Fault("MatMul_0", FaultKind.REL_ERROR, magnitude=0.05),  # cos 1, 5 % off: FAIL, accuracy reached: yellow
        Fault("SoftmaxV2_0", FaultKind.NAN),  # NaN on one side: red
    )
    return write_scenario(tmp_path_factory.mktemp("cli"), ScenarioConfig(model=ModelConfig(layers=1), tokens=1,
                                                                          faults=faults))  # fmt: skip


def compare(cli, scenario, *extra: str):
    args = ["compare", "--mode", "torchair", "--target_path", str(scenario.target), "--golden_path",
            str(scenario.golden_fx), "--jobs", "1", *extra]  # fmt: skip
    return cli(*args)


def test_reports_written_with_msprobe_spellings(cli, scenario, tmp_path):
    result = compare(cli, scenario, "--output_path", str(tmp_path), "-hl")
    assert result.exit_code == 0, result.output
    assert "first divergence in token 0: MatMul_0" in result.stdout
    csv_path = next(p for p in tmp_path.glob("tcmp_compare_rank0_*.csv") if "unmatched" not in p.name)
    rows = list(csv.DictReader(csv_path.open()))
    header = next(csv.reader(csv_path.open()))
    assert header[:9] == ["Token", "Rank", "API Name", "Stack Info", "Data Name", "NPU Dtype", "Bench Dtype",
                          "NPU Tensor Shape", "Bench Tensor Shape"]  # fmt: skip
    assert header[-3:] == ["Result", "Accuracy Reached or Not", "Err_message"]
    matmul = next(r for r in rows if r["API Name"] == "MatMul_0.output.0")
    assert matmul["Result"] == "FAIL" and matmul["Accuracy Reached or Not"] == "Yes"
    softmax = next(r for r in rows if r["API Name"] == "SoftmaxV2_0.output.0")
    assert softmax["Cosine"] == "N/A" and "position of inf or nan" in softmax["Err_message"]
    summary = json.loads(next(tmp_path.glob("*_summary.json")).read_text())
    assert summary["complete"] and summary["first_divergence"][0]["op"] == "MatMul_0"
    assert summary["counts"]["fail"] == 2 and summary["counts"]["rows"] == len(rows)
    unmatched = list(csv.DictReader(next(tmp_path.glob("*_unmatched.csv")).open()))
    assert unmatched and all(u["Reason"] and u["Kind"] in {k.value for k in UnmatchedKind} for u in unmatched)
    by_design = sum(u["Kind"] == "by design" for u in unmatched)
    assert by_design and f"golden ({by_design} by design" in " ".join(result.stdout.split())
    # highlight: whole rows filled red / yellow / green
    sheet = openpyxl.load_workbook(next(tmp_path.glob("*.xlsx"))).active
    fills = {sheet.cell(row=i, column=3).value: sheet.cell(row=i, column=1).fill.fgColor.rgb
             for i in range(2, sheet.max_row + 1)}  # fmt: skip
    assert fills["MatMul_0.output.0"].endswith("FFFF00")  # FAIL, accuracy reached: suspicious
    assert fills["SoftmaxV2_0.output.0"].endswith("FF0000")
    assert fills["MatMul_0.input.0"].endswith("C6EFCE")
    last_column = sheet.cell(row=2, column=len(header)).fill.fgColor.rgb
    assert last_column == sheet.cell(row=2, column=1).fill.fgColor.rgb  # the whole row


def test_fail_on_diff_and_default_output_dir(cli, scenario, tmp_path):
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        result = compare(cli, scenario, "--fail-on-diff")
    finally:
        os.chdir(cwd)
    assert result.exit_code == 1
    assert list(tmp_path.glob("tcmp_compare_rank0_*_summary.json"))  # the current directory by default


def test_the_html_page_is_written_by_default_and_no_html_skips_it(cli, scenario, tmp_path):
    result = compare(cli, scenario, "--output_path", str(tmp_path / "default"))
    assert result.exit_code == 0, result.output
    (page,) = (tmp_path / "default").glob("tcmp_compare_rank0_*_report.html")
    assert f"page: {page}" in result.stdout
    summary = json.loads(next((tmp_path / "default").glob("*_summary.json")).read_text())
    assert summary["files"]["html"] == str(page)
    skipped = compare(cli, scenario, "--output_path", str(tmp_path / "skipped"), "--no-html")
    assert skipped.exit_code == 0, skipped.output
    assert not list((tmp_path / "skipped").glob("*.html")) and "page:" not in skipped.stdout
    assert list((tmp_path / "skipped").glob("*_summary.json"))


def test_usage_errors_exit_2(cli, scenario):
    assert compare(cli, scenario, "--data-mode", "bogus").exit_code == 2
    assert cli("compare", "--target_path", "x").exit_code == 2
    result = compare(cli, scenario, "--rank", "3")
    assert result.exit_code == 2 and "--rank 3" in result.stderr


def test_runtime_errors_exit_3_with_one_line(cli, scenario, tmp_path):
    result = cli("compare", "-tp", scenario.target, "-gp", scenario.target)  # a path mistake: usage
    assert result.exit_code == 2 and "same dump" in result.stderr and "Traceback" not in result.stderr
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    result = compare(cli, scenario, "--output_path", str(blocker / "reports"))
    assert result.exit_code == 3 and "cannot write reports" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and result.stdout == ""


def test_an_unforeseen_error_exits_3_with_one_line(scenario, tmp_path, monkeypatch, capsys):
    import tcmp.compare.execute.run as run
    from tcmp import cli

    def broken(*args, **kwargs):
        raise RuntimeError("nothing foresaw this")

    monkeypatch.setattr(run, "run_compare", broken)
    monkeypatch.setattr(sys, "argv", ["tcmp", "compare", "-tp", str(scenario.target), "-gp", str(scenario.golden_fx),
                                      "-o", str(tmp_path), "--jobs", "1"])  # fmt: skip
    with pytest.raises(SystemExit) as exited:
        cli.main()
    assert exited.value.code == 3  # not 1, which --fail-on-diff means
    stderr = capsys.readouterr().err
    assert "RuntimeError: nothing foresaw this" in stderr and "--verbose" in stderr
    assert "Traceback" not in stderr and len(stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_no_partial_report_when_the_compare_fails(cli, scenario, tmp_path, monkeypatch):
    import tcmp.compare.report.xlsx as xlsx

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(xlsx.XlsxStream, "close", broken)
    result = compare(cli, scenario, "--output_path", str(tmp_path), "--highlight")
    assert result.exit_code == 3 and "No space left" in result.stderr
    assert list(tmp_path.iterdir()) == []  # nothing half-written that looks like a report


@pytest.mark.parametrize("mode", ["statistics", "md5"])
def test_data_modes_columns(cli, scenario, tmp_path, mode):
    result = compare(cli, scenario, "--output_path", str(tmp_path), "--data-mode", mode)
    assert result.exit_code == 0, result.output
    header = next(csv.reader(next(p for p in tmp_path.glob("*.csv") if "unmatched" not in p.name).open()))
    if mode == "md5":
        assert header[9:11] == ["NPU MD5", "BENCH MD5"]
    else:
        assert header[9:17] == ["Max diff", "Min diff", "Mean diff", "L2norm diff", "MaxRelativeErr",
                                "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr"]  # fmt: skip


def test_formula_injection_is_escaped():
    assert text("=SUM(A1)") == "'=SUM(A1)" and text("@x") == "'@x" and text("-x") == "'-x"
    assert text("-1.5") == "-1.5" and text("+3e-4") == "+3e-4" and text("plain") == "plain"
