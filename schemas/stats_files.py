"""Dump files that hold summaries instead of tensors.

- GE stats mode (`dump_config.dump_data = "stats"`): a CSV per op named `<dump file name>.csv` with the columns
  `Input/Output,Index,Data Size,Data Type,Format,Shape,Max Value,Min Value,Avg Value,Count,Nan Count,
  Negative Inf Count,Positive Inf Count` (spec/dump-formats.md §1.1).
- The msprobe appendix "convert to min/max" script (spec §6): `<GE dump file>_min_max.npz` with arrays
  `inputs`/`outputs` of shape (n, 2), and `<FX file stem>_min_max.npy` of shape (2,).

All of them become `Summary` records; values the source does not carry stay None.
"""

from __future__ import annotations

import csv
import functools
import math
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from .dtypes import DataType
from .errors import DumpCorrupt, DumpIncomplete
from .formats import Format
from .fx_dump import read_fx_value
from .records import IO, Summary

STATS_COLUMNS = (
    "Input/Output", "Index", "Data Size", "Data Type", "Format", "Shape", "Max Value", "Min Value", "Avg Value",
    "Count", "Nan Count", "Negative Inf Count", "Positive Inf Count",
)  # fmt: skip
_INT = re.compile(r"-?\d+")


@dataclass(frozen=True)
class SummaryTensor:
    """One tensor of a summary-only dump file."""

    io: IO
    index: int
    summary: Summary
    dtype: Optional[int] = None  # dump-proto DataType code when the source names it
    format: Optional[int] = None
    shape: Optional[tuple[int, ...]] = None
    size: Optional[int] = None


@functools.cache  # two enums, asked twice per CSV row
def _by_upper_name(enum_type) -> dict:
    return {name.upper(): member for name, member in enum_type.__members__.items()}


def _enum_code(text: str, enum_type, prefix: str) -> Optional[int]:
    """A code written as a number or a name, with or without the prefix (`DT_FLOAT16`/`FLOAT16`, `FORMAT_ND`/`ND`)."""
    text = text.strip()
    if _INT.fullmatch(text):
        return int(text)
    members = _by_upper_name(enum_type)
    bare = text.upper()[len(prefix) :] if text.upper().startswith(prefix) else text.upper()
    member = members.get(bare, members.get(prefix + bare))
    return int(member) if member is not None else None


def _float(text: str) -> Optional[float]:
    text = text.strip()
    if not text or text.upper() in ("N/A", "NONE", "NULL"):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _int(text: str) -> Optional[int]:
    value = _float(text)
    return None if value is None or not math.isfinite(value) else int(value)


def read_stats_csv(path: Path) -> tuple[SummaryTensor, ...]:
    """Rows of a GE stats-mode CSV. Unknown extra columns are ignored; missing required ones are an error."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig", errors="replace")  # -sig: a BOM is not part of the header
    except OSError as exc:
        raise DumpCorrupt(path, f"cannot read: {exc}") from exc
    if not text.endswith("\n"):
        raise DumpIncomplete(path, "stats CSV does not end with a newline: still being written")
    rows = list(csv.reader(text.splitlines()))
    if not rows:
        raise DumpIncomplete(path, "empty stats CSV")
    header = [h.strip() for h in rows[0]]
    missing = [c for c in ("Input/Output", "Index", "Max Value", "Min Value") if c not in header]
    if missing:
        raise DumpCorrupt(path, f"not a GE stats CSV: missing column(s) {', '.join(missing)}")
    column = {name: i for i, name in enumerate(header)}

    def cell(row: list[str], name: str) -> str:
        i = column.get(name)
        return row[i] if i is not None and i < len(row) else ""

    tensors = []
    for line_no, row in enumerate(rows[1:], start=2):
        if not any(c.strip() for c in row):
            continue
        direction = cell(row, "Input/Output").strip().lower()
        if direction not in ("input", "output"):
            raise DumpCorrupt(path, f"line {line_no}: Input/Output is {direction!r}")
        index = _int(cell(row, "Index"))
        if index is None:
            raise DumpCorrupt(path, f"line {line_no}: Index is {cell(row, 'Index')!r}")
        negative, positive = _int(cell(row, "Negative Inf Count")), _int(cell(row, "Positive Inf Count"))
        infs = None if negative is None and positive is None else (negative or 0) + (positive or 0)
        shape_text = cell(row, "Shape")
        tensors.append(
            SummaryTensor(
                io=IO(direction),
                index=index,
                summary=Summary(
                    numel=_int(cell(row, "Count")),
                    min=_float(cell(row, "Min Value")),
                    max=_float(cell(row, "Max Value")),
                    mean=_float(cell(row, "Avg Value")),
                    nan_count=_int(cell(row, "Nan Count")),
                    inf_count=infs,
                ),
                dtype=_enum_code(cell(row, "Data Type"), DataType, "DT_"),
                format=_enum_code(cell(row, "Format"), Format, "FORMAT_"),
                shape=tuple(int(d) for d in _INT.findall(shape_text)) if shape_text.strip() else None,
                size=_int(cell(row, "Data Size")),
            )
        )
    return tuple(tensors)


def _min_max_summary(pair: np.ndarray) -> Summary:
    low, high = (float(v) for v in np.asarray(pair, dtype=np.float64).reshape(-1)[:2])
    return Summary(numel=None, min=low, max=high)


def _min_max_rows(array: np.ndarray, path: Path, key: str) -> tuple[Summary, ...]:
    array = np.asarray(array)
    if array.size == 0:
        return ()
    if array.ndim != 2 or array.shape[1] != 2 or array.dtype.kind not in "biuf":
        raise DumpCorrupt(path, f"{key}: expected (n, 2) numeric [min, max] rows, got {array.dtype}{array.shape}")
    return tuple(_min_max_summary(row) for row in array)


def read_ge_min_max_npz(path: Path) -> tuple[tuple[SummaryTensor, ...], tuple[SummaryTensor, ...]]:
    """The appendix script's `<GE dump>_min_max.npz`: per-tensor [min, max] for inputs and outputs."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as archive:  # read the keys while the file is open
            inputs = _min_max_rows(archive["inputs"], path, "inputs") if "inputs" in archive.files else ()
            outputs = _min_max_rows(archive["outputs"], path, "outputs") if "outputs" in archive.files else ()
    except (zipfile.BadZipFile, EOFError) as exc:
        raise DumpIncomplete(path, f"not a complete .npz archive yet ({exc})") from exc
    except (OSError, ValueError, KeyError) as exc:
        raise DumpCorrupt(path, f"unreadable min/max archive: {exc}") from exc
    return (
        tuple(SummaryTensor(IO.INPUT, i, s) for i, s in enumerate(inputs)),
        tuple(SummaryTensor(IO.OUTPUT, i, s) for i, s in enumerate(outputs)),
    )


def read_fx_min_max_npy(path: Path) -> Summary:
    """The appendix script's `<FX file stem>_min_max.npy`: `[min, max]` in the source's dtype."""
    path = Path(path)
    try:
        value = read_fx_value(path)  # one open and one header parse; DumpIncomplete / DumpCorrupt by size
    except OSError as exc:
        raise DumpCorrupt(path, f"unreadable min/max file: {exc.strerror or exc}") from exc
    array = value.array
    if array is None or array.shape != (2,) or array.dtype.kind not in "biuf":
        got = f"{array.dtype}{array.shape}" if array is not None else f"a {value.kind.value}"
        raise DumpCorrupt(path, f"expected a [min, max] pair, got {got}")
    return _min_max_summary(array)
