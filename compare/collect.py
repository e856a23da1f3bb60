"""Everything a compare needs before any tensor is read: both dump trees walked, the golden's type detected, ranks
and runs checked, and every GE graph of every rank bound to its graph file and its golden directories.

The plan is made of directories, not files: all files of a step directory share the rank, token, model and run
its path gives, so a dump of a million files is planned from a few thousand records, and each token's files are
listed (their names parsed) in the worker that compares the token. Binding by content reads one token's names.

Bindings go by names where the names allow it (`graph_{N}` model directories to `dynamo_original_graph_{N}` files,
fusion-off model directories by their name) and by content otherwise (the FX node keys a graph's `_fx_tensor_name`s
name, the op names a dump holds) — never by position, which is how the peer paired graph 2 with graph 10. A tree
holding two runs (several GE `{time}` directories for one rank and model, several FX directories of one graph) is
refused with the runs listed, instead of comparing a blend.
"""

from __future__ import annotations

import enum
import os
import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional

from tcmp.schemas.errors import DumpError
from tcmp.schemas.ge_names import sanitize
from tcmp.schemas.graph import Graph, GraphKind
from tcmp.schemas.graph_cache import load_graph
from tcmp.schemas.index import IndexUnusable, find_index, open_index
from tcmp.schemas.layout import (
    DumpDir,
    DumpFile,
    DumpOutline,
    GraphFile,
    Unrecognized,
    dump_names,
    graph_files_in,
    graph_number_of,
    other_graph_dumps,
    outline,
    scan_directory,
)
from tcmp.schemas.records import FileSummary, Side

from .fx_stacks import with_stacks
from .records import CompareError, Role, Unmatched, UnmatchedKind

_BY_NAME_ONLY = "fused ops are decomposed by name only"
_UNREADABLE_INDEX = (IndexUnusable, sqlite3.Error, OSError)  # what reading an index that is missing or damaged raises
FX_RUN_SCORE = 0.5  # share of a graph's FX node keys a directory must hold to belong to it
FX_DUPLICATE_SCORE = 0.9  # two directories this complete for one graph: two runs


class GoldenKind(str, enum.Enum):
    FX = "fx"
    GE = "ge"  # a GE dump taken with fusion switched off


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
        for d in dirs:
            if d.on_disk:
                scan = scan_directory(self.root, d.path, side=d.side, fx_token_base=self.fx_token_base)
                files += scan.files
                problems += scan.problems
        stored: dict[Path, FileSummary] = {}
        indexed = [d for d in dirs if d.indexed]
        if indexed and self.index is not None:
            try:
                with open_index(self.index) as reader:
                    deleted = [f for d in indexed for f in reader.deleted_in(d.path) if not os.path.lexists(f.path)]
                    stored.update((s.path, s) for s in reader.summaries_of(deleted))
            except _UNREADABLE_INDEX as exc:  # the only record of those files: no compare
                why = f"index {self.index} unreadable where it holds files deleted by tcmp watch: {exc}"
                raise CompareError(why) from exc
            files += (f.file for f in deleted)
        files.sort(key=lambda f: str(f.path))
        return Listing(tuple(files), tuple(problems), stored)


@dataclass(frozen=True)
class Listing:
    files: tuple[DumpFile, ...]
    problems: tuple[Unrecognized, ...]
    stored: Mapping[Path, FileSummary]  # summaries from the index of the files whose raw data is gone


@dataclass(frozen=True)
class Binding:
    """One GE graph (model) of one rank: its target directories, its graph and its golden directories."""

    rank: Optional[int]
    model: str
    graph: Optional[Graph]
    target_dirs: tuple[DumpDir, ...]
    golden_dirs: tuple[DumpDir, ...]
    golden_label: str  # the golden directory these came from (FX graph dir or GE model dir)


@dataclass(frozen=True)
class CompareInputs:
    target: DumpSource
    golden: DumpSource
    golden_kind: GoldenKind
    bindings: tuple[Binding, ...]
    unmatched: tuple[Unmatched, ...]  # what is unusable at the directory level (and unusable graphs)
    notes: tuple[str, ...]
    # directories no binding compares: the golden's are listed as out of scope, both sides' unusable files too
    unbound: tuple[tuple[Role, DumpDir], ...] = ()

    @property
    def ranks(self) -> tuple[Optional[int], ...]:
        return tuple(sorted({b.rank for b in self.bindings}, key=lambda r: -1 if r is None else r))


