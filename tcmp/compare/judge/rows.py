"""The result table's rows: what the judge makes of a `Pair` (both sides' statistics, the metrics, the verdict)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from tcmp.compare.judge.metrics import NA, Cell, StatisticsMetrics, TensorMetrics
from tcmp.compare.judge.verdict import Colour, Result
from tcmp.compare.records import Pair


@dataclass(frozen=True)
class TensorStats:
    dtype: Optional[str]
    shape: Optional[tuple[int, ...]]
    max: Optional[float]
    min: Optional[float]
    mean: Optional[float]
    l2norm: Optional[float]
    crc32: Optional[str]
    nan_count: Optional[int] = None  # None: the source does not say (a stats CSV without the column)
    inf_count: Optional[int] = None


@dataclass(frozen=True)
class Row:
    """One line of the result table."""

    pair: Pair
    npu: TensorStats
    bench: TensorStats
    tensor: Optional[TensorMetrics]
    statistics: Optional[StatisticsMetrics]
    result: Result
    accuracy_reached: bool
    messages: tuple[str, ...]
    nan_inf_one_side: bool
    from_index: bool = False  # the data came from summaries stored by `tcmp watch`, not raw files
    colour: Colour = Colour.GREEN
    unreadable: bool = False  # not compared: a file of the pair could not be read (truncated, corrupt, denied)

    def coloured(self, colour: Colour) -> Row:
        """This row in `colour` (`dataclasses.replace` without its per-call look at the fields: a call per row)."""
        return Row(self.pair, self.npu, self.bench, self.tensor, self.statistics, self.result, self.accuracy_reached,
                   self.messages, self.nan_inf_one_side, self.from_index, colour, self.unreadable)  # fmt: skip

    @property
    def error_cell(self) -> Cell:
        """The absolute error of this row for the magnitude rule: MaxAbsErr (tensor) or Max diff (statistics)."""
        if self.tensor is not None:
            return self.tensor.max_abs_err
        if self.statistics is not None:
            return self.statistics.max.diff
        return NA
