"""The HTML page's 1 − Cosine chart is drawn from the full-precision cosine, not from the rounded CSV cell (issue 22,
item 11: drawn from cells, bf16 rounding noise showed as a two-level sawtooth). Expected values are recomputed here
from the dumped tensors themselves (read with numpy from the GE dump files the synthetic writer wrote)."""

from __future__ import annotations

import ast
import csv

import numpy as np
from test_report_page import payload

from tcmp.compare.execute.run import run_compare
from tcmp.compare.report.outcome import CompareOptions
from tcmp.schemas.dtypes import DataType
from tcmp.schemas.dump_records import IO
from tcmp.schemas.ge_dump import open_ge_dump
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario


def _tensor(root, label: str) -> np.ndarray:
    """A GE tensor by the report's real data name: '<file> <input|output> <index>'."""
    name, io, index = label.rsplit(" ", 2)
    path = next(root.rglob(name))
    reader = open_ge_dump(path)
    try:
        return np.asarray(reader.load(reader.dump.tensor(IO(io), int(index))).array).astype(np.float64)
    finally:
        reader.close()


def test_the_chart_plots_one_minus_cosine_at_full_precision(tmp_path):
    config = ScenarioConfig(model=ModelConfig(layers=1, dtype=int(DataType.DT_BF16)), tokens=1, ulp_noise=1)
    scenario = write_scenario(tmp_path / "dump", config)
    result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_ge), tmp_path / "report")
    written = result.ranks[0].report
    with written.csv.open(newline="") as handle:
        header, *rows = list(csv.reader(handle))
    data = payload(written.html)
    cosine, names = header.index("Cosine"), header.index("Data Name")
    assert len(data["dist"]) == len(rows)
    checked = coarse = 0
    for cells, dist in zip(rows, data["dist"]):
        if cells[cosine] in ("N/A", "NaN"):
            assert dist is None
            continue
        npu_name, bench_name = ast.literal_eval(cells[names])
        if bench_name.startswith("Cast("):  # a GE-inserted cast's bench is computed (Cast(its input)), no file
            assert dist is not None
            continue
        n, b = _tensor(scenario.target, npu_name).ravel(), _tensor(scenario.golden_ge, bench_name).ravel()
        expected = 1 - n @ b / (np.linalg.norm(n) * np.linalg.norm(b))
        assert abs(dist - expected) <= 1e-15 + 1e-9 * abs(expected), (cells[header.index("API Name")], dist, expected)
        from_cell = 1 - float(cells[cosine])
        assert abs(from_cell - dist) <= 1e-8  # the cell is the same number, to its 8 digits
        coarse += abs(from_cell - expected) > 1e-15 + 1e-9 * abs(expected)  # what a chart of the cells would miss
        checked += 1
    assert checked > 20 and coarse > 0
