"""--jobs beyond the CPUs this process may use is capped, with a note: more processes only queue for the same CPUs
(each after its own fork and start-up)."""

from __future__ import annotations

import pytest

from tcmp.schemas import host
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    return write_scenario(tmp_path_factory.mktemp("jobs"), ScenarioConfig(model=ModelConfig(layers=1), tokens=2))


@pytest.mark.parametrize(("requested", "cpus", "used"), [(1000, 2, 2), (3, 3, 3), (2, 4, 2)])
def test_jobs_over_the_usable_cpus_are_capped_with_a_note(cli, scenario, tmp_path, monkeypatch, requested, cpus,
                                                          used):  # fmt: skip
    monkeypatch.setattr(host, "usable_cpus", lambda: cpus)
    out = tmp_path / f"out{requested}"
    result = cli("compare", "-m", "torchair", "-tp", scenario.target, "-gp", scenario.golden_fx, "-o", out,
                 "--jobs", requested, "-v")  # fmt: skip
    assert result.exit_code in (0, 1), result.output
    note = f"--jobs {requested} capped at {cpus}"
    assert (note in result.stderr) is (requested > cpus), result.stderr
    assert f"with {used} processes" in result.stderr, result.stderr
