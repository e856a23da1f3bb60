"""Records shared between the layers: which side of a compare a file belongs to, tensor direction, file
completeness, and the per-tensor summary that the index stores and statistics-mode compares."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np


class Side(str, enum.Enum):
    GE = "ge"
    FX = "fx"
    GRAPH = "graph"
    ACL = "acl"  # aclgraph `.pt` dumps (reduce-overhead / npugraph_ex)


class IO(str, enum.Enum):
    INPUT = "input"
    OUTPUT = "output"


class Completeness(str, enum.Enum):
    """What a format-level size check says about a file on disk."""

    COMPLETE = "complete"
    INCOMPLETE = "incomplete"  # smaller than its header promises: still being written
    CORRUPT = "corrupt"  # larger than promised, or a header that cannot be parsed


@dataclass(frozen=True)
class Summary:
    """Condensed statistics of one tensor.

    min, max, mean and l2norm are taken over the non-NaN elements (so ±inf shows in min/max and makes mean and
    l2norm infinite); nan_count and inf_count say what was there. None means "not available" (non-numeric
    tensor, or a source such as an appendix `_min_max` file that only holds min and max). crc32 is taken over
    the tensor's canonical ND bytes (see tcmp.summaries.summarize).
    """

    numel: Optional[int]
    min: Optional[float]
    max: Optional[float]
    mean: Optional[float] = None
    l2norm: Optional[float] = None
    nan_count: Optional[int] = None
    inf_count: Optional[int] = None
    crc32: Optional[int] = None


@dataclass(frozen=True)
class LoadedTensor:
    """A tensor as read from a dump: ND layout where the device format could be undone.

    `array` keeps the dump's own dtype (ml_dtypes' bfloat16 and float8 types included; sub-byte integers widened
    to int8/uint8); `raw` means it holds the payload bytes because the dtype has no numeric decoding. `notes`
    say everything a user should know about how it was read (unverified bit orders, unconverted layouts …).
    """

    array: np.ndarray
    dtype_name: str
    raw: bool = False
    layout_converted: bool = False
    notes: tuple[str, ...] = ()
    layout_flagged: bool = False


class TensorKind(str, enum.Enum):
    TENSOR = "tensor"
    SCALAR = "scalar"  # FX 0-d numeric argument
    NONE = "none"  # FX None argument
    STRING = "string"
    OBJECT = "object"
    RAW = "raw"  # a GE payload without numeric decoding: only its CRC means something
    NOT_DUMPED = "not_dumped"  # a GE tensor the writer skipped (device address 0): described, no data
    MIN_MAX = "min_max"  # appendix convert-to-min/max files: min and max only
    STATS = "stats"  # GE stats-mode CSV: min, max, mean, NaN/inf counts


@dataclass(frozen=True)
class TensorSummary:
    """One tensor of a dump file, condensed: what the index stores and statistics/md5 compares read."""

    io: IO
    index: int
    sub_index: Optional[int]  # FX list arguments (INPUT.i.j)
    kind: TensorKind
    dtype: Optional[str]  # "DT_FLOAT16" for GE, the numpy dtype name for FX
    shape: Optional[tuple[int, ...]]  # ND shape
    summary: Optional[Summary]  # None when nothing numeric is known
    device_format: Optional[str] = None
    device_shape: Optional[tuple[int, ...]] = None
    notes: tuple[str, ...] = ()
    # GE outputs: the header's `OpOutput.original_op` (the pre-fusion op and output a fused op's output stands for),
    # which pairs the output as it pairs from the raw file
    original_op: Optional[tuple[str, int]] = None
    # FX outputs that may stack a list (`OUTPUT.1` holding the tensors GE names `OUTPUT.1.0`, `OUTPUT.1.1`, …): the
    # summary of each element along the leading dimension, so the index pairs an element as the raw file does
    elements: tuple[Summary, ...] = ()


@dataclass(frozen=True)
class FileSummary:
    path: Path
    op_name: str  # GE: the header's (unsanitized) op name; FX: the node name
    dump_time: Optional[int]
    tensors: tuple[TensorSummary, ...]
    slicing: Optional[str] = None  # an FFTS+ slice file's slicing attribute (JSON, as dumped): how slices merge