@dataclass
class _GraphCache:
    graphs: dict[Path, Graph] = field(default_factory=dict)
    index: Optional[Path] = None  # holds the parses `tcmp watch` already stored

    def load(self, path: Path, notes: list[str]) -> Graph:
        if path not in self.graphs:
            stored = None
            if self.index is not None:  # a reader per graph (a handful per compare), never left open
                try:
                    with open_index(self.index) as reader:
                        stored = reader.graph(path)
                except _UNREADABLE_INDEX as exc:  # damaged where the graphs are: parse the file
                    notes.append(f"index {self.index} unusable for graph {path.name}, parsed from the file: {exc}")
                    self.index = None
            graph = stored if stored is not None else load_graph(path)
            self.graphs[path] = with_stacks(graph, notes)  # Stack Info from the capture helper's stack file
        return self.graphs[path]


def _with_index(tree: DumpOutline, db: Optional[Path], notes: list[str]) -> tuple[DumpOutline, Optional[Path]]:
    """Add to a walked tree the directories of files only the index still knows (raw data deleted by `tcmp watch`),
    and the graph files it parsed. The index is the tree's own (`.tcmp/index.sqlite` in it or above it) or `db`."""
    path = db if db is not None else find_index(tree.root)
    if path is None:
        return tree, None
    try:
        with open_index(path) as reader:
            indexed = reader.deleted_dirs_under(tree.root)
            graph_files = reader.graph_files_under(tree.root)
    except _UNREADABLE_INDEX as exc:
        note = f"index {path} unusable, raw files only: {exc}"
        if note not in notes:  # both trees' index, usually
            notes.append(note)
        return tree, None
    on_disk = {(d.path, d.side): d for d in tree.dirs}
    dirs = {**on_disk}
    for d in indexed:
        found = on_disk.get((d.path, d.side))
        dirs[(d.path, d.side)] = d if found is None else replace(found, kinds=found.kinds | d.kinds, indexed=True)
    known_graphs = {g.path for g in tree.graphs}
    merged = DumpOutline(
        tree.root,
        tuple(sorted(dirs.values(), key=lambda d: (d.side.value, str(d.path)))),
        tree.graphs + tuple(g for g in graph_files if g.path not in known_graphs),
        tree.problems,
    )
    return merged, path


def _fx_keys(graph: Graph) -> set[str]:
    return {o.fx_tensor.node_key for op in graph.ops for o in op.outputs if o.fx_tensor is not None}


def _check_paths(target: Path, golden: Path) -> tuple[Path, Path]:
    for role, path in (("target", target), ("golden", golden)):
        if not path.exists():
            raise CompareError(f"{role} path {path} does not exist", usage=True)
        if not path.is_dir():
            raise CompareError(f"{role} path {path} is not a directory", usage=True)
    target, golden = Path(os.path.realpath(target)), Path(os.path.realpath(golden))
    if target == golden:
        raise CompareError(f"target and golden are the same dump ({target}); give the golden run's directory")
    if target in golden.parents or golden in target.parents:
        raise CompareError(f"one path contains the other ({target} / {golden}); give two separate dumps")
    return target, golden


