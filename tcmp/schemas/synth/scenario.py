"""Synthetic torchair dump trees: a GE fusion-on dump (the target), its golden FX dump (any layout era) and a
fusion-off GE dump, for several ranks, tokens and graphs, with injected faults.

Layout written under `root` (docs/formats.md, "GE dump tree", "FX layout eras"):

    target/msprobe_ge_dump/dynamo_{original,optimized}_graph_{N}_rank_{R}_pid_…_ts_….txt
    target/msprobe_ge_dump/[worldsize{W}_global_rank{R}/]{time}/{R}/graph_{N}_0/{model_id}/{token}/<GE files>
    golden_ge/msprobe_ge_dump/…                      same layout, fusion off, another {time}
    golden_fx/…                                      per `FxEra`

Values are exact: the golden FX tensors are the model's float64 values rounded to their dtype, and the target
holds the same values (plus optional relative `noise`, or `ulp_noise`: the few units in the last place another
kernel's rounding moves a result by) except where a `Fault` says otherwise. Faults stay local
unless `propagate_faults`: then everything downstream of the faulty op is off as well, which is what a real
accuracy bug looks like (and what first-divergence analysis must see through). The returned `Scenario` lists
every target op execution written, with its fault, so tests can check a compare against it.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional

import numpy as np

from tcmp.schemas.dtypes import DataType
from tcmp.schemas.dump_records import IO
from tcmp.schemas.formats import Format
from tcmp.schemas.ge_names import sanitize
from tcmp.schemas.graph_names import GraphNameForm
from tcmp.schemas.synth.faults import Fault, FaultKind, apply_fault
from tcmp.schemas.synth.fx_writer import FxEra, FxWriter
from tcmp.schemas.synth.ge_writer import TensorSpec, write_ge_dump
from tcmp.schemas.synth.graph_writer import GraphOpSpec, OutputSpec, graph_file_name, write_graph
from tcmp.schemas.synth.model import (
    FusionGroup,
    GeOpDef,
    ModelConfig,
    ModelGraph,
    ModelValues,
    OpKind,
    TensorRef,
    build_model_values,
)
from tcmp.schemas.synth.target_values import TargetNoise, TargetValues

MAX_FILE_NAME = 255  # longer dump names are replaced by a hash and recorded in mapping.csv
BASE_TIMESTAMP_US = 1_764_400_000_000_000  # 16-digit µs timestamps, as gettimeofday gives today
TARGET_TIME_DIR = "20261129083000"
GOLDEN_TIME_DIR = "20261129084500"
PID = 4242


@dataclass(frozen=True)
class Undumped:
    """A tensor of GE op `op` that the writer skips (device address 0: its size in the header, no payload), as CANN
    does for an unconnected optional input; in the target dump, the fusion-off dump, or both."""

    op: str
    io: IO
    index: int
    target: bool = True
    golden: bool = False


@dataclass(frozen=True)
class ScenarioConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    seed: int = 0
    ranks: int = 1
    tokens: int = 2
    graphs: tuple[int, ...] = (1,)  # graph numbers N (graph_{N}); several graphs = several models
    fx_era: FxEra = FxEra.RANKED
    ge_rank_dirs: bool = True  # GE under worldsize*_global_rank* (torchair >= 2025-08)
    write_fx: bool = True
    write_fusion_off: bool = True
    faults: tuple[Fault, ...] = ()
    propagate_faults: bool = False
    noise: float = 0.0
    # A clean run as a real device gives it: every float output of a computing op within `ulp_noise` units in the
    # last place of its dtype of the exact value (another summation order, another kernel), but a Cast's output
    # its (noisy) input cast, and a GE-inserted op's output exactly its input (TransData only moves data); graph
    # inputs and constants exact. 0: exact values.
    ulp_noise: int = 0
    ffts_ops: tuple[str, ...] = ()  # target ops written as two FFTS+ slice files (automatic mode)
    capture_names: bool = False  # adump capture-mode file names (6 fields) instead of the GE 5-field form
    undumped: tuple[Undumped, ...] = ()
    # target ops (unfused GE op names) whose task GE ran again in every token: one stray execution, another task
    # id, written just before the real one (an earlier timestamp), its tensors of another shape (the first row)
    reruns: tuple[str, ...] = ()
    # How torchair named the graph files: by default the form of the FX era's time (graph_names); and where it
    # wrote them, relative to the scenario root (torchair's graph_dump.path), None: in the GE dump root.
    graph_name_form: Optional[GraphNameForm] = None
    graph_dir: Optional[str] = None

    @property
    def graph_form(self) -> GraphNameForm:
        if self.graph_name_form is not None:
            return self.graph_name_form
        if self.fx_era is FxEra.RANKED:
            return GraphNameForm.NUMBERED
        return GraphNameForm.DYNAMO if self.fx_era is FxEra.GM_STEP else GraphNameForm.KIND


@dataclass(frozen=True)
class TargetOp:
    """One op execution written into the target dump."""

    rank: int
    token: int
    graph: int
    op_name: str  # graph name (fused ops: GE's fused name), unsanitized
    op_type: str
    execution: int  # k-th execution of this op in the token
    paths: tuple[Path, ...]  # one file, or the FFTS+ slice files
    fault: Optional[FaultKind]
    members: tuple[str, ...] = ()  # fused ops: the member op names
    inserted: bool = False  # GE-inserted op (TransData / Cast without FX counterpart)
    inner: bool = False  # inner op of a multi-op expansion (its outputs have no FX tensor)
    undumped: tuple[tuple[IO, int], ...] = ()  # its tensors written without data (device address 0)
    rerun: bool = False  # the stray execution of a task GE ran again (ScenarioConfig.reruns): no golden partner


@dataclass(frozen=True)
class Scenario:
    root: Path
    target: Path
    golden_fx: Optional[Path]
    golden_ge: Optional[Path]
    config: ScenarioConfig
    graphs: tuple[ModelGraph, ...]
    target_ops: tuple[TargetOp, ...]

    def faulty(self, rank: int, token: int) -> tuple[TargetOp, ...]:
        return tuple(o for o in self.target_ops if o.rank == rank and o.token == token and o.fault is not None)

    @property
    def golden(self) -> Path:
        golden = self.golden_fx or self.golden_ge
        assert golden is not None
        return golden


@dataclass
class _Clock:
    """Execution order: one timestamp per op execution, one task id per file."""

    now: int = BASE_TIMESTAMP_US
    task: int = 1

    def tick(self) -> tuple[int, int]:
        self.now += 37
        self.task += 1
        return self.now, self.task


@dataclass(frozen=True)
class _DumpOp:
    """One op as dumped: unfused, or a fusion group collapsed into one op."""

    name: str
    type: str
    inputs: tuple[TensorRef, ...]
    outputs: tuple[TensorRef, ...]
    original_ops: tuple[Optional[tuple[str, int]], ...]
    repeat: int
    members: tuple[str, ...] = ()
    kind: OpKind = OpKind.COMPUTE


def _dump_ops(graph: ModelGraph, fused: bool) -> list[_DumpOp]:
    """The ops a GE run executes (and dumps), in execution order."""
    executed = [o for o in graph.ge_ops if o.kind not in (OpKind.DATA, OpKind.CONST)]
    groups = {m: g for g in graph.fusion_groups for m in g.members} if fused else {}
    ops: list[_DumpOp] = []
    for op in executed:
        group = groups.get(op.name)
        if group is None:
            outs = tuple(TensorRef(op.name, i) for i in range(len(op.output_dtypes)))
            ops.append(_DumpOp(op.name, op.type, op.inputs, outs, (None,) * len(outs), op.repeat, kind=op.kind))
        elif op.name == group.members[0]:
            ops.append(_fused_op(graph, group))
    return ops


def _fused_op(graph: ModelGraph, group: FusionGroup) -> _DumpOp:
    members = [graph.op(m) for m in group.members]
    inside = set(group.members)
    inputs: list[TensorRef] = []
    for member in members:
        for ref in member.inputs:
            if ref.op not in inside and ref not in inputs:
                inputs.append(ref)
    outputs = [
        TensorRef(m.name, i)
        for m in members
        for i in range(len(m.output_dtypes))
        if graph.consumers.get(TensorRef(m.name, i), frozenset()) - inside  # read outside the group
    ] or [TensorRef(members[-1].name, i) for i in range(len(members[-1].output_dtypes))]
    originals = tuple((r.op, r.index) if group.record_original_op else None for r in outputs)
    return _DumpOp(group.name, group.type, tuple(inputs), tuple(outputs), originals, 1, group.members)


def _c0(fmt: int, dtype: int) -> int:
    if fmt in (Format.FRACTAL_NZ, Format.FRACTAL_Z, Format.NC1HWC0) and dtype == DataType.DT_FLOAT:
        return 8
    return 16


class _TensorLayout:
    """Dtype and device format of every GE tensor of a graph."""

    def __init__(self, graph: ModelGraph) -> None:
        self.dtypes = {TensorRef(o.name, i): d for o in graph.ge_ops for i, d in enumerate(o.output_dtypes)}
        self.formats = {TensorRef(o.name, i): f for o in graph.ge_ops for i, f in enumerate(o.output_formats)}


class _GeWriter:
    """Writes one GE dump tree (target or fusion-off golden) for all ranks, graphs and tokens."""

    def __init__(self, root: Path, config: ScenarioConfig, time_dir: str, fused: bool, target: bool) -> None:
        self.root, self.config, self.time_dir, self.fused, self.is_target = root, config, time_dir, fused, target
        self.records: list[TargetOp] = []

    def step_dir(self, rank: int, graph: int, model_index: int, token: int) -> Path:
        base = self.root / "msprobe_ge_dump"
        if self.config.ge_rank_dirs:
            base = base / f"worldsize{self.config.ranks}_global_rank{rank}"
        return base / self.time_dir / str(rank) / f"graph_{graph}_0" / str(model_index * 3 + 1) / str(token)

    def write_graph_files(self, rank: int, graph_number: int, graph: ModelGraph, values: ModelValues) -> None:
        if self.config.graph_dir is None:
            directory = self.root / "msprobe_ge_dump"
        else:
            directory = self.root.parent / self.config.graph_dir / self.root.name
        directory.mkdir(parents=True, exist_ok=True)
        specs = _graph_specs(graph, values)
        form = self.config.graph_form
        ts = f"2026112908{30 + graph_number % 20:02d}{rank:02d}000000"  # names without a rank differ by time
        write_graph(directory, graph_file_name(graph_number, rank, PID, ts, form=form), f"graph_{graph_number}", specs)
        if form is not GraphNameForm.DYNAMO:  # torchair before 2024-01 dumped the converted graph only
            name = graph_file_name(graph_number, rank, PID, ts, kind="optimized", form=form)
            write_graph(directory, name, graph.graph_name, specs)

    def write_token(
        self, rank: int, graph_number: int, model_index: int, token: int, graph: ModelGraph, source: TargetValues,
        clock: _Clock,
    ) -> None:  # fmt: skip
        directory = self.step_dir(rank, graph_number, model_index, token)
        directory.mkdir(parents=True, exist_ok=True)
        layout = _TensorLayout(graph)
        for op in _dump_ops(graph, self.fused):
            stray = self.is_target and op.name in self.config.reruns
            for execution in range(op.repeat):
                ts, task = clock.tick()
                if stray and execution == 0:
                    self._write_rerun(directory, rank, graph_number, token, op, source, layout, ts, task)
                number = execution + stray  # k-th execution in the token, the stray one counted
                fault = source.faults.get(op.name) if self.is_target else None
                local = source.local_fault(op.name) if self.is_target else None
                inputs = [self._spec(source, layout, ref, 0) for ref in op.inputs]
                outputs = [
                    self._spec(source, layout, ref, execution, original, local)
                    for ref, original in zip(op.outputs, op.original_ops)
                ]
                skipped = self._undumped(op.name)
                inputs = [replace(t, dumped=False) if (IO.INPUT, i) in skipped else t for i, t in enumerate(inputs)]
                outputs = [replace(t, dumped=False) if (IO.OUTPUT, j) in skipped else t for j, t in enumerate(outputs)]
                if self.is_target and op.name in self.config.ffts_ops:
                    paths = self._write_ffts(directory, op, inputs, outputs, ts, task)
                else:
                    path = directory / self._file_name(directory, op, ts, task, number)
                    write_ge_dump(path, op.name, inputs, outputs, dump_time=ts)
                    paths = (path,)
                if fault is not None and fault.kind in (FaultKind.TRUNCATE, FaultKind.CORRUPT_HEADER):
                    _damage(paths[0], fault.kind)
                if self.is_target:
                    self.records.append(
                        TargetOp(rank, token, graph_number, op.name, op.type, number, paths,
                                 fault.kind if fault else None, op.members,
                                 inserted=op.kind is OpKind.INSERTED, inner=op.kind is OpKind.INNER,
                                 undumped=tuple(sorted(skipped)))
                    )  # fmt: skip

    def _write_rerun(
        self, directory: Path, rank: int, graph_number: int, token: int, op: _DumpOp, source: TargetValues,
        layout: _TensorLayout, ts: int, task: int,
    ) -> None:  # fmt: skip
        """The stray execution of a task run again: 1 µs before the real one, a task id of its own, each tensor
        cut to its first row (or, with one row, doubled), so no golden tensor has its shape."""

        def other_shape(spec: TensorSpec) -> TensorSpec:
            value = np.asarray(spec.values)
            if value.ndim == 0:
                return replace(spec, values=np.stack([value, value]))
            cut = value[:1] if value.shape[0] > 1 else np.concatenate([value, value])
            return replace(spec, values=cut)

        inputs = [other_shape(self._spec(source, layout, ref, 0)) for ref in op.inputs]
        outputs = [other_shape(self._spec(source, layout, ref, 0, original)) for ref, original in
                   zip(op.outputs, op.original_ops)]  # fmt: skip
        stray_task = task + 100_000  # a task id no other file of the token has
        path = directory / self._file_name(directory, op, ts - 1, stray_task, 0)
        write_ge_dump(path, op.name, inputs, outputs, dump_time=ts - 1)
        self.records.append(
            TargetOp(rank, token, graph_number, op.name, op.type, 0, (path,), None, op.members,
                     inserted=op.kind is OpKind.INSERTED, inner=op.kind is OpKind.INNER, rerun=True)
        )  # fmt: skip

    def _undumped(self, op_name: str) -> set[tuple[IO, int]]:
        wanted = [u for u in self.config.undumped if u.op == op_name]
        return {(u.io, u.index) for u in wanted if (u.target if self.is_target else u.golden)}

    def _spec(
        self,
        source: TargetValues,
        layout: _TensorLayout,
        ref: TensorRef,
        execution: int,
        original: Optional[tuple[str, int]] = None,
        fault: Optional[Fault] = None,
    ) -> TensorSpec:
        dtype, fmt = layout.dtypes[ref], layout.formats[ref]
        value = source.target(ref, execution) if self.is_target else source.golden(ref, execution)
        if fault is not None:
            value = apply_fault(fault, value)
            fmt = Format.ND if fault.kind is FaultKind.SHAPE else fmt
        return TensorSpec(value, dtype, fmt, c0=_c0(fmt, dtype), original_op=original)

    def _file_name(self, directory: Path, op: _DumpOp, ts: int, task: int, execution: int) -> str:
        stream = 2
        if self.config.capture_names:  # adump keeps dots in names; a path separator cannot be in a file name
            name = f"{op.type}.{op.name.replace('/', '_')}.{execution}.{task}.{stream}.{ts}"
        else:
            name = f"{op.type}.{sanitize(op.name)}.{task}.{stream}.{ts}"
        if len(name.encode()) <= MAX_FILE_NAME:
            return name
        hashed = str(zlib.crc32(str(directory / name).encode()) * 1_000_003 + task)  # stands in for std::hash
        with open(directory / "mapping.csv", "a", encoding="utf-8") as handle:
            handle.write(f"{hashed},{name}\n")
        return hashed

    def _write_ffts(self, directory: Path, op: _DumpOp, inputs, outputs, ts: int, task: int) -> tuple[Path, ...]:
        """Two automatic-mode slices, every input and output cut in two along axis 0 (docs/formats.md,
        "FFTS+ slice files")."""
        threads = (0, 1)

        def cut(specs: Sequence[TensorSpec]):
            # 0-d tensors (constants) cannot be cut: every thread gets the whole value
            pieces = [np.array_split(np.asarray(s.values), 2, axis=0) if np.ndim(s.values) else
                      [np.asarray(s.values)] * 2 for s in specs]  # fmt: skip
            bounds = []
            for thread in threads:
                per_tensor: list[list[dict[str, int]]] = []
                for parts in pieces:
                    if not parts[thread].ndim:
                        per_tensor.append([])
                        continue
                    lower = sum(len(p) for p in parts[:thread])
                    axes = [{"lower": lower, "higher": lower + len(parts[thread])}]
                    per_tensor.append(axes + [{"lower": 0, "higher": d} for d in parts[thread].shape[1:]])
                bounds.append(per_tensor)
            return pieces, bounds

        in_pieces, in_bounds = cut(inputs)
        out_pieces, out_bounds = cut(outputs)
        attr = {
            "threadMode": 1,
            "slice_instance_num": len(threads),
            "outputCutList": [[2] + [1] * (np.ndim(s.values) - 1) for s in outputs],
            "input_tensor_slice": in_bounds,
            "output_tensor_slice": out_bounds,
        }
        paths = []
        for thread in threads:
            path = directory / f"{op.type}.{sanitize(op.name)}.{task}.2.{ts + thread}.4.{task}.{thread}.0"
            write_ge_dump(
                path,
                op.name,
                [replace(s, values=p[thread], format=int(Format.ND)) for s, p in zip(inputs, in_pieces)],
                [replace(s, values=p[thread], format=int(Format.ND)) for s, p in zip(outputs, out_pieces)],
                dump_time=ts + thread,
                attrs=[("ffts_slice_info", json.dumps(attr))],
            )
            paths.append(path)
        return tuple(paths)


def _damage(path: Path, kind: FaultKind) -> None:
    data = bytearray(path.read_bytes())
    if kind is FaultKind.TRUNCATE:
        path.write_bytes(bytes(data[: max(9, len(data) * 2 // 3)]))
    else:
        data[8:40] = b"\xff" * min(32, len(data) - 8)
        path.write_bytes(bytes(data))


def _graph_specs(graph: ModelGraph, values: ModelValues) -> list[GraphOpSpec]:
    """The graph as torchair writes it: GE inserts its TransData/Cast ops later, so they are not in it, and their
    consumers' edges point at the original producers."""
    inserted = {op.name: op for op in graph.ge_ops if op.kind is OpKind.INSERTED}

    def source(ref: TensorRef) -> TensorRef:
        while ref.op in inserted:
            ref = inserted[ref.op].inputs[0]
        return ref

    return [_graph_op_spec(op, values, source) for op in graph.ge_ops if op.kind is not OpKind.INSERTED]


