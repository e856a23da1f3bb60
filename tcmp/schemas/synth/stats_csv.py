"""Stats-mode CSVs (`dump_data="stats"`) written the way CANN's two writers write them (hicann/runtime), for tests:

- `aicpu_stats_csv`: the AICPU `OpDumpTask::ProcessDumpStats` (dump_task.cpp) with its `DataStats` classes
  (dump_task.h): the 13 columns, its dtype/format names or `-`, `AxBxC` or `-` shapes, C++ ostream number
  formatting (6 significant digits), seven empty cells where it has no statistics.
- `AdumpStatsWriter`: the adump `AdxDumpRecord` (adx_dump_record.cpp): a header built from the selected statistics,
  `UNKNOW` names, `NA` rows for a tensor the device could not summarize, and the `compatible_` flag that is never
  reset, which leaves the header of a non-default selection one column longer than its rows once the default
  selection has been written (the writer's own unit test `GenerateFileData` shows it).

The statistics are computed with numpy from the tensors as dumped (device layout). The AICPU writer's semantics
are its source's (max/min start from the first element, so a leading NaN makes both NaN; the mean of a tensor with
infinities of one sign is that infinity); adump's device kernel is not public, so its values follow tcmp's
`Summary` definitions (over the non-NaN elements).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np

from tcmp.schemas.dtypes import DataType, to_float32
from tcmp.schemas.dump_records import IO
from tcmp.schemas.formats import Format
from tcmp.schemas.stats_files import SELECTABLE_STATISTICS, STATS_COLUMNS


@dataclass(frozen=True)
class DumpedTensor:
    """One tensor as a stats writer sees it: header fields and the device-layout values (None: address 0)."""

    io: IO
    index: int
    size: int
    dtype: int
    format: int
    shape: tuple[int, ...]
    values: Optional[np.ndarray]


def _cpp(value: float) -> str:
    """`std::ostream << double` with default flags: %g with 6 significant digits; glibc's nan/inf spelling."""
    if math.isnan(value):
        return "-nan" if math.copysign(1.0, value) < 0 else "nan"
    return f"{value:g}"


# --------------------------------------------------------------------------------------------------------------
# AICPU OpDumpTask


# GetDataTypeStr's map: DT_UNDEFINED .. DT_DUAL; anything else is "-"
_AICPU_DTYPES = frozenset(range(int(DataType.DT_UNDEFINED), int(DataType.DT_DUAL) + 1))
# GetDataFormatStr's map: NCHW .. RESERVED; anything else is "-"
_AICPU_FORMATS = frozenset(range(int(Format.NCHW), int(Format.RESERVED) + 1))
_AICPU_FLOATS = frozenset({DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_DOUBLE})
_AICPU_INTEGERS = frozenset(
    {DataType.DT_UINT8, DataType.DT_INT8, DataType.DT_INT16, DataType.DT_UINT16, DataType.DT_INT32,
     DataType.DT_INT64, DataType.DT_UINT32, DataType.DT_UINT64, DataType.DT_BOOL}
)  # fmt: skip


def _aicpu_statistics(tensor: DumpedTensor) -> str:
    """`GenerateDataStatsInfo`: max,min,avg,count,nan,-inf,+inf, or six commas (address 0, other dtypes)."""
    values = tensor.values
    if values is None or tensor.dtype not in _AICPU_FLOATS | _AICPU_INTEGERS:
        return ",,,,,,"
    flat = np.asarray(values).reshape(-1)
    if flat.size == 0:  # the writer reads data_[0] regardless; what it prints then is undefined
        return "0,0,0,0,0,0,0"
    if tensor.dtype in _AICPU_FLOATS:
        wide = flat.astype(np.float64)
        if math.isnan(wide[0]):  # maxValue_ = minValue_ = data_[0]; every comparison with NaN is false
            high = low = math.nan
        else:
            high, low = float(np.nanmax(wide)), float(np.nanmin(wide))
        nans, negative, positive = int(np.isnan(wide).sum()), int(np.isneginf(wide).sum()), int(np.isposinf(wide).sum())
        if nans:
            mean = math.nan
        elif negative and not positive:  # AdjustAvgValue
            mean = -math.inf
        elif positive and not negative:
            mean = math.inf
        elif positive and negative:
            mean = math.nan
        else:
            mean = float(wide.mean())
        extremes = f"{_cpp(high)},{_cpp(low)}"
    else:  # integers print as integers (int8/uint8 cast to int, bool as 0/1); isnan/isinf are false
        ints = flat.astype(np.int64) if tensor.dtype != DataType.DT_UINT64 else flat.astype(np.uint64)
        extremes = f"{int(ints.max())},{int(ints.min())}"
        mean, nans, negative, positive = float(ints.astype(np.float64).mean()), 0, 0, 0
    count = tensor.size // np.asarray(values).dtype.itemsize  # count_ = dataSize_ / sizeof(T)
    return f"{extremes},{_cpp(mean)},{count},{nans},{negative},{positive}"


def _aicpu_shape(shape: Sequence[int]) -> str:
    return "x".join(str(d) for d in shape) if shape else "-"  # GenerateDataDimInfo


def aicpu_stats_csv(tensors: Iterable[DumpedTensor]) -> str:
    """The whole file `ProcessDumpStats` writes for one op (inputs first, then outputs)."""
    lines = [",".join(STATS_COLUMNS)]
    for t in sorted(tensors, key=lambda t: (t.io is IO.OUTPUT, t.index)):
        dtype = DataType(t.dtype).name if t.dtype in _AICPU_DTYPES else "-"
        fmt = Format(t.format).name if t.format in _AICPU_FORMATS else "-"
        lines.append(
            f"{t.io.value.capitalize()},{t.index},{t.size},{dtype},{fmt},{_aicpu_shape(t.shape)},{_aicpu_statistics(t)}"
        )
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------------------
# adump AdxDumpRecord

