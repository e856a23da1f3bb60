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
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from tcmp.schemas import SLOTS
from tcmp.schemas.dump_records import IO, Side
from tcmp.schemas.errors import DumpError, NameParseError, unreadable_reason
from tcmp.schemas.fx_dump import FxFileName, parse_fx_file_name
from tcmp.schemas.ge_names import (
    MAPPING_FILE,
    GeFileKind,
    GeFileName,
    is_hashed_name,
    read_mapping,
    resolve_ge_file_name,
)
from tcmp.schemas.graph import GraphFileName, GraphKind, GraphNameForm, is_other_graph_dump, parse_graph_file_name
from tcmp.schemas.graph_names import SNIFF_BYTES, graph_name_by_content, looks_like_ge_graph_text

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


def in_rank_directory(path: Path) -> bool:
    """Does the path lie in a `worldsize{W}_[global_]rank{R}` directory (its rank read from it, not from a device)?"""
    return _rank_of(path.parts) is not None


@functools.lru_cache(maxsize=4096)  # the same for every file of a directory
def _ge_place(parts: tuple[str, ...]) -> tuple:
    """(rank, step, model, run, device, model_id) of a GE file's directory:
    …/{time}/{device}/{model}/{model_id}/{step}.

    Without a `worldsize{W}_[global_]rank{R}` directory (the layout before 2025-08) the device is the rank: each
    device's process dumps its own model executions, and comparing two devices' files as one token would pair
    executions across devices (the peer groups such trees by device too)."""
    up = list(reversed(parts))  # up[0] is the file's directory
    step = int(up[0]) if up and _DIGITS.match(up[0]) else None
    model_id = int(up[1]) if step is not None and len(up) > 1 and _DIGITS.match(up[1]) else None
    model = up[2] if model_id is not None and len(up) > 2 else None
    device = int(up[3]) if model is not None and len(up) > 3 and _DIGITS.match(up[3]) else None
    run = next((p for p in up if _TIME_DIR.match(p)), None)
    rank = _rank_of(parts)
    return rank if rank is not None else device, step, model, run, device, model_id


@functools.lru_cache(maxsize=4096)  # the same for every file of a directory
def _fx_place(parts: tuple[str, ...], token_base: Optional[int]) -> Union[tuple, str]:
    """(rank, token, graph) of an FX file's directory, or why it has none: the step directory is the file's parent
    (newest/oldest eras) or grandparent (middle eras)."""
    up = list(reversed(parts))
    if up and _DIGITS.match(up[0]):
        step, graph = int(up[0]), (up[1] if len(up) > 1 else None)
    elif len(up) > 1 and _DIGITS.match(up[1]):
        step, graph = int(up[1]), up[0]
    else:
        return "FX file outside a step directory ({graph}/{step}/ or {step}/{graph}/)"
    rank = _rank_of(parts)
    base = token_base if token_base is not None else (0 if rank is not None else 1)
    if step - base < 0:
        return f"FX step directory {step} is below the token base {base}"
    return rank, step - base, graph


