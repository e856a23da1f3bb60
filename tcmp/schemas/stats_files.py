"""Dump files that hold summaries instead of tensors.

- GE stats mode (`dump_config.dump_data = "stats"`): a CSV per op named `<dump file name>.csv`, as two CANN
  writers produce it (docs/formats.md, "Stats-mode CSVs"; hicann/runtime):
  - the AICPU writer (`OpDumpTask::ProcessDumpStats`, dump_task.cpp): always the 13 columns of `STATS_COLUMNS`;
    `-` for an unknown data type or format and for a shape without dims; seven empty statistic cells for a tensor
    whose address is 0 or whose dtype it cannot summarize (bf16 among them);
  - the adump writer (`AdxDumpRecord::GenerateFileData`, adx_dump_record.cpp): the six leading columns, then the
    statistics selected in the dump config (`SELECTABLE_STATISTICS`, in that order) with `Count` first, except for
    the default selection, whose header is the 13 columns above; `UNKNOW` for an unknown data type or format, `NA`
    for a shape of more than 25 dims and for every statistic of a tensor the device could not summarize. Its slip:
    `compatible_` is never reset, so once a process has written the default selection, the header of any other
    keeps its leading `Count` while the rows leave that cell out (and, with `Nan Count` selected, put the count
    before it, where the header names `Count` a second time): rows one cell shorter than the header. Its rows of
    `NA` omit the leading count, or place it at the fourth statistic, so they can be one or two cells short.
    It writes the header again when its memory of the last ten file names has lost this file.
- The msprobe appendix "convert to min/max" script (docs/formats.md, "min/max files"): `<GE dump file>_min_max.npz`
  with arrays
  `inputs`/`outputs` of shape (n, 2), and `<FX file stem>_min_max.npy` of shape (2,).

All of them become `Summary` records; values the source does not carry stay None. The readers raise DumpIncomplete
(still being written) or DumpCorrupt (never readable), nothing else.
"""

from __future__ import annotations

import csv
import functools
import io
import math
import re
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from tcmp.schemas.dtypes import DataType
from tcmp.schemas.dump_records import IO, Summary
from tcmp.schemas.errors import DumpCorrupt, DumpIncomplete
from tcmp.schemas.formats import Format
from tcmp.schemas.fx_dump import parse_npy_header, read_fx_value
from tcmp.schemas.limits import (
    MAX_NPZ_MEMBER_BYTES,
    MAX_NPZ_MEMBERS,
    MAX_NPZ_TOTAL_BYTES,
    MAX_TENSORS_PER_FILE,
    refusal,
)

BASE_COLUMNS = ("Input/Output", "Index", "Data Size", "Data Type", "Format", "Shape")
STATS_COLUMNS = (
    *BASE_COLUMNS, "Max Value", "Min Value", "Avg Value", "Count", "Nan Count", "Negative Inf Count",
    "Positive Inf Count",
)  # fmt: skip
# adump's STATS_ITEM_MAP, in its order; the dump config names them Max, Min, Avg, Nan, Negative Inf, Positive Inf,
# L2norm. Its header puts "Count" before them (or, for exactly the first six, before "Nan Count").
SELECTABLE_STATISTICS = (
    "Max Value", "Min Value", "Avg Value", "Nan Count", "Negative Inf Count", "Positive Inf Count", "l2norm",
)  # fmt: skip

_BASE = tuple(c.lower() for c in BASE_COLUMNS)
_FLOAT_COLUMNS = {"max value": "max", "min value": "min", "avg value": "mean", "l2norm": "l2norm"}
_COUNT_COLUMNS = {"count": "numel", "nan count": "nan", "negative inf count": "neg", "positive inf count": "pos"}
_UNKNOWN = frozenset({"", "NA", "N/A", "NONE", "NULL"})  # the writers write "NA" or nothing
_INT = re.compile(r"-?\d{1,19}")  # the index stores int64: longer numbers are no count a writer wrote
_DIMS = re.compile(r"\d{1,19}(?:[xX]\d{1,19})*")  # "4x50x50x16"
_LISTED_DIMS = re.compile(r"[\[(]\s*(?:\d{1,19}\s*(?:,\s*\d{1,19}\s*)*,?)?[\])]")  # "[2, 6]": older tcmp files
_INT64_MAX = 2**63 - 1


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


