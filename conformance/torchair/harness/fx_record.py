"""What the harness keeps of torchair's FX graphs: nodes, their arguments and value shapes, as JSON.

Two graphs matter: the one dynamo/AOT captured (the FX data dumper interprets it as it is) and the one torchair
converts to GE after its own FX passes (`_optimize_fx(deepcopy(gm))`: no-op removal, pattern fusion, view to
reshape). Both are read, never changed, from torchair's objects after the runs: the `_NpuFxDumper` of the FX run
and the `GeConcreteGraph` of the conversion run (it keeps the optimized graph as `fx_graph`).
"""

from __future__ import annotations

import gc

import torch


def _arg(value):
    if isinstance(value, torch.fx.Node):
        return {"node": value.name}
    if isinstance(value, (list, tuple)):
        return [_arg(v) for v in value]
    if isinstance(value, dict):
        return {"dict": {str(k): _arg(v) for k, v in value.items()}}
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    return {"repr": repr(value)}


def _val(value):
    if isinstance(value, torch.Tensor):
        return {"shape": [str(d) for d in value.shape], "dtype": str(value.dtype).replace("torch.", "")}
    if isinstance(value, (list, tuple)):
        return [_val(v) for v in value]
    if isinstance(value, dict):
        return {"dict": {str(k): _val(v) for k, v in value.items()}}
    if isinstance(value, torch.SymInt):
        return {"symint": str(value)}
    return None


def graph_nodes(graph: torch.fx.Graph) -> list:
    return [
        {
            "name": node.name,
            "op": node.op,
            "target": str(node.target),
            "args": _arg(node.args),
            "kwargs": {k: _arg(v) for k, v in node.kwargs.items()},
            "val": _val(node.meta.get("val")),
        }
        for node in graph.nodes
    ]


def _instances(class_name: str) -> list:
    return [obj for obj in gc.get_objects() if type(obj).__name__ == class_name]


def captured_graphs() -> dict:
    """{dumper name: nodes} of every FX data dumper in this process (the FX run's graphs as captured)."""
    return {str(d._name): graph_nodes(d.module.graph) for d in _instances("_NpuFxDumper")}


def converted_graphs() -> dict:
    """{GE graph name: nodes} of the optimized FX graph behind every GE graph converted in this process."""
    out = {}
    for concrete in _instances("GeConcreteGraph"):
        fx_graph = getattr(concrete, "_fx_graph", None)
        if fx_graph is not None:
            out[str(concrete.graph.name)] = graph_nodes(fx_graph.graph)
    return out


def aclgraph_graphs() -> dict:
    """{graph name: nodes} of every FX graph of this process into which torchair put save_npugraph_tensor calls:
    in stage `original` the graph as captured (npu_fx_compiler returns it with the calls, run eagerly), in stage
    `optimized` the AclConcreteGraph's graph after torchair's FX passes (fx2acl_converter), which is captured."""
    out = {}
    for concrete in _instances("AclConcreteGraph"):
        fx_graph = getattr(concrete, "_fx_graph", None)
        if fx_graph is not None and _has_save_calls(fx_graph.graph):
            out[f"acl_{len(out)}"] = graph_nodes(fx_graph.graph)
    if not out:
        for module in _graph_modules():
            if _has_save_calls(module.graph):
                out[f"original_{len(out)}"] = graph_nodes(module.graph)
    return out


def _graph_modules() -> list:
    found = []
    for obj in gc.get_objects():
        try:
            if isinstance(obj, torch.fx.GraphModule):
                found.append(obj)
        except ReferenceError:  # a dead weak proxy among the objects
            continue
    return found


def _has_save_calls(graph: torch.fx.Graph) -> bool:
    return any(str(n.target).startswith("npu.save_npugraph_tensor") for n in graph.nodes)