def _graph_op_spec(op: GeOpDef, values: ModelValues, source) -> GraphOpSpec:
    outputs = tuple(
        OutputSpec(
            fx_tensor_name=f"{fx[0]}.OUTPUT.{fx[1]}" if fx is not None else None,
            dtype=dtype,
            shape=tuple(np.shape(values.tensors[TensorRef(op.name, i)])),
            layout="ND",
        )
        for i, (fx, dtype) in enumerate(zip(op.fx_outputs, op.output_dtypes))
    )
    edges = tuple(f"{r.op}:{r.index}" for r in map(source, op.inputs)) + tuple(f"{c}:-1" for c in op.control_inputs)
    return GraphOpSpec(op.name, op.type, edges, outputs)


def _noise_of(config: ScenarioConfig) -> TargetNoise:
    return TargetNoise(config.seed, config.noise, config.ulp_noise, config.faults, config.propagate_faults)


def write_scenario(root: Path, config: ScenarioConfig = ScenarioConfig()) -> Scenario:
    """Write the dump trees of `config` under `root` and return what was written."""
    root = Path(root)
    target = _GeWriter(root / "target", config, TARGET_TIME_DIR, fused=True, target=True)
    golden_ge = _GeWriter(root / "golden_ge", config, GOLDEN_TIME_DIR, fused=False, target=False)
    fx = FxWriter(root / "golden_fx", config.fx_era, world_size=config.ranks) if config.write_fx else None
    graphs: list[ModelGraph] = []
    for rank in range(config.ranks):
        for model_index, number in enumerate(config.graphs):
            graph, values = None, None
            for token in range(config.tokens):
                weights = np.random.default_rng([config.seed, rank, number])  # same weights every token
                activations = np.random.default_rng([config.seed, rank, number, token])
                model = replace(config.model, layers=config.model.layers + model_index)  # graphs differ
                graph, values = build_model_values(model, weights, activations, f"graph_{number}")
                source = TargetValues(_noise_of(config), graph, values, rank, token)
                clock = _Clock(now=BASE_TIMESTAMP_US + (token * 10 + model_index) * 10_000_000)
                target.write_token(rank, number, model_index, token, graph, source, clock)
                if config.write_fusion_off:
                    golden_ge.write_token(rank, number, model_index, token, graph, source, _Clock(clock.now))
                if fx is not None:
                    fx.write_token(rank, number, token, graph, values)
            assert graph is not None and values is not None
            target.write_graph_files(rank, number, graph, values)
            if config.write_fusion_off:
                golden_ge.write_graph_files(rank, number, graph, values)
            if rank == 0:
                graphs.append(graph)
    return Scenario(
        root=root,
        target=root / "target" / "msprobe_ge_dump",
        golden_fx=fx.dump_root if fx is not None else None,
        golden_ge=root / "golden_ge" / "msprobe_ge_dump" if config.write_fusion_off else None,
        config=config,
        graphs=tuple(graphs),
        target_ops=tuple(target.records),
    )
