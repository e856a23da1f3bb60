"""A local compare of several ranks ends as a cluster compare does: a line per rank and the earliest divergence
across ranks (report.divergences.ranks_lines, one function for both)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tcmp.schemas.synth.faults import Fault, FaultKind
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario


@pytest.fixture(scope="module")
def three_ranks(tmp_path_factory):
    faults = (
        Fault("MatMul_0", FaultKind.REL_ERROR, magnitude=0.5, tokens=(1,), ranks=(0,)),  # rank 0: only in token 1
        Fault("MatMul_0", FaultKind.REL_ERROR, magnitude=0.5, tokens=(0,), ranks=(2,)),  # rank 2: in token 0
    )
    config = ScenarioConfig(model=ModelConfig(layers=1), ranks=3, tokens=2, faults=faults)
    return write_scenario(tmp_path_factory.mktemp("ranks"), config)


def test_a_local_multi_rank_compare_ends_with_a_line_per_rank_and_the_earliest_divergence(three_ranks, tmp_path):
    done = subprocess.run([sys.executable, "-m", "tcmp", "compare", "-tp", str(three_ranks.target), "-gp",
                           str(three_ranks.golden_fx), "-o", str(tmp_path), "-j", "1", "--no-html"],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith("ranks: rank"))
    per_rank = {line.split()[1]: line for line in lines[start + 1 : start + 4]}
    assert sorted(per_rank) == ["0", "1", "2"]
    assert per_rank["0"].endswith("tokens 1: MatMul_0") and per_rank["1"].endswith("none")
    assert per_rank["2"].endswith("tokens 0: MatMul_0")
    # token 0 comes before token 1: rank 2's divergence is the earliest, and no other rank's in token 0 is that op
    assert lines[start + 4].startswith("earliest divergence: rank 2, token 0, op MatMul_0")
    assert lines[start + 4].endswith("first divergence there on ranks 2")
    assert start + 5 == len(lines)  # the compare ends with them
