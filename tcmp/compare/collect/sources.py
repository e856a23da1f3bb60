"""One side's dump tree as a compare reads it: its root, `tcmp watch`'s index for it, and the listing of a
token's directories, where the files that cannot be used (a name that does not parse, a file the system will not
let tcmp open) become unmatched items instead of stopping the compare."""

from __future__ import annotations

import os
import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tcmp.compare.records import CompareError, Role, Unmatched, UnmatchedKind
from tcmp.schemas.dump_outline import DumpDir, scan_directory
from tcmp.schemas.dump_records import FileSummary, Side
from tcmp.schemas.dump_tree import DumpFile, Unrecognized
from tcmp.schemas.errors import unreadable_reason
from tcmp.schemas.index import IndexUnusable, open_index

UNREADABLE_INDEX = (IndexUnusable, sqlite3.Error, OSError)  # what reading an index that is missing or damaged raises


@dataclass(frozen=True)
class DumpSource:
    """One side's dump tree as a compare reads it: its root, its FX step base and `tcmp watch`'s index for it.
    Small and picklable: a unit's worker lists the unit's directories itself."""

    root: Path
    fx_token_base: Optional[int] = None
    index: Optional[Path] = None

    def listing(self, dirs: Sequence[DumpDir]) -> Listing:
        """The dump files of `dirs` (on disk, and those only the index knows, with their stored summaries), in
        path order, and the files that look like dumps but cannot be used."""
        files: list[DumpFile] = []
        problems: list[Unrecognized] = []
        unreadable: list[tuple[DumpFile, str]] = []
        for d in dirs:
            if d.on_disk:
                scan = scan_directory(self.root, d.path, side=d.side, fx_token_base=self.fx_token_base, token=d.token)
                files += _openable(scan.files, unreadable)
                problems += scan.problems
        stored: dict[Path, FileSummary] = {}
        indexed = [d for d in dirs if d.indexed]
        if indexed and self.index is not None:
            try:
                with open_index(self.index) as reader:
                    deleted = [
                        f
                        for d in indexed
                        for f in reader.deleted_in(d.path)
                        if not os.path.lexists(f.path) and (d.side is not Side.ACL or f.file.token == d.token)
                    ]
                    stored.update((s.path, s) for s in reader.summaries_of(deleted))
            except UNREADABLE_INDEX as exc:  # the only record of those files: no compare
                why = f"index {self.index} unreadable where it holds files deleted by tcmp watch: {exc}"
                raise CompareError(why) from exc
            files += (f.file for f in deleted)
        files.sort(key=lambda f: str(f.path))
        unreadable = [(f, why) for f, why in unreadable if f.path not in stored]  # deleted by tcmp watch meanwhile
        return Listing(tuple(files), tuple(problems), stored, tuple(unreadable))


def _openable(files: Iterable[DumpFile], unreadable: list[tuple[DumpFile, str]]) -> list[DumpFile]:
    """The files this process may read; the others go to `unreadable` with why (`unreadable: permission denied`):
    one file the system will not let tcmp read is one unmatched item, not the end of the compare, nor a tensor
    paired by a header nobody could read. access(2) (the modes, ACLs and capabilities open(2) would check) costs
    ~3 µs a file, next to a header read of tens; the reason is asked of open(2) for the few it refuses."""
    readable = []
    for f in files:
        if os.access(f.path, os.R_OK):
            readable.append(f)
            continue
        try:
            os.close(os.open(f.path, os.O_RDONLY | os.O_NONBLOCK))
        except OSError as exc:
            unreadable.append((f, unreadable_reason(exc)))
        else:  # access(2) judges by the real ids, open(2) by the effective ones: open decides
            readable.append(f)
    return readable


@dataclass(frozen=True)
class Listing:
    files: tuple[DumpFile, ...]
    problems: tuple[Unrecognized, ...]
    stored: Mapping[Path, FileSummary]  # summaries from the index of the files whose raw data is gone
    unreadable: tuple[tuple[DumpFile, str], ...] = ()  # dump files the system would not let tcmp open, and why

    def unusable(self, role: Role, rank: Optional[int]) -> list[Unmatched]:
        """The unmatched items of the files that cannot be used: unparsable names, unreadable files."""
        items = [unusable(role, rank, p) for p in self.problems]
        return items + [_unreadable_file(role, f, why) for f, why in self.unreadable]


def by_token(dirs: Iterable[DumpDir]) -> dict[int, list[DumpDir]]:
    """Directories by token; a directory outside any step directory counts as token 0."""
    groups: dict[int, list[DumpDir]] = defaultdict(list)
    for d in dirs:
        groups[d.token if d.token is not None else 0].append(d)
    return groups


def by_model(dirs: Iterable[DumpDir]) -> dict[str, list[DumpDir]]:
    groups: dict[str, list[DumpDir]] = defaultdict(list)
    for d in dirs:
        groups[d.model or ""].append(d)
    return groups


def unusable(role: Role, rank: Optional[int], problem: Unrecognized) -> Unmatched:
    """The unmatched item for a file (or directory) that looks like part of the dump but cannot be used."""
    return Unmatched(role, rank, None, problem.path.name, "", None, None, str(problem.path), problem.reason,
                     UnmatchedKind.UNREADABLE)  # fmt: skip


def _unreadable_file(role: Role, f: DumpFile, why: str) -> Unmatched:
    """The unmatched item for a dump file the system would not let tcmp open."""
    return Unmatched(role, f.rank, f.token, f.op_name, f.op_type or "", f.io, f.index, str(f.path), why,
                     UnmatchedKind.UNREADABLE)  # fmt: skip
