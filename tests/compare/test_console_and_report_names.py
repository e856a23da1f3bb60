"""What `tcmp compare`'s console says when it exits 1 for files it could not read, what the reports of a dump
without rank directories are named, and where the max/min/mean/l2norm cells come from (issue 22, items 10 and
11): through the command line."""

from __future__ import annotations

import csv
import math

import numpy as np

from tcmp.schemas.dtypes import to_float32
from tcmp.schemas.ge_dump import open_ge_dump
from tcmp.schemas.synth.faults import Fault, FaultKind
from tcmp.schemas.synth.fx_writer import FxEra
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario


def compare(cli, target, golden, out, *extra):
    return cli("compare", "-tp", target, "-gp", golden, "-o", out, "--jobs", "1", *extra)


def test_an_unreadable_file_is_named_on_the_console_with_its_reason_and_where_the_rest_are(cli, tmp_path):
    s = write_scenario(tmp_path / "s", ScenarioConfig(model=ModelConfig(layers=1), tokens=1))
    ge_files = sorted(p for p in s.target.rglob("*") if p.is_file() and p.name[0].isupper())
    cut = ge_files[:4]
    for path in cut:
        path.write_bytes(path.read_bytes()[:40])  # cut short inside its header
    out = tmp_path / "out"
    result = compare(cli, s.target, s.golden_fx, out)
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    named = [line for line in lines if any(str(p) in line for p in cut)]
    assert len(named) == 3 and all("header not fully written (or the file is cut)" in line for line in named)
    (unmatched,) = out.glob("*_unmatched.csv")
    assert any(f"1 more unreadable item in {unmatched}" in line for line in lines)


def test_a_dump_without_rank_directories_gets_report_names_without_a_rank(cli, tmp_path):
    config = ScenarioConfig(model=ModelConfig(layers=1), tokens=1, ge_rank_dirs=False, fx_era=FxEra.CWD_DATA_DUMP)
    s = write_scenario(tmp_path / "s", config)
    assert not [p for p in s.target.rglob("worldsize*")]
    out = tmp_path / "out"
    result = compare(cli, s.target, s.golden_fx, out)
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in out.iterdir())
    assert len(names) == 4 and all(n.startswith("tcmp_compare_2") for n in names), names


def test_an_inf_is_a_value_of_the_stats_columns_and_a_nan_only_a_count(cli, tmp_path):
    """What the README says the summarizer gives for a raw file: max/min/mean/l2norm over the non-NaN values."""
    faults = (Fault("MatMul_0", FaultKind.INF),)
    s = write_scenario(tmp_path / "s", ScenarioConfig(model=ModelConfig(layers=1), tokens=1, faults=faults))
    (path,) = (p for p in s.target.rglob("*.MatMul_0.*") if p.is_file())
    with open_ge_dump(path) as reader:
        values = to_float32(reader.load(reader.dump.outputs[0], nd=False).array).astype(np.float64).ravel()
    finite = values[np.isfinite(values)]
    assert np.isposinf(values).any() and finite.size  # what the fault wrote: some +inf among finite values
    out = tmp_path / "out"
    result = compare(cli, s.target, s.golden_fx, out, "--data-mode", "statistics")
    assert result.exit_code == 0, result.output
    (table,) = (p for p in out.glob("tcmp_compare_*.csv") if not p.name.endswith("_unmatched.csv"))
    with open(table, newline="", encoding="utf-8") as fh:
        row = next(r for r in csv.DictReader(fh) if r["API Name"] == "MatMul_0.output.0")
    assert row["NPU max"] == "inf" and row["NPU mean"] == "inf" and row["NPU l2norm"] == "inf"
    assert math.isclose(float(row["NPU min"]), float(finite.min()), rel_tol=1e-6)
    assert int(row["NPU inf count"]) == int(np.isinf(values).sum()) and row["NPU NaN count"] == "0"
