"""What a compare gives, and what it is asked: its options, the counts and divergences of each rank, and the
unmatched items as they travel to the report. Shared by where units run (the local pool, Ray) and where their
results are written."""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Optional, Protocol

from tcmp.compare.collect.binding import GoldenKind
from tcmp.compare.judge.metrics import Mode
from tcmp.compare.judge.rows import Row
from tcmp.compare.judge.verdict import Thresholds
from tcmp.compare.records import Role, Unmatched, UnmatchedKind
from tcmp.compare.report.table import render_unmatched


class DataMode(str, enum.Enum):
    AUTO = "auto"
    TENSOR = "tensor"
    STATISTICS = "statistics"
    MD5 = "md5"


@dataclass(frozen=True)
class CompareOptions:
    target: Path
    golden: Path
    mode: DataMode = DataMode.AUTO
    rank: Optional[int] = None
    target_run: Optional[str] = None
    golden_run: Optional[str] = None
    fx_token_base: Optional[int] = None
    jobs: int = 1
    thresholds: Thresholds = field(default_factory=Thresholds)
    db: Optional[Path] = None  # `tcmp watch`'s index, when it is not inside the dump trees
    graph: Optional[Path] = None  # the graph text file(s), when they are not under the target


@dataclass(frozen=True)
class Divergence:
    """The earliest op of a token whose output fails while every compared input passes."""

    rank: Optional[int]
    token: int
    op_name: Optional[str]  # None: no op fits (see note)
    op_type: Optional[str]
    rows: tuple[Row, ...]
    note: str = ""
    timestamp: int = 0


@dataclass(frozen=True)
class Counts:
    rows: int = 0
    passed: int = 0
    failed: int = 0
    not_compared: int = 0
    unmatched_target: int = 0
    unmatched_golden: int = 0
    # the same unmatched items by kind: only `no partner` and `unreadable` ask the user to look
    unmatched_by_design: int = 0
    unmatched_out_of_scope: int = 0
    unmatched_no_partner: int = 0
    unmatched_unreadable: int = 0
    rows_from_index: int = 0
    nan_inf_one_side: int = 0  # rows with NaN/inf on one side only (where one appears, and all it spreads to)
    rows_unreadable: int = 0  # rows not compared because a file of theirs could not be read

    @property
    def rows_from_raw(self) -> int:
        return self.rows - self.rows_from_index

    def plus(self, other: Counts) -> Counts:
        return Counts(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(Counts)))

    def as_dict(self) -> dict[str, int]:
        return {
            "rows": self.rows,
            "pass": self.passed,
            "fail": self.failed,
            "not_compared": self.not_compared,
            "unmatched_target": self.unmatched_target,
            "unmatched_golden": self.unmatched_golden,
            "unmatched_by_design": self.unmatched_by_design,
            "unmatched_out_of_scope": self.unmatched_out_of_scope,
            "unmatched_no_partner": self.unmatched_no_partner,
            "unmatched_unreadable": self.unmatched_unreadable,
            "rows_from_index": self.rows_from_index,
            "rows_from_raw": self.rows_from_raw,
            "nan_inf_one_side": self.nan_inf_one_side,
            "rows_unreadable": self.rows_unreadable,
        }

    @property
    def unreadable(self) -> int:
        """Dump files that could not be read: unmatched items of kind `unreadable` and rows not compared for it."""
        return self.unmatched_unreadable + self.rows_unreadable


class ReportFiles(Protocol):
    """Where a rank's report files were written (`writers.WrittenReport`, which imports this module)."""

    @property
    def csv(self) -> Path: ...
    @property
    def unmatched(self) -> Path: ...
    @property
    def summary(self) -> Path: ...
    @property
    def xlsx(self) -> Optional[Path]: ...
    @property
    def html(self) -> Optional[Path]: ...


@dataclass(frozen=True)
class RankResult:
    """One rank's outcome. The table itself streams into the report files; `rows` and `unmatched` are kept only
    when asked for (`keep_rows`), so memory does not grow with the dump."""

    rank: Optional[int]
    counts: Counts
    divergences: tuple[Divergence, ...]
    worst: tuple[Row, ...]
    target_ops: int  # GE op executions in the target
    ops_in_rows: int  # of which appear in the table
    rows: tuple[Row, ...] = ()
    unmatched: tuple[Unmatched, ...] = ()
    report: Optional[ReportFiles] = None  # when files were written
    unreadable: tuple[Unmatched, ...] = ()  # the first UNREADABLE_KEPT unreadable items, kept always: the console's

    @property
    def ops_unmatched_only(self) -> int:
        return self.target_ops - self.ops_in_rows


@dataclass(frozen=True)
class CompareResult:
    options: CompareOptions
    golden_kind: GoldenKind
    mode: Mode
    mode_reason: str
    ranks: tuple[RankResult, ...]
    notes: tuple[str, ...]
    golden_fused: bool = False  # the GE golden holds fusions of the target's ops: taken with fusion on?

    @property
    def failed(self) -> bool:
        return any(rank.counts.failed for rank in self.ranks)

    @property
    def golden_description(self) -> str:
        """What the golden dump is, as the console and the HTML report name it."""
        if self.golden_kind is GoldenKind.FX:
            return "FX dump"
        if self.golden_kind is GoldenKind.ACL:
            return "aclgraph dump"
        return "GE dump that looks taken with fusion on (see the note)" if self.golden_fused else "fusion-off GE dump"

    @property
    def unreadable(self) -> int:
        """Dump files (or directories) that could not be read, over all ranks: the CLI exits 1 for them."""
        return sum(rank.counts.unreadable for rank in self.ranks)


UNREADABLE_KEPT = 3  # unreadable items a rank keeps to say why the compare exits 1; all are in its unmatched CSV


@dataclass(frozen=True)
class UnmatchedBatch:
    """Unmatched items as they travel to the report: their CSV text and counts (rendered where they are found, in
    the workers), and the items themselves only when they are to be kept."""

    csv_text: str
    counts: Counts
    items: tuple[Unmatched, ...] = ()
    unreadable: tuple[Unmatched, ...] = ()  # the first UNREADABLE_KEPT of kind `unreadable`, kept or not

    @classmethod
    def of(cls, items: Sequence[Unmatched], keep: bool) -> UnmatchedBatch:
        target = sum(u.role is Role.TARGET for u in items)
        kinds = Counter(u.kind for u in items)
        counts = Counts(
            unmatched_target=target,
            unmatched_golden=len(items) - target,
            unmatched_by_design=kinds[UnmatchedKind.BY_DESIGN],
            unmatched_out_of_scope=kinds[UnmatchedKind.OUT_OF_SCOPE],
            unmatched_no_partner=kinds[UnmatchedKind.NO_PARTNER],
            unmatched_unreadable=kinds[UnmatchedKind.UNREADABLE],
        )
        unreadable = tuple(u for u in items if u.kind is UnmatchedKind.UNREADABLE)[:UNREADABLE_KEPT]
        return cls(render_unmatched(items), counts, tuple(items) if keep else (), unreadable)
