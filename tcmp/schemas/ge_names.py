"""GE dump file names (docs/formats.md, "GE file names") and the `mapping.csv` of hashed long names.

Every form is recognised from its tail, so op names with dots (the capture-mode writer does not sanitize them)
still parse:

    standard   {OpType}.{OpName}.{task}.{stream}.{timestamp}
    old        {OpType}.{OpName}.{task}.{timestamp}
    capture    {OpType}.{OpName}.{dumpNumber}.{task}.{stream}.{timestamp}
    long       standard + .{task_type}.{context}.{thread}.{device}   (FFTS+ writes task_type 4)
               old      + .{task_type}.{context}.{thread}.{device}   (CANN's documented form without the stream id)
               capture  + .FFTSPLUS.{context}.{thread}.{device}

A long-form tail is `{task_type}` (runtime's Task.TaskType, 0-4) and three digit fields whose last, the device
id, is not a 16-digit timestamp: a name that ends in a timestamp is a capture-mode name whose dumpNumber and ids
happen to look like a tail. The field count then decides: 9 fields carry the stream id (in the writer's order,
task before stream), 8 fields do not.
    stats      any of the above + .csv
    appendix   any of the above + _min_max.npz   (the user-side convert-to-min/max script)
    hashed     decimal digits only; the real name is in mapping.csv beside it
"""

from __future__ import annotations

import csv
import enum
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tcmp.schemas import SLOTS
from tcmp.schemas.errors import DumpCorrupt, NameParseError

MAPPING_FILE = "mapping.csv"
FFTS_TASK_TYPE = "4"
FFTS_LITERAL = "FFTSPLUS"
# runtime's Task.TaskType (op_mapping_info.proto): AICORE, AICPU, DEBUG, SDMA, FFTSPLUS; CANN documents the long
# name with any {task_type}, the aicpu writer only ever writes FFTSPLUS
LONG_NAME_TASK_TYPES = frozenset({"0", "1", "2", "3", FFTS_TASK_TYPE})
# gettimeofday in µs; the peer insists on 16 digits, tcmp only flags others (`timestamp_suspicious`)
TIMESTAMP_DIGITS = 16

_DIGITS = re.compile(r"\d+")


class GeFileKind(str, enum.Enum):
    BINARY = "binary"  # the header + payload dump (or a nano dump)
    STATS_CSV = "stats_csv"  # dump_data="stats"
    MIN_MAX_NPZ = "min_max_npz"  # appendix convert-to-min/max script


class GeNameForm(str, enum.Enum):
    STANDARD = "standard"
    OLD = "old"
    CAPTURE = "capture"


@dataclass(frozen=True, **SLOTS)
class FftsSlice:
    """The long-name tail: which context/thread slice of the op this file holds (FFTS+ for task type 4)."""

    context_id: int
    thread_id: int
    device_id: int
    task_type: int = int(FFTS_TASK_TYPE)  # the FFTSPLUS literal of capture names is task type 4 as well


@dataclass(frozen=True, **SLOTS)
class GeFileName:
    op_type: str
    op_name: str
    timestamp: int
    task_id: int
    stream_id: Optional[int]
    form: GeNameForm
    kind: GeFileKind
    dump_number: Optional[int] = None  # capture mode only
    ffts: Optional[FftsSlice] = None
    hashed_as: Optional[str] = None  # the on-disk digits name when resolved through mapping.csv

    @property
    def timestamp_suspicious(self) -> bool:
        return len(str(self.timestamp)) != TIMESTAMP_DIGITS


def sanitize(op_name: str) -> str:
    """The runtime's file-name sanitizing of op names (ReplaceStringElem): space, `.`, `/` and `\\` become `_`."""
    return op_name.translate(_SANITIZE)


_SANITIZE = str.maketrans({" ": "_", ".": "_", "/": "_", "\\": "_"})


def _strip_kind(name: str) -> tuple[str, GeFileKind]:
    if name.endswith("_min_max.npz"):
        return name[: -len("_min_max.npz")], GeFileKind.MIN_MAX_NPZ
    if name.endswith(".csv"):
        return name[: -len(".csv")], GeFileKind.STATS_CSV
    return name, GeFileKind.BINARY


def _is_digits(field: str) -> bool:
    return bool(_DIGITS.fullmatch(field))


