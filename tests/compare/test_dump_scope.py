"""Dump scope (issue 25, item 3): golden tensors of ops GE was not told to dump are out of scope, not without a
partner; an op selected but missing still has no partner.

The target is the synthetic writer's clean dump with only the files of the selected ops kept, as GE writes only
those (DumpProperties::IsNeedDump: a dump_list model's layers are op names). The options file has torchair's form
(`_set_dump_options_json`: {"dump": {..., "dump_list": [{"model_name": <GE graph name>, "layer": [...]}]}}).
"""

from __future__ import annotations

import json
import os

import pytest

from tcmp.compare.collect.scope import NOT_SELECTED
from tcmp.compare.execute.run import run_compare
from tcmp.compare.records import CompareError, Role, UnmatchedKind
from tcmp.compare.report.outcome import CompareOptions
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

SELECTED = ("Gelu_0", "MatMul_0", "SoftmaxV2_0")
MISSING = "SoftmaxV2_0"  # selected, but its file is gone: still no partner


@pytest.fixture(scope="module")
def scoped(tmp_path_factory):
    root = tmp_path_factory.mktemp("scope")
    scenario = write_scenario(root, ScenarioConfig(model=ModelConfig(layers=1), tokens=1))
    for path in list(scenario.target.rglob("*")):
        fields = path.name.split(".")
        is_ge_file = path.is_file() and len(fields) == 5 and fields[-1].isdigit()
        if is_ge_file and (fields[1] not in SELECTED or fields[1] == MISSING):
            path.unlink()
    options = root / "options.json"
    dump = {"dump_path": str(scenario.target), "dump_list": [{"model_name": "graph_1", "layer": list(SELECTED)}]}
    options.write_text(json.dumps({"dump": dump}))
    return scenario, options


def _golden_outputs(result, node_prefix: str):
    return [
        u
        for rank in result.ranks
        for u in rank.unmatched
        if u.role is Role.GOLDEN and u.io is not None and u.io.value == "output" and u.op_name.startswith(node_prefix)
    ]


def test_unselected_ops_are_out_of_scope_and_selected_missing_stay_no_partner(scoped):
    scenario, options = scoped
    with_scope, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx, dump_options=options),
                                keep_rows=True)  # fmt: skip
    without, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx), keep_rows=True)
    (rank,) = with_scope.ranks
    assert {r.pair.op_name for r in rank.rows} == {"Gelu_0", "MatMul_0"}  # the selected ops still pair
    kinds = {(u.op_name, u.index): (u.kind, u.reason) for u in _golden_outputs(with_scope, "")}
    before = {(u.op_name, u.index): u.kind for u in _golden_outputs(without, "")}
    out_of_scope = {k for k, (kind, why) in kinds.items() if kind is UnmatchedKind.OUT_OF_SCOPE and why == NOT_SELECTED}
    assert out_of_scope, kinds
    # without the options file, those very tensors have no partner (the old behaviour)
    assert all(before[k] is UnmatchedKind.NO_PARTNER for k in out_of_scope)
    # the node of the selected SoftmaxV2_0, whose file is missing, is not among them and still has no partner
    softmax = [k for k, (kind, _) in kinds.items() if "softmax" in k[0].lower()]
    assert softmax and all(kinds[k][0] is UnmatchedKind.NO_PARTNER for k in softmax)
    assert not [k for k, (kind, _) in kinds.items() if kind is UnmatchedKind.NO_PARTNER and k not in softmax]
    assert any(f"dump scope from {options}" in n for n in with_scope.notes)


def test_options_found_in_the_working_directory(scoped, tmp_path, monkeypatch):
    scenario, options = scoped
    (tmp_path / "ge_dump_data_json").mkdir()
    found = tmp_path / "ge_dump_data_json" / f"dump_options_worldsize1_rank0_pid{os.getpid()}.json"
    found.write_text(options.read_text())
    monkeypatch.chdir(tmp_path)
    result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx), keep_rows=True)
    assert any(u.reason == NOT_SELECTED for rank in result.ranks for u in rank.unmatched)
    assert any(str(found) in n for n in result.notes)


def test_malformed_given_options_is_a_usage_error(scoped, tmp_path):
    scenario, _ = scoped
    bad = tmp_path / "bad.json"
    bad.write_text('{"dump": {"dump_list": "Add"}}')
    with pytest.raises(CompareError, match="dump_list") as info:
        run_compare(CompareOptions(scenario.target, scenario.golden_fx, dump_options=bad))
    assert info.value.usage


def test_cli_dump_options(cli, scoped, tmp_path):
    scenario, options = scoped
    ok = cli("compare", "-tp", scenario.target, "-gp", scenario.golden_fx, "-o", tmp_path, "--jobs", "1",
             "--dump-options", options)  # fmt: skip
    assert ok.exit_code == 0, ok.output
    unmatched = next(tmp_path.glob("*_unmatched.csv")).read_text()
    assert f"out of scope,{NOT_SELECTED}" in unmatched
    bad = tmp_path / "bad.json"
    bad.write_text("[" * 1000)
    refused = cli("compare", "-tp", scenario.target, "-gp", scenario.golden_fx, "-o", tmp_path, "--jobs", "1",
                  "--dump-options", bad)  # fmt: skip
    assert refused.exit_code == 2 and "nested deeper" in refused.output