def _common_ranks(target: Sequence[Optional[int]], golden: Sequence[Optional[int]], rank: Optional[int]):
    """Pairs (target rank, golden rank) to compare."""
    t_ranked, g_ranked = [r for r in target if r is not None], [r for r in golden if r is not None]
    if rank is not None:
        if t_ranked and rank not in t_ranked:
            raise CompareError(f"--rank {rank}: the target has ranks {t_ranked}", usage=True)
        if g_ranked and rank not in g_ranked:
            raise CompareError(f"--rank {rank}: the golden has ranks {g_ranked}", usage=True)
        return [(rank if t_ranked else None, rank if g_ranked else None)]
    if t_ranked and g_ranked:
        common = sorted(set(t_ranked) & set(g_ranked))
        if not common:
            raise CompareError(f"no common rank: the target has ranks {sorted(set(t_ranked))}, the golden "
                               f"{sorted(set(g_ranked))}")  # fmt: skip
        return [(r, r) for r in common]
    if t_ranked or g_ranked:
        ranked, role = (t_ranked, "target") if t_ranked else (g_ranked, "golden")
        if len(set(ranked)) > 1:
            other = "golden" if role == "target" else "target"
            raise CompareError(
                f"the {role} has ranks {sorted(set(ranked))} but the {other} has no rank directories; "
                "pass --rank N to compare one of them", usage=True,
            )  # fmt: skip
        only = ranked[0]
        return [(only if t_ranked else None, only if g_ranked else None)]
    return [(None, None)]


def _single_run(dirs: Sequence[DumpDir], role: str, chosen: Optional[str]) -> list[DumpDir]:
    """Refuse a tree holding several GE runs ({time} dirs) for one rank and model, unless one is chosen."""
    runs_by_model: dict[tuple, set] = defaultdict(set)
    for d in dirs:
        runs_by_model[(d.rank, d.model)].add(d.run)
    if chosen is not None:
        picked = [d for d in dirs if d.run == chosen]
        if not picked:
            runs = sorted({str(d.run) for d in dirs})
            raise CompareError(f"--{role}-run {chosen}: the {role} holds runs {runs}", usage=True)
        return picked
    mixed = {k: sorted(map(str, v)) for k, v in runs_by_model.items() if len(v) > 1}
    if mixed:
        (rank, model), runs = next(iter(mixed.items()))
        raise CompareError(
            f"the {role} dump holds {len(runs)} runs for rank {rank}, model {model}: {', '.join(runs)} "
            f"(two dumps written into one directory); choose one with --{role}-run"
        )
    return list(dirs)


def by_token(dirs: Iterable[DumpDir]) -> dict[int, list[DumpDir]]:
    """Directories by token; a directory outside any step directory counts as token 0."""
    groups: dict[int, list[DumpDir]] = defaultdict(list)
    for d in dirs:
        groups[d.token if d.token is not None else 0].append(d)
    return groups


def _by_model(dirs: Iterable[DumpDir]) -> dict[str, list[DumpDir]]:
    groups: dict[str, list[DumpDir]] = defaultdict(list)
    for d in dirs:
        groups[d.model or ""].append(d)
    return groups


def _graph_files_for(graphs: Sequence[GraphFile], rank: Optional[int]) -> dict[object, list[GraphFile]]:
    """The original graphs a rank may use, by graph number; a file without a number (torchair before 2025-05)
    stands alone, to be bound by content."""
    by_number: dict[object, list[GraphFile]] = defaultdict(list)
    for g in graphs:
        if g.name.kind is GraphKind.ORIGINAL and (g.name.rank is None or rank is None or g.name.rank == rank):
            by_number[g.name.number if g.name.number is not None else g.path].append(g)
    return by_number


def _jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    """Shared names over all names: a model whose ops are a subset of another's (one layer fewer) scores lower
    against the larger one, where the share of one side's names found in the other would tie."""
    a, b = set(a), set(b)
    return len(a & b) / max(1, len(a | b))


def _share(wanted: Iterable[str], held: Iterable[str]) -> float:
    """The share of `wanted` found in `held`."""
    wanted = set(wanted)
    return len(wanted & set(held)) / max(1, len(wanted))


def _content_score(graph: Graph, dumped: frozenset[str]) -> float:
    return _jaccard(dumped, (sanitize(op.name) for op in graph.ops))


@dataclass(frozen=True)
class _Names:
    """The names one token's files of a group hold: GE op names, FX node keys (`node-target`)."""

    ops: frozenset[str]
    fx_keys: frozenset[str]


