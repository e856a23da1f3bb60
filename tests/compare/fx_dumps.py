"""Tiny hand-built GE/FX dump pairs for the GE → FX matcher's rules (test_fx_rules*.py): a torchair graph text
file, GE dump files and FX .npy files, each written as the real writers lay them out.

- the graph: `msprobe_ge_dump/dynamo_original_graph_1_rank_0_pid_…_ts_….txt` (graph_writer), graph `graph_1`;
- GE: `msprobe_ge_dump/worldsize1_global_rank0/{time}/0/graph_1_0/1/{step}/{OpType}.{OpName}.{task}.0.{ts_us}`
  (ge_writer), one file per execution, in the order `ge()` is called;
- FX (torchair 2.14): `msprobe_fx_dump/worldsize1_global_rank0/graph_1/{step}/{node}-{target}.INPUT|OUTPUT.{i}
  [.{j}].{ts}.npy`, one `np.save` per positional argument and output, one 20-digit timestamp per node call, calls
  in the order `fx()` is called.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

import numpy as np

from tcmp.compare.execute.run import run_compare
from tcmp.compare.judge.rows import Row
from tcmp.compare.records import Role, Unmatched, UnmatchedKind
from tcmp.compare.report.outcome import CompareOptions, CompareResult
from tcmp.schemas.dtypes import DataType
from tcmp.schemas.dump_records import IO
from tcmp.schemas.synth.ge_writer import TensorSpec, write_ge_dump
from tcmp.schemas.synth.graph_writer import GraphOpSpec, OutputSpec, graph_file_name, write_graph

F32, F16, I32, I64 = DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_INT32, DataType.DT_INT64
I8 = DataType.DT_INT8
_NUMPY_OF = {F32: np.float32, F16: np.float16, I8: np.int8, I32: np.int32, I64: np.int64}
_GE_OF = {np.dtype(v): k for k, v in _NUMPY_OF.items()}

GE_RANK_DIR = "msprobe_ge_dump/worldsize1_global_rank0/20261129083000/0/graph_1_0/1"
FX_RANK_DIR = "msprobe_fx_dump/worldsize1_global_rank0/graph_1"
_FX_START = 20261129083000000000  # %Y%m%d%H%M%S%f
_GE_START_US = 1_764_405_000_000_000


def out(fx_tensor_name: Optional[str], shape: Sequence[int], dtype: int = F32) -> OutputSpec:
    """A graph op's output desc: its `_fx_tensor_name` (None: an inner op of an expansion), shape and dtype."""
    return OutputSpec(fx_tensor_name, int(dtype), tuple(shape))


def op(name: str, type_: str, inputs: Sequence[str] = (), outputs: Sequence[OutputSpec] = ()) -> GraphOpSpec:
    return GraphOpSpec(name, type_, tuple(inputs), tuple(outputs))


def data(name: str, shape: Sequence[int], dtype: int = F32) -> GraphOpSpec:
    """A graph input (never executed, so never dumped)."""
    return op(name, "Data", (), (out(None, shape, dtype),))


def values(*shape: int, start: float = 0.0, dtype=np.float32) -> np.ndarray:
    """Distinct values (exact in float16 too), so that a tensor paired with the wrong file fails."""
    count = int(np.prod(shape)) if shape else 1
    return (np.arange(count, dtype=np.float64).reshape(shape) * 0.25 + start).astype(dtype)


FxArg = Union[np.ndarray, Sequence[np.ndarray], object]


@dataclass
class Outcome:
    """One compare of a built pair, with lookups by what the rules talk about."""

    result: CompareResult

    @property
    def rank(self):
        return self.result.ranks[0]

    @property
    def rows(self) -> tuple[Row, ...]:
        return self.rank.rows

    def rows_of(self, op_name: str, io: IO, index: int) -> list[Row]:
        return [r for r in self.rows if (r.pair.op_name, r.pair.io, r.pair.index) == (op_name, io, index)]

    def row(self, op_name: str, io: IO, index: int, execution: int = 0) -> Row:
        found = [r for r in self.rows_of(op_name, io, index) if r.pair.execution == execution]
        listed = [(u.op_name, u.io, u.index, u.kind.value, u.reason) for u in self.target_unmatched()]
        assert len(found) == 1, f"no single row for {op_name} {io.value} {index} #{execution}; unmatched: {listed}"
        return found[0]

    def label(self, op_name: str, io: IO, index: int, execution: int = 0) -> str:
        """The FX file (and element) a GE tensor was paired with."""
        return self.row(op_name, io, index, execution).pair.bench.label

    def target_unmatched(self) -> list[Unmatched]:
        return [u for u in self.rank.unmatched if u.role is Role.TARGET]

    def golden_unmatched(self) -> list[Unmatched]:
        return [u for u in self.rank.unmatched if u.role is Role.GOLDEN]

    def unmatched(self, op_name: str, io: IO, index: int) -> list[Unmatched]:
        """The target items listed for one GE tensor (one per execution not paired)."""
        return [u for u in self.target_unmatched() if (u.op_name, u.io, u.index) == (op_name, io, index)]

    def one_unmatched(self, op_name: str, io: IO, index: int) -> Unmatched:
        found = self.unmatched(op_name, io, index)
        paired = [r.pair.bench.label for r in self.rows_of(op_name, io, index)]
        assert len(found) == 1, f"{op_name} {io.value} {index}: listed {found}, paired with {paired}"
        return found[0]

    def golden(self, file_name: str) -> Unmatched:
        """The golden item listed for one FX file, by its name without the timestamp (`mul-aten.mul.Tensor.INPUT.0`)."""
        found = [u for u in self.golden_unmatched() if _without_timestamp(Path(u.path).name) == file_name]
        listed = sorted(Path(u.path).name for u in self.golden_unmatched())
        assert len(found) == 1, f"{file_name}: {len(found)} golden items listed; listed: {listed}"
        return found[0]

    def golden_names(self) -> set[str]:
        """The FX files listed, without their timestamps."""
        return {_without_timestamp(Path(u.path).name) for u in self.golden_unmatched()}


