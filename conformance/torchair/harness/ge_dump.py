"""The GE binary side: the dump a fault-free GE would have written for the graph torchair loaded, plus one fault.

This side is synthetic — no GE ran. For each run of the graph (one GE step), the graph torchair handed to GE is
interpreted on that run's inputs (ge_interp.walk), op by op in torchair's order; every output that carries an
`_fx_tensor_name` whose FX file exists takes that FX tensor's value cast to the GE dtype (after the interpreter's
own value is checked to agree with it), so the tensors both sides name are equal, and an op without a name is
computed from exactly those values. An output named after a pattern-fused node (no FX file of that name) takes the
value of the FX output of a replaced node that holds it. Then one file per executed op (not Data/Const/NetOutput)
is written with tcmp's synthetic writer, in GE's tree layout and file names (docs/formats.md, "GE file names",
"GE dump tree").

The fault: one executed op of one of the model's `fault_op_types` (fault_op) gets its float outputs changed;
the same changed values are what its consumers' dumped inputs hold. Nothing downstream changes (the consumers
compute from the fault-free values), so the faulted op is the first divergence by construction.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from tcmp.schemas.synth.ge_writer import TensorSpec, write_ge_dump

from . import dump_scope, ge_interp
from .fx_files import FxFile, element
from .ge_graph import Edge, GeGraph, GeOp, graph_from_proto, read_graph_text, read_model_bytes
from .run_inputs import load_inputs
from .values import values_match

GE_DUMP_DIR = "msprobe_ge_dump"  # tcmp.daemon.capture.GE_DUMP_DIR: enable_ge_dump's dump_path under its root


class HarnessError(RuntimeError):
    """The harness could not build a trustworthy GE side for a model (its own fault, never tcmp's)."""


@dataclass(frozen=True)
class GeTensor:
    """One tensor of one written GE dump file, with the truth about it."""

    step: int
    op: str
    op_type: str
    io: str  # "input" | "output"
    index: int  # its index in the dump file (connected inputs only, in order)
    file: Path
    value: np.ndarray  # what a fault-free GE holds here
    faulted: bool  # the file holds a changed value instead
    fx_name: Optional[str]  # outputs: its `_fx_tensor_name`; inputs: the producer output's
    producer: Optional[Edge]  # inputs: the edge it reads
    from_fx: bool  # outputs: the value is an FX tensor's (the one it is named after, or the replaced node's output
    # a pattern-fused op's output stands for), else the interpreter's


@dataclass(frozen=True)
class GeSide:
    graph: GeGraph
    fault_op: str
    tensors: tuple[GeTensor, ...]
    dumped_ops: tuple[tuple[int, str, str], ...]  # (step, op name, op type) of every written file
    # the FX nodes ({name}-{target}) whose outputs only ops GE did not select for dump (dump_layer) carry
    unselected_nodes: frozenset = frozenset()


def _parse_fx_name(fx_name: str) -> tuple[str, tuple[str, ...]]:
    """`{key}.OUTPUT.{path}` -> (`{key}.OUTPUT.{first}`, rest of the path): the FX file and the element in it."""
    head, marker, path = fx_name.partition(".OUTPUT.")
    if not marker:
        raise HarnessError(f"an _fx_tensor_name without .OUTPUT.: {fx_name}")
    parts = tuple(path.split("."))
    return f"{head}.OUTPUT.{parts[0]}", parts[1:]


def fault(value: np.ndarray) -> np.ndarray:
    """A value that fails Cosine >= 0.99 and MaxRelativeErr < 0.01 clearly against the original."""
    v = value.astype(np.float64)
    return ge_interp.cast(1.5 * v + 0.5 * np.roll(v, 1) + 0.25, ge_interp.NUMPY_TO_GE[np.dtype(value.dtype)])


def _is_float(value: np.ndarray) -> bool:
    return value.dtype.kind == "f" or value.dtype == ge_interp.GE_TO_NUMPY[27]


def _sanitized(name: str) -> str:
    for ch in " ./\\":
        name = name.replace(ch, "_")
    return name


def load_executed_graph(model_dir: Path, ir) -> tuple[GeGraph, list[Path]]:
    """The one graph torchair loaded into GE, checked against its `dynamo_optimized_graph` dump, and its runs."""
    models = sorted((model_dir / "executed").glob("*.pb"))
    if len(models) != 1:
        raise HarnessError(f"{model_dir.name}: expected one GE graph, torchair loaded {len(models)}")
    graph = graph_from_proto(read_model_bytes(models[0].read_bytes(), ir))
    dumps = sorted((model_dir / "ge").rglob("dynamo_optimized_*.txt"))
    if len(dumps) != 1:
        raise HarnessError(f"{model_dir.name}: expected one dynamo_optimized graph dump, found {len(dumps)}")
    dumped = graph_from_proto(read_graph_text(dumps[0], ir))
    key = [(op.name, op.type, op.inputs, [d.fx_name for d in op.output_descs]) for op in graph.ops]
    if key != [(op.name, op.type, op.inputs, [d.fx_name for d in op.output_descs]) for op in dumped.ops]:
        raise HarnessError(f"{model_dir.name}: the graph torchair loaded differs from its dynamo_optimized dump")
    runs = sorted((model_dir / "executed" / graph.name).glob("run_*.npz"), key=lambda p: int(p.stem.split("_")[1]))
    return graph, runs


def fault_op(
    graph: GeGraph, op_types: tuple[str, ...], values: dict, from_fx: set, fx_outputs: list, written=None
) -> GeOp:
    """The op to fault — a tensor no compare can pair is a fault no compare can see: of `op_types` in preference,
    the first op (torchair's order) with a float output named after an FX file that holds it; failing that, one
    whose float output some FX output holds by value (a pattern-fused op, through the nodes it replaced)."""

    def named(op: GeOp, i: int) -> bool:
        return (op.name, i) in from_fx and _is_float(values[(op.name, i)])

    def held(op: GeOp, i: int) -> bool:
        value = values[(op.name, i)]
        return _is_float(value) and any(values_match(value, fx) for fx in fx_outputs)

    for test in (named, held):
        for op_type in op_types:
            for op in graph.ops:
                chosen = op.dumped if written is None else written(op)
                if op.type == op_type and chosen and any(test(op, i) for i in range(len(op.output_descs))):
                    return op
    raise HarnessError(f"graph {graph.name} has no op of the fault types {op_types} with an output in the FX dump")


def _replaced_value(op: GeOp, i: int, value: np.ndarray, fx_values: list, step: int) -> Optional[np.ndarray]:
    """The FX value an output of a pattern-fused op holds: the output of one of the nodes the pattern replaced,
    found as the FX outputs of the step that hold the interpreter's value (all of them must agree)."""
    dtype = ge_interp.NUMPY_TO_GE[np.dtype(value.dtype)]
    held = [ge_interp.cast(v, dtype) for v in fx_values if values_match(value, v)]
    if not held:
        return None
    if any(not np.array_equal(held[0], other) for other in held[1:]):
        raise HarnessError(f"step {step}: {op.name} ({op.type}) output {i}: FX outputs of different values hold it")
    return held[0]


def _settled_values(graph: GeGraph, inputs: list, fx_outputs: dict, step: int, fused_nodes) -> tuple[dict, set]:
    """Every tensor's fault-free value in one run, named outputs taken from the FX files; and which came from FX.
    An output named after a pattern-fused node (`fused_nodes`: the converted graph's, which the FX dump does not
    have) takes the value of the replaced node's FX output that holds it."""
    from_fx: set = set()
    numeric = [v for f in fx_outputs.values() for v in [_numeric(f)] if v is not None]

    def settle(op: GeOp, outputs: list) -> list:
        settled = list(outputs)
        for i, desc in enumerate(op.output_descs):
            if desc.fx_name is None:
                continue
            file_name, path = _parse_fx_name(desc.fx_name)
            fx_file = fx_outputs.get(file_name)
            if fx_file is None:
                if desc.fx_name.split("-", 1)[0] in fused_nodes:
                    replaced = _replaced_value(op, i, outputs[i], numeric, step)
                    if replaced is not None:
                        settled[i] = replaced
                        from_fx.add((op.name, i))
                continue
            fx_value = element(fx_file.load(), path)
            if fx_value is None:
                continue  # the FX file cannot hold it (a dict of tensors, a string): the interpreter's value stays
            if not values_match(outputs[i], fx_value):
                raise HarnessError(
                    f"step {step}: {op.name} ({op.type}) output {i}: the interpreter disagrees with the FX tensor "
                    f"{desc.fx_name} it is named after (shapes {outputs[i].shape} vs {fx_value.shape})"
                )
            settled[i] = ge_interp.cast(fx_value, ge_interp.NUMPY_TO_GE[np.dtype(outputs[i].dtype)])
            from_fx.add((op.name, i))
        return settled

    return ge_interp.walk(graph, inputs, settle), from_fx


def _numeric(f: FxFile) -> Optional[np.ndarray]:
    try:
        value = f.load()
    except Exception:
        return None
    return value if value.dtype.kind in "fiub" else None


def _spec(value: np.ndarray) -> TensorSpec:
    dtype = ge_interp.NUMPY_TO_GE[np.dtype(value.dtype)]
    logical = value.astype(np.float64) if _is_float(value) else value
    return TensorSpec(values=logical, dtype=dtype)


def write_ge_side(
    model_dir: Path,
    ir,
    fx: list[FxFile],
    fault_op_types: tuple[str, ...],
    rank_dirs: bool,
    fused_nodes=frozenset(),
    ge_dir: Optional[Path] = None,
    inject_fault: bool = True,
) -> GeSide:
    """The GE dump under `ge_dir` (default: the conversion run's `ge/`), with the fault or (`inject_fault` False: the
    clean run) without it; `fault_op` is the op the fault goes to either way."""
    graph, runs = load_executed_graph(model_dir, ir)
    settled = []
    for step, run in enumerate(runs):
        fx_outputs = {f.tensor_name: f for f in fx if f.step == step and f.io == "OUTPUT"}
        settled.append(_settled_values(graph, load_inputs(run), fx_outputs, step, fused_nodes))
    if not settled:
        raise HarnessError(f"{model_dir.name}: GE never ran graph {graph.name}")
    step0_fx = [v for f in fx if f.step == 0 and f.io == "OUTPUT" for v in [_numeric(f)] if v is not None]
    # GE writes only the ops its dump options select (the file torchair wrote in the conversion run's ge/)
    names = dump_scope.dumped_names(model_dir / "ge", graph.name)

    def written(op: GeOp) -> bool:
        return op.dumped and (names is None or op.name in names)

    faulty = fault_op(graph, fault_op_types, settled[0][0], settled[0][1], step0_fx, written)
    root = (ge_dir or model_dir / "ge") / GE_DUMP_DIR  # where enable_ge_dump pointed GE's dump_path
    if rank_dirs:
        root = root / "worldsize1_global_rank0"
    base = root / time.strftime("%Y%m%d%H%M%S") / "0" / f"{graph.name}_0" / "1"
    clock_us = int(time.time() * 1e6)
    tensors: list[GeTensor] = []
    dumped: list[tuple[int, str, str]] = []
    for step, (values, from_fx) in enumerate(settled):
        changed = {
            (faulty.name, i): fault(values[(faulty.name, i)])
            for i in range(len(faulty.output_descs))
            if _is_float(values[(faulty.name, i)])
        }
        if not changed:
            raise HarnessError(f"{faulty.name} ({faulty.type}) has no float output to fault")
        if not inject_fault:
            changed = {}
        for task, op in enumerate(o for o in graph.ops if written(o)):
            clock_us += 7
            path = base / str(step) / f"{op.type}.{_sanitized(op.name)}.{task + 1}.0.{clock_us}"
            edges = [e for e in op.inputs if e is not None]
            ins = [changed.get((e.producer, e.index), values[(e.producer, e.index)]) for e in edges]
            outs = [changed.get((op.name, i), values[(op.name, i)]) for i in range(len(op.output_descs))]
            write_ge_dump(path, op.name, [_spec(v) for v in ins], [_spec(v) for v in outs], dump_time=clock_us)
            dumped.append((step, op.name, op.type))
            for i, e in enumerate(edges):
                producer_desc = graph.op(e.producer).output_descs[e.index]
                tensors.append(
                    GeTensor(
                        step,
                        op.name,
                        op.type,
                        "input",
                        i,
                        path,
                        values[(e.producer, e.index)],
                        (e.producer, e.index) in changed,
                        producer_desc.fx_name,
                        e,
                        False,
                    )
                )
            for i, desc in enumerate(op.output_descs):
                tensors.append(
                    GeTensor(
                        step,
                        op.name,
                        op.type,
                        "output",
                        i,
                        path,
                        values[(op.name, i)],
                        (op.name, i) in changed,
                        desc.fx_name,
                        None,
                        (op.name, i) in from_fx,
                    )
                )
    carried: dict = {}  # FX node -> whether a written op carries one of its outputs
    for op in (o for o in graph.ops if o.dumped):
        for desc in op.output_descs:
            if desc.fx_name is not None and ".OUTPUT." in desc.fx_name:
                node = desc.fx_name.split(".OUTPUT.", 1)[0]
                carried[node] = carried.get(node, False) or written(op)
    unselected = frozenset(node for node, any_written in carried.items() if not any_written)
    return GeSide(graph, faulty.name, tuple(tensors), tuple(dumped), unselected)
