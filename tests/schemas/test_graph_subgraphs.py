"""Graphs with subgraphs (issue 25, item 2): a GE ModelDef's every graph is read, its ops counted, marked with the
subgraph they are in and with the subgraphs they call, as protobuf's own parse of the same file gives them."""

from __future__ import annotations

from google.protobuf import text_format

from tcmp.schemas.graph_reader import parse_graph_text
from tcmp.schemas.graph_subgraphs import SubgraphTree
from tcmp.schemas.proto import ModelDef
from tcmp.schemas.synth.subgraph_model import subgraph_model, subgraph_model_text


def _protobuf_view(text: str):
    model = ModelDef()
    text_format.Parse(text, model)
    per_graph = {(None if k == 0 else g.name): [op.name for op in g.op] for k, g in enumerate(model.graph)}
    calls = {op.name: tuple(op.subgraph_name) for g in model.graph for op in g.op if op.subgraph_name}
    return sum(len(g.op) for g in model.graph), per_graph, calls


def test_every_graph_of_a_model_def_is_read_as_protobuf_parses_it():
    text = subgraph_model_text()
    count, per_graph, calls = _protobuf_view(text)
    graph = parse_graph_text(text, "ge_proto_00000001_graph_1_Build.txt")
    assert len(graph) == count == 5 + sum(len(g.op) for g in subgraph_model().graph[1:])
    read: dict = {}
    for op in graph.ops:
        read.setdefault(op.subgraph, []).append(op.name)
    assert read == per_graph
    assert {op.name: op.subgraphs for op in graph.ops if op.subgraphs} == calls
    assert [op.order for op in graph.ops] == list(range(count))
    assert graph.name == "graph_1" and graph.warnings == ()


def test_the_root_graph_alone_is_five_ops():
    """What the reader saw before: 5 ops, no compute."""
    graph = parse_graph_text(subgraph_model_text(), "g.txt")
    assert [op.type for op in graph.ops if op.subgraph is None] == ["Data", "Data", "PartitionedCall", "If", "While"]


def test_function_attributes_name_subgraphs_when_the_field_is_empty():
    """A framework-converted graph names its functions in attributes: If's then/else_branch, Case's branches."""
    model = subgraph_model()
    for graph in model.graph:
        for op in graph.op:
            if op.type == "If":
                del op.subgraph_name[:]
                op.attr["then_branch"].func.name = "then_g"
                op.attr["else_branch"].func.name = "else_g"
            if op.type == "PartitionedCall" and op.name == "pc":
                del op.subgraph_name[:]
                op.attr["f"].func.name = "pc_sub"
    case = model.graph[0].op.add(name="case", type="Case")
    case.attr["branches"].list.na.add(name="then_g")
    case.attr["branches"].list.na.add(name="else_g")
    case.attr["cond"].s = b"not a function"  # a key some other op type uses: not read for Case
    graph = parse_graph_text(text_format.MessageToString(model), "g.txt")
    assert graph.op("if").subgraphs == ("then_g", "else_g")
    assert graph.op("pc").subgraphs == ("pc_sub",)
    assert graph.op("case").subgraphs == ("then_g", "else_g")


def test_the_tree_knows_the_branches_around_an_op():
    graph = parse_graph_text(subgraph_model_text(), "g.txt")
    tree = SubgraphTree(graph)
    [branch] = tree.branches_around(graph.op("then_pc/Relu"))  # nested: then_g -> then_g/pc2 -> then_pc
    assert (branch.op, branch.subgraph, branch.position, branch.siblings) == ("if", "then_g", 0, ("then_g", "else_g"))
    assert tree.within("then_g") >= {"then_g/Add", "then_pc/Relu"}
    assert "else_g/Sub" not in tree.within("then_g")
    assert tree.branches_around(graph.op("pc_sub/Mul")) == ()  # a PartitionedCall always runs its subgraph
    assert tree.branches_around(graph.op("body_g/AddN")) == ()  # a While body: iterations, not branches
