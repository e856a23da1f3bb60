"""Everything a compare needs before any tensor is read: both dump trees walked, the golden's type detected, ranks
and runs checked, and every GE graph of every rank bound to its graph file and its golden files.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from tcmp.schemas.errors import DumpError
from tcmp.schemas.ge_names import sanitize
from tcmp.schemas.graph import Graph, GraphKind
from tcmp.schemas.graph_cache import load_graph
from tcmp.schemas.index import FileState, IndexedFile, IndexUnusable, find_index, open_index
from tcmp.schemas.layout import DumpFile, DumpTree, GraphFile, discover, graph_number_of
from tcmp.schemas.records import Side

from .records import CompareError, Role, Unmatched, UnmatchedKind

FX_RUN_SCORE = 0.5  # share of a graph's FX node keys a directory must hold to belong to it
FX_DUPLICATE_SCORE = 0.9  # two directories this complete for one graph: two runs


class GoldenKind(str, enum.Enum):
    FX = "fx"
    GE = "ge"  # a GE dump taken with fusion switched off


@dataclass(frozen=True)
class Binding:
    """One GE graph (model) of one rank: its target files, its graph and its golden files."""

    rank: Optional[int]
    model: str
    graph: Optional[Graph]
    target_files: tuple[DumpFile, ...]
    golden_files: tuple[DumpFile, ...]
    golden_label: str  # the golden directory these came from (FX graph dir or GE model dir)


@dataclass(frozen=True)
class IndexedTree:
    """The part of a dump tree that exists only in `tcmp watch`'s index: files whose raw data it deleted."""

    index: Optional[Path]
    deleted: Mapping[Path, IndexedFile]


@dataclass(frozen=True)
class CompareInputs:
    target_root: Path
    golden_root: Path
    golden_kind: GoldenKind
    bindings: tuple[Binding, ...]
    unmatched: tuple[Unmatched, ...]
    notes: tuple[str, ...]
    target_index: IndexedTree = field(default_factory=lambda: IndexedTree(None, {}))
    golden_index: IndexedTree = field(default_factory=lambda: IndexedTree(None, {}))

    def deleted(self, path: Path) -> Optional[tuple[Path, IndexedFile]]:
        """(index, indexed file) when `path`'s raw data is gone and only its summary remains."""
        for tree in (self.target_index, self.golden_index):
            if tree.index is not None and path in tree.deleted:
                return tree.index, tree.deleted[path]
        return None

    @property
    def ranks(self) -> tuple[Optional[int], ...]:
        return tuple(sorted({b.rank for b in self.bindings}, key=lambda r: -1 if r is None else r))


@dataclass
class _GraphCache:
    workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    graphs: dict[Path, Graph] = field(default_factory=dict)
    index: Optional[Path] = None  # holds the parses `tcmp watch` already stored

    def load(self, path: Path) -> Graph:
        if path not in self.graphs:
            stored = None
            if self.index is not None:  # a reader per graph (a handful per compare), never left open
                with open_index(self.index) as reader:
                    stored = reader.graph(path)
            self.graphs[path] = stored if stored is not None else load_graph(path, workers=self.workers)
        return self.graphs[path]


def _with_index(tree: DumpTree, db: Optional[Path], notes: list[str]) -> tuple[DumpTree, IndexedTree]:
    """Add to a walked tree the files only the index still knows (raw data deleted by `tcmp watch`), and the
    graph files it parsed. The index is the tree's own (`.tcmp/index.sqlite` in it or above it) or `db`."""
    path = db if db is not None else find_index(tree.root)
    if path is None:
        return tree, IndexedTree(None, {})
    try:
        with open_index(path) as reader:
            indexed = reader.files_under(tree.root)
            graph_files = reader.graph_files_under(tree.root)
    except (IndexUnusable, sqlite3.Error, OSError) as exc:
        notes.append(f"index {path} unusable, raw files only: {exc}")
        return tree, IndexedTree(None, {})
    on_disk = {f.path for f in tree.files}
    deleted = {
        f.path: f for f in indexed if f.raw_deleted and f.state is FileState.SUMMARIZED and f.path not in on_disk
    }
    known_graphs = {g.path for g in tree.graphs}
    merged = DumpTree(
        tree.root,
        tree.files + tuple(f.file for f in deleted.values()),
        tree.graphs + tuple(g for g in graph_files if g.path not in known_graphs),
        tree.problems,
    )
    return merged, IndexedTree(path, deleted)


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