def _ge_record(kind: FileKind, path: Path, parts: tuple[str, ...], name: GeFileName) -> DumpFile:
    rank, step, model, run, device, model_id = _ge_place(parts)
    return DumpFile(
        side=Side.GE,
        kind=kind,
        path=path,
        rank=rank,
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
    place = _fx_place(parts, token_base)
    if isinstance(place, str):
        return Unrecognized(path, place)
    rank, token, graph = place
    return DumpFile(
        side=Side.FX,
        kind=kind,
        path=path,
        rank=rank,
        token=token,
        model=graph,
        run=graph,
        op_type=name.target,
        op_name=name.node,
        io=name.io,
        index=name.index,
        timestamp=int(name.timestamp) if name.timestamp.isdigit() else None,
        name=name,
    )


def _walk(root: Path, unreadable: Optional[list[Unrecognized]] = None) -> Iterator[tuple[Path, list[os.DirEntry]]]:
    """Directories under root (root included) with their file entries; symlinked directories not entered. A
    directory that cannot be listed (a `chmod 000` rank directory) is added to `unreadable`, never skipped unsaid."""
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            with os.scandir(directory) as it:
                entries = list(it)
        except FileNotFoundError:
            continue  # vanished since its parent was listed
        except OSError as exc:
            if unreadable is not None:
                unreadable.append(Unrecognized(directory, unreadable_reason(exc)))
            continue
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


@dataclass(frozen=True)
class DirectoryScan:
    """The dump files of one directory, and those of its files that look like dumps but cannot be used."""

    files: tuple[DumpFile, ...]
    problems: tuple[Unrecognized, ...]


def _list_files(directory: Path) -> Union[list[os.DirEntry], Unrecognized]:
    """The file entries of a directory, by name; why not when it cannot be listed (a vanished one has none)."""
    try:
        with os.scandir(directory) as it:
            entries = [e for e in it if e.name != INDEX_DIR and not e.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return []
    except OSError as exc:
        return Unrecognized(directory, unreadable_reason(exc))
    return sorted(entries, key=lambda e: e.name)


def _scan_entries(
    root: Path, directory: Path, entries: list[os.DirEntry], fx_token_base: Optional[int], side: Optional[Side]
) -> DirectoryScan:
    """The dump files among a directory's file entries, of one side or both (graph files and symlinked directories
    are the outline's)."""
    files: list[DumpFile] = []
    problems: list[Unrecognized] = []
    mapping: Optional[dict[str, str]] = None
    parts = directory.parts
    for entry in entries:
        kind = classify_name(entry.name)
        if kind is None or kind is FileKind.GRAPH or (side is not None and _side_of(kind) is not side):
            continue
        path = directory / entry.name  # cheaper than parsing entry.path again
        if entry.is_symlink() and path.is_dir():
            continue
        problem = _unusable_entry(root, path, entry)
        if problem is not None:
            problems.append(problem)
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
        elif isinstance(found, Unrecognized):
            problems.append(found)
    return DirectoryScan(tuple(files), tuple(problems))


def _unusable_entry(root: Path, path: Path, entry: os.DirEntry) -> Optional[Unrecognized]:
    if entry.is_symlink() and not _inside(path, root):
        return Unrecognized(path, "symlink pointing outside the dump tree; not followed")
    if not entry.is_file():  # opening a FIFO would wait for a writer
        return Unrecognized(path, "not a regular file (a FIFO, socket or device, or a broken symlink)")
    return None


def scan_directory(
    root: Union[str, Path], directory: Path, *, side: Optional[Side] = None, fx_token_base: Optional[int] = None
) -> DirectoryScan:
    """The dump files (of `side`, or both sides) of one directory of the tree under `root` (a `DumpDir` of
    `outline`), read from their names, and those that cannot be used (the directory itself, when it cannot be
    listed any more)."""
    entries = _list_files(directory)
    if isinstance(entries, Unrecognized):
        return DirectoryScan((), (entries,))
    return _scan_entries(Path(os.path.realpath(root)), directory, entries, fx_token_base, side)


def dump_names(directory: Path, side: Side) -> Iterator[tuple[str, Optional[str]]]:
    """(op name, op type) of each of `side`'s dump files in a directory, from their names alone (nothing checked or
    placed; names that do not parse are left out): what binding a model or graph by its ops needs."""
    entries = _list_files(directory)
    mapping: Optional[dict[str, str]] = None
    for entry in entries if not isinstance(entries, Unrecognized) else ():  # said where its files are listed
        kind = classify_name(entry.name)
        if kind is None or kind is FileKind.GRAPH or _side_of(kind) is not side:
            continue
        try:
            if side is Side.FX:
                fx = parse_fx_file_name(entry.name)
                yield fx.node, fx.target
                continue
            if mapping is None and is_hashed_name(entry.name):
                mapping = read_mapping(directory)
            ge = resolve_ge_file_name(entry.name, mapping or {})
            yield ge.op_name, ge.op_type
        except DumpError:
            continue


@dataclass(frozen=True, **SLOTS)
class DumpDir:
    """A directory holding dump files of one side. Everything a path says about a file (rank, token, model, run) is
    the same for every file in its directory: a compare plans by directories and reads the file names only where it
    compares them, so what it holds does not grow with the number of files."""

    side: Side
    path: Path
    rank: Optional[int]
    token: Optional[int]
    model: Optional[str]  # GE model directory name / FX graph directory name
    run: Optional[str]
    kinds: frozenset[FileKind]  # of the dump files named in it (before their names are parsed)
    on_disk: bool = True  # False: only `tcmp watch`'s index still knows its files
    indexed: bool = False  # `tcmp watch` deleted raw files of it: their summaries are in its index


@dataclass(frozen=True)
class DumpOutline:
    """A dump tree by directories: its dump directories, its graph files, and what cannot be used at that level
    (symlinked directories, FX files outside a step directory)."""

    root: Path
    dirs: tuple[DumpDir, ...]
    graphs: tuple[GraphFile, ...]
    problems: tuple[Unrecognized, ...]


@dataclass(frozen=True)
class DumpTreeRoot:
    """One dump a tree holds: the directory its writer was given (`msprobe_ge_dump`, an FX dump path), and its side.
    A tree holding two is two dumps, never one."""

    path: Path
    side: Side


# How far a dump directory lies below its root (rank directories aside): GE {time}/{device}/{model}/{model_id}/{step},
# FX {graph}/{step} or {step}/{graph}.
_ROOT_DEPTH = {Side.GE: 5, Side.FX: 2}


def _root_of(d: DumpDir, top: Path) -> Optional[Path]:
    """The root of the dump a directory belongs to: above its place directories and its rank directory, wherever
    that lies (`msprobe_ge_dump/worldsize…/` or `worldsize…/msprobe_ge_dump/`: the ranks of one dump), and above an
    FX `data_dump/`; never above `top`, the path given. None when the directory's path is not a dump's."""
    if d.side is Side.GE and d.model is None:
        return None  # GE files outside {time}/{device}/{model}/{model_id}/{step}: listed where they are read
    parts = d.path.parts
    depth = _ROOT_DEPTH[d.side]
    if parts[: len(top.parts)] != top.parts or len(parts) - depth <= len(top.parts):
        return top
    below_top = parts[len(top.parts) : -depth]
    ranked = next((k for k, part in enumerate(below_top) if _RANK_DIR.match(part)), None)
    if ranked is not None:
        return Path(*top.parts, *below_top[:ranked])
    if d.side is Side.FX and below_top[-1] == "data_dump":
        below_top = below_top[:-1]
    return Path(*top.parts, *below_top)


def dump_roots(tree: DumpOutline) -> tuple[DumpTreeRoot, ...]:
    """The dumps a tree holds, by root and side: more than one (a GE and a fusion-off GE dump side by side, a GE and
    an FX dump) means the path given is one level too shallow."""
    found = set()
    for d in tree.dirs:
        root = _root_of(d, tree.root)
        if root is not None:
            found.add(DumpTreeRoot(root, d.side))
    return tuple(sorted(found, key=lambda r: (str(r.path), r.side.value)))


def _place_dir(
    side: Side, directory: Path, fx_token_base: Optional[int]
) -> Union[tuple[Optional[int], Optional[int], Optional[str], Optional[str]], str]:
    """(rank, token, model, run) of a directory of `side`'s dump files, or why its FX files have no place."""
    if side is Side.GE:
        rank, step, model, run, _, _ = _ge_place(directory.parts)
        return rank, step, model, run
    place = _fx_place(directory.parts, fx_token_base)
    if isinstance(place, str):
        return place
    rank, token, graph = place
    return rank, token, graph, graph


_FX_KINDS = (FileKind.FX_NPY, FileKind.FX_MIN_MAX_NPY)


def _side_of(kind: FileKind) -> Side:
    return Side.FX if kind in _FX_KINDS else Side.GE


def _outline_entries(
    root: Path, directory: Path, entries: list[os.DirEntry], fx_token_base: Optional[int]
) -> tuple[list[DumpDir], list[GraphFile], list[Unrecognized]]:
    """One directory's graph files, dump directories (one per side) and problems, without parsing dump names."""
    kinds: dict[Side, set[FileKind]] = defaultdict(set)
    graphs: list[GraphFile] = []
    problems: list[Unrecognized] = []
    for entry in entries:  # no Path per entry: tens of thousands of files in a token's directory
        if entry.is_symlink() and (directory / entry.name).is_dir():  # whatever its name: not entered
            problems.append(Unrecognized(directory / entry.name, "symlinked directory; not entered"))
            continue
        kind = classify_name(entry.name)
        if kind is None:
            continue
        if kind is not FileKind.GRAPH:
            kinds[_side_of(kind)].add(kind)
        else:
            path = directory / entry.name
            problem = _unusable_entry(root, path, entry)
            if problem is None:
                graphs.append(GraphFile(path, parse_graph_file_name(entry.name)))  # type: ignore[arg-type]
            else:
                problems.append(problem)
    dirs = []
    for side, side_kinds in kinds.items():
        place = _place_dir(side, directory, fx_token_base)
        if isinstance(place, str):  # every FX file here is unplaced: listed one by one
            problems.extend(_scan_entries(root, directory, entries, fx_token_base, side).problems)
            continue
        dirs.append(DumpDir(side, directory, *place, frozenset(side_kinds)))
    return dirs, graphs, problems


def outline(root: Union[str, Path], *, fx_token_base: Optional[int] = None) -> DumpOutline:
    """Every dump directory and graph file under `root`, and what is unusable at the directory level.

    `fx_token_base` overrides the FX step numbering (0 or 1) when the era cannot be told from the layout.
    """
    root = Path(os.path.realpath(root))
    dirs: list[DumpDir] = []
    graphs: list[GraphFile] = []
    problems: list[Unrecognized] = []
    for directory, entries in _walk(root, problems):
        found = _outline_entries(root, directory, entries, fx_token_base)
        dirs += found[0]
        graphs += found[1]
        problems += found[2]
    dirs.sort(key=lambda d: (d.side.value, str(d.path)))
    graphs.sort(key=_graph_order)
    problems.sort(key=lambda p: str(p.path))
    return DumpOutline(root, tuple(dirs), tuple(graphs), tuple(problems))


def _graph_order(g: GraphFile) -> tuple:
    return (-1 if g.name.rank is None else g.name.rank, -1 if g.name.number is None else g.name.number, str(g.path))


def graph_files_in(path: Union[str, Path], top_level_only: bool = False) -> tuple[GraphFile, ...]:
    """The graph text files a path holds: every torchair-named one under a directory (or, `top_level_only`,
    directly in it, as torchair writes them to `graph_dump.path`); a file given by name whatever its name
    (a GE `ge_proto_*.txt` dump, a renamed copy), read as an original graph."""
    path = Path(os.path.realpath(path))
    if path.is_file():
        name = parse_graph_file_name(path.name)
        return (
            GraphFile(path, name or GraphFileName(GraphKind.ORIGINAL, None, None, None, None, GraphNameForm.GIVEN)),
        )
    if top_level_only:
        try:
            with os.scandir(path) as entries:
                found = [(e.path, parse_graph_file_name(e.name)) for e in entries if e.is_file()]
        except OSError:
            return ()
        return tuple(sorted((GraphFile(Path(p), n) for p, n in found if n is not None), key=_graph_order))
    return outline(path).graphs


# GE's own graph dumps (DUMP_GE_GRAPH): GE graphs too, but built, not torchair's original graph: never guessed
_GE_GRAPH_DUMP_PREFIXES = ("ge_proto_", "ge_onnx_")


def holds_ge_graph_text(path: Path) -> bool:
    """Does the file start as the text format of a GE graph (its first KB read; False when it cannot be read)?"""
    try:
        with open(path, "rb") as fh:
            return looks_like_ge_graph_text(fh.read(SNIFF_BYTES))
    except OSError:
        return False


def graph_files_by_content(directory: Union[str, Path]) -> tuple[GraphFile, ...]:
    """The `.txt` files directly in a directory whose names are none of torchair's forms (nor GE's own graph dumps)
    but whose content is a GE graph: a renamed copy, a test's `dynamo_original_graph_{ts}_test.txt`."""
    try:
        with os.scandir(directory) as it:
            named = sorted(e.name for e in it if e.name.endswith(".txt") and e.is_file())
    except OSError:
        return ()
    found = [
        GraphFile(Path(directory) / name, graph_name_by_content(name))
        for name in named
        if parse_graph_file_name(name) is None
        and not name.startswith(_GE_GRAPH_DUMP_PREFIXES)
        and holds_ge_graph_text(Path(directory) / name)
    ]
    return tuple(sorted(found, key=_graph_order))


def other_graph_dumps(path: Union[str, Path], top_level_only: bool = False) -> tuple[Path, ...]:
    """torchair graph dumps of type "pbtxt" or "py" under a path: what to name when no text graph is found."""
    found: list[Path] = []
    for directory, entries in _walk(Path(path)):
        found += [directory / e.name for e in entries if is_other_graph_dump(e.name)]
        if top_level_only:
            break
    return tuple(sorted(found))


def discover(root: Union[str, Path], *, fx_token_base: Optional[int] = None) -> DumpTree:
    """Every dump file, graph file and unusable dump-like file under `root`: the outline, then each directory's
    files (a compare reads a big tree that way one token at a time, holding less).

    `fx_token_base` overrides the FX step numbering (0 or 1) when the era cannot be told from the layout.
    """
    shape = outline(root, fx_token_base=fx_token_base)
    files: list[DumpFile] = []
    problems = list(shape.problems)
    for d in shape.dirs:
        scan = scan_directory(shape.root, d.path, side=d.side, fx_token_base=fx_token_base)
        files += scan.files
        problems += scan.problems
    files.sort(key=lambda f: (f.side.value, str(f.path)))
    problems.sort(key=lambda p: str(p.path))
    return DumpTree(shape.root, tuple(files), shape.graphs, tuple(problems))
