"""Dump-tree discovery: every file under a GE or FX dump root, classified by name and located by its path.

GE (spec/dump-formats.md §4.1), under `msprobe_ge_dump/` or `msit_ge_dump/`, optionally below a
`worldsize{W}_[global_]rank{R}` directory:

    {time: 14 digits}/{device}/{model name}/{model id}/{step}/{dump files, mapping.csv}

FX (spec §4.2), four eras:

    ≥ 2025-08: {root}/worldsize{W}_global_rank{R}/{gm_{ts}_dump | graph_{N}}/{step}/*.npy      steps from 0
    2024-03…2025-05: {root}/[data_dump/]{step}/gm_{ts}_dump/*.npy                               steps from 1
    2023-10…2024-02: gm_{ts}_dump/{step}/*.npy                                                   steps from 1

Tokens in the records are 0-based: the eras that count from 1 (no rank directory) are shifted. Graph text files
(`dynamo_original_graph_*`) anywhere in a tree are listed with their parsed names. Nothing is dropped silently:
files whose names look like dumps but do not parse, hashed names without a mapping row and symlinks that leave
the tree are returned as `Unrecognized` with the reason. Symlinked directories are never entered (and reported).
"""

from __future__ import annotations

import enum
import functools
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from . import SLOTS
from .errors import DumpError, NameParseError
from .fx_dump import FxFileName, parse_fx_file_name
from .ge_names import MAPPING_FILE, GeFileKind, GeFileName, is_hashed_name, read_mapping, resolve_ge_file_name
from .graph import GraphFileName, parse_graph_file_name
from .records import IO, Side

GE_ROOT_NAMES = ("msprobe_ge_dump", "msit_ge_dump")
FX_ROOT_NAMES = ("msprobe_fx_dump", "msit_fx_dump")
INDEX_DIR = ".tcmp"  # the daemon's index lives here; never part of a dump

_RANK_DIR = re.compile(r"^worldsize(\d+)_(?:global_)?rank(\d+)$")
_TIME_DIR = re.compile(r"^\d{14}$")
_DIGITS = re.compile(r"^\d+$")
_GRAPH_NUMBER = re.compile(r"^graph_(\d+)")
# Files that live in dump trees but are not dumps: configs, logs, editor swap files, reports.
_IGNORED_SUFFIXES = (".txt", ".json", ".log", ".swp", ".cfg", ".py", ".xlsx", ".pbtxt", ".tmp", ".lock")


class FileKind(str, enum.Enum):
    GE_BINARY = "ge_binary"
    GE_STATS_CSV = "ge_stats_csv"
    GE_MIN_MAX_NPZ = "ge_min_max_npz"
    FX_NPY = "fx_npy"
    FX_MIN_MAX_NPY = "fx_min_max_npy"
    GRAPH = "graph"


# the files that hold raw tensors (the others hold summaries or a graph): what a tensor-mode compare can read and
# what `tcmp watch --drop-raw` may delete once summarized
RAW_TENSOR_KINDS = frozenset({FileKind.GE_BINARY, FileKind.FX_NPY})

_GE_KINDS = {
    GeFileKind.BINARY: FileKind.GE_BINARY,
    GeFileKind.STATS_CSV: FileKind.GE_STATS_CSV,
    GeFileKind.MIN_MAX_NPZ: FileKind.GE_MIN_MAX_NPZ,
}


@dataclass(frozen=True, **SLOTS)
class DumpFile:
    """One dump file with everything its path and name say about it.

    GE files hold all inputs and outputs of one op execution (`io`/`index` None); an FX file holds one tensor.
    `token` is 0-based. `run` is what tells two dumps written into one tree apart: the GE `{time}` directory;
    for FX, the graph directory (one per compiled GraphModule and run).
    """

    side: Side
    kind: FileKind
    path: Path
    rank: Optional[int]
    token: Optional[int]
    model: Optional[str]  # GE model directory name / FX graph directory name
    run: Optional[str]
    op_type: Optional[str]  # GE op type / FX target
    op_name: str  # GE op name from the file name (sanitized) / FX node name
    io: Optional[IO]
    index: Optional[int]
    timestamp: Optional[int]
    name: Union[GeFileName, FxFileName, None]
    device: Optional[int] = None
    model_id: Optional[int] = None

    @property
    def graph_number(self) -> Optional[int]:
        """N of `graph_{N}` when the model/graph directory is named after the GE graph."""
        return graph_number_of(self.model or "")


