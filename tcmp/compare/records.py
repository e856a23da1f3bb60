"""Records flowing through the compare's stages: tensor references, matched pairs, unmatched tensors, the compare's
error. The result rows the judge makes of pairs are in `judge.rows`."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Optional, Union

from tcmp.compare.rules.cast_check import CastCheck
from tcmp.schemas.dump_records import IO, TensorSummary
from tcmp.schemas.dump_tree import RAW_TENSOR_KINDS, DumpFile, FileKind
from tcmp.schemas.errors import TcmpError
from tcmp.schemas.ge_header import GeDump
from tcmp.schemas.npy_header import NpyHeader

# What planning read of a file (a GE dump's header, an FX file's .npy header), handed to the loader with the pairs so
# that a header is parsed once per compare
FileHeader = Union[GeDump, NpyHeader]


class CompareError(TcmpError):
    """A compare that cannot run: one clear line for the user. `usage` marks a mistake in the command line."""


class UnmatchedKind(str, enum.Enum):
    """Why an item has no partner, in the terms a user acts on."""

    BY_DESIGN = "by design"  # nothing to pair it with exists: fused-op members, FX input copies, arguments, …
    OUT_OF_SCOPE = "out of scope"  # its token, rank, run or graph is not in the other dump, or GE did not dump it
    NO_PARTNER = "no partner"  # a partner should exist and was not found: look at these
    UNREADABLE = "unreadable"  # its file or its name could not be read


class Role(str, enum.Enum):
    """Which dump of the compare a file belongs to."""

    TARGET = "target"
    GOLDEN = "golden"


@dataclass(frozen=True)
class TensorRef:
    """One tensor of a dump: (io, index[, sub_index]) of one file, or of the FFTS+ slice files of one op.

    `stored` is a summary the tensor only exists as (a stats-mode CSV, an appendix min/max file, the daemon's index
    when the raw file is gone). `has_raw` says whether the raw tensor can be read. `dumped` is False for a GE tensor
    the writer skipped (device address 0): it has no data at all.
    """

    files: tuple[DumpFile, ...]
    io: IO
    index: int
    sub_index: Optional[int] = None
    stored: Optional[TensorSummary] = None
    raw_deleted: bool = False
    dumped: bool = True
    element: Optional[int] = None  # an FX file stacking a list output (`OUTPUT.1` of a `(Tensor, Tensor[])`): [element]
    reshaped: bool = False  # holds the other side's elements in another shape (a view torchair's fusion folded in)

    @property
    def has_raw(self) -> bool:
        return not self.raw_deleted and all(f.kind in RAW_TENSOR_KINDS for f in self.files)

    @property
    def label(self) -> str:
        """The report's "real data name": the GE file and tensor, or the FX file name."""
        name = self.files[0].path.name
        if self.files[0].kind in (FileKind.FX_NPY, FileKind.FX_MIN_MAX_NPY, FileKind.ACL_PT):
            return name if self.element is None else f"{name}[{self.element}]"
        slices = f" (+{len(self.files) - 1} FFTS+ slices)" if len(self.files) > 1 else ""
        return f"{name} {self.io.value} {self.index}{slices}"


@dataclass(frozen=True)
class Pair:
    """A target tensor and the golden tensor it is compared with."""

    rank: Optional[int]
    token: int
    graph: str
    op_name: str  # GE op name (a fused op's full name)
    op_type: str
    order: int  # execution order of the op within its token
    execution: int  # k-th execution of the op in the token
    io: IO
    index: int
    npu: TensorRef
    bench: TensorRef
    notes: tuple[str, ...] = ()
    stack_info: Optional[str] = None
    timestamp: int = 0  # the GE execution's dump time: orders ops across the graphs of a token
    cast: Optional[CastCheck] = None  # a GE-inserted value-changing cast: the bench is Cast(input), not the input
    carried: Optional[str] = None  # the narrower dtype whose precision the target tensor carries (`ulp.RULE`)

    @property
    def api_name(self) -> str:
        suffix = f" #{self.execution}" if self.execution else ""
        return f"{self.op_name}.{self.io.value}.{self.index}{suffix}"

    @property
    def bench_label(self) -> str:
        """The bench's "real data name": a value-changing cast's bench is Cast(its input), and says so."""
        if self.cast is None or self.cast.preserving:
            return self.bench.label
        return f"Cast({self.bench.label}) {self.cast.label}"


@dataclass(frozen=True)
class Unmatched:
    """A target op or tensor, or a golden tensor, that has no partner, and why."""

    role: Role
    rank: Optional[int]
    token: Optional[int]
    op_name: str
    op_type: str
    io: Optional[IO]
    index: Optional[int]
    path: str
    reason: str
    kind: UnmatchedKind