class _BadCell(Exception):
    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


@functools.cache  # two enums, asked twice per CSV row
def _by_upper_name(enum_type) -> dict:
    return {name.upper(): member for name, member in enum_type.__members__.items()}


def _enum_code(text: str, enum_type, prefix: str) -> Optional[int]:
    """A code written as a number or a name, with or without the prefix (`DT_FLOAT16`/`FLOAT16`, `FORMAT_ND`/`ND`).
    The writers' words for "unknown" (`-`, `UNKNOW`) and names tcmp does not know give None, not an error."""
    text = text.strip()
    if _INT.fullmatch(text) and len(text) <= 6:
        return int(text)
    members = _by_upper_name(enum_type)
    if enum_type is Format and text.upper() == "DHWCH":  # adump's FORMAT_STRING_MAP name for DHWCN (31)
        return int(Format.DHWCN)
    bare = text.upper()[len(prefix) :] if text.upper().startswith(prefix) else text.upper()
    member = members.get(bare, members.get(prefix + bare))
    return int(member) if member is not None else None


def _float(text: str) -> Optional[float]:
    text = text.strip()
    if text.upper() in _UNKNOWN:
        return None
    try:
        return float(text)  # C++ ostream's "nan", "-nan", "inf", "1.4013e-43" included
    except ValueError:
        raise _BadCell("not a number") from None


def _count(text: str) -> Optional[int]:
    text = text.strip()
    if text.upper() in _UNKNOWN:
        return None
    if not _INT.fullmatch(text) or int(text) > _INT64_MAX:
        raise _BadCell("not a count")
    value = int(text)
    return value if value >= 0 else None  # adump prints NaN/inf counts as int32: a negative one has wrapped


def _index(text: str) -> int:
    text = text.strip()
    if not _INT.fullmatch(text) or not 0 <= int(text) <= _INT64_MAX:
        raise _BadCell("not a tensor index")
    return int(text)


def _size(text: str) -> Optional[int]:
    text = text.strip()
    if text.upper() in _UNKNOWN:
        return None
    if not _INT.fullmatch(text) or abs(int(text)) > _INT64_MAX:
        raise _BadCell("not a byte count")
    return int(text)


def _shape(text: str) -> Optional[tuple[int, ...]]:
    text = text.strip()
    if text == "-":  # both writers: a tensor without dims, i.e. a scalar
        return ()
    if text.upper() in _UNKNOWN:  # adump: more dims than its record holds
        return None
    if _DIMS.fullmatch(text) or _LISTED_DIMS.fullmatch(text):
        dims = tuple(int(d) for d in re.findall(r"\d+", text))
        if all(d <= _INT64_MAX for d in dims):
            return dims
    raise _BadCell("not a shape")


def _direction(text: str) -> IO:
    direction = text.strip().lower()
    if direction not in ("input", "output"):
        raise _BadCell("neither Input nor Output")
    return IO(direction)


@dataclass(frozen=True)
class _Header:
    line: int
    names: tuple[str, ...]  # stripped, lower case

    @property
    def writers_order(self) -> bool:
        return self.names[: len(_BASE)] == _BASE

    @property
    def count_first(self) -> bool:
        """adump's header, whose leading Count its slip leaves without a cell."""
        return self.writers_order and self.names[len(_BASE) : len(_BASE) + 1] == ("count",)


def _header(cells: Sequence[str], line: int, path: Path) -> _Header:
    names = tuple(c.strip().lstrip("\ufeff").strip().lower() for c in cells)
    missing = [c for c in ("Input/Output", "Index") if c.lower() not in names]
    if missing:
        raise DumpCorrupt(path, f"not a GE stats CSV: line {line} has no column {' or '.join(missing)}")
    return _Header(line, names)


