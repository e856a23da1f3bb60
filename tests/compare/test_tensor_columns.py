"""Tensor mode's metric columns come from one declaration (issue 24): the `TensorMetrics` fields that name a
column. Each declared cell shows up in its column of the CSV (and so of the page, which reads the CSV's text), as a
number in the xlsx and the summary JSON, and as `N/A` where a pair is not compared; a field added with a column
name is covered by these tests without editing them."""

from __future__ import annotations

from dataclasses import fields, replace

import numpy as np
import pytest

from tcmp.compare.execute.run import run_compare
from tcmp.compare.judge.metrics import NA, Mode, TensorMetrics, tensor_metrics
from tcmp.compare.report.outcome import CompareOptions
from tcmp.compare.report.table import NUMBER_COLUMNS, columns, row_cells, typed
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

DECLARED = [f for f in fields(TensorMetrics) if "column" in f.metadata]


@pytest.fixture(scope="module")
def row(tmp_path_factory):
    config = ScenarioConfig(model=ModelConfig(layers=1), tokens=1, write_fusion_off=False)
    scenario = write_scenario(tmp_path_factory.mktemp("tensor_columns"), config)
    result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx), keep_rows=True)
    return next(r for r in result.ranks[0].rows if r.tensor is not None)


def test_the_tensor_columns_are_the_records_declared_columns_in_order():
    names = tuple(f.metadata["column"] for f in DECLARED)
    # today's: msprobe's six, then tcmp's MaxUlpErr
    assert names == ("Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
                     "Five Thousandth Err Ratio", "MaxUlpErr")  # fmt: skip
    header = columns(Mode.TENSOR)
    start = header.index("Bench Tensor Shape") + 1
    assert header[start : start + len(names) + 1] == (*names, "Requires_grad Consistent")
    assert all(name in NUMBER_COLUMNS for name in names)
    assert not set(names) & set(columns(Mode.MD5))


@pytest.mark.parametrize("declared", DECLARED, ids=lambda f: f.name)
def test_each_declared_cell_lands_in_its_column_of_the_csv_the_xlsx_and_the_summary(row, declared):
    metrics = TensorMetrics(**{declared.name: 0.25}, messages=("m",))
    header = columns(Mode.TENSOR)
    cells = row_cells(replace(row, tensor=metrics), Mode.TENSOR)
    values = typed(header, cells)  # what the xlsx and the summary JSON hold
    for f in DECLARED:
        at = header.index(f.metadata["column"])
        assert (cells[at], values[at]) == (("0.25", 0.25) if f is declared else ("N/A", None))
    assert metrics.cells == tuple(0.25 if f is declared else NA for f in DECLARED)


def test_a_pair_that_cannot_be_compared_is_na_in_every_declared_column(row):
    mismatch = tensor_metrics(np.ones(3, np.float32), np.ones(4, np.float32))
    assert mismatch.shape_mismatch and all(getattr(mismatch, f.name) is NA for f in DECLARED)
    header = columns(Mode.TENSOR)
    for tensor in (mismatch, None):  # None: no tensor at all (a file that could not be read)
        cells = row_cells(replace(row, tensor=tensor), Mode.TENSOR)
        assert [cells[header.index(f.metadata["column"])] for f in DECLARED] == ["N/A"] * len(DECLARED)
