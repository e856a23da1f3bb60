"""A compare's progress moves inside its units: the share of a unit's pairs compared reaches the callback from the
main process and, through a queue, from the workers."""

from __future__ import annotations

import queue

import pytest

from tcmp.compare.collect.inputs import collect
from tcmp.compare.execute import local_pool, progress, units
from tcmp.compare.execute.run import run_compare
from tcmp.compare.judge.metrics import Mode
from tcmp.compare.judge.verdict import Thresholds
from tcmp.compare.report.outcome import CompareOptions
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario


@pytest.fixture(scope="module")
def two_tokens(tmp_path_factory):
    root = tmp_path_factory.mktemp("progress")
    return write_scenario(root, ScenarioConfig(tokens=2, model=ModelConfig(layers=2), write_fusion_off=False))


def _assert_moves_within_units(seen: list[tuple[float, int]], units: int) -> None:
    assert seen and {total for _, total in seen} == {units}
    done = [d for d, _ in seen]
    assert done == sorted(done) and done[-1] == pytest.approx(units)
    assert any(not float(d).is_integer() for d in done), done  # some report came from inside a unit


@pytest.mark.parametrize("jobs", [1, 2])
def test_progress_counts_the_share_of_each_unit_done(two_tokens, monkeypatch, jobs):
    monkeypatch.setattr(progress, "REPORT_INTERVAL_S", 0.0)  # every pair reports (workers fork with it set)
    seen: list[tuple[float, int]] = []
    result, _ = run_compare(
        CompareOptions(two_tokens.target, two_tokens.golden_fx, jobs=jobs), progress=lambda d, t: seen.append((d, t))
    )
    assert sum(r.counts.rows for r in result.ranks) > 0
    _assert_moves_within_units(seen, units=2)


def test_a_late_report_never_moves_a_finished_unit_back():
    reports: queue.Queue = queue.Queue()  # what the tracker reads: the pool's queue, or any with get_nowait
    seen: list[tuple[float, int]] = []
    tracker = progress.ProgressTracker(3, lambda d, t: seen.append((d, t)), reports)
    tracker.finished(0)
    reports.put((1, 0, 0.25))  # unit 1 split in two: its first part half done
    reports.put((1, 1, 0.125))  # its second part a quarter done
    reports.put((0, 0, 0.25))  # late: unit 0 is done
    reports.put((1, 0, 0.2))  # late: part 0 of unit 1 went further already
    tracker.poll()
    assert seen == [(1.0, 3), (1.375, 3)]  # unit 0 finished, unit 1 three eighths done, unit 2 not started
    assert tracker.done == 1.375


def test_outside_a_pool_a_unit_has_no_worker_report():
    assert progress.worker_report(0) is None


def test_a_unit_compared_in_a_worker_reports_through_the_pools_queue(two_tokens):
    inputs = collect(two_tokens.target, two_tokens.golden_fx)
    unit = units.plan_units(inputs.bindings[0], inputs)[0][0]
    with local_pool.compare_workers(2) as workers:
        assert workers is not None
        result = workers.pool.submit(local_pool.compare_unit_in_worker, 7, unit, Mode.TENSOR, Thresholds(), False)
        assert result.result(timeout=120).counts.rows > 0
        number, part, share = workers.progress.get(timeout=10)  # a unit's first report always goes out
    assert (number, part) == (7, 0) and 0 < share <= 1
