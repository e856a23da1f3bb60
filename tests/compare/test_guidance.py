"""What the compare tells a user whose inputs are not what it needs (issue 18, items 12 and 13): a target path one
level too deep is sent to the dump root, not to dump again; the two dumps given the wrong way round are named as
such (an FX dump as the target; a fusion-off GE dump as the target of a fusion-on golden, told by the fused ops)."""

from __future__ import annotations

import shutil

import pytest

from tcmp.compare.execute.run import run_compare
from tcmp.compare.records import CompareError
from tcmp.compare.report.outcome import CompareOptions
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    # two layers: one fused op of type AutomaticBufferFusionOp, one FusedRmsNorm told by its joined name
    return write_scenario(tmp_path_factory.mktemp("guidance"), ScenarioConfig(model=ModelConfig(layers=2), tokens=1))


def _too_deep(scenario):
    rank = next(scenario.target.glob("worldsize*"))
    time_dir = next(rank.glob("[0-9]" * 14))
    step = next(time_dir.glob("*/graph_1_0/*/0"))
    return {"rank": rank, "time": time_dir, "step": step}


@pytest.mark.parametrize("level", ["rank", "time", "step"])
def test_a_target_one_level_too_deep_is_sent_to_the_dump_root(scenario, tmp_path, monkeypatch, cli, level):
    monkeypatch.chdir(tmp_path)  # no graph files in the working directory either
    target = _too_deep(scenario)[level]
    with pytest.raises(CompareError) as raised:
        run_compare(CompareOptions(target, scenario.golden_fx))
    message = str(raised.value)
    graph = next(scenario.target.glob("dynamo_original_graph_*")).name
    assert raised.value.usage
    assert message.endswith(f"a dump whose root holds {graph}: give the dump root `{scenario.target}`")
    assert "graph_dump" not in message  # not sent to switch torchair's graph dump on and dump again
    result = cli("compare", "-tp", target, "-gp", scenario.golden_fx, "-o", tmp_path / "out", "--jobs", "1")
    assert result.exit_code == 2 and "give the dump root" in result.stderr
    assert not list((tmp_path / "out").iterdir())  # no report


def test_a_fusion_off_golden_with_a_too_deep_target_is_compared_by_name_and_told_the_root(scenario, tmp_path,
                                                                                        monkeypatch):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    result, _ = run_compare(CompareOptions(_too_deep(scenario)["rank"], scenario.golden_ge, jobs=1))
    assert result.ranks[0].counts.rows > 0
    assert any(f"give the dump root `{scenario.target}`" in note for note in result.notes)


def test_the_dump_root_without_its_graph_files_is_still_named(scenario, tmp_path, monkeypatch):
    """Graph files torchair wrote elsewhere (its graph_dump.path): the root is named by its msprobe name."""
    copy = tmp_path / "copy" / "msprobe_ge_dump"
    shutil.copytree(scenario.target, copy, ignore=shutil.ignore_patterns("dynamo_*"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CompareError, match=r"lies inside the dump root `.*/copy/msprobe_ge_dump`: give the dump root"):
        run_compare(CompareOptions(next(copy.glob("worldsize*")), scenario.golden_fx))


def test_an_fx_dump_given_as_the_target_is_named_with_the_swap(scenario, tmp_path, cli):
    with pytest.raises(CompareError, match=r"holds an FX dump and the golden path a GE dump: -tp/-gp look swapped"):
        run_compare(CompareOptions(scenario.golden_fx, scenario.target))
    other = write_scenario(tmp_path / "other", ScenarioConfig(model=ModelConfig(layers=1), tokens=1))
    with pytest.raises(CompareError, match=r"holds an FX dump \(.npy files\), not a GE dump: -tp/-gp may be swapped"):
        run_compare(CompareOptions(scenario.golden_fx, other.golden_fx))
    result = cli("compare", "-tp", scenario.golden_fx, "-gp", scenario.target, "-o", tmp_path / "out")
    assert result.exit_code == 2 and "look swapped" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_fusion_on_golden_of_a_fusion_off_target_is_told_by_its_fused_ops(scenario, tmp_path, cli):
    fused = {g.name for g in scenario.graphs[0].fusion_groups}
    assert len(fused) == 2  # the scenario's: one of each kind
    result, _ = run_compare(CompareOptions(scenario.golden_ge, scenario.target, jobs=1))
    warning = result.notes[0]
    assert warning.startswith("the golden looks fusion-on and the target fusion-off: 2 golden ops are fusions")
    assert "-tp/-gp may be swapped" in warning and any(name in warning for name in fused)
    assert result.golden_fused
    shown = cli("compare", "-tp", scenario.golden_ge, "-gp", scenario.target, "-o", tmp_path, "--jobs", "1")
    assert shown.exit_code == 0, shown.output
    assert "golden: GE dump that looks taken with fusion on" in shown.stdout
    assert "fusion-off GE dump" not in shown.stdout  # the label no longer says what the dump is not
    # the right way round: no warning
    right, _ = run_compare(CompareOptions(scenario.target, scenario.golden_ge, jobs=1))
    assert not right.golden_fused and not any("fusion-on" in note for note in right.notes)


def test_fused_ops_by_type_joined_names_and_truncated_names():
    """Hand-made names (docs/formats.md, "Fused names": UB fusions are named by joining their members' names, or
    `{first}_ub_fusion` past 512 characters; automatic UB fusion has the type AutomaticBufferFusionOp)."""
    from tcmp.compare.collect.guidance import fused_ops, golden_looks_fused

    unfused = ["MatMul_0", "Add_1", "Conv_1", "Relu_2", "Mul_3"]
    ops = [
        ("MatMul_0Add_1", "FusedMatMulAdd"),  # joined names
        ("Conv_1_ub_fusion", "Conv2D"),  # truncated
        ("Whatever_9", "AutomaticBufferFusionOp"),  # by type alone
        ("Relu_2", "Relu"),  # in both dumps
        ("Mul_3X", "Mul"),  # not a fusion: no complete split into the other's names
    ]
    assert fused_ops(ops, unfused) == [("Conv_1_ub_fusion", "Conv2D"), ("MatMul_0Add_1", "FusedMatMulAdd"),
                                       ("Whatever_9", "AutomaticBufferFusionOp")]  # fmt: skip
    fusion_off = [(n, "T") for n in unfused]
    assert "may be swapped" in golden_looks_fused(fusion_off, ops)
    assert golden_looks_fused(ops, fusion_off) == ""  # fusion-on target, fusion-off golden: as it should be
    assert golden_looks_fused(ops, ops) == ""  # the same ops: nothing to tell
