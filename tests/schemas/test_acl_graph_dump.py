"""torchair's aclgraph graph dump (`dynamo_optimized_*.py`, torch's `GraphModule.print_readable(False)`) read as
text: each getitem's node and output, each op node's target. The files are printed by real torch from real FX
graphs; the expected maps come from the graphs' nodes."""

from __future__ import annotations

import operator
from pathlib import Path

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from tcmp.schemas import acl_graph_dump
from tcmp.schemas.acl_graph_dump import GetItem, parse_graph_dump_name, read_graph_dumps
from tcmp.schemas.errors import DumpError


def _model(x, w):
    y = torch.relu(x @ w)
    var, mean = torch.var_mean(y, 1, keepdim=True)
    values, indices = torch.topk(y, 2)
    return var + mean, values, indices


def _graph(tmp_path: Path, name: str = "dynamo_optimized_graph_1_rank_0_pid_7_ts_20261202010101000001.py"):
    gm = make_fx(_model)(torch.randn(4, 8), torch.randn(8, 6))
    path = tmp_path / name
    path.write_text(gm.print_readable(False))
    return gm, path


def test_getitems_and_targets_are_those_of_the_graph_torch_printed(tmp_path):
    gm, path = _graph(tmp_path)
    dump = read_graph_dumps([path])
    nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
    expected_getitems = {n.name: GetItem(n.args[0].name, n.args[1]) for n in nodes if n.target is operator.getitem}
    expected_targets = {n.name: str(n.target) for n in nodes if n.target is not operator.getitem}
    assert len(expected_getitems) == 4
    assert dict(dump.getitems) == expected_getitems
    assert dict(dump.targets) == expected_targets
    assert dump.ambiguous == frozenset()


def test_the_file_name_says_stage_graph_and_rank():
    name = parse_graph_dump_name("dynamo_optimized_graph_12_rank_3_pid_4711_ts_20261202061238503621.py")
    assert (name.stage, name.graph, name.rank, name.pid) == ("optimized", "graph_12", 3, 4711)
    assert parse_graph_dump_name("dynamo_original_graph_1_rank_0_pid_1.py").stage == "original"
    assert parse_graph_dump_name("dynamo_optimized_graph_1.txt") is None


def test_a_name_two_graphs_use_differently_is_left_out(tmp_path):
    _, first = _graph(tmp_path)
    second = tmp_path / "dynamo_optimized_graph_2_rank_0_pid_7_ts_20261202010101000002.py"
    second.write_text(
        "class GraphModule(torch.nn.Module):\n"
        '    def forward(self, arg0_1: "f32[4]"):\n'
        "        var_mean = torch.ops.aten.var_mean.correction(arg0_1, [0])\n"
        '        getitem: "f32[]" = var_mean[1]\n'
    )
    dump = read_graph_dumps([first, second])
    assert "getitem" in dump.ambiguous and "getitem" not in dump.getitems
    assert dump.getitems["getitem_1"] == GetItem("var_mean", 1)  # the same in both, or only in one: kept


def test_the_text_is_never_run(tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / "dynamo_optimized_graph_1_rank_0_pid_1.py"
    path.write_text(
        f"import os\nos.system('touch {marker}')\n__import__('os').system('touch {marker}')\n"
        "class GraphModule(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        f"        y = __import__('os').system('touch {marker}')\n"
        "        getitem = y[0]\n"
    )
    dump = read_graph_dumps([path])
    assert not marker.exists()
    assert dict(dump.getitems) == {"getitem": GetItem("y", 0)} and dict(dump.targets) == {}


def test_oversized_input_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "dynamo_optimized_graph_1_rank_0_pid_1.py"
    path.write_text("    getitem = x[0]\n" + "    # " + "x" * 5000 + "\n")
    monkeypatch.setattr(acl_graph_dump, "MAX_LINE", 1024)
    with pytest.raises(DumpError, match="line over 1024"):
        read_graph_dumps([path])
    monkeypatch.setattr(acl_graph_dump, "MAX_GRAPH_DUMP_BYTES", 100)
    with pytest.raises(DumpError, match="over the 100"):
        read_graph_dumps([path])
    with pytest.raises(DumpError, match="unreadable"):
        read_graph_dumps([tmp_path / "missing.py"])


def test_fx_never_gives_a_removed_nodes_name_to_a_new_node():
    """What pairing two aclgraph stages' getitems by name rests on: torchair's optimized graph is a copy of the
    graph the original stage runs, and FX names a node its passes add after the highest of its base name ever
    used, so one name in both stages is one node."""
    gm = make_fx(_model)(torch.randn(4, 8), torch.randn(8, 6))
    nodes = {n.name: n for n in gm.graph.nodes}
    removed = nodes["getitem_1"]
    with gm.graph.inserting_after(removed):
        added = gm.graph.call_function(operator.getitem, (nodes["var_mean"], 1))
    removed.replace_all_uses_with(added)
    gm.graph.erase_node(removed)
    with gm.graph.inserting_after(added):
        another = gm.graph.call_function(operator.getitem, (nodes["var_mean"], 0))
    used = {"getitem", "getitem_1", "getitem_2", "getitem_3"}
    assert added.name not in used and another.name not in used and added.name != another.name


def test_the_graphs_inputs_are_nodes_of_it(tmp_path):
    gm, path = _graph(tmp_path)
    dump = read_graph_dumps([path])
    placeholders = {n.name for n in gm.graph.nodes if n.op == "placeholder"}
    assert dump.inputs == placeholders and all(dump.has_node(n) for n in placeholders)
    assert not dump.has_node("getitem_99")