def _single_run(files: Sequence[DumpFile], role: str, chosen: Optional[str]) -> list[DumpFile]:
    """Refuse a tree holding several GE runs ({time} dirs) for one rank and model, unless one is chosen."""
    runs_by_model: dict[tuple, set] = defaultdict(set)
    for f in files:
        runs_by_model[(f.rank, f.model)].add(f.run)
    if chosen is not None:
        picked = [f for f in files if f.run == chosen]
        if not picked:
            runs = sorted({str(f.run) for f in files})
            raise CompareError(f"--{role}-run {chosen}: the {role} holds runs {runs}", usage=True)
        return picked
    mixed = {k: sorted(map(str, v)) for k, v in runs_by_model.items() if len(v) > 1}
    if mixed:
        (rank, model), runs = next(iter(mixed.items()))
        raise CompareError(
            f"the {role} dump holds {len(runs)} runs for rank {rank}, model {model}: {', '.join(runs)} "
            f"(two dumps written into one directory); choose one with --{role}-run"
        )
    return list(files)


def _group(files: Iterable[DumpFile], key) -> dict:
    groups: dict = defaultdict(list)
    for f in files:
        groups[key(f)].append(f)
    return groups


def _graph_files_for(graphs: Sequence[GraphFile], rank: Optional[int]) -> dict[int, list[GraphFile]]:
    by_number: dict[int, list[GraphFile]] = defaultdict(list)
    for g in graphs:
        if g.name.kind is GraphKind.ORIGINAL and (g.name.rank is None or rank is None or g.name.rank == rank):
            by_number[g.name.number].append(g)
    return by_number


def _content_score(graph: Graph, files: Sequence[DumpFile]) -> float:
    names = {sanitize(op.name) for op in graph.ops}
    dumped = {f.op_name for f in files}
    return len(dumped & names) / max(1, len(dumped))


class _Binder:
    def __init__(self, target: DumpTree, golden: DumpTree, kind: GoldenKind, cache: _GraphCache) -> None:
        self.target, self.golden, self.kind, self.cache = target, golden, kind, cache
        self.unmatched: list[Unmatched] = []
        self.notes: list[str] = []

    def _pick_graph(self, candidates: list[GraphFile], files: Sequence[DumpFile]) -> Optional[Graph]:
        graphs, broken = [], []
        for g in candidates:
            try:
                graphs.append(self.cache.load(g.path))
            except DumpError as exc:
                broken.append(f"graph file {g.path} unusable: {exc.message}")
        if not graphs and broken:
            raise CompareError(broken[0])
        self.notes.extend(broken)
        if len(graphs) > 1:
            graphs.sort(key=lambda g: _content_score(g, files), reverse=True)
            self.notes.append(
                f"{len(graphs)} graph files for one graph ({', '.join(str(g.path.name) for g in graphs)}); "
                f"used {graphs[0].path.name}, which names most of the dumped ops"
            )
        return graphs[0]

    def graph_for(self, rank: Optional[int], model: str, files: Sequence[DumpFile]) -> Optional[Graph]:
        by_number = _graph_files_for(self.target.graphs, rank)
        number = graph_number_of(model)
        if number in by_number:
            return self._pick_graph(by_number[number], files)
        # the model directory is not named after a graph: pick by content
        best, best_score = None, 0.0
        for candidates in by_number.values():
            graph = self._pick_graph(candidates, files)
            score = _content_score(graph, files) if graph is not None else 0.0
            if score > best_score:
                best, best_score = graph, score
        return best if best_score > 0 else None

    def golden_groups(self, rank: Optional[int], run: Optional[str]) -> dict[str, list[DumpFile]]:
        files = self.golden.fx_files if self.kind is GoldenKind.FX else self.golden.ge_files
        files = [f for f in files if f.rank == rank]
        if self.kind is GoldenKind.GE:
            files = _single_run(files, "golden", run)
        elif run is not None:
            picked = [f for f in files if f.run == run]
            if not picked:
                raise CompareError(f"--golden-run {run}: the golden holds {sorted({str(f.run) for f in files})}",
                                   usage=True)  # fmt: skip
            files = picked
        return _group(files, lambda f: f.model or "")

    def bind_fx(self, graph: Optional[Graph], groups: dict[str, list[DumpFile]], model: str) -> Optional[str]:
        if graph is None:
            return None
        if graph.name in groups:  # FX directories named graph_{N} (torch_npu >= 2.9)
            return graph.name
        keys = _fx_keys(graph)
        scores = []
        for label, files in groups.items():
            held = {f"{f.op_name}-{f.op_type}" for f in files}
            scores.append((len(keys & held) / max(1, len(keys | held)), label))  # Jaccard: subsets score low
        scores.sort(reverse=True)
        complete = [label for score, label in scores if score >= FX_DUPLICATE_SCORE]
        if len(complete) > 1:
            raise CompareError(
                f"the golden FX dump holds {len(complete)} runs of graph {graph.name} (model {model}): "
                f"{', '.join(complete)}; choose one with --golden-run"
            )
        if scores and scores[0][0] >= FX_RUN_SCORE:
            return scores[0][1]
        return None

    def bind_ge(self, model: str, files: Sequence[DumpFile], groups: dict[str, list[DumpFile]]) -> Optional[str]:
        if model in groups:
            return model
        target_ops = {f.op_name for f in files}
        best = max(groups, key=lambda m: len(target_ops & {f.op_name for f in groups[m]}), default=None)
        return best if best is not None and target_ops & {f.op_name for f in groups[best]} else None


