"""Binding by names: each GE graph (model) of a rank to its graph file and its golden directories, by the names
the files hold where directory names do not say (see collect's docstring)."""

from __future__ import annotations

import enum
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from tcmp.compare.collect import guidance
from tcmp.compare.collect.sources import UNREADABLE_INDEX, DumpSource, by_model, by_token
from tcmp.compare.collect.stacks import with_stacks
from tcmp.compare.records import CompareError, Unmatched
from tcmp.schemas.acl_graph_dump import AclGraphDump
from tcmp.schemas.dump_outline import DumpDir, DumpOutline, dump_names
from tcmp.schemas.dump_records import Side
from tcmp.schemas.dump_tree import GraphFile, graph_number_of
from tcmp.schemas.errors import DumpError
from tcmp.schemas.ge_names import sanitize
from tcmp.schemas.graph import Graph
from tcmp.schemas.graph_cache import load_graph
from tcmp.schemas.graph_names import GraphKind
from tcmp.schemas.index import open_index

BY_NAME_ONLY = "fused ops are decomposed by name only"
FX_RUN_SCORE = 0.5  # share of a graph's FX node keys a directory must hold to belong to it
FX_DUPLICATE_SCORE = 0.9  # two directories this complete for one graph: two runs


class GoldenKind(str, enum.Enum):
    FX = "fx"
    GE = "ge"  # a GE dump taken with fusion switched off
    ACL = "acl"  # an aclgraph dump (the other stage, another run) of an aclgraph target


@dataclass(frozen=True)
class Binding:
    """One GE graph (model) of one rank: its target directories, its graph and its golden directories."""

    rank: Optional[int]
    model: str
    graph: Optional[Graph]
    target_dirs: tuple[DumpDir, ...]
    golden_dirs: tuple[DumpDir, ...]
    golden_label: str  # the golden directory these came from (FX graph dir or GE model dir)
    acl_graph: Optional[AclGraphDump] = None  # an aclgraph target's graph dump: its getitems' nodes and outputs


@dataclass
class GraphCache:
    graphs: dict[Path, Graph] = field(default_factory=dict)
    index: Optional[Path] = None  # holds the parses `tcmp watch` already stored

    def load(self, path: Path, notes: list[str]) -> Graph:
        if path not in self.graphs:
            stored = None
            if self.index is not None:  # a reader per graph (a handful per compare), never left open
                try:
                    with open_index(self.index) as reader:
                        stored = reader.graph(path)
                except UNREADABLE_INDEX as exc:  # damaged where the graphs are: parse the file
                    notes.append(f"index {self.index} unusable for graph {path.name}, parsed from the file: {exc}")
                    self.index = None
            graph = stored if stored is not None else load_graph(path)
            self.graphs[path] = with_stacks(graph, notes)  # Stack Info from the capture helper's stack file
        return self.graphs[path]


def _fx_keys(graph: Graph) -> set[str]:
    return {o.fx_tensor.node_key for op in graph.ops for o in op.outputs if o.fx_tensor is not None}


def single_run(dirs: Sequence[DumpDir], role: str, chosen: Optional[str]) -> list[DumpDir]:
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
    typed: frozenset[tuple[str, Optional[str]]]  # (op name, op type)


class Binder:
    """Binds by names. A group's names are read from its first token's directories only: every token of a graph
    dumps the same ops, and reading one keeps collecting independent of the number of tokens."""

    def __init__(
        self, target: tuple[DumpOutline, DumpSource], golden: tuple[DumpOutline, DumpSource], kind: GoldenKind,
        cache: GraphCache, graphs: Sequence[GraphFile],
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
                frozenset(op for op, _ in names), frozenset(f"{op}-{op_type}" for op, op_type in names),
                frozenset(names),
            )  # fmt: skip
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
            if BY_NAME_ONLY not in self.notes:  # a fusion-off golden pairs ops by name; the graph decomposes fusions
                self.notes.append(BY_NAME_ONLY)
            return None
        if len(graphs) > 1:
            graphs.sort(key=lambda g: _content_score(g, dumped), reverse=True)
            names = [g.path.name for g in graphs]
            if len(set(names)) < len(names):  # copies in two directories: their names alone would read alike
                names = [str(g.path) for g in graphs]
            self.notes.append(
                f"{len(graphs)} graph files for one graph ({', '.join(names)}); "
                f"used {names[0]}, which names most of the dumped ops"
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

    def binds_dumped_ops(self, binding: Binding) -> bool:
        """Does the binding's graph name any of the ops its target directories dump?"""
        if binding.graph is None:
            return False
        return _content_score(binding.graph, self.names(self.target_source, binding.target_dirs).ops) > 0

    def golden_groups(self, rank: Optional[int], run: Optional[str]) -> dict[str, list[DumpDir]]:
        side = Side.FX if self.kind is GoldenKind.FX else Side.GE
        dirs = [d for d in self.golden.dirs if d.side is side and d.rank == rank]
        if self.kind is GoldenKind.GE:
            dirs = single_run(dirs, "golden", run)
        elif run is not None:
            picked = [d for d in dirs if d.run == run]
            if not picked:
                raise CompareError(f"--golden-run {run}: the golden holds {sorted({str(d.run) for d in dirs})}",
                                   usage=True)  # fmt: skip
            dirs = picked
        return by_model(dirs)

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

    def swap_warning(self, bindings: Sequence[Binding]) -> str:
        """A warning when the fusion-on dump looks given as the golden: told from the fused ops of a token of each
        bound model (see guidance.golden_looks_fused)."""
        target_ops: set[tuple[str, Optional[str]]] = set()
        golden_ops: set[tuple[str, Optional[str]]] = set()
        for b in bindings:
            if b.golden_dirs:
                target_ops |= self.names(self.target_source, b.target_dirs).typed
                golden_ops |= self.names(self.golden_source, b.golden_dirs).typed
        return guidance.golden_looks_fused(sorted(target_ops, key=str), sorted(golden_ops, key=str))