def _without_timestamp(name: str) -> str:
    head, _, _ = name[: -len(".npy")].rpartition(".")
    return head


class DumpPair:
    """Builds one GE dump with its graph and the FX dump of the same run, under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.graph_ops: list[GraphOpSpec] = []
        self._ge_clock = _GE_START_US
        self._fx_clock = _FX_START
        self._tasks = 0
        self.fx_files: dict[str, Path] = {}  # file name without timestamp -> path (the last call's)

    @property
    def target(self) -> Path:
        return self.root / "msprobe_ge_dump"

    @property
    def golden(self) -> Path:
        return self.root / "msprobe_fx_dump"

    def graph(self, *ops: GraphOpSpec) -> None:
        self.graph_ops.extend(ops)

    def ge(
        self, op_name: str, op_type: str, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray], step: int = 0
    ) -> Path:
        """One execution of GE op `op_name` (of `op_type`): a dump file holding these input and output values."""
        self._ge_clock += 10
        self._tasks += 1
        path = self.root / GE_RANK_DIR / str(step) / f"{op_type}.{op_name}.{self._tasks}.0.{self._ge_clock}"
        specs = [_spec(v) for v in (*inputs, *outputs)]
        write_ge_dump(path, op_name, specs[: len(inputs)], specs[len(inputs) :], dump_time=self._ge_clock)
        return path

    def fx(
        self,
        key: str,
        inputs: Sequence[FxArg],
        outputs: Sequence[FxArg],
        step: int = 0,
    ) -> dict[str, Path]:
        """One call of an FX node `{node}-{target}`: an argument given as a list is saved one file per element
        (`INPUT.{i}.{j}`); anything else goes through np.array, as torchair's dumper does; an object array (a list
        holding None) is pickled."""
        self._fx_clock += 17
        directory = self.root / FX_RANK_DIR / str(step)
        directory.mkdir(parents=True, exist_ok=True)
        written: dict[str, Path] = {}

        def save(stem: str, value) -> None:
            path = directory / f"{key}.{stem}.{self._fx_clock}.npy"
            array = value if isinstance(value, np.ndarray) else np.array(value)
            np.save(path, array, allow_pickle=array.dtype.hasobject)
            written[f"{key}.{stem}"] = path

        for i, arg in enumerate(inputs):
            if isinstance(arg, list) and all(isinstance(a, np.ndarray) for a in arg):
                for j, element in enumerate(arg):
                    save(f"INPUT.{i}.{j}", element)
            else:
                save(f"INPUT.{i}", arg)
        for k, value in enumerate(outputs):
            save(f"OUTPUT.{k}", value)
        self.fx_files.update(written)
        return written

    def write_graph(self) -> Path:
        self.target.mkdir(parents=True, exist_ok=True)
        name = graph_file_name(1, 0, 4242, "20261129083000000000")
        return write_graph(self.target, name, "graph_1", self.graph_ops)

    def compare(self) -> Outcome:
        self.write_graph()
        result, _ = run_compare(CompareOptions(self.target, self.golden), keep_rows=True)
        assert len(result.ranks) == 1
        return Outcome(result)


def _spec(value: np.ndarray) -> TensorSpec:
    value = np.asarray(value)
    dtype = _GE_OF[value.dtype]
    logical = value.astype(np.float64) if value.dtype.kind == "f" else value
    return TensorSpec(values=logical, dtype=int(dtype))


def by_design(u: Unmatched, *words: str) -> None:
    """`u` is listed by design, its reason naming every one of `words` (case-insensitive)."""
    assert u.kind is UnmatchedKind.BY_DESIGN, f"{u.kind.value}: {u.reason}"
    missing = [w for w in words if w.lower() not in u.reason.lower()]
    assert not missing, f"reason lacks {missing}: {u.reason}"