def _parse_fields(fields: list[str], kind: GeFileKind, ffts: Optional[FftsSlice], capture_only: bool):
    """The name without its long-name tail; None when the numeric tail does not fit any form."""
    op_type, n = fields[0], len(fields)
    if n >= 6 and all(map(_is_digits, fields[-4:])) and fields[1]:
        # capture mode; only the adump capture writer leaves dots in op names, so 6+ fields mean this form
        dump_number, task, stream, ts = (int(x) for x in fields[-4:])
        return GeFileName(
            op_type, ".".join(fields[1:-4]), ts, task, stream, GeNameForm.CAPTURE, kind, dump_number, ffts
        )
    if capture_only:
        return None
    if n == 5 and all(map(_is_digits, fields[2:])):
        task, stream, ts = (int(x) for x in fields[2:])
        return GeFileName(op_type, fields[1], ts, task, stream, GeNameForm.STANDARD, kind, ffts=ffts)
    if n == 4 and all(map(_is_digits, fields[2:])):
        task, ts = (int(x) for x in fields[2:])
        return GeFileName(op_type, fields[1], ts, task, None, GeNameForm.OLD, kind, ffts=ffts)
    return None


def parse_ge_file_name(name: str) -> GeFileName:
    """Parse one GE dump file name (not a hashed one; see `resolve_ge_file_name`)."""
    stem, kind = _strip_kind(name)
    fields = stem.split(".")
    if len(fields) >= 4 and fields[0] and fields[1]:
        task_type, *slice_ids = fields[-4:]
        is_long = (task_type in LONG_NAME_TASK_TYPES or task_type == FFTS_LITERAL) and all(map(_is_digits, slice_ids))
        # a 16-digit last field is a timestamp: the name is a capture-mode one, not a long one
        if len(fields) >= 8 and is_long and len(slice_ids[-1]) != TIMESTAMP_DIGITS:
            numeric_type = int(FFTS_TASK_TYPE) if task_type == FFTS_LITERAL else int(task_type)
            context_id, thread_id, device_id = (int(x) for x in slice_ids)
            ffts = FftsSlice(context_id, thread_id, device_id, task_type=numeric_type)
            parsed = _parse_fields(fields[:-4], kind, ffts, capture_only=task_type == FFTS_LITERAL)
            if parsed is not None:
                return parsed
        parsed = _parse_fields(fields, kind, None, capture_only=False)
        if parsed is not None:
            return parsed
    raise NameParseError(
        None,
        f"{name!r} is not a GE dump file name: expected "
        "{OpType}.{OpName}.{task}.{stream}.{timestamp} (or the capture-mode, long/FFTS+ or old form)",
    )


def hashed_stem(name: str) -> Optional[str]:
    """The hash a long name was replaced by (its mapping.csv key), None when `name` is not a hashed name."""
    stem, _ = _strip_kind(name)
    return stem if _is_digits(stem) else None


def is_hashed_name(name: str) -> bool:
    """A long name the runtime replaced by std::hash of its path (ENAMETOOLONG); see mapping.csv."""
    return hashed_stem(name) is not None


def read_mapping(directory: Path) -> dict[str, str]:
    """`mapping.csv` of one dump directory: hashed file name -> original file name (empty if absent).

    Rows are `hash,original`; the original may be a path, only its last component is a file name. A
    malformed row makes the whole file unusable (DumpCorrupt), since a wrong mapping would mislabel data.
    """
    path = directory / MAPPING_FILE
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return {}
    return parse_mapping(text, path)


def parse_mapping(text: str, path: Path) -> dict[str, str]:
    """`mapping.csv`'s text read already (`path` is only named in errors); see read_mapping."""
    mapping: dict[str, str] = {}
    for line_no, row in enumerate(csv.reader(text.splitlines()), start=1):
        if not row or not "".join(row).strip():
            continue
        if len(row) < 2 or not _is_digits(row[0].strip()):
            raise DumpCorrupt(path, f"line {line_no}: expected `hash,original name`, got {row!r}")
        original = ",".join(row[1:]).strip()
        mapping[row[0].strip()] = original.replace("\\", "/").rsplit("/", 1)[-1]
    return mapping


def resolve_ge_file_name(name: str, mapping: dict[str, str]) -> GeFileName:
    """Parse a file name, resolving a hashed one through its directory's mapping."""
    if not is_hashed_name(name):
        return parse_ge_file_name(name)
    stem, kind = _strip_kind(name)
    original = mapping.get(stem)
    if original is None:
        raise NameParseError(None, f"{name!r} is a hashed long name but {MAPPING_FILE} has no row for {stem}")
    parsed = parse_ge_file_name(original)
    # the appendix script and stats mode append to the on-disk (hashed) name
    return GeFileName(
        parsed.op_type,
        parsed.op_name,
        parsed.timestamp,
        parsed.task_id,
        parsed.stream_id,
        parsed.form,
        kind if kind is not GeFileKind.BINARY else parsed.kind,
        parsed.dump_number,
        parsed.ffts,
        hashed_as=name,
    )
