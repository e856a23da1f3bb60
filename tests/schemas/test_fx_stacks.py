"""The FX stack file (tcmp/schemas/fx_stacks.py): what the capture helper writes, what the compare reads."""

from __future__ import annotations

import json

import pytest

from tcmp.schemas.fx_stacks import (
    FxStackGraph,
    StackFileError,
    is_stack_file,
    read_stack_file,
    stack_file_name,
    stack_files_in,
    write_stack_file,
)

STACK = 'File "model.py", line 12, in forward\n    y = x + 1\n'


def test_written_file_reads_back_and_is_the_documented_json(tmp_path):
    graphs = [
        FxStackGraph(1, (("add-aten.add.Tensor", STACK), ("view-aten.view.default", "File b.py, line 3"))),
        FxStackGraph(None, (("add-aten.add.Tensor", "File c.py, line 9"),)),
    ]
    path = write_stack_file(tmp_path, 4242, graphs)
    assert path.name == "tcmp_fx_stacks_4242.json" == stack_file_name(4242)
    raw = json.loads(path.read_text())  # the format the module docstring gives, by hand
    assert raw == {
        "format": "tcmp-fx-stacks",
        "version": 1,
        "pid": 4242,
        "graphs": [
            {"number": 1, "nodes": [["add-aten.add.Tensor", STACK], ["view-aten.view.default", "File b.py, line 3"]]},
            {"number": None, "nodes": [["add-aten.add.Tensor", "File c.py, line 9"]]},
        ],
    }
    read = read_stack_file(path)
    assert read.pid == 4242 and read.graphs == tuple(graphs)
    assert read.graphs[0].by_node() == {"add": STACK, "view": "File b.py, line 3"}
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary left behind


def test_rewriting_replaces_the_file(tmp_path):
    write_stack_file(tmp_path, 7, [FxStackGraph(1, (("a-x", "s1"),))])
    write_stack_file(tmp_path, 7, [FxStackGraph(1, (("a-x", "s1"),)), FxStackGraph(2, (("b-y", "s2"),))])
    assert [g.number for g in read_stack_file(tmp_path / "tcmp_fx_stacks_7.json").graphs] == [1, 2]


def test_stack_files_are_recognised_by_name(tmp_path):
    for name in ("tcmp_fx_stacks_12.json", "tcmp_fx_stacks_x.json", "tcmp_fx_stacks_12.json.tmp", "other.json"):
        (tmp_path / name).write_text("{}")
    assert [p.name for p in stack_files_in(tmp_path)] == ["tcmp_fx_stacks_12.json"]
    assert is_stack_file("tcmp_fx_stacks_1.json") and not is_stack_file("tcmp_fx_stacks_.json")
    assert stack_files_in(tmp_path / "missing") == []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not JSON"),
        (json.dumps({"format": "other", "version": 1, "graphs": []}), "not a tcmp-fx-stacks file"),
        (json.dumps({"format": "tcmp-fx-stacks", "version": 2, "graphs": []}), "version 2"),
        (json.dumps({"format": "tcmp-fx-stacks", "version": 1}), "no `graphs` list"),
        (json.dumps({"format": "tcmp-fx-stacks", "version": 1, "pid": "7", "graphs": []}), "`pid`"),
        (json.dumps({"format": "tcmp-fx-stacks", "version": 1, "graphs": [{"number": 1}]}), "graph 0"),
        (json.dumps({"format": "tcmp-fx-stacks", "version": 1, "graphs": [{"number": "1", "nodes": []}]}), "number"),
        (json.dumps({"format": "tcmp-fx-stacks", "version": 1, "graphs": [{"nodes": [["k"]]}]}), "node 0"),
    ],
)
def test_a_bad_file_is_refused_with_what_is_wrong(tmp_path, content, message):
    path = tmp_path / "tcmp_fx_stacks_1.json"
    path.write_text(content)
    with pytest.raises(StackFileError) as info:
        read_stack_file(path)
    assert message in info.value.message and info.value.path == path