def graph_number_of(model: str) -> Optional[int]:
    """N of `graph_{N}` when a GE model directory (or FX graph directory) is named after the GE graph."""
    match = _GRAPH_NUMBER.match(model)
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class GraphFile:
    path: Path
    name: GraphFileName


@dataclass(frozen=True)
class Unrecognized:
    """A file that looks like part of the dump but cannot be used, and why."""

    path: Path
    reason: str


@dataclass(frozen=True)
class DumpTree:
    root: Path
    files: tuple[DumpFile, ...]
    graphs: tuple[GraphFile, ...]
    problems: tuple[Unrecognized, ...]

    @property
    def ge_files(self) -> tuple[DumpFile, ...]:
        return tuple(f for f in self.files if f.side is Side.GE)

    @property
    def fx_files(self) -> tuple[DumpFile, ...]:
        return tuple(f for f in self.files if f.side is Side.FX)

    @property
    def ranks(self) -> tuple[Optional[int], ...]:
        return tuple(sorted({f.rank for f in self.files}, key=lambda r: -1 if r is None else r))


@functools.lru_cache(maxsize=4096)  # called per file with its directory's parts
def _rank_of(parts: tuple[str, ...]) -> Optional[int]:
    for part in reversed(parts):
        match = _RANK_DIR.match(part)
        if match:
            return int(match.group(2))
    return None


def _ge_record(kind: FileKind, path: Path, parts: tuple[str, ...], name: GeFileName) -> DumpFile:
    """Locate a GE file by the directories above it: …/{time}/{device}/{model}/{model_id}/{step}/file."""
    up = list(reversed(parts))  # up[0] is the file's directory
    step = int(up[0]) if up and _DIGITS.match(up[0]) else None
    model_id = int(up[1]) if step is not None and len(up) > 1 and _DIGITS.match(up[1]) else None
    model = up[2] if model_id is not None and len(up) > 2 else None
    device = int(up[3]) if model is not None and len(up) > 3 and _DIGITS.match(up[3]) else None
    run = next((p for p in up if _TIME_DIR.match(p)), None)
    return DumpFile(
        side=Side.GE,
        kind=kind,
        path=path,
        rank=_rank_of(parts),
        token=step,
        model=model,
        run=run,
        op_type=name.op_type,
        op_name=name.op_name,
        io=None,
        index=None,
        timestamp=name.timestamp,
        name=name,
        device=device,
        model_id=model_id,
    )


def _fx_record(
    kind: FileKind, path: Path, parts: tuple[str, ...], name: FxFileName, token_base: Optional[int]
) -> Union[DumpFile, Unrecognized]:
    """Locate an FX file: the step directory is its parent (newest/oldest eras) or grandparent (middle eras)."""
    up = list(reversed(parts))
    if up and _DIGITS.match(up[0]):
        step, graph = int(up[0]), (up[1] if len(up) > 1 else None)
    elif len(up) > 1 and _DIGITS.match(up[1]):
        step, graph = int(up[1]), up[0]
    else:
        return Unrecognized(path, "FX file outside a step directory ({graph}/{step}/ or {step}/{graph}/)")
    rank = _rank_of(parts)
    base = token_base if token_base is not None else (0 if rank is not None else 1)
    if step - base < 0:
        return Unrecognized(path, f"FX step directory {step} is below the token base {base}")
    return DumpFile(
        side=Side.FX,
        kind=kind,
        path=path,
        rank=rank,
        token=step - base,
        model=graph,
        run=graph,
        op_type=name.target,
        op_name=name.node,
        io=name.io,
        index=name.index,
        timestamp=int(name.timestamp) if name.timestamp.isdigit() else None,
        name=name,
    )


def _walk(root: Path) -> Iterator[tuple[Path, list[os.DirEntry]]]:
    """Directories under root (root included) with their file entries; symlinked directories not entered."""
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            with os.scandir(directory) as it:
                entries = list(it)
        except OSError:
            continue  # vanished or unreadable directory; files in it cannot be listed
        files = []
        for entry in entries:
            if entry.name == INDEX_DIR:
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                else:
                    files.append(entry)
            except OSError:
                continue
        yield directory, sorted(files, key=lambda e: e.name)


def _inside(path: Path, root: Path) -> bool:
    try:
        Path(os.path.realpath(path)).relative_to(root)
    except ValueError:
        return False
    return True


