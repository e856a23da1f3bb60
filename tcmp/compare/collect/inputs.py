"""Everything a compare needs before any tensor is read: both dump trees walked, the golden's type detected, ranks
and runs checked, and every GE graph of every rank bound to its graph file and its golden directories.

The plan is made of directories, not files: all files of a step directory share the rank, token, model and run
its path gives, so a dump of a million files is planned from a few thousand records, and each token's files are
listed (their names parsed) in the worker that compares the token. Binding by content reads one token's names.

Bindings go by names where the names allow it (`graph_{N}` model directories to `dynamo_original_graph_{N}` files,
fusion-off model directories by their name) and by content otherwise (the FX node keys a graph's `_fx_tensor_name`s
name, the op names a dump holds) — never by position, which is how the peer paired graph 2 with graph 10. A tree
holding two runs (several GE `{time}` directories for one rank and model, several FX directories of one graph) is
refused with the runs listed, instead of comparing a blend; a path holding two dumps (two `msprobe_ge_dump` trees,
a GE and an FX dump) is refused with each one's root.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Optional

from tcmp.compare.collect import guidance
from tcmp.compare.collect.acl_graphs import acl_graph_dump
from tcmp.compare.collect.acl_stage import staged_tokens
from tcmp.compare.collect.binding import BY_NAME_ONLY, Binder, Binding, GoldenKind, GraphCache, single_run
from tcmp.compare.collect.scope import dump_selections
from tcmp.compare.collect.sources import UNREADABLE_INDEX, DumpSource, by_model, unusable
from tcmp.compare.records import CompareError, Role, Unmatched
from tcmp.schemas.acl_dump import ACL_MODEL, AclStage
from tcmp.schemas.dump_options import DumpSelection
from tcmp.schemas.dump_outline import DumpDir, DumpOutline, dump_names, dump_roots, outline
from tcmp.schemas.dump_records import Side
from tcmp.schemas.dump_tree import GraphFile
from tcmp.schemas.graph_files import graph_files_by_content, graph_files_in, holds_ge_graph_text
from tcmp.schemas.graph_names import GraphKind
from tcmp.schemas.index import find_index, open_index


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
    golden_fused: bool = False  # the GE golden holds fusions of the target's ops: fusion on (see the notes)
    # what GE was told to dump, by target rank (collect.scope); a rank without one: everything
    dump_scope: Mapping[Optional[int], DumpSelection] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def ranks(self) -> tuple[Optional[int], ...]:
        return tuple(sorted({b.rank for b in self.bindings}, key=lambda r: -1 if r is None else r))


def _with_index(tree: DumpOutline, db: Optional[Path], notes: list[str]) -> tuple[DumpOutline, Optional[Path]]:
    """Add to a walked tree the directories of files only the index still knows (raw data deleted by `tcmp watch`),
    and the graph files it parsed. The index is the tree's own (`.tcmp/index.sqlite` in it or above it) or `db`."""
    path = db if db is not None else find_index(tree.root)
    if path is None:
        return tree, None
    if db is not None and not db.exists():
        raise CompareError(f"--db {db}: no such index file", usage=True)
    try:
        with open_index(path) as reader:
            indexed = reader.deleted_dirs_under(tree.root)
            graph_files = reader.graph_files_under(tree.root)
    except UNREADABLE_INDEX as exc:
        if db is not None:  # asked for: not to be replaced by the raw files without a word
            raise CompareError(f"--db {db}: index unusable: {exc}") from exc
        note = f"index {path} unusable, raw files only: {exc}"
        if note not in notes:  # both trees' index, usually
            notes.append(note)
        return tree, None
    on_disk = {(d.path, d.side, d.token): d for d in tree.dirs}  # the token: an aclgraph directory holds every token
    dirs = {**on_disk}
    for d in indexed:
        found = on_disk.get((d.path, d.side, d.token))
        dirs[(d.path, d.side, d.token)] = d if found is None else replace(found, kinds=found.kinds | d.kinds,
                                                                          indexed=True)  # fmt: skip
    known_graphs = {g.path for g in tree.graphs}
    merged = DumpOutline(
        tree.root,
        tuple(sorted(dirs.values(), key=lambda d: (d.side.value, str(d.path)))),
        tree.graphs + tuple(g for g in graph_files if g.path not in known_graphs),
        tree.problems,
    )
    return merged, path