def _unavailable_row(cells: Sequence[str], width: int) -> Optional[tuple[Optional[int]]]:
    """adump's row for a tensor the device could not summarize: every statistic `NA`, the count left out or put at
    the fourth place. Returns (count,) for such a row, None for any other."""
    if not 1 <= len(cells) <= width:
        return None
    known = [c.strip() for c in cells if c.strip().upper() != "NA"]
    if len(known) == len(cells) or len(known) > 1:
        return None
    if known and not (_INT.fullmatch(known[0]) and 0 <= int(known[0]) <= _INT64_MAX):
        return None
    return (int(known[0]) if known else None,)


def _columns(header: _Header, row: Sequence[str], line: int, path: Path) -> tuple[str, ...]:
    if len(row) == len(header.names):
        return header.names
    if len(row) == len(header.names) - 1 and header.count_first:  # the slip: no cell for the leading Count
        return header.names[: len(_BASE)] + header.names[len(_BASE) + 1 :]
    expected = f"{len(header.names)}" + (f" (or {len(header.names) - 1})" if header.count_first else "")
    raise DumpCorrupt(path, f"line {line}: {len(row)} cells where the header (line {header.line}) has {expected}")


def _row(header: _Header, row: Sequence[str], line: int, path: Path) -> SummaryTensor:
    base = len(_BASE)
    unavailable = _unavailable_row(row[base:], len(header.names) - base) if header.writers_order else None
    columns = header.names[:base] if unavailable is not None else _columns(header, row, line, path)
    cells: dict[str, str] = {}
    for position, name in enumerate(columns):
        cells[name] = row[position]  # a name given twice (the slip's second Count): the later cell, as adump fills
    floats: dict[str, Optional[float]] = {}
    counts: dict[str, Optional[int]] = {}
    name = ""
    try:
        name = "input/output"
        direction = _direction(cells[name])
        name = "index"
        index = _index(cells[name])
        dtype, fmt = None, None
        shape: Optional[tuple[int, ...]] = None
        size: Optional[int] = None
        if "data type" in cells:
            dtype = _enum_code(cells["data type"], DataType, "DT_")
        if "format" in cells:
            fmt = _enum_code(cells["format"], Format, "FORMAT_")
        name = "shape"
        if name in cells:
            shape = _shape(cells[name])
        name = "data size"
        if name in cells:
            size = _size(cells[name])
        for name, field in _FLOAT_COLUMNS.items():
            floats[field] = _float(cells[name]) if name in cells else None
        for name, field in _COUNT_COLUMNS.items():
            counts[field] = _count(cells[name]) if name in cells else None
    except _BadCell as exc:
        position = len(columns) - columns[::-1].index(name)  # the cell read: the last of a name given twice
        raise DumpCorrupt(
            path, f"line {line}, column {position} ({name!r}): {cells[name].strip()[:40]!r} is {exc.what}"
        ) from None
    if unavailable is not None:
        (counts["numel"],) = unavailable
    negative, positive = counts["neg"], counts["pos"]
    summary = Summary(
        numel=counts["numel"],
        min=floats["min"],
        max=floats["max"],
        mean=floats["mean"],
        l2norm=floats["l2norm"],
        nan_count=counts["nan"],
        inf_count=None if negative is None or positive is None else negative + positive,
    )
    return SummaryTensor(direction, index, summary, dtype, fmt, shape, size)