def classify_name(name: str) -> Optional[FileKind]:
    """The kind of dump file a name is (before parsing it), None for files that are not dumps."""
    if name == MAPPING_FILE or name.startswith("."):
        return None
    if parse_graph_file_name(name) is not None:
        return FileKind.GRAPH
    if name.endswith("_min_max.npy"):
        return FileKind.FX_MIN_MAX_NPY
    if name.endswith(".npy"):
        return FileKind.FX_NPY
    if name.endswith("_min_max.npz"):
        return FileKind.GE_MIN_MAX_NPZ
    if name.endswith(".csv"):
        return FileKind.GE_STATS_CSV if name.count(".") >= 4 or is_hashed_name(name) else None
    if name.endswith(_IGNORED_SUFFIXES):
        return None
    if is_hashed_name(name) or name.count(".") >= 3:
        return FileKind.GE_BINARY
    return None


def locate(
    path: Union[str, Path],
    *,
    mapping: Optional[dict[str, str]] = None,
    fx_token_base: Optional[int] = None,
) -> Union[DumpFile, GraphFile, Unrecognized, None]:
    """Classify one file by its name and place it by its path; None for files that are not part of a dump.

    `mapping` is its directory's mapping.csv (read here when a hashed name needs it and none is given).
    """
    path = path if isinstance(path, Path) else Path(path)  # Path(a_path) re-parses the whole path
    kind = classify_name(path.name)
    if kind is None:
        return None
    return _locate(path, path.name, kind, path.parent.parts, mapping, fx_token_base)


def _locate(
    path: Path,
    name: str,
    kind: FileKind,
    parts: tuple[str, ...],
    mapping: Optional[dict[str, str]],
    fx_token_base: Optional[int],
) -> Union[DumpFile, GraphFile, Unrecognized]:
    """`locate` for a file already classified, with its directory's `parts` (computed once per directory)."""
    try:
        if kind is FileKind.GRAPH:
            return GraphFile(path, parse_graph_file_name(name))  # type: ignore[arg-type]
        if kind in (FileKind.FX_NPY, FileKind.FX_MIN_MAX_NPY):
            return _fx_record(kind, path, parts, parse_fx_file_name(name), fx_token_base)
        if is_hashed_name(name):
            mapping = mapping if mapping is not None else read_mapping(path.parent)
            if not mapping:
                raise NameParseError(path, f"hashed long name but no {MAPPING_FILE} beside it")
        resolved = resolve_ge_file_name(name, mapping or {})
        return _ge_record(_GE_KINDS[resolved.kind], path, parts, resolved)
    except DumpError as exc:
        return Unrecognized(path, exc.message)


def discover(root: Union[str, Path], *, fx_token_base: Optional[int] = None) -> DumpTree:
    """Every dump file, graph file and unusable dump-like file under `root`.

    `fx_token_base` overrides the FX step numbering (0 or 1) when the era cannot be told from the layout.
    """
    root = Path(os.path.realpath(root))
    files: list[DumpFile] = []
    graphs: list[GraphFile] = []
    problems: list[Unrecognized] = []
    for directory, entries in _walk(root):
        mapping: Optional[dict[str, str]] = None
        parts = directory.parts
        for entry in entries:
            path = directory / entry.name  # cheaper than parsing entry.path again
            if entry.is_symlink() and path.is_dir():  # whatever its name: the files below it are not listed
                problems.append(Unrecognized(path, "symlinked directory; not entered"))
                continue
            kind = classify_name(entry.name)
            if kind is None:
                continue
            if entry.is_symlink() and not _inside(path, root):
                problems.append(Unrecognized(path, "symlink pointing outside the dump tree; not followed"))
                continue
            if not entry.is_file():  # opening a FIFO would wait for a writer
                problems.append(
                    Unrecognized(path, "not a regular file (a FIFO, socket or device, or a broken symlink)")
                )
                continue
            if mapping is None and is_hashed_name(entry.name):
                try:
                    mapping = read_mapping(directory)  # once per directory, only when needed
                except DumpError as exc:
                    problems.append(Unrecognized(path, exc.message))
                    continue
            found = _locate(path, entry.name, kind, parts, mapping, fx_token_base)
            if isinstance(found, DumpFile):
                files.append(found)
            elif isinstance(found, GraphFile):
                graphs.append(found)
            else:
                problems.append(found)
    files.sort(key=lambda f: (f.side.value, str(f.path)))
    graphs.sort(key=lambda g: (g.name.rank if g.name.rank is not None else -1, g.name.number, str(g.path)))
    problems.sort(key=lambda p: str(p.path))
    return DumpTree(root, tuple(files), tuple(graphs), tuple(problems))