class _Binder:
    """Binds by names. A group's names are read from its first token's directories only: every token of a graph
    dumps the same ops, and reading one keeps collecting independent of the number of tokens."""

    def __init__(
        self, target: tuple[DumpOutline, DumpSource], golden: tuple[DumpOutline, DumpSource], kind: GoldenKind,
        cache: _GraphCache, graphs: Sequence[GraphFile],
    ) -> None:  # fmt: skip
        (self.target, self.target_source), (self.golden, self.golden_source) = target, golden
        self.graphs = graphs
        self.kind, self.cache = kind, cache
        self.unmatched: list[Unmatched] = []
        self.notes: list[str] = []
        self._names: dict[tuple, _Names] = {}

    def names(self, source: DumpSource, dirs: Sequence[DumpDir]) -> _Names:
        tokens = by_token(dirs)
        sample = tuple(tokens[min(tokens)])
        key = (source.root, tuple(d.path for d in sample))
        if key not in self._names:
            if all(d.on_disk and not d.indexed for d in sample):
                names = {name for d in sample for name in dump_names(d.path, d.side)}
            else:  # the index holds (some of) their names
                names = {(f.op_name, f.op_type) for f in source.listing(sample).files}
            self._names[key] = _Names(
                frozenset(op for op, _ in names), frozenset(f"{op}-{op_type}" for op, op_type in names)
            )
        return self._names[key]

    def _pick_graph(self, candidates: list[GraphFile], dumped: frozenset[str]) -> Optional[Graph]:
        graphs, broken = [], []
        for g in candidates:
            try:
                graphs.append(self.cache.load(g.path, self.notes))
            except DumpError as exc:
                broken.append(f"graph file {g.path} unusable: {exc.message}")
        self.notes.extend(note for note in broken if note not in self.notes)
        if not graphs:  # every one broken
            if self.kind is GoldenKind.FX:
                raise CompareError(broken[0])  # GE ops reach their FX tensors only through the graph
            if _BY_NAME_ONLY not in self.notes:  # a fusion-off golden pairs ops by name; the graph decomposes fusions
                self.notes.append(_BY_NAME_ONLY)
            return None
        if len(graphs) > 1:
            graphs.sort(key=lambda g: _content_score(g, dumped), reverse=True)
            self.notes.append(
                f"{len(graphs)} graph files for one graph ({', '.join(str(g.path.name) for g in graphs)}); "
                f"used {graphs[0].path.name}, which names most of the dumped ops"
            )
        return graphs[0]

    def graph_for(self, rank: Optional[int], model: str, dirs: Sequence[DumpDir]) -> Optional[Graph]:
        by_number = _graph_files_for(self.graphs, rank)
        number = graph_number_of(model)
        dumped = self.names(self.target_source, dirs).ops if len(by_number.get(number, ())) != 1 else frozenset()
        if number is not None and number in by_number:
            return self._pick_graph(by_number[number], dumped)
        # the model directory is not named after a graph: pick by content
        best, best_score = None, 0.0
        for candidates in by_number.values():
            graph = self._pick_graph(candidates, dumped)
            score = _content_score(graph, dumped) if graph is not None else 0.0
            if score > best_score:
                best, best_score = graph, score
        return best if best_score > 0 else None

    def golden_groups(self, rank: Optional[int], run: Optional[str]) -> dict[str, list[DumpDir]]:
        side = Side.FX if self.kind is GoldenKind.FX else Side.GE
        dirs = [d for d in self.golden.dirs if d.side is side and d.rank == rank]
        if self.kind is GoldenKind.GE:
            dirs = _single_run(dirs, "golden", run)
        elif run is not None:
            picked = [d for d in dirs if d.run == run]
            if not picked:
                raise CompareError(f"--golden-run {run}: the golden holds {sorted({str(d.run) for d in dirs})}",
                                   usage=True)  # fmt: skip
            dirs = picked
        return _by_model(dirs)

    def bind_fx(self, graph: Optional[Graph], groups: dict[str, list[DumpDir]], model: str) -> Optional[str]:
        if graph is None:
            return None
        if graph.name in groups:  # FX directories named graph_{N} (torch_npu >= 2.9)
            return graph.name
        keys = _fx_keys(graph)
        scores = []
        for label, dirs in groups.items():
            held = self.names(self.golden_source, dirs).fx_keys
            # the Jaccard index picks among directories (of graphs built alike, the one of this graph); the share
            # of the graph's FX names the directory holds accepts it (a directory also holds nodes GE names
            # nowhere: views built inside their consumers, no-ops, which lower the index)
            scores.append((_jaccard(keys, held), _share(keys, held), label))
        scores.sort(reverse=True)
        complete = [label for score, _, label in scores if score >= FX_DUPLICATE_SCORE]
        if len(complete) > 1:
            raise CompareError(
                f"the golden FX dump holds {len(complete)} runs of graph {graph.name} (model {model}): "
                f"{', '.join(complete)}; choose one with --golden-run"
            )
        if scores and scores[0][1] >= FX_RUN_SCORE:
            return scores[0][2]
        return None

    def bind_ge(self, model: str, dirs: Sequence[DumpDir], groups: dict[str, list[DumpDir]]) -> Optional[str]:
        if model in groups:
            return model
        target_ops = self.names(self.target_source, dirs).ops

        def score(label: str) -> float:
            return _jaccard(target_ops, self.names(self.golden_source, groups[label]).ops)

        best = max(groups, key=score, default=None)
        return best if best is not None and score(best) > 0 else None


