"""The report files people open and share (issue 18, items 6-10): their mode follows the umask, the xlsx holds
numbers as numbers with a filter and a frozen header, every metric is a plain number with a fixed number of
significant digits in every mode, statistics rows carry NaN/inf counts and the worst rows start where a NaN
first appears, Err_message parts are separated."""

from __future__ import annotations

import csv
import json
import math
import os
import stat
from contextlib import contextmanager
from pathlib import Path

import openpyxl
import pytest
from openpyxl.utils import get_column_letter

from tcmp.compare.execute.run import run_compare
from tcmp.compare.report.outcome import CompareOptions, DataMode
from tcmp.compare.report.table import NAN_INF_COLUMNS, STATISTICS_COLUMNS, number
from tcmp.compare.report.writers import ReportChoice, chosen_formats
from tcmp.schemas.synth.faults import Fault, FaultKind
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

NAN_OP = "SoftmaxV2_2"  # as the demo: a NaN in token 1, spreading to everything downstream


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    faults = (
        Fault("layers.1/MatMul_1", FaultKind.REL_ERROR, magnitude=0.03),
        Fault(NAN_OP, FaultKind.NAN, tokens=(1,)),
    )
    config = ScenarioConfig(model=ModelConfig(layers=3), tokens=2, faults=faults, propagate_faults=True,
                            write_fusion_off=False)  # fmt: skip
    return write_scenario(tmp_path_factory.mktemp("report_files"), config)


def compare(scenario, out: Path, mode: DataMode):
    result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx, mode=mode), out,
                            formats=chosen_formats(ReportChoice(highlight=True)), keep_rows=True)  # fmt: skip
    report = result.ranks[0].report
    return result, report


@pytest.fixture(scope="module")
def statistics(scenario, tmp_path_factory):
    return compare(scenario, tmp_path_factory.mktemp("statistics"), DataMode.STATISTICS)


@pytest.fixture(scope="module")
def tensor(scenario, tmp_path_factory):
    return compare(scenario, tmp_path_factory.mktemp("tensor"), DataMode.TENSOR)


def csv_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


@contextmanager
def umask(mask: int):
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


# --- item 6: modes -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
def test_report_files_get_the_mode_the_umask_gives(scenario, tmp_path, mask, mode):
    with umask(mask):
        _, report = compare(scenario, tmp_path, DataMode.STATISTICS)
    files = [report.csv, report.unmatched, report.summary, report.xlsx, report.html]
    assert all(f.is_file() for f in files)
    assert {f.name: stat.S_IMODE(f.stat().st_mode) for f in files} == {f.name: mode for f in files}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f.name for f in files)  # no temporary left


# --- items 7, 8: numbers ---------------------------------------------------------------------------------------


def test_numbers_have_fixed_significant_digits_and_no_negative_zero():
    assert number(-0.0) == "0" and number(0.0) == "0"
    assert number(0.018065924756228924) == "0.018065925"  # 8 significant digits, rounded
    assert number(0.9999) == "0.9999" and number(1.0) == "1" and number(0.99999999) == "0.99999999"
    assert number(0.0099999996) == "0.0099999996"  # a MaxRelativeErr just under the 0.01 limit does not print as it
    assert number(-1234567890.0) == "-1.2345679e+09" and number(3.5e-12) == "3.5e-12"
    assert (number(math.nan), number(math.inf), number(-math.inf)) == ("NaN", "inf", "-inf")


@pytest.mark.parametrize("which", ["statistics", "tensor"])
def test_metric_cells_are_plain_numbers_in_every_mode(request, which):
    _, report = request.getfixturevalue(which)
    rows = csv_rows(report.csv)
    header = list(rows[0])
    first_metric, first_text = header.index("Bench Tensor Shape") + 1, header.index("Result")
    numeric = [h for h in header[first_metric:first_text] if h != "Requires_grad Consistent"]
    for row in rows:
        for column in numeric:
            cell = row[column]
            assert cell in ("N/A", "NaN", "inf", "-inf") or float(cell) == float(cell), (column, cell)
            assert not cell.endswith("%") and cell not in ("-0", "-0.0"), (column, cell)
            if cell not in ("N/A", "NaN", "inf", "-inf") and float(cell) != 0:
                digits = cell.lstrip("-").split("e")[0].replace(".", "").lstrip("0")
                assert len(digits) <= 8, (column, cell)


