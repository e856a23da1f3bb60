"""A compare runs with the cyclic collector at `host.COMPARE_GC_THRESHOLDS` (issue 26: at Python's defaults the
collector took a quarter of a 10K-node compare's CPU), in the main process and in every worker's unit, and leaves
the process's thresholds as they were."""

from __future__ import annotations

import gc

import pytest

from tcmp.compare.execute import pairs
from tcmp.compare.execute.run import collect_inputs, run_compare
from tcmp.compare.execute.units import plan_bindings
from tcmp.compare.judge.metrics import Mode
from tcmp.compare.judge.verdict import Thresholds
from tcmp.compare.report.outcome import CompareOptions
from tcmp.schemas.host import COMPARE_GC_THRESHOLDS
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    config = ScenarioConfig(model=ModelConfig(layers=1), tokens=2, write_fusion_off=False)
    return write_scenario(tmp_path_factory.mktemp("gc"), config)


def test_pairs_are_compared_at_the_compare_thresholds_and_the_process_keeps_its_own(scenario, monkeypatch):
    seen = set()
    evaluate = pairs.evaluate
    monkeypatch.setattr(pairs, "evaluate", lambda *a: seen.add(gc.get_threshold()) or evaluate(*a))
    before = (900, 11, 12)
    old = gc.get_threshold()
    gc.set_threshold(*before)
    try:
        result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx, jobs=1))
        assert gc.get_threshold() == before
    finally:
        gc.set_threshold(*old)
    assert result.ranks[0].counts.rows > 0 and seen == {COMPARE_GC_THRESHOLDS}


def test_a_unit_compared_alone_as_a_worker_does_is_too(scenario, monkeypatch):
    seen = set()
    evaluate = pairs.evaluate
    monkeypatch.setattr(pairs, "evaluate", lambda *a: seen.add(gc.get_threshold()) or evaluate(*a))
    inputs = collect_inputs(CompareOptions(scenario.target, scenario.golden_fx, jobs=1))
    units, _ = plan_bindings(inputs.bindings, inputs)
    old = gc.get_threshold()
    pairs.compare_unit(units[0], Mode.TENSOR, Thresholds())
    assert seen == {COMPARE_GC_THRESHOLDS} and gc.get_threshold() == old
