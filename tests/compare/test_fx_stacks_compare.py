"""Stack Info from the capture helper's stack file (tcmp/compare/collect/stacks.py), on tcmp's synthetic torchair dumps.

The expected stack of a row is worked out here from the graph and the stack file this test writes: the stack of
the FX node the row's GE op is named after; a fused op's, its first member's that has one."""

from __future__ import annotations

import shutil

import pytest

from tcmp.compare.execute.run import run_compare
from tcmp.compare.report.outcome import CompareOptions
from tcmp.schemas.fx_stacks import FxStackGraph, write_stack_file
from tcmp.schemas.graph_names import parse_graph_file_name
from tcmp.schemas.graph_reader import read_graph
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import PID, ScenarioConfig, write_scenario


@pytest.fixture
def scenario(tmp_path_factory):
    return write_scenario(tmp_path_factory.mktemp("stacks"), ScenarioConfig(model=ModelConfig(layers=1), tokens=1))


def _graph(scenario):
    files = sorted(scenario.target.rglob("dynamo_original_graph_*.txt"))
    assert len(files) == 1
    return read_graph(files[0])


def _stacks(graph) -> dict:
    """A distinct made-up stack per FX node the graph names, by node key."""
    keys = sorted({o.fx_tensor.node_key for op in graph.ops for o in op.outputs if o.fx_tensor is not None})
    return {key: f'File "model.py", line {100 + i}, in forward\n    {key.partition("-")[0]} = ...\n'
            for i, key in enumerate(keys)}  # fmt: skip


def _expected(graph, stacks, op_name, members) -> str:
    for name in (op_name, *members):
        op = graph.op(name)
        for desc in op.outputs if op is not None else ():
            if desc.fx_tensor is not None and desc.fx_tensor.node_key in stacks:
                return stacks[desc.fx_tensor.node_key]
    return None


def _rows(scenario):
    result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx), keep_rows=True)
    return result, [r for rank in result.ranks for r in rank.rows]


def test_rows_carry_the_stack_of_the_fx_node_their_op_is_named_after(scenario):
    graph = _graph(scenario)
    name = parse_graph_file_name(graph.path.name)
    assert (name.pid, graph.name) == (PID, f"graph_{name.number}")
    stacks = _stacks(graph)
    write_stack_file(graph.path.parent, PID, [FxStackGraph(name.number, tuple(stacks.items()))])
    members = {o.op_name: o.members for o in scenario.target_ops}
    _, rows = _rows(scenario)
    named = 0
    for row in rows:
        want = _expected(graph, stacks, row.pair.op_name, members.get(row.pair.op_name, ()))
        assert row.pair.stack_info == want, row.pair.api_name
        named += want is not None
    assert named > len(rows) // 2  # most rows are named ops


def test_without_a_stack_file_or_with_another_process_s_stack_info_stays_empty(scenario):
    graph = _graph(scenario)
    name = parse_graph_file_name(graph.path.name)
    _, rows = _rows(scenario)
    assert rows and all(r.pair.stack_info is None for r in rows)
    write_stack_file(graph.path.parent, PID + 1, [FxStackGraph(name.number, tuple(_stacks(graph).items()))])
    _, rows = _rows(scenario)
    assert all(r.pair.stack_info is None for r in rows)


def test_another_graph_number_or_too_few_shared_nodes_binds_nothing(scenario):
    graph = _graph(scenario)
    name = parse_graph_file_name(graph.path.name)
    stacks = list(_stacks(graph).items())
    write_stack_file(graph.path.parent, PID, [FxStackGraph(name.number + 1, tuple(stacks))])
    _, rows = _rows(scenario)
    assert all(r.pair.stack_info is None for r in rows)
    # no number recorded: bound by the node names, which must be at least half of the graph's
    write_stack_file(graph.path.parent, PID, [FxStackGraph(None, tuple(stacks[: len(stacks) // 3]))])
    _, rows = _rows(scenario)
    assert all(r.pair.stack_info is None for r in rows)
    write_stack_file(graph.path.parent, PID, [FxStackGraph(None, tuple(stacks))])
    _, rows = _rows(scenario)
    assert any(r.pair.stack_info is not None for r in rows)


def test_a_broken_stack_file_is_a_note_and_the_compare_goes_on(scenario):
    graph = _graph(scenario)
    (graph.path.parent / f"tcmp_fx_stacks_{PID}.json").write_text("{broken")
    result, rows = _rows(scenario)
    assert rows and all(r.pair.stack_info is None for r in rows)
    assert any("stack file" in n and "not JSON" in n for n in result.notes)


def test_the_stack_file_survives_a_copy_of_the_dump_tree(scenario, tmp_path):
    """The file travels with the graph files: a dump tree copied elsewhere keeps its Stack Info."""
    graph = _graph(scenario)
    name = parse_graph_file_name(graph.path.name)
    stacks = _stacks(graph)
    write_stack_file(graph.path.parent, PID, [FxStackGraph(name.number, tuple(stacks.items()))])
    copy = tmp_path / "copy"
    shutil.copytree(scenario.root, copy)
    target = copy / scenario.target.relative_to(scenario.root)
    golden = copy / scenario.golden_fx.relative_to(scenario.root)
    result, _ = run_compare(CompareOptions(target, golden), keep_rows=True)
    rows = [r for rank in result.ranks for r in rank.rows]
    assert {r.pair.stack_info for r in rows} - {None} <= set(stacks.values())
    assert any(r.pair.stack_info is not None for r in rows)