def collect(
    target: Path,
    golden: Path,
    *,
    rank: Optional[int] = None,
    target_run: Optional[str] = None,
    golden_run: Optional[str] = None,
    fx_token_base: Optional[int] = None,
    graph_workers: Optional[int] = None,
    db: Optional[Path] = None,
) -> CompareInputs:
    """Walk both trees (plus what `tcmp watch`'s index keeps of files it deleted; `db` names the index when it
    is not in the trees), detect the golden's kind, check ranks and runs, bind graphs and golden files."""
    target, golden = _check_paths(Path(target), Path(golden))
    notes: list[str] = []
    target_tree, target_index = _with_index(discover(target), db, notes)
    golden_tree, golden_index = _with_index(discover(golden, fx_token_base=fx_token_base), db, notes)
    if not target_tree.ge_files:
        raise CompareError(f"no GE dump files under the target path {target}")
    if golden_tree.ge_files:
        kind = GoldenKind.GE
    elif golden_tree.fx_files:
        kind = GoldenKind.FX
    else:
        raise CompareError(f"no FX .npy files and no GE dump files under the golden path {golden}")
    originals = [g for g in target_tree.graphs if g.name.kind is GraphKind.ORIGINAL]
    if kind is GoldenKind.FX and not originals:
        raise CompareError(
            f"no dynamo_original_graph_*.txt under the target path {target}: GE ops are mapped to FX tensors "
            "through it (enable torchair's graph_dump with the GE dump)"
        )
    binder = _Binder(
        target_tree, golden_tree, kind, _GraphCache(graph_workers or os.cpu_count() or 1, index=target_index.index)
    )
    binder.notes.extend(notes)
    if kind is GoldenKind.GE and not originals:
        binder.notes.append("no graph file in the target: fused ops are decomposed by name only")
    for tree, role in ((target_tree, Role.TARGET), (golden_tree, Role.GOLDEN)):
        for problem in tree.problems:
            binder.unmatched.append(
                Unmatched(role, None, None, problem.path.name, "", None, None, str(problem.path), problem.reason,
                          UnmatchedKind.UNREADABLE)
            )  # fmt: skip
    golden_ranks = [f.rank for f in (golden_tree.fx_files if kind is GoldenKind.FX else golden_tree.ge_files)]
    bindings: list[Binding] = []
    used_golden: set[Path] = set()
    for t_rank, g_rank in _common_ranks([f.rank for f in target_tree.ge_files], golden_ranks, rank):
        files = _single_run([f for f in target_tree.ge_files if f.rank == t_rank], "target", target_run)
        groups = binder.golden_groups(g_rank, golden_run)
        for model, model_files in sorted(_group(files, lambda f: f.model or "").items()):
            graph = binder.graph_for(t_rank, model, model_files) if originals else None
            if kind is GoldenKind.FX:
                label = binder.bind_fx(graph, groups, model)
            else:
                label = binder.bind_ge(model, model_files, groups)
            golden_files = tuple(groups.get(label, ())) if label is not None else ()
            used_golden.update(f.path for f in golden_files)
            if graph is None and kind is GoldenKind.FX:
                reason = f"no graph file for model {model} of rank {t_rank}"
            elif label is None:
                reason = f"no golden {'FX graph directory' if kind is GoldenKind.FX else 'model'} for model {model}"
            else:
                reason = ""
            if reason:
                binder.notes.append(reason)
            bindings.append(Binding(t_rank, model, graph, tuple(model_files), golden_files, label or ""))
    for f in golden_tree.files:
        if f.path not in used_golden and f.side in (Side.FX, Side.GE):
            binder.unmatched.append(
                Unmatched(Role.GOLDEN, f.rank, f.token, f.op_name, f.op_type or "", f.io, f.index, str(f.path),
                          "golden file of a rank, run or graph that is not compared", UnmatchedKind.OUT_OF_SCOPE)
            )  # fmt: skip
    return CompareInputs(
        target, golden, kind, tuple(bindings), tuple(binder.unmatched), tuple(binder.notes), target_index, golden_index
    )