def _check_paths(target: Path, golden: Path) -> tuple[Path, Path]:
    for role, path in (("target", target), ("golden", golden)):
        if not path.exists():
            raise CompareError(f"{role} path {path} does not exist", usage=True)
        if not path.is_dir():
            raise CompareError(f"{role} path {path} is not a directory", usage=True)
    target, golden = Path(os.path.realpath(target)), Path(os.path.realpath(golden))
    if target == golden:
        raise CompareError(f"target and golden are the same dump ({target}); give the golden run's directory",
                           usage=True)  # fmt: skip
    if target in golden.parents or golden in target.parents:
        raise CompareError(f"one path contains the other ({target} / {golden}); give two separate dumps", usage=True)
    return target, golden


def _common_ranks(target: Sequence[Optional[int]], golden: Sequence[Optional[int]], rank: Optional[int]):
    """Pairs (target rank, golden rank) to compare."""
    t_ranked, g_ranked = [r for r in target if r is not None], [r for r in golden if r is not None]
    if rank is not None:
        for role, ranked in (("target", t_ranked), ("golden", g_ranked)):
            if ranked and rank not in ranked:
                raise CompareError(f"--rank {rank}: rank {rank} is not in the {role} dump (it holds "
                                   f"{_ranks(ranked)})", usage=True)  # fmt: skip
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
    acl_stages: tuple[AclStage, AclStage] = (AclStage.ORIGINAL, AclStage.ORIGINAL),
    dump_options: Optional[Path] = None,
) -> CompareInputs:
    """Walk both trees by directories (plus what `tcmp watch`'s index keeps of files it deleted; `db` names the
    index when it is not in the trees), detect the golden's kind, check ranks and runs, bind graphs and golden
    directories. Dump file names are read where their tokens are compared (`DumpSource.listing`). Graph files
    are `graph` (a file or a directory) when given, else the target's, else the working directory's. The dump
    scope is `dump_options` when given, else found beside the target or in the working directory (collect.scope)."""
    target, golden = _check_paths(Path(target), Path(golden))
    notes: list[str] = []
    target_tree, target_index = _with_index(outline(target), db, notes)
    golden_tree, golden_index = _with_index(outline(golden, fx_token_base=fx_token_base), db, notes)
    target_source = DumpSource(target_tree.root, None, target_index)
    golden_source = DumpSource(golden_tree.root, fx_token_base, golden_index)
    for tree, role in ((target_tree, "target"), (golden_tree, "golden")):
        roots = dump_roots(tree)
        if len(roots) > 1:  # two dumps compared as one would pair each op with whichever came first
            raise CompareError(guidance.several_dumps(role, tree.root, roots), usage=True)
    target_ge = [d for d in target_tree.dirs if d.side is Side.GE]
    target_acl = [d for d in target_tree.dirs if d.side is Side.ACL]
    if target_acl and not _any_name_parses(target_ge):
        return collect_acl(target_tree, golden_tree, (target_source, golden_source), notes, rank, golden_run,
                           acl_stages, graph)  # fmt: skip
    kind = _golden_kind(target_tree, golden_tree, notes)
    graphs, searched = _graph_files(target_tree, graph, notes)
    originals = [g for g in graphs if g.name.kind is GraphKind.ORIGINAL]
    root = guidance.dump_root_above(target) if not originals and searched and graph is None else None
    if kind is GoldenKind.FX and not originals:
        if root is not None:  # the graph files are (or belong) beside the dump root, not below a rank directory
            raise CompareError(f"{guidance.no_graph(searched)}: {guidance.give_the_dump_root(root)}",
                               usage=True)  # fmt: skip
        raise CompareError(f"{guidance.no_graph(searched)}: GE ops are mapped to FX tensors through it. "
                           f"{guidance.GRAPH_HOWTO}")  # fmt: skip
    binder = Binder(
        (target_tree, target_source), (golden_tree, golden_source), kind, GraphCache(index=target_index), graphs,
    )  # fmt: skip
    binder.notes.extend(notes)
    if kind is GoldenKind.GE and not originals:
        to_do = f"; {guidance.give_the_dump_root(root)}" if root is not None else ""
        binder.notes.append(f"{guidance.no_graph(searched)}: {BY_NAME_ONLY}{to_do}")
    for tree, role in ((target_tree, Role.TARGET), (golden_tree, Role.GOLDEN)):
        for problem in tree.problems:
            binder.unmatched.append(unusable(role, None, problem))
    golden_side = Side.FX if kind is GoldenKind.FX else Side.GE
    golden_ranks = [d.rank for d in golden_tree.dirs if d.side is golden_side]
    bindings: list[Binding] = []
    bound: set[tuple[Path, Side]] = set()
    rank_pairs = _common_ranks([d.rank for d in target_ge], golden_ranks, rank)
    target_only = {d.rank for d in target_ge if d.rank is not None} - {t for t, _ in rank_pairs}
    if rank is None and target_only:  # its ops are in no list: said here
        binder.notes.append(f"target {_ranks(target_only)} not compared: not in the golden dump")
    for t_rank, g_rank in rank_pairs:
        dirs = single_run([d for d in target_ge if d.rank == t_rank], "target", target_run)
        groups = binder.golden_groups(g_rank, golden_run)
        for model, model_dirs in sorted(by_model(dirs).items()):
            model_graph = binder.graph_for(t_rank, model, model_dirs) if originals else None
            if kind is GoldenKind.FX:
                label = binder.bind_fx(model_graph, groups, model)
            else:
                label = binder.bind_ge(model, model_dirs, groups)
            golden_dirs = tuple(groups.get(label, ())) if label is not None else ()
            bound.update((d.path, d.side) for d in (*model_dirs, *golden_dirs))
            if model_graph is None and kind is GoldenKind.FX:
                reason = f"no graph file for model {model} of rank {t_rank}"
            elif label is None:
                reason = f"no golden {'FX graph directory' if kind is GoldenKind.FX else 'model'} for model {model}"
            else:
                reason = ""
            if reason:
                binder.notes.append(reason)
            bindings.append(Binding(t_rank, model, model_graph, tuple(model_dirs), golden_dirs, label or ""))
    if graph is not None and originals and not any(binder.binds_dumped_ops(b) for b in bindings):
        raise CompareError(guidance.graph_binds_nothing(graph, originals, bindings), usage=True)
    swapped = binder.swap_warning(bindings) if kind is GoldenKind.GE else ""
    if swapped:
        binder.notes.insert(0, swapped)
    unbound = [
        (role, d)
        for tree, role in ((target_tree, Role.TARGET), (golden_tree, Role.GOLDEN))
        for d in tree.dirs
        if (d.path, d.side) not in bound
    ]
    in_scope = _in_scope(unbound, rank, binder.notes)
    scope = dump_selections(dump_options, target_tree.root, sorted({t for t, _ in rank_pairs}, key=str), binder.notes)
    return CompareInputs(
        target_source, golden_source, kind, tuple(bindings), tuple(binder.unmatched), tuple(binder.notes), in_scope,
        golden_fused=bool(swapped), dump_scope=MappingProxyType(scope),
    )  # fmt: skip