# the dump config's names for the statistics (dump_setting.cpp InitDumpStatsItem), in STATS_ITEM_MAP's order
CONFIG_NAMES = ("Max", "Min", "Avg", "Nan", "Negative Inf", "Positive Inf", "L2norm")
DEFAULT_SELECTION = CONFIG_NAMES[:6]  # an empty stats list in the config
_COUNT_POSITION = 3  # COUNT_HEADER_COMPATIBLE
_MAX_SHAPE_SIZE = 25
_ADUMP_FLOATS = frozenset(
    {DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_BF16, DataType.DT_HIFLOAT8, DataType.DT_FLOAT8_E5M2,
     DataType.DT_FLOAT8_E4M3FN}
)  # fmt: skip  # TypeDataHandle: read as float; DT_INT64 as int64; anything else as int32
_ADUMP_DTYPES = frozenset(range(int(DataType.DT_UNDEFINED), int(DataType.DT_FLOAT4_E1M2) + 1))  # DT_STRING_MAP
_ADUMP_FORMAT_NAMES = {int(f): f.name for f in Format if f <= Format.C1HWC0}  # FORMAT_STRING_MAP ...
_ADUMP_FORMAT_NAMES[int(Format.DHWCN)] = "DHWCH"  # ... whose proto spells format 31 FORMAT_DHWCH


def _float32(value: float) -> str:
    return _cpp(float(np.float32(value)))  # FloatDataHandle: a float reinterpreted from the 64-bit slot


def _adump_values(t: DumpedTensor) -> list[str]:
    """The seven statistics in STATS_ITEM_MAP's order, formatted as GetStatsString does."""
    flat = to_float32(np.asarray(t.values)).reshape(-1).astype(np.float64)
    valid = flat[~np.isnan(flat)]
    high, low = (float(valid.max()), float(valid.min())) if valid.size else (math.nan, math.nan)
    mean = float(valid.mean()) if valid.size else math.nan
    norm = float(np.sqrt(np.square(valid).sum()))
    if t.dtype in _ADUMP_FLOATS:
        extremes = [_float32(high), _float32(low)]
    else:  # Int32DataHandle prints the low 32 bits as a signed int; DT_INT64 prints all 64
        ints = np.asarray(t.values).reshape(-1).astype(np.int64)
        width = np.int64 if t.dtype == DataType.DT_INT64 else np.int32
        extremes = [str(int(v.astype(width))) for v in (ints.max(), ints.min())] if ints.size else ["0", "0"]
    counts = [int(np.isnan(flat).sum()), int(np.isneginf(flat).sum()), int(np.isposinf(flat).sum())]
    return extremes + [_float32(mean)] + [str(int(np.int32(c))) for c in counts] + [_float32(norm)]


class AdumpStatsWriter:
    """One process's `AdxDumpRecord`: its `compatible_` flag outlives the selection that set it."""

    def __init__(self, compatible: bool = False) -> None:
        self.compatible = compatible

    def header(self, selection: Sequence[str]) -> str:
        """`SetOptimizationMode` (it also updates the flag, as the writer does)."""
        chosen = set(selection)
        unknown = chosen - set(CONFIG_NAMES)
        if unknown or not chosen:
            raise ValueError(f"not a selection of {CONFIG_NAMES}: {sorted(unknown) or 'empty'}")
        header = list(STATS_COLUMNS[:6])
        if chosen == set(DEFAULT_SELECTION):
            self.compatible = True
        else:
            header.append("Count")
        for position, (config, column) in enumerate(zip(CONFIG_NAMES, SELECTABLE_STATISTICS)):
            if config in chosen:
                if self.compatible and position == _COUNT_POSITION:
                    header.append("Count")
                header.append(column)
        return ",".join(header)

    def row(self, t: DumpedTensor, selection: Sequence[str], summarized: bool = True) -> str:
        """`GenerateFileData`'s line for one tensor; `summarized=False` is the device's result != 0."""
        count = 1
        if not t.shape:
            shape = "-"
        elif len(t.shape) > _MAX_SHAPE_SIZE:
            shape = "NA"
        else:
            shape = "x".join(str(d) for d in t.shape)
            count = math.prod(t.shape)
        dtype = DataType(t.dtype).name if t.dtype in _ADUMP_DTYPES else "UNKNOW"
        fmt = _ADUMP_FORMAT_NAMES.get(t.format, "UNKNOW")
        cells = ["Input" if t.io is IO.INPUT else "Output", str(t.index), str(t.size), dtype, fmt, shape]
        positions = [p for p, name in enumerate(CONFIG_NAMES) if name in set(selection)]  # statsList_
        if not summarized or t.values is None:
            for i in range(len(positions)):
                if self.compatible and i == _COUNT_POSITION:
                    cells.append(str(count))
                cells.append("NA")
        else:
            values = _adump_values(t)
            if not self.compatible:
                cells.append(str(count))
            for position in positions:
                if self.compatible and position == _COUNT_POSITION:
                    cells.append(str(count))
                cells.append(values[position])
        return ",".join(cells)

    def csv(self, tensors: Iterable[DumpedTensor], selection: Sequence[str] = DEFAULT_SELECTION,
            unsummarized: frozenset[tuple[IO, int]] = frozenset()) -> str:  # fmt: skip
        """One file in one chunk: the header (first time the writer sees the name) and a row per tensor."""
        lines = [self.header(selection)]
        for t in tensors:
            lines.append(self.row(t, selection, (t.io, t.index) not in unsummarized))
        return "\n".join(lines) + "\n"