def read_stats_csv(path: Path) -> tuple[SummaryTensor, ...]:
    """Rows of a GE stats-mode CSV, as either CANN writer writes it (see the module's docstring). Columns are
    found by name; unknown ones are ignored. Raises DumpIncomplete for a file still being written, DumpCorrupt
    naming the line and column for anything the writers do not write."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DumpCorrupt(path, f"cannot read: {exc.strerror or exc}") from exc
    if b"\0" in data:
        raise DumpCorrupt(path, f"binary data (a NUL byte at offset {data.index(0)}) in a stats CSV")
    text = data.decode("utf-8-sig", errors="replace")  # -sig: a BOM is not part of the header
    if not text:
        raise DumpIncomplete(path, "empty stats CSV")
    complete = text[: text.rfind("\n") + 1]  # the writers append whole lines: a last one without "\n" is unfinished
    header: Optional[_Header] = None
    tensors = []
    reader = csv.reader(io.StringIO(complete, newline=""))
    try:
        for cells in reader:
            line = reader.line_num
            if not any(c.strip() for c in cells):
                continue
            if header is None or cells[0].strip().lower() == "input/output":
                header = _header(cells, line, path)  # adump writes it again when it has forgotten the file
            else:
                tensors.append(_row(header, cells, line, path))
    except csv.Error as exc:
        raise DumpCorrupt(path, f"line {reader.line_num}: {exc}") from None
    if len(complete) < len(text):
        raise DumpIncomplete(path, "stats CSV does not end with a newline: still being written")
    if header is None:
        raise DumpCorrupt(path, "not a GE stats CSV: no header line")
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
    """The appendix script's `<GE dump>_min_max.npz`: per-tensor [min, max] for inputs and outputs.

    Read with bounded work: the archive's member count and the sizes its directory declares are checked before
    anything is inflated, a member is inflated at most to its cap (a declared size may lie), and its rows are
    counted from its .npy header before they are turned into summaries."""
    path = Path(path)
    try:
        with zipfile.ZipFile(path) as archive:
            members = {info.filename: info for info in archive.infolist()}
            _check_npz_directory(path, tuple(members.values()))
            found: dict[str, tuple[Summary, ...]] = {}
            for key in ("inputs", "outputs"):
                info = members.get(f"{key}.npy")
                if info is not None:
                    with archive.open(info) as member:
                        data = member.read(MAX_NPZ_MEMBER_BYTES + 1)
                    found[key] = _min_max_rows(_npz_member_array(path, key, data), path, key)
    except (zipfile.BadZipFile, EOFError) as exc:
        raise DumpIncomplete(path, f"not a complete .npz archive yet ({exc})") from exc
    except (OSError, ValueError, KeyError, NotImplementedError, zlib.error) as exc:
        raise DumpCorrupt(path, f"unreadable min/max archive: {exc}") from exc
    return (
        tuple(SummaryTensor(IO.INPUT, i, s) for i, s in enumerate(found.get("inputs", ()))),
        tuple(SummaryTensor(IO.OUTPUT, i, s) for i, s in enumerate(found.get("outputs", ()))),
    )


def _check_npz_directory(path: Path, members: Sequence[zipfile.ZipInfo]) -> None:
    if len(members) > MAX_NPZ_MEMBERS:
        raise DumpCorrupt(path, refusal(".npz archive", len(members), MAX_NPZ_MEMBERS, "members"))
    for info in members:
        if info.file_size > MAX_NPZ_MEMBER_BYTES:
            raise DumpCorrupt(path, refusal(f".npz member {info.filename!r}", info.file_size, MAX_NPZ_MEMBER_BYTES))
    total = sum(info.file_size for info in members)
    if total > MAX_NPZ_TOTAL_BYTES:
        raise DumpCorrupt(path, refusal(".npz archive inflated", total, MAX_NPZ_TOTAL_BYTES))


def _npz_member_array(path: Path, key: str, data: bytes) -> np.ndarray:
    """One member's bytes (read up to one byte past its cap) as an array, its row count checked first."""
    if len(data) > MAX_NPZ_MEMBER_BYTES:  # its directory entry said less
        raise DumpCorrupt(path, refusal(f".npz member {key!r} inflated", len(data), MAX_NPZ_MEMBER_BYTES))
    header = parse_npy_header(io.BytesIO(data), len(data), path)
    if header.shape and header.shape[0] > MAX_TENSORS_PER_FILE:
        raise DumpCorrupt(path, refusal(f"{key}: a table", header.shape[0], MAX_TENSORS_PER_FILE, "rows"))
    if header.dtype.hasobject or header.data_nbytes is None:
        raise DumpCorrupt(path, f"{key}: an object array, not numeric [min, max] rows")
    if len(data) != header.data_offset + header.data_nbytes:
        raise DumpCorrupt(path, f"{key}: member size does not match its .npy header")
    flat = np.frombuffer(data, dtype=header.dtype, count=math.prod(header.shape), offset=header.data_offset)
    return flat.reshape(header.shape, order="F" if header.fortran_order else "C")


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
