"""--jobs beyond the CPUs this process may use is capped by the command line, with a note (more processes only queue
for the same CPUs, each after its own fork and start-up); --oversubscribe runs them all. The library takes the jobs
it is given (tests of the workers' life cycle start more of them than there are CPUs)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tcmp.cli import application
from tcmp.cli.options import capped_jobs
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

# the real command line with this process's affinity narrowed to one CPU, as `taskset -c N tcmp ...` would
ON_ONE_CPU = "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); from tcmp.cli import main; main()"


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    return write_scenario(tmp_path_factory.mktemp("jobs"), ScenarioConfig(model=ModelConfig(layers=1), tokens=2))


@pytest.mark.parametrize(
    ("requested", "cpus", "used", "note"),
    [
        (1000, 2, 2, "--jobs 1000: capped at the 2 CPUs this process may use"),
        (5, 1, 1, "--jobs 5: capped at the 1 CPU this process may use"),
        (3, 3, 3, None),
        (2, 4, 2, None),
    ],
)
def test_jobs_over_the_cpus_are_capped_with_a_note(requested, cpus, used, note):
    assert capped_jobs(requested, cpus) == (used, note)


def _compare_on_one_cpu(scenario, out, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-c", ON_ONE_CPU, "compare", "-tp", str(scenario.target), "-gp",
               str(scenario.golden_fx), "-o", str(out), "--jobs", "3", "-v", *args]  # fmt: skip
    env = {**os.environ, "COLUMNS": "300"}  # the note on one line
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, cwd=out.parent)


def test_the_cli_on_one_cpu_runs_one_process_and_says_so(scenario, tmp_path):
    done = _compare_on_one_cpu(scenario, tmp_path / "capped")
    assert done.returncode in (0, 1), done.stderr
    assert "note: --jobs 3: capped at the 1 CPU this process may use; --oversubscribe runs them all" in done.stderr
    assert "with 1 process\n" in done.stderr, done.stderr


def test_oversubscribe_runs_every_process_asked_for(scenario, tmp_path):
    done = _compare_on_one_cpu(scenario, tmp_path / "all", "--oversubscribe")
    assert done.returncode in (0, 1), done.stderr
    assert "capped" not in done.stderr
    assert "with 3 processes" in done.stderr, done.stderr


def test_demo_jobs_are_capped_too(cli, tmp_path, monkeypatch):
    import tcmp.daemon.demo

    asked: list[int] = []

    class Stop(Exception):
        pass

    def run_demo(root, jobs, progress):
        asked.append(jobs)
        raise Stop

    monkeypatch.setattr(application, "usable_cpus", lambda: 2)
    monkeypatch.setattr(tcmp.daemon.demo, "run_demo", run_demo)
    result = cli("demo", tmp_path / "demo", "--jobs", "7")
    assert isinstance(result.exception, Stop) and asked == [2]
    assert "note: --jobs 7: capped at the 2 CPUs this process may use" in result.stderr, result.stderr