def test_statistics_relative_errors_are_fractions_of_the_stats_they_compare(statistics):
    _, report = statistics
    rows = [r for r in csv_rows(report.csv) if r["NormRelativeErr"] not in ("N/A", "NaN", "inf")]
    checked = 0
    for row in rows:
        for stat_name, column in (("max", "MaxRelativeErr"), ("l2norm", "NormRelativeErr")):
            n, b = float(row[f"NPU {stat_name}"]), float(row[f"Bench {stat_name}"])
            if abs(b) > 1e-3:
                # from the stats as written: 8 significant digits are each within 5e-8 of their value, relatively
                expected = abs(n - b) / abs(b)
                slack = 5e-8 * (abs(n) + abs(b)) / abs(b) + 5e-8 * expected
                assert abs(float(row[column]) - expected) <= slack, (row["API Name"], column)
                checked += 1
    assert checked > 100
    matmul = next(r for r in rows if r["API Name"] == "layers.1/MatMul_1.output.0")
    assert float(matmul["NormRelativeErr"]) == pytest.approx(0.03, rel=1e-3)  # the injected 3 %, as a fraction


def test_xlsx_holds_numbers_with_a_filter_a_frozen_header_and_fitting_widths(statistics):
    _, report = statistics
    rows = csv_rows(report.csv)
    sheet = openpyxl.load_workbook(report.xlsx).active
    header = [c.value for c in sheet[1]]
    assert header == list(rows[0])
    last = get_column_letter(len(header))
    assert sheet.auto_filter.ref == f"A1:{last}{len(rows) + 1}"
    assert sheet.freeze_panes == "A2"
    column = {name: i + 1 for i, name in enumerate(header)}
    for i, row in enumerate(rows, start=2):
        for name in ("Token", "Rank", "Max diff", "NormRelativeErr", "NPU max", "Bench l2norm", *NAN_INF_COLUMNS):
            cell = sheet.cell(row=i, column=column[name])
            if row[name] in ("N/A", "NaN", "inf", "-inf"):
                assert cell.data_type == "s" and cell.value == row[name]
            else:
                assert cell.data_type == "n" and cell.value == float(row[name]), (name, row[name], cell.value)
        assert sheet.cell(row=i, column=column["API Name"]).data_type == "s"
        assert sheet.cell(row=i, column=column["NormRelativeErr"]).number_format.endswith("%")
        assert sheet.cell(row=i, column=column["NPU max"]).number_format == "General"
    widths = {}
    for dimension in sheet.column_dimensions.values():  # openpyxl merges equal neighbours into one range
        for k in range(dimension.min, dimension.max + 1):
            widths[k] = dimension.width
    for name in ("API Name", "Data Name", "NPU max", "Err_message", "Accuracy Reached or Not"):
        longest = max(len(name), *(len(r[name]) for r in rows))
        assert min(longest, 80) <= widths[column[name]] <= 82, (name, longest, widths[column[name]])


def test_xlsx_shows_percentages_in_statistics_mode_only(statistics, tensor):
    """Tensor mode's MaxRelativeErr is the same fraction as statistics mode's, but msprobe writes it as a plain
    number: only statistics-mode relative errors are shown as percentages (issue 22, item 11)."""
    for (_, report), percent in ((statistics, True), (tensor, False)):
        rows = csv_rows(report.csv)
        sheet = openpyxl.load_workbook(report.xlsx).active
        column = {c.value: i + 1 for i, c in enumerate(sheet[1])}
        shown = [sheet.cell(row=i, column=column["MaxRelativeErr"]) for i in range(2, len(rows) + 2)]
        numbers = [c for c in shown if c.data_type == "n"]
        assert numbers and all(c.number_format.endswith("%") == percent for c in numbers), report.xlsx
        assert all(sheet.cell(row=i, column=column["NPU max"]).number_format == "General" for i in range(2, 12))