def collect(
    target: Path,
    golden: Path,
    *,
    rank: Optional[int] = None,
    target_run: Optional[str] = None,
    golden_run: Optional[str] = None,
    fx_token_base: Optional[int] = None,
    db: Optional[Path] = None,
    graph: Optional[Path] = None,
) -> CompareInputs:
    """Walk both trees by directories (plus what `tcmp watch`'s index keeps of files it deleted; `db` names the
    index when it is not in the trees), detect the golden's kind, check ranks and runs, bind graphs and golden
    directories. Dump file names are read where their tokens are compared (`DumpSource.listing`). Graph files
    are `graph` (a file or a directory) when given, else the target's, else the working directory's."""
    target, golden = _check_paths(Path(target), Path(golden))
    notes: list[str] = []
    target_tree, target_index = _with_index(outline(target), db, notes)
    golden_tree, golden_index = _with_index(outline(golden, fx_token_base=fx_token_base), db, notes)
    target_source = DumpSource(target_tree.root, None, target_index)
    golden_source = DumpSource(golden_tree.root, fx_token_base, golden_index)
    target_ge = [d for d in target_tree.dirs if d.side is Side.GE]
    # what may explain a tree without dump files: `tcmp watch` deleted them and its index cannot be read
    why = "".join(f"; {note}" for note in notes)
    if not _any_name_parses(target_ge):
        raise CompareError(f"no GE dump files under the target path {target}{_unparsed(target_ge)}{why}")
    if _any_name_parses([d for d in golden_tree.dirs if d.side is Side.GE]):
        kind = GoldenKind.GE
    elif _any_name_parses([d for d in golden_tree.dirs if d.side is Side.FX]):
        kind = GoldenKind.FX
    else:
        raise CompareError(
            f"no FX .npy files and no GE dump files under the golden path {golden}{_unparsed(golden_tree.dirs)}{why}"
        )
    graphs, searched = _graph_files(target_tree, graph, notes)
    originals = [g for g in graphs if g.name.kind is GraphKind.ORIGINAL]
    if kind is GoldenKind.FX and not originals:
        raise CompareError(f"{_no_graph(searched)}: GE ops are mapped to FX tensors through it. {_GRAPH_HOWTO}")
    binder = _Binder(
        (target_tree, target_source), (golden_tree, golden_source), kind, _GraphCache(index=target_index), graphs,
    )  # fmt: skip
    binder.notes.extend(notes)
    if kind is GoldenKind.GE and not originals:
        binder.notes.append(f"{_no_graph(searched)}: {_BY_NAME_ONLY}")
    for tree, role in ((target_tree, Role.TARGET), (golden_tree, Role.GOLDEN)):
        for problem in tree.problems:
            binder.unmatched.append(unusable(role, None, problem))
    golden_side = Side.FX if kind is GoldenKind.FX else Side.GE
    golden_ranks = [d.rank for d in golden_tree.dirs if d.side is golden_side]
    bindings: list[Binding] = []
    bound: set[tuple[Path, Side]] = set()
    for t_rank, g_rank in _common_ranks([d.rank for d in target_ge], golden_ranks, rank):
        dirs = _single_run([d for d in target_ge if d.rank == t_rank], "target", target_run)
        groups = binder.golden_groups(g_rank, golden_run)
        for model, model_dirs in sorted(_by_model(dirs).items()):
            graph = binder.graph_for(t_rank, model, model_dirs) if originals else None
            if kind is GoldenKind.FX:
                label = binder.bind_fx(graph, groups, model)
            else:
                label = binder.bind_ge(model, model_dirs, groups)
            golden_dirs = tuple(groups.get(label, ())) if label is not None else ()
            bound.update((d.path, d.side) for d in (*model_dirs, *golden_dirs))
            if graph is None and kind is GoldenKind.FX:
                reason = f"no graph file for model {model} of rank {t_rank}"
            elif label is None:
                reason = f"no golden {'FX graph directory' if kind is GoldenKind.FX else 'model'} for model {model}"
            else:
                reason = ""
            if reason:
                binder.notes.append(reason)
            bindings.append(Binding(t_rank, model, graph, tuple(model_dirs), golden_dirs, label or ""))
    unbound = tuple(
        (role, d)
        for tree, role in ((target_tree, Role.TARGET), (golden_tree, Role.GOLDEN))
        for d in tree.dirs
        if (d.path, d.side) not in bound
    )
    return CompareInputs(
        target_source, golden_source, kind, tuple(bindings), tuple(binder.unmatched), tuple(binder.notes), unbound
    )


