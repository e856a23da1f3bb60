"""The one driver (issue 24): the local pool and the Ray executor implement every member of `UnitExecutor`, the
driver reads nothing else of an executor, and an executor that has only those members runs a compare to the same
report files as the local compare (a rank it reports unfinished gets none)."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

from tcmp.compare.cluster.inventory import ClusterPlan, RankPlace
from tcmp.compare.cluster.ray_executor import Node, RayExecutor
from tcmp.compare.collect.binding import GoldenKind
from tcmp.compare.execute import driver
from tcmp.compare.execute.driver import PlannedCompare, drive
from tcmp.compare.execute.executor import NotCompared, UnitDone, UnitExecutor
from tcmp.compare.execute.local_pool import LocalPool
from tcmp.compare.execute.pairs import compare_unit
from tcmp.compare.execute.run import collect_inputs, directory_items, orphans_batch, run_compare, summary_only_dirs
from tcmp.compare.execute.units import plan_bindings
from tcmp.compare.report.outcome import CompareOptions, UnmatchedBatch
from tcmp.compare.report.writers import ReportChoice, chosen_formats
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import Fault, FaultKind, ScenarioConfig, write_scenario

PROTOCOL_MEMBERS = {"progress_queue", "run", "unfinished"}


NO_PAGE = chosen_formats(ReportChoice(highlight=False, html=False))


def test_the_protocol_declares_progress_queue_run_and_unfinished():
    declared = {name for name in vars(UnitExecutor) if not name.startswith("_")}
    assert declared == PROTOCOL_MEMBERS


def test_both_executors_implement_the_protocol():
    local = LocalPool(None, 1, lambda number: UnmatchedBatch.of([], False))
    plan = ClusterPlan((RankPlace(0, 2, ("a" * 8,)),), GoldenKind.FX, False, 0, 2, (), ())
    ray = RayExecutor(plan, [Node("a" * 8, "10.0.0.1", 0)], CompareOptions(Path("t"), Path("g")))
    assert isinstance(local, UnitExecutor) and isinstance(ray, UnitExecutor)
    assert local.progress_queue is None and local.unfinished == ()
    # held by a node without CPUs only: not compared, said before any unit runs
    assert ray.unfinished == (NotCompared(0, "only nodes without CPUs for Ray tasks hold it"),)


def executor_attributes(function) -> set[str]:
    """The attributes `function` reads of its parameter `executor`, from its source."""
    tree = ast.parse(inspect.getsource(function))
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "executor"
    }


def test_the_driver_uses_only_what_the_protocol_declares():
    used = executor_attributes(driver.drive)
    assert used and used <= PROTOCOL_MEMBERS
    # nothing else of the module touches an executor
    others = [f for name, f in vars(driver).items() if inspect.isfunction(f) and f.__module__ == driver.__name__]
    assert all(f is driver.drive or not executor_attributes(f) for f in others)


class ProtocolOnly:
    """An executor with the protocol's members and nothing else (no instance attributes either): units compared
    one after another in this process, the ranks in `skip` left unfinished."""

    __slots__ = ()

    def __init__(self) -> None:
        pass

    progress_queue = None

    def run(self, units, job, tracker):
        for number, unit in enumerate(units):
            if unit.rank in SKIP:
                continue
            result = compare_unit(unit, job.mode, job.thresholds, job.keep_rows, tracker.report_for(number))
            tracker.finished(number)
            yield number, UnitDone(result, LISTED_AFTER[0](number))

    @property
    def unfinished(self):
        return tuple(NotCompared(rank, "skipped by the test") for rank in sorted(SKIP))


SKIP: set = set()
LISTED_AFTER: list = [None]


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    faults = (Fault("MatMul_0", FaultKind.REL_ERROR, magnitude=0.05),)
    config = ScenarioConfig(model=ModelConfig(layers=1), tokens=2, ranks=2, faults=faults, write_fusion_off=False)
    return write_scenario(tmp_path_factory.mktemp("driver"), config)


STAMP = re.compile(rb"_\d{14}")  # the second the reports were written, in their names


def report_files(directory: Path) -> dict[str, bytes]:
    """The report files without their time stamp and directory (which the summary names), by name."""
    return {
        STAMP.sub(b"", path.name.encode()).decode(): STAMP.sub(b"", path.read_bytes().replace(bytes(directory), b"DIR"))
        for path in sorted(directory.iterdir())
    }


def drive_protocol_only(options: CompareOptions, out: Path, skip: set):
    inputs = collect_inputs(options)
    units, orphans_after = plan_bindings(inputs.bindings, inputs)
    planned = PlannedCompare(inputs.ranks, inputs.golden_kind, inputs.golden_fused, inputs.notes,
                             directory_items(inputs), inputs.bindings, *summary_only_dirs(inputs))  # fmt: skip
    SKIP.clear()
    SKIP.update(skip)
    LISTED_AFTER[0] = lambda number: orphans_batch(orphans_after.get(number, ()), inputs, False)
    executor = ProtocolOnly()
    with pytest.raises(AttributeError):
        executor.anything_else = 1  # the driver can read nothing the class does not declare
    return drive(planned, units, executor, options, out, formats=NO_PAGE, progress=None, keep_rows=False)


def test_a_protocol_only_executor_writes_the_local_compares_reports(scenario, tmp_path):
    options = CompareOptions(scenario.target, scenario.golden_fx, jobs=1)
    run_compare(options, tmp_path / "local", formats=NO_PAGE)
    done = drive_protocol_only(options, tmp_path / "driven", set())
    local, driven = report_files(tmp_path / "local"), report_files(tmp_path / "driven")
    assert len(local) >= 4 and any("rank1" in name for name in local)  # both ranks' CSV, unmatched, summary
    assert driven == local
    assert done.unfinished == () and [r.rank for r in done.result.ranks] == [0, 1]
    assert done.report_stamp is not None and all(done.report_stamp in p.name for p in (tmp_path / "driven").iterdir())


def test_a_rank_the_executor_did_not_finish_gets_no_reports(scenario, tmp_path):
    options = CompareOptions(scenario.target, scenario.golden_fx, jobs=1)
    run_compare(options, tmp_path / "local", formats=NO_PAGE)
    done = drive_protocol_only(options, tmp_path / "driven", {1})
    local, driven = report_files(tmp_path / "local"), report_files(tmp_path / "driven")
    assert driven and not any("rank1" in name for name in driven)
    assert driven == {name: data for name, data in local.items() if "rank1" not in name}
    assert done.unfinished == (NotCompared(1, "skipped by the test"),)
    assert [r.rank for r in done.result.ranks] == [0]