def collect_acl(
    target_tree: DumpOutline,
    golden_tree: DumpOutline,
    sources: tuple[DumpSource, DumpSource],
    notes: list[str],
    rank: Optional[int],
    golden_run: Optional[str],
    stages: tuple[AclStage, AclStage],
    graph: Optional[Path] = None,
) -> CompareInputs:
    """`collect` for an aclgraph target: one binding per rank, its directories (every graph of the process saves
    into one) with the golden's of that rank — an FX dump's graph directories (`--golden-run` picks one), or an
    aclgraph dump's. There is no GE graph: pairing is by FX node name (`match.acl`)."""
    golden_side = next((side for side in (Side.FX, Side.ACL)
                        if _any_name_parses([d for d in golden_tree.dirs if d.side is side])), None)  # fmt: skip
    if golden_side is None:
        raise CompareError(f"no FX .npy files and no aclgraph .pt files under the golden path {golden_tree.root}"
                           f"{_unreadable_root(golden_tree)}", usage=not notes)  # fmt: skip
    kind = GoldenKind.FX if golden_side is Side.FX else GoldenKind.ACL
    target_dirs = [d for d in target_tree.dirs if d.side is Side.ACL]
    golden_dirs = [d for d in golden_tree.dirs if d.side is golden_side]
    if golden_run is not None:
        golden_dirs = [d for d in golden_dirs if d.run == golden_run]
        if not golden_dirs:
            raise CompareError(f"--golden-run {golden_run}: not a run of the golden dump", usage=True)
    unmatched = [unusable(role, None, p) for tree, role in ((target_tree, Role.TARGET), (golden_tree, Role.GOLDEN))
                 for p in tree.problems]  # fmt: skip
    bindings = []
    for t_rank, g_rank in _common_ranks([d.rank for d in target_dirs], [d.rank for d in golden_dirs], rank):
        mine = [d for d in target_dirs if d.rank == t_rank]
        theirs = [d for d in golden_dirs if d.rank == g_rank]
        golden_stage = stages[1] if golden_side is Side.ACL else AclStage.ORIGINAL  # an FX dump: one step per call
        staged = (
            staged_tokens("target", mine, stages[0], theirs, golden_stage, sources, notes),
            staged_tokens("golden", theirs, golden_stage, mine, stages[0], (sources[1], sources[0]), notes),
        )
        unmatched += [unusable(Role.TARGET, t_rank, p) for p in staged[0][1]]
        unmatched += [unusable(Role.GOLDEN, g_rank, p) for p in staged[1][1]]
        graphs = sorted({d.model or "" for d in staged[1][0]})
        if len(graphs) > 1:
            notes.append(f"rank {t_rank}: the golden's graph directories {', '.join(graphs)} compared together with "
                         "the aclgraph dump, which holds every graph of the process in one directory")  # fmt: skip
        # the optimized stage's getitems: which node and output each takes is in torchair's graph dump only
        acl_graph = None
        if stages[0] is AclStage.OPTIMIZED:

            def saved(dirs: Sequence[DumpDir] = tuple(staged[0][0])) -> list[str]:
                return [f.op_name for f in sources[0].listing(dirs).files]

            acl_graph = acl_graph_dump(target_tree.root, graph, t_rank, saved, notes)
        bindings.append(Binding(t_rank, ACL_MODEL, None, tuple(staged[0][0]), tuple(staged[1][0]),
                                ", ".join(graphs) or ACL_MODEL, acl_graph))  # fmt: skip
    bound = {(d.path, d.side) for b in bindings for d in (*b.target_dirs, *b.golden_dirs)}
    unbound = [(role, d) for tree, role in ((target_tree, Role.TARGET), (golden_tree, Role.GOLDEN))
               for d in tree.dirs if (d.path, d.side) not in bound]  # fmt: skip
    in_scope = _in_scope(unbound, rank, notes)
    return CompareInputs(sources[0], sources[1], kind, tuple(bindings), tuple(unmatched), tuple(notes), in_scope)