_GRAPH_HOWTO = (
    'torchair writes it with config.debug.graph_dump.type = "txt", to config.debug.graph_dump.path (default: the '
    "working directory of the run); give that file or directory with --graph PATH"
)


def _graph_files(target: DumpOutline, given: Optional[Path], notes: list[str]) -> tuple[tuple[GraphFile, ...], list]:
    """The graph text files to bind, and the places searched (for a message when there are none)."""
    if given is not None:
        if not given.exists():
            raise CompareError(f"--graph {given}: no such file or directory", usage=True)
        return graph_files_in(given), [(f"--graph {given}", given, False)]
    if target.graphs:
        return target.graphs, []
    cwd = Path.cwd()
    searched = [(f"the target path {target.root}", target.root, False), (f"the working directory {cwd}", cwd, True)]
    found = graph_files_in(cwd, top_level_only=True) if not _inside_or_is(cwd, target.root) else ()
    if found:
        notes.append(f"graph files from the working directory {cwd}, where torchair writes them by default")
    return found, searched


def _inside_or_is(path: Path, root: Path) -> bool:
    path, root = Path(os.path.realpath(path)), Path(os.path.realpath(root))
    return path == root or root in path.parents


def _no_graph(searched: list) -> str:
    """No graph text file in any of the places searched: say where, and what else was there."""
    places = " nor in ".join(label for label, _, _ in searched) or "the target path"
    message = f"no torchair graph text file (dynamo_original_graph_*.txt, dynamo_*.txt) in {places}"
    others = [p for _, path, top in searched for p in other_graph_dumps(path, top_level_only=top)]
    if others:
        shown = ", ".join(str(p) for p in others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
        message += f" (only graph dumps of type pbtxt or py, which tcmp cannot read: {shown})"
    return message


def _any_name_parses(dirs: Sequence[DumpDir]) -> bool:
    """Does any of these directories hold a file whose name parses as a dump file name (the index only holds such
    files)? Normally the first name answers; the outline itself reads no names."""
    return any(not d.on_disk or d.indexed or next(dump_names(d.path, d.side), None) is not None for d in dirs)


def _unparsed(dirs: Sequence[DumpDir]) -> str:
    return ": files there are named like dumps, but no name parses as a dump file name" if dirs else ""


def unusable(role: Role, rank: Optional[int], problem: Unrecognized) -> Unmatched:
    """The unmatched item for a file that looks like part of the dump but cannot be used."""
    return Unmatched(role, rank, None, problem.path.name, "", None, None, str(problem.path), problem.reason,
                     UnmatchedKind.UNREADABLE)  # fmt: skip