def test_summary_json_holds_numbers_as_numbers(statistics):
    _, report = statistics
    summary = json.loads(report.summary.read_text())
    worst = summary["worst_rows"]
    assert worst
    for row in worst:
        assert isinstance(row["Token"], int) and isinstance(row["Rank"], int)
        for name in (*STATISTICS_COLUMNS, "NPU max", "Bench l2norm"):
            assert row[name] is None or isinstance(row[name], float) or row[name] in ("NaN", "inf", "-inf")
        assert all(isinstance(row[name], int) for name in NAN_INF_COLUMNS)
    assert isinstance(summary["thresholds"]["cosine"], float)


# --- item 9: NaN and inf in statistics mode --------------------------------------------------------------------


def test_statistics_rows_carry_nan_and_inf_counts_and_the_nan_origin_heads_the_worst_rows(statistics):
    result, report = statistics
    rows = {(r["Token"], r["API Name"]): r for r in csv_rows(report.csv)}
    origin = rows[("1", f"{NAN_OP}.output.0")]
    size = math.prod(json.loads(origin["NPU Tensor Shape"]))
    injected = len(range(0, size, max(1, size // 4)))  # the synthetic writer: flat[:: size // 4] = NaN
    assert (origin["NPU NaN count"], origin["NPU inf count"]) == (str(injected), "0")
    assert (origin["Bench NaN count"], origin["Bench inf count"]) == ("0", "0")
    assert origin["Result"] == "FAIL" and origin["Accuracy Reached or Not"] == "No"
    assert math.isfinite(float(origin["NPU max"]))  # the stats are over the finite values: only the count tells
    assert rows[("1", f"{NAN_OP}.input.0")]["NPU NaN count"] == "0"
    assert rows[("0", f"{NAN_OP}.output.0")]["NPU NaN count"] == "0"  # token 0 has no NaN
    (rank,) = result.ranks
    downstream = [r for r in rank.rows if r.nan_inf_one_side]
    assert len(downstream) > 10  # the NaN spread: many rows have it on one side
    assert rank.worst[0].pair.api_name == f"{NAN_OP}.output.0" and rank.worst[0].pair.token == 1
    one_sided = [r.nan_inf_one_side for r in rank.worst]
    assert one_sided == sorted(one_sided, reverse=True)  # before any finite error


def test_tensor_mode_carries_the_counts_too(tensor):
    _, report = tensor
    rows = {(r["Token"], r["API Name"]): r for r in csv_rows(report.csv)}
    origin = rows[("1", f"{NAN_OP}.output.0")]
    assert int(origin["NPU NaN count"]) > 0 and origin["Bench NaN count"] == "0"
    assert rows[("0", "layers.1/MatMul_1.output.0")]["NPU NaN count"] == "0"


# --- item 10: Err_message ------------------------------------------------------------------------------------


def test_err_message_parts_are_separated(statistics):
    result, report = statistics
    rows = csv_rows(report.csv)
    (rank,) = result.ranks
    several = [r for r in rank.rows if len(r.messages) > 1]
    assert several
    by_key = {(r["Token"], r["API Name"]): r["Err_message"] for r in rows}
    for row in several:
        written = by_key[(str(row.pair.token), row.pair.api_name)]
        assert written.count("; ") == len(row.messages) - 1, written
        assert written.split("; ")[0] == row.messages[0].rstrip(".")
    consumer = next(r["Err_message"] for r in rows if r["Token"] == "1" and "via producer edge" in r["Err_message"]
                    and "NaN/inf" in r["Err_message"])  # fmt: skip
    assert consumer.startswith("via producer edge ") and "; NaN/inf in the NPU tensor only." in consumer