def _in_scope(unbound: list[tuple[Role, DumpDir]], rank: Optional[int], notes: list[str]) -> tuple:
    """The directories no binding compares, less those of the ranks `--rank` leaves out on purpose: those are said
    once in `notes` (`rank 0 not compared (--rank 1)`), not file by file as out of scope."""
    if rank is None:
        return tuple(unbound)
    left_out = {d.rank for _, d in unbound if d.rank is not None and d.rank != rank}
    if left_out:
        notes.append(f"{_ranks(left_out)} not compared (--rank {rank})")
    return tuple((role, d) for role, d in unbound if d.rank is None or d.rank == rank)


def _golden_kind(target: DumpOutline, golden: DumpOutline, notes: Sequence[str]) -> GoldenKind:
    """The golden's kind, after checking that the target holds a GE dump. A path without any dump is a mistake in
    the command line, as one that does not exist: usage errors, saying what the path holds instead."""
    target_ge = [d for d in target.dirs if d.side is Side.GE]
    golden_ge = _any_name_parses([d for d in golden.dirs if d.side is Side.GE])
    # what may explain a tree without dump files: `tcmp watch` deleted them and its index cannot be read. The notes
    # so far are the indexes' only: with one, the path may be right and the index the only record (a runtime error)
    why = "".join(f"; {note}" for note in notes)
    # a tree whose only record is an index that cannot be read is not a mistake in the command line: runtime (3)
    usage = not notes
    if not _any_name_parses(target_ge):
        holds_fx = _any_name_parses([d for d in target.dirs if d.side is Side.FX])
        instead = guidance.not_a_ge_target(holds_fx, golden_ge)
        raise CompareError(
            f"no GE dump files under the target path {target.root}{_unreadable_root(target)}{_unparsed(target_ge)}"
            + (f": {instead}" if instead else "") + why, usage=usage,
        )  # fmt: skip
    if golden_ge:
        return GoldenKind.GE
    if _any_name_parses([d for d in golden.dirs if d.side is Side.FX]):
        return GoldenKind.FX
    raise CompareError(
        f"no FX .npy files and no GE dump files under the golden path {golden.root}{_unreadable_root(golden)}"
        f"{_unparsed(golden.dirs)}{why}", usage=usage,
    )  # fmt: skip


