"""Walking a dump tree: its dump directories and graph files (the outline), the dumps it holds (their roots), and
the dump files of each directory (a scan), or all of them at once (`discover`).

Symlinked directories are never entered (and reported); symlinks that leave the tree and files that are not regular
files are returned as `Unrecognized` with the reason, as are directories that cannot be listed.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from tcmp.schemas import SLOTS
from tcmp.schemas.acl_dump import ACL_MODEL, AclFileName, acl_rank, parse_acl_file_name, shared_counters
from tcmp.schemas.dump_places import FX_WRAPPER_DIRS, RANK_DIR, fx_place, ge_place
from tcmp.schemas.dump_records import Side
from tcmp.schemas.dump_tree import (
    INDEX_DIR,
    DumpFile,
    FileKind,
    GraphFile,
    Unrecognized,
    classify_name,
    locate_classified,
)
from tcmp.schemas.errors import DumpError, unreadable_reason
from tcmp.schemas.fx_dump import parse_fx_file_name
from tcmp.schemas.ge_names import is_hashed_name, read_mapping, resolve_ge_file_name
from tcmp.schemas.graph_names import parse_graph_file_name


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
    def acl_files(self) -> tuple[DumpFile, ...]:
        return tuple(f for f in self.files if f.side is Side.ACL)

    @property
    def ranks(self) -> tuple[Optional[int], ...]:
        return tuple(sorted({f.rank for f in self.files}, key=lambda r: -1 if r is None else r))


def walk(root: Path, unreadable: Optional[list[Unrecognized]] = None) -> Iterator[tuple[Path, list[os.DirEntry]]]:
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
        found = locate_classified(path, entry.name, kind, parts, mapping, fx_token_base)
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
    root: Union[str, Path],
    directory: Path,
    *,
    side: Optional[Side] = None,
    fx_token_base: Optional[int] = None,
    token: Optional[int] = None,
) -> DirectoryScan:
    """The dump files (of `side`, or both sides) of one directory of the tree under `root` (a `DumpDir` of
    `outline`), read from their names, and those that cannot be used (the directory itself, when it cannot be
    listed any more).

    An aclgraph directory holds every token: with `token` (its `DumpDir`'s), only that token's files, less those of
    nodes whose save counter is shared (`acl_dump.SharedCounter`); its unusable files are the outline's problems."""
    entries = _list_files(directory)
    if isinstance(entries, Unrecognized):
        return DirectoryScan((), (entries,))
    scan = _scan_entries(Path(os.path.realpath(root)), directory, entries, fx_token_base, side)
    if side is not Side.ACL or token is None:
        return scan
    shared = shared_counters([f.name for f in scan.files if isinstance(f.name, AclFileName)])
    return DirectoryScan(tuple(f for f in scan.files if f.token == token and f.op_name not in shared), ())


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
            if side is Side.ACL:
                yield parse_acl_file_name(entry.name).node, None
                continue
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
    if d.side is Side.ACL:  # the files lie in the rank directory itself, below the dump path torchair was given
        return d.path.parent if d.path != top and top in d.path.parents else top
    parts = d.path.parts
    depth = _ROOT_DEPTH[d.side]
    if parts[: len(top.parts)] != top.parts or len(parts) - depth <= len(top.parts):
        return top
    below_top = parts[len(top.parts) : -depth]
    ranked = next((k for k, part in enumerate(below_top) if RANK_DIR.match(part)), None)
    if ranked is not None:
        return Path(*top.parts, *below_top[:ranked])
    if d.side is Side.FX and below_top[-1] in FX_WRAPPER_DIRS:
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
    """(rank, token, model, run) of a directory of `side`'s dump files, or why its FX (aclgraph) files have no
    place. An aclgraph directory holds every token (its files' save counters)."""
    if side is Side.ACL:
        rank = acl_rank(directory.parts)
        return rank if isinstance(rank, str) else (rank, None, ACL_MODEL, None)
    if side is Side.GE:
        rank, step, model, run, _, _ = ge_place(directory.parts)
        return rank, step, model, run
    place = fx_place(directory.parts, fx_token_base)
    if isinstance(place, str):
        return place
    rank, token, graph = place
    return rank, token, graph, graph


_FX_KINDS = (FileKind.FX_NPY, FileKind.FX_MIN_MAX_NPY)


def _side_of(kind: FileKind) -> Side:
    if kind is FileKind.ACL_PT:
        return Side.ACL
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
        if isinstance(place, str):  # every FX (aclgraph) file here is unplaced: listed one by one
            problems.extend(_scan_entries(root, directory, entries, fx_token_base, side).problems)
            continue
        if side is Side.ACL:
            acl_dirs, acl_problems = _acl_token_dirs(root, directory, entries, place[0], frozenset(side_kinds))
            dirs += acl_dirs
            problems += acl_problems
            continue
        dirs.append(DumpDir(side, directory, *place, frozenset(side_kinds)))
    return dirs, graphs, problems


def _acl_token_dirs(
    root: Path, directory: Path, entries: list[os.DirEntry], rank: Optional[int], kinds: frozenset[FileKind]
) -> tuple[list[DumpDir], list[Unrecognized]]:
    """An aclgraph directory as one `DumpDir` per token (the save counters its names hold), and its unusable files:
    names that do not parse, and every file of a node whose counter is shared (said once here, not per token)."""
    scan = _scan_entries(root, directory, entries, None, Side.ACL)
    names = [f.name for f in scan.files if isinstance(f.name, AclFileName)]
    shared = shared_counters(names)
    problems = list(scan.problems)
    problems += (Unrecognized(f.path, shared[f.op_name].reason) for f in scan.files if f.op_name in shared)
    tokens = sorted({n.counter for n in names if n.node not in shared})
    return [DumpDir(Side.ACL, directory, rank, k, ACL_MODEL, None, kinds) for k in tokens], problems


def outline(root: Union[str, Path], *, fx_token_base: Optional[int] = None) -> DumpOutline:
    """Every dump directory and graph file under `root`, and what is unusable at the directory level.

    `fx_token_base` overrides the FX step numbering (0 or 1) when the era cannot be told from the layout.
    """
    root = Path(os.path.realpath(root))
    dirs: list[DumpDir] = []
    graphs: list[GraphFile] = []
    problems: list[Unrecognized] = []
    for directory, entries in walk(root, problems):
        found = _outline_entries(root, directory, entries, fx_token_base)
        dirs += found[0]
        graphs += found[1]
        problems += found[2]
    dirs.sort(key=lambda d: (d.side.value, str(d.path)))
    graphs.sort(key=graph_file_order)
    problems.sort(key=lambda p: str(p.path))
    return DumpOutline(root, tuple(dirs), tuple(graphs), tuple(problems))


def graph_file_order(g: GraphFile) -> tuple:
    return (-1 if g.name.rank is None else g.name.rank, -1 if g.name.number is None else g.name.number, str(g.path))


def discover(root: Union[str, Path], *, fx_token_base: Optional[int] = None) -> DumpTree:
    """Every dump file, graph file and unusable dump-like file under `root`: the outline, then each directory's
    files (a compare reads a big tree that way one token at a time, holding less).

    `fx_token_base` overrides the FX step numbering (0 or 1) when the era cannot be told from the layout.
    """
    shape = outline(root, fx_token_base=fx_token_base)
    files: list[DumpFile] = []
    problems = list(shape.problems)
    for d in shape.dirs:
        scan = scan_directory(shape.root, d.path, side=d.side, fx_token_base=fx_token_base, token=d.token)
        files += scan.files
        problems += scan.problems
    files.sort(key=lambda f: (f.side.value, str(f.path)))
    problems.sort(key=lambda p: str(p.path))
    return DumpTree(shape.root, tuple(files), shape.graphs, tuple(problems))
