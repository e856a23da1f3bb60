"""`tcmp demo`: a synthetic GE dump with a few injected faults and its golden FX dump, compared end to end."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import Fault, FaultKind, ScenarioConfig, write_scenario

from .run import CompareOptions, CompareResult, run_compare

DEMO_FAULTS = (
    Fault("layers.1/MatMul_1", FaultKind.REL_ERROR, magnitude=0.03),
    Fault("SoftmaxV2_2", FaultKind.NAN, tokens=(1,)),
    Fault("Gelu_0", FaultKind.TRUNCATE, tokens=(0,)),
)


@dataclass(frozen=True)
class DemoResult:
    root: Path
    faults: tuple[str, ...]
    result: CompareResult


def run_demo(root: Path, jobs: int = 1) -> DemoResult:
    """Write the dump pair under `root`, compare it, write the reports into `root/report`."""
    config = ScenarioConfig(
        model=ModelConfig(layers=3), tokens=2, faults=DEMO_FAULTS, propagate_faults=True, write_fusion_off=False
    )
    scenario = write_scenario(root, config)
    result, _ = run_compare(
        CompareOptions(scenario.target, scenario.golden, jobs=jobs), root / "report", highlight=True
    )
    faults = tuple(
        f"{f.op} ({f.kind.value}{'' if f.tokens is None else f', token {list(f.tokens)}'})" for f in DEMO_FAULTS
    )
    return DemoResult(root, faults, result)