def _unreadable_root(tree: DumpOutline) -> str:
    return next((f" ({p.reason})" for p in tree.problems if p.path == tree.root), "")


def _ranks(ranks: Iterable[int]) -> str:
    """`rank 0`, `ranks 0, 2, 3`."""
    found = sorted(set(ranks))
    return f"rank{'s' if len(found) > 1 else ''} {', '.join(map(str, found))}"


def _graph_files(target: DumpOutline, given: Optional[Path], notes: list[str]) -> tuple[tuple[GraphFile, ...], list]:
    """The graph text files to bind, and the places searched (for a message when there are none). Where no file has
    one of torchair's names, a `.txt` holding a GE graph (`--graph`'s directory, the dump root) is taken, said."""
    if given is not None:
        if not given.exists():
            raise CompareError(f"--graph {given}: no such file or directory", usage=True)
        if given.is_file():
            unreadable = guidance.unreadable_graph_dump(given, holds_ge_graph_text(given))
            if unreadable:
                raise CompareError(unreadable, usage=True)
            return graph_files_in(given), [(f"--graph {given}", given, False)]
        return _with_graphs_by_content(graph_files_in(given), (given,), notes), [(f"--graph {given}", given, False)]
    places = (target.root, *(r.path for r in dump_roots(target) if r.side is Side.GE and r.path != target.root))
    found = _with_graphs_by_content(target.graphs, places, notes)
    if found:
        return found, []
    cwd = Path.cwd()
    searched = [(f"the target path {target.root}", target.root, False), (f"the working directory {cwd}", cwd, True)]
    found = graph_files_in(cwd, top_level_only=True) if not _inside_or_is(cwd, target.root) else ()
    if found:
        notes.append(f"graph files from the working directory {cwd}, where torchair writes them by default")
    return found, searched


def _with_graphs_by_content(
    graphs: tuple[GraphFile, ...], places: Sequence[Path], notes: list[str]
) -> tuple[GraphFile, ...]:
    """`graphs`, and when none is an original graph, the `.txt` files in `places` holding a GE graph (noted)."""
    if any(g.name.kind is GraphKind.ORIGINAL for g in graphs):
        return graphs
    sniffed = tuple(g for place in places for g in graph_files_by_content(place))
    for g in sniffed:
        if g.name.kind is GraphKind.ORIGINAL:
            notes.append(f"graph file {g.path} taken as torchair's original graph: its name is none of torchair's "
                         "forms, its content a GE graph")  # fmt: skip
    return graphs + sniffed


def _inside_or_is(path: Path, root: Path) -> bool:
    path, root = Path(os.path.realpath(path)), Path(os.path.realpath(root))
    return path == root or root in path.parents


def _any_name_parses(dirs: Sequence[DumpDir]) -> bool:
    """Does any of these directories hold a file whose name parses as a dump file name (the index only holds such
    files)? Normally the first name answers; the outline itself reads no names."""
    return any(not d.on_disk or d.indexed or next(dump_names(d.path, d.side), None) is not None for d in dirs)


def _unparsed(dirs: Sequence[DumpDir]) -> str:
    return ": files there are named like dumps, but no name parses as a dump file name" if dirs else ""
