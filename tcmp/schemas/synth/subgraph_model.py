"""A GE ModelDef with subgraphs for tests, built with protobuf from tcmp's descriptors, as GE prints one
(`ModelSerializeImp::SerializeModel`: the root graph, then every subgraph, each named after its instance; an op
names the subgraphs it calls in OpDef's `subgraph_name`, in its IR order).

The root graph holds 5 ops; the compute lives in its subgraphs: a PartitionedCall's (Mul), an If's two branches
(Add / Sub, the Add branch calling a nested PartitionedCall holding a Relu) and a While's cond and body.
"""

from __future__ import annotations

from google.protobuf import text_format

from tcmp.schemas.proto import GE_IR_DATA_TYPE, ModelDef

F32 = GE_IR_DATA_TYPE.values_by_name["DT_FLOAT"].number
SHAPE = (2, 3)

# subgraph name -> (op name, op type, FX tensor name of output 0 or None), without its Data / NetOutput
SUBGRAPH_OPS = {
    "pc_sub": (("pc_sub/Mul", "Mul", "mul-aten.mul.Tensor.OUTPUT.0"),),
    "then_g": (("then_g/Add", "Add", "add-aten.add.Tensor.OUTPUT.0"), ("then_g/pc2", "PartitionedCall", None)),
    "then_pc": (("then_pc/Relu", "Relu", "relu-aten.relu.default.OUTPUT.0"),),
    "else_g": (("else_g/Sub", "Sub", "sub-aten.sub.Tensor.OUTPUT.0"),),
    "cond_g": (("cond_g/Less", "Less", None),),
    "body_g": (("body_g/AddN", "Add", "add_1-aten.add.Tensor.OUTPUT.0"),),
}
CALLS = {"pc": ("pc_sub",), "if": ("then_g", "else_g"), "then_g/pc2": ("then_pc",), "loop": ("cond_g", "body_g")}


def _op(graph, name: str, op_type: str, inputs=(), fx_name=None):
    op = graph.op.add(name=name, type=op_type)
    op.input.extend(inputs)
    desc = op.output_desc.add(dtype=F32, layout="ND")
    desc.shape.dim.extend(SHAPE)
    if fx_name is not None:
        desc.attr["_fx_tensor_name"].s = fx_name.encode()
    op.subgraph_name.extend(CALLS.get(name, ()))
    return op


def subgraph_model(root_name: str = "graph_1") -> ModelDef:
    model = ModelDef(name=root_name)
    root = model.graph.add(name=root_name)
    _op(root, "x", "Data")
    _op(root, "pred", "Data")
    _op(root, "pc", "PartitionedCall", ("x:0",))
    _op(root, "if", "If", ("pred:0", "pc:0"))
    _op(root, "loop", "While", ("if:0",))
    for sub, ops in SUBGRAPH_OPS.items():
        graph = model.graph.add(name=sub)
        arg = _op(graph, f"{sub}/arg0", "Data")
        arg.attr["_parent_node_index"].i = 0
        previous = arg.name
        for name, op_type, fx_name in ops:
            _op(graph, name, op_type, (f"{previous}:0",), fx_name)
            previous = name
        _op(graph, f"{sub}/NetOutput", "NetOutput", (f"{previous}:0",))
    return model


def subgraph_model_text(root_name: str = "graph_1") -> str:
    return text_format.MessageToString(subgraph_model(root_name))
