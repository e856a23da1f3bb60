"""tcmp's graph reader against torchair's own protobuf module, on the graph files torchair dumped.

For every `dynamo_*graph*.txt` of a model: tcmp's op count equals the count of torchair's generated protobuf module's
parse of the same file. torchair (2.5.1, 2.14.0) converts no `torch.cond` / `while_loop`, so its graphs hold no
subgraphs; the check also wraps each converted graph, with torchair's protobuf classes, into the ModelDef GE prints
for a model with subgraphs (a root graph whose `PartitionedCall` and `If` call copies of it; GE's
`ModelSerializeImp::SerializeModel` layout) and holds tcmp's per-graph ops and subgraph references to protobuf's
parse of that text. Runs in tcmp's environment (it imports tcmp from the repository).
"""

from __future__ import annotations

from pathlib import Path

from google.protobuf import text_format

from .ge_dump import HarnessError


def _wrapped(graph, ir):
    """The converted graph as the subgraph of a PartitionedCall and both branches of an If, in a GE ModelDef."""
    model = ir.ModelDef(name=graph.name)
    root = model.graph.add(name=f"{graph.name}_root")
    root.op.add(name="pred", type="Data")
    root.op.add(name="x", type="Data")
    call = root.op.add(name="pc", type="PartitionedCall", input=["x:0"])
    call.subgraph_name.append(f"{graph.name}_f")
    branch = root.op.add(name="if", type="If", input=["pred:0", "pc:0"])
    branch.subgraph_name.extend([f"{graph.name}_then", f"{graph.name}_else"])
    root.op.add(name="out", type="NetOutput", input=["if:0"])
    for suffix in ("f", "then", "else"):
        sub = model.graph.add()
        sub.CopyFrom(graph)
        sub.name = f"{graph.name}_{suffix}"
    return text_format.MessageToString(model)


def _per_graph(model) -> tuple[int, dict, dict]:
    names = [None if k == 0 else g.name for k, g in enumerate(model.graph)]
    per_graph = {name: [op.name for op in g.op] for name, g in zip(names, model.graph)}
    calls = {(name, op.name): tuple(op.subgraph_name) for name, g in zip(names, model.graph) for op in g.op
             if op.subgraph_name}  # fmt: skip
    return sum(len(g.op) for g in model.graph), per_graph, calls


def check_graph_counts(model_dir: Path, ir) -> int:
    """Raises HarnessError where tcmp's reader and torchair's protobuf disagree; returns the files checked."""
    from tcmp.schemas.graph_reader import parse_graph_text

    checked = 0
    for path in sorted((model_dir / "ge").rglob("dynamo_*graph*.txt")):
        text = path.read_text()
        graph = ir.GraphDef()
        text_format.Parse(text, graph)
        read = parse_graph_text(text, path)
        if len(read.ops) != len(graph.op):
            raise HarnessError(f"{path.name}: tcmp reads {len(read.ops)} ops, torchair's protobuf {len(graph.op)}")
        wrapped = _wrapped(graph, ir)
        model = ir.ModelDef()
        text_format.Parse(wrapped, model)
        count, per_graph, calls = _per_graph(model)
        read = parse_graph_text(wrapped, path.with_name(f"ge_proto_{path.stem}.txt"))
        read_per_graph: dict = {}
        for op in read.ops:
            read_per_graph.setdefault(op.subgraph, []).append(op.name)
        read_calls = {(op.subgraph, op.name): op.subgraphs for op in read.ops if op.subgraphs}
        if len(read.ops) != count or read_per_graph != per_graph or read_calls != calls:
            raise HarnessError(
                f"{path.name} wrapped in a ModelDef with subgraphs: tcmp reads {len(read.ops)} ops in "
                f"{len(read_per_graph)} graphs, torchair's protobuf {count} in {len(per_graph)}"
            )
        checked += 1
    if not checked:
        raise HarnessError(f"{model_dir.name}: no graph file to check tcmp's reader on")
    return checked
