"""One token's dump files turned into op executions: GE ops in execution order (FFTS+ slices of one execution
merged, repeated executions of one op numbered), FX node calls with their argument and output files.

Only headers are read here (the GE header, a stats CSV, an appendix npz); tensors are read when compared.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Callable, Optional, TypeVar, cast

from tcmp.schemas.dump_records import IO, FileSummary, TensorKind, TensorSummary
from tcmp.schemas.dump_tree import DumpFile, FileKind
from tcmp.schemas.errors import DumpError, describe, unreadable_reason
from tcmp.schemas.ffts import ffts_base_name
from tcmp.schemas.fx_dump import FxFileName
from tcmp.schemas.ge_dump import read_ge_dump
from tcmp.schemas.ge_header import GeDump
from tcmp.schemas.ge_names import GeFileName
from tcmp.summaries.ffts import merged_slice_tensors
from tcmp.summaries.summarize import summarize_file


@dataclass(frozen=True)
class TensorMeta:
    io: IO
    index: int
    shape: Optional[tuple[int, ...]]  # ND shape, when the header says
    dtype: Optional[str]
    stored: Optional[TensorSummary] = None  # summary-only files (and the index): the tensor's summary
    dumped: bool = True  # False: the writer skipped it (device address 0), there is nothing to compare


@dataclass(frozen=True)
class GeExecution:
    op_name: str  # the header's unsanitized name when read, else the file name's
    op_type: str
    timestamp: int
    files: tuple[DumpFile, ...]  # one file, or the FFTS+ slice files of this execution
    inputs: tuple[TensorMeta, ...]
    outputs: tuple[TensorMeta, ...]
    original_ops: tuple[Optional[tuple[str, int]], ...]  # per output: the header's original_op
    error: Optional[str] = None  # unreadable: why
    order: int = 0  # position in the token's execution order
    execution: int = 0  # k-th execution of this op name in the token
    raw_deleted: bool = False
    headers: tuple[GeDump, ...] = ()  # the headers read here, for loading the tensors later

    def numbered(self, order: int, execution: int) -> GeExecution:
        """This execution at `order` in its token, the `execution`-th of its op (`dataclasses.replace` without its
        per-call look at the fields: a call per file)."""
        return GeExecution(self.op_name, self.op_type, self.timestamp, self.files, self.inputs, self.outputs,
                           self.original_ops, self.error, order, execution, self.raw_deleted, self.headers)  # fmt: skip

    @property
    def file_op_name(self) -> str:
        return self.files[0].op_name

    def tensor(self, io: IO, index: int) -> Optional[TensorMeta]:
        items = self.inputs if io is IO.INPUT else self.outputs
        return items[index] if index < len(items) else None


@dataclass(frozen=True)
class FxCall:
    """One call of an FX node in one token: its argument and output files."""

    node: str
    target: str
    timestamp: str
    call: int  # k-th call of this node in the token
    inputs: tuple[tuple[int, Optional[int], DumpFile], ...]  # (i, j, file), numeric order (INPUT.2 before .10)
    outputs: tuple[tuple[int, DumpFile], ...]

    @property
    def key(self) -> str:
        return f"{self.node}-{self.target}"

    def output(self, index: int) -> Optional[DumpFile]:
        return next((f for k, f in self.outputs if k == index), None)


def _stored_meta(t: TensorSummary) -> TensorMeta:
    return TensorMeta(t.io, t.index, t.shape, t.dtype, t, dumped=t.kind is not TensorKind.NOT_DUMPED)


def _from_summaries(
    op_name: str,
    op_type: str,
    timestamp: int,
    files: Sequence[DumpFile],
    tensors: Sequence[TensorSummary],
    raw_deleted: bool = False,
) -> GeExecution:
    """An execution known by its tensors' summaries only (a stats/min-max file, or the index's rows)."""
    inputs = tuple(_stored_meta(t) for t in tensors if t.io is IO.INPUT)
    outputs = tuple(_stored_meta(t) for t in tensors if t.io is IO.OUTPUT)
    originals = tuple(t.original_op for t in tensors if t.io is IO.OUTPUT)  # the index's, as the header gave them
    return GeExecution(op_name, op_type, timestamp, tuple(files), inputs, outputs, originals,
                       raw_deleted=raw_deleted)  # fmt: skip


def _from_index(files: Sequence[DumpFile], summary: FileSummary) -> GeExecution:
    """An execution whose raw file is gone: its tensors are the summaries `tcmp watch` stored."""
    first = files[0]
    op_name = ffts_base_name(summary.op_name) if len(files) > 1 else summary.op_name or first.op_name
    timestamp = summary.dump_time or first.timestamp or 0
    return _from_summaries(op_name, first.op_type or "", timestamp, files, summary.tensors, raw_deleted=True)


def _from_index_slices(files: Sequence[DumpFile], summaries: Sequence[FileSummary]) -> GeExecution:
    """An FFTS+ execution whose slice files are gone: described by its first slice, as from the raw files (shapes
    to pair by, original ops), with the whole tensors' summaries merged from every slice's."""
    execution = _from_index(files, summaries[0])
    merged = {(t.io, t.index): t for t in merged_slice_tensors(files, summaries)}

    def whole(meta: TensorMeta) -> TensorMeta:
        stored = merged.get((meta.io, meta.index))
        return meta if stored is None else replace(meta, stored=stored)

    return replace(execution, inputs=tuple(map(whole, execution.inputs)), outputs=tuple(map(whole, execution.outputs)))


def _read_execution(files: Sequence[DumpFile], stored: Mapping[Path, FileSummary]) -> GeExecution:
    first = files[0]
    name = first.name
    assert isinstance(name, GeFileName)
    if len(files) > 1 and all(f.path in stored for f in files):
        return _from_index_slices(files, [stored[f.path] for f in files])
    if first.path in stored:
        return _from_index(files, stored[first.path])
    base = GeExecution(first.op_name, first.op_type or "", first.timestamp or 0, tuple(files), (), (), ())
    try:
        if first.kind is FileKind.GE_BINARY:
            dump = read_ge_dump(first.path)
            inputs, outputs = (
                tuple(TensorMeta(t.io, t.index, t.nd_shape, t.dtype_name, dumped=t.dumped) for t in items)
                for items in (dump.inputs, dump.outputs)
            )
            originals = tuple(
                (t.original_op.name, t.original_op.output_index) if t.original_op else None for t in dump.outputs
            )
            op_name = ffts_base_name(dump.op_name) if len(files) > 1 else dump.op_name
            return GeExecution(
                op_name or first.op_name, base.op_type, dump.dump_time or base.timestamp, tuple(files), inputs,
                outputs, originals, headers=(dump,),
            )  # fmt: skip
        # a stats CSV or min/max file: read as the daemon reads it, so it shows the same (dtype, format) either way
        summary = summarize_file(first)
        return _from_summaries(base.op_name, base.op_type, base.timestamp, files, summary.tensors)
    except DumpError as exc:
        return GeExecution(base.op_name, base.op_type, base.timestamp, tuple(files), (), (), (), error=describe(exc))
    except OSError as exc:  # it could be opened when listed (sources._openable); an I/O error, or gone since
        why = unreadable_reason(exc)
        return GeExecution(base.op_name, base.op_type, base.timestamp, tuple(files), (), (), (), error=why)


def _slice_order(f: DumpFile) -> tuple[int, int]:
    name = f.name
    assert isinstance(name, GeFileName) and name.ffts is not None  # only FFTS slices are grouped
    return name.ffts.thread_id, f.timestamp or 0


def ge_executions(
    files: Sequence[DumpFile], stored: Mapping[Path, FileSummary] = MappingProxyType({})
) -> tuple[GeExecution, ...]:
    """The GE op executions of one token, in execution order (dump time, then file name). `stored`: summaries
    from the index for files whose raw data `tcmp watch` deleted."""
    slices: dict[tuple, list[DumpFile]] = defaultdict(list)
    singles: list[list[DumpFile]] = []
    for f in files:
        name = f.name
        if isinstance(name, GeFileName) and name.ffts is not None:
            slices[(ffts_base_name(name.op_name), name.task_id, name.stream_id)].append(f)
        else:
            singles.append([f])
    groups = singles + [sorted(g, key=_slice_order) for g in slices.values()]
    executions = sorted((_read_execution(g, stored) for g in groups), key=lambda e: (e.timestamp, e.files[0].path.name))
    counts: dict[str, int] = defaultdict(int)
    numbered = []
    for order, e in enumerate(executions):
        numbered.append(e.numbered(order, counts[e.op_name]))
        counts[e.op_name] += 1
    return tuple(numbered)


_Partner = TypeVar("_Partner")


def align_runs(
    runs: Sequence[GeExecution], partners: Sequence[_Partner], fits: Callable[[GeExecution, _Partner], bool]
) -> dict[int, int]:
    """Executions of one op in a token (`runs`) to the golden's runs of it (FX calls, fusion-off executions):
    execution number -> partner index. The k-th with the k-th when the counts agree; else in order, skipping on
    the side with more runs what `fits` says cannot be the same run (another output shape: a GE task run again,
    a step retried on one side). An execution left out has no partner."""
    if len(runs) == len(partners):
        return {e.execution: k for k, e in enumerate(runs)}
    pairs: dict[int, int] = {}
    a = b = 0
    while a < len(runs) and b < len(partners):
        if fits(runs[a], partners[b]):
            pairs[runs[a].execution] = b
            a, b = a + 1, b + 1
        elif len(runs) - a > len(partners) - b:
            a += 1
        else:
            b += 1
    return pairs


def same_shape(a: Optional[tuple[int, ...]], b: Optional[tuple[int, ...]]) -> bool:
    """Whether two tensors can be one run's (true where either shape is not known)."""
    return a is None or b is None or tuple(a) == tuple(b)


def fx_calls(files: Sequence[DumpFile]) -> dict[str, tuple[FxCall, ...]]:
    """FX node calls of one token by node key, each node's calls in call order."""
    by_call: dict[tuple[str, str], list[DumpFile]] = defaultdict(list)
    for f in files:
        name = f.name
        assert isinstance(name, FxFileName)
        by_call[(name.key, name.timestamp)].append(f)
    calls: dict[str, list[FxCall]] = defaultdict(list)
    for (key, ts), call_files in sorted(by_call.items(), key=lambda item: (item[0][0], int(item[0][1] or 0))):
        names = [(cast(FxFileName, f.name), f) for f in call_files]  # (asserted above)
        inputs = sorted(
            ((n.index, n.sub_index, f) for n, f in names if n.io is IO.INPUT),
            key=lambda x: (x[0], -1 if x[1] is None else x[1]),
        )
        outputs = sorted(((n.index, f) for n, f in names if n.io is IO.OUTPUT), key=lambda x: x[0])
        first = names[0][0]
        calls[key].append(FxCall(first.node, first.target, ts, len(calls[key]), tuple(inputs), tuple(outputs)))
    return {k: tuple(v) for k, v in calls.items()}
