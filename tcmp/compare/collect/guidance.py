"""What a compare tells a user whose inputs are not what it needs, in terms of what to type instead: where graph
files were looked for, a target path one level too deep (a rank, `{time}` or step directory of the dump), and the
two dumps given the wrong way round (an FX dump as the target; a fusion-off GE dump as the target of a fusion-on
golden, told apart by the fused ops)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tcmp.compare.collect.fusion import UB_FUSION_SUFFIX, NameSplitter
from tcmp.schemas.dump_outline import DumpTreeRoot
from tcmp.schemas.dump_records import Side
from tcmp.schemas.dump_tree import GE_ROOT_NAMES, GraphFile
from tcmp.schemas.graph_files import graph_files_in, other_graph_dumps
from tcmp.schemas.graph_names import GraphKind

GRAPH_HOWTO = (
    'torchair writes it with config.debug.graph_dump.type = "txt", to config.debug.graph_dump.path (default: the '
    "working directory of the run); give that file or directory with --graph PATH"
)
SWAP_HINT = (
    "-tp takes the GE graph-mode dump, fusion on; -gp its golden: an FX dump, or a GE dump taken with fusion off"
)
# The op type GE gives an automatic UB fusion (docs/formats.md, "GE file names"); other fusions are told by their names.
FUSION_OP_TYPES = frozenset({"AutomaticBufferFusionOp"})
# How far above a target path its dump root may lie: worldsize{W}_rank{R}/{time}/{device}/{model}/{model_id}/{step}.
DUMP_ROOT_DEPTH = 6


def no_graph(searched: Sequence[tuple[str, Path, bool]]) -> str:
    """No graph text file in any of the places searched (label, path, top level only): say where, and what else was
    there."""
    places = " nor in ".join(label for label, _, _ in searched) or "the target path"
    message = f"no torchair graph text file (dynamo_original_graph_*.txt, dynamo_*.txt) in {places}"
    others = [p for _, path, top in searched for p in other_graph_dumps(path, top_level_only=top)]
    if others:
        shown = ", ".join(str(p) for p in others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
        message += f" (only graph dumps of type pbtxt or py, which tcmp cannot read: {shown})"
    return message


def unreadable_graph_dump(path: Path, holds_ge_graph: bool) -> str:
    """Why a file given with --graph is a graph dump tcmp does not read ("" when it reads it): torchair's
    graph_dump types "py" (Python code) and "pbtxt" (TensorFlow nodes for TensorBoard, unless the file holds the
    text format of a GE graph after all)."""
    if path.suffix == ".py":
        what = 'of type "py" (Python code that rebuilds the graph)'
    elif path.suffix == ".pbtxt" and not holds_ge_graph:
        what = 'of type "pbtxt" (TensorFlow nodes for TensorBoard, without the GE output descs)'
    else:
        return ""
    return (
        f'--graph {path} is a torchair graph dump {what}, which tcmp does not read: it reads the type "txt" dump, '
        f"dynamo_original_graph_*.txt; {GRAPH_HOWTO}"
    )


def graph_binds_nothing(given: Path, graphs: Sequence[GraphFile], bindings: Sequence) -> str:
    """A --graph whose graph files name none of the dumped ops: the files, and the models they were tried on."""
    if len(graphs) == 1 and graphs[0].path == given:
        files = "it"
    else:
        names = ", ".join(g.path.name for g in graphs[:3]) + (f" and {len(graphs) - 3} more" if len(graphs) > 3 else "")
        files = f"its graph file{'s' if len(graphs) > 1 else ''} {names}"
    tried = [f"model {b.model}" + ("" if b.rank is None else f" of rank {b.rank}") for b in bindings]
    models = ", ".join(tried[:5]) + (f" and {len(tried) - 5} more" if len(tried) > 5 else "")
    return (
        f"--graph {given}: {files} name{'s' if len(graphs) == 1 else ''} none of the dumped ops (tried on {models}): "
        "not the graph of this run; give the target run's dynamo_original_graph_*.txt"
    )


@dataclass(frozen=True)
class DumpRoot:
    """The GE dump root a path lies inside, and the original graph files beside it."""

    path: Path
    graphs: tuple[GraphFile, ...]


def dump_root_above(path: Path) -> Optional[DumpRoot]:
    """The nearest directory above `path` that holds torchair's original graph files, or is named as msprobe/msit
    name a GE dump root (`msprobe_ge_dump`): where a target path given one level too deep belongs."""
    for parent in list(path.parents)[:DUMP_ROOT_DEPTH]:
        graphs = tuple(g for g in graph_files_in(parent, top_level_only=True) if g.name.kind is GraphKind.ORIGINAL)
        if graphs or parent.name in GE_ROOT_NAMES:
            return DumpRoot(parent, graphs)
    return None


def give_the_dump_root(root: DumpRoot) -> str:
    """What to do when the target path lies inside a dump root: give the root (where its graph files are)."""
    if root.graphs:
        graph = root.graphs[0].path.name
        return f"the target path lies inside a dump whose root holds {graph}: give the dump root `{root.path}`"
    return f"the target path lies inside the dump root `{root.path}`: give the dump root, and the graph with --graph"


def several_dumps(role: str, path: Path, roots: Sequence[DumpTreeRoot]) -> str:
    """A target or golden path holding more than one dump (a GE and a fusion-off GE dump side by side, a GE and an
    FX dump): each one, and the option that takes one of them."""
    flag = "-tp/--target_path" if role == "target" else "-gp/--golden_path"
    by_path: dict[Path, list[str]] = {}
    for r in roots:
        by_path.setdefault(r.path, []).append(_SIDE_NAMES[r.side])
    mixed = {p: kinds for p, kinds in by_path.items() if len(kinds) > 1}
    if mixed:  # no path option takes one of them: the files of two dumps share a directory
        where = "; ".join(f"{p} holds {' and '.join(kinds)} dump files" for p, kinds in mixed.items())
        return (f"the {role} path {path} mixes two dumps in one directory: {where}. tcmp compares one dump per "
                "path: move the other dump's files into a directory of their own")  # fmt: skip
    found = ", ".join(f"{r.path} ({_SIDE_NAMES[r.side]})" for r in roots)
    return f"the {role} path {path} holds {len(roots)} dumps: {found}; give one of them with {flag}"


_SIDE_NAMES = {Side.GE: "GE", Side.FX: "FX", Side.ACL: "aclgraph", Side.GRAPH: "graph"}


def not_a_ge_target(target_holds_fx: bool, golden_holds_ge: bool) -> str:
    """What a target path without GE dump files holds instead, when that says more ("" if not)."""
    if target_holds_fx and golden_holds_ge:
        return f"it holds an FX dump and the golden path a GE dump: -tp/-gp look swapped; {SWAP_HINT}"
    if target_holds_fx:
        return f"it holds an FX dump (.npy files), not a GE dump: -tp/-gp may be swapped; {SWAP_HINT}"
    return ""


def fused_ops(ops: Iterable[tuple[str, Optional[str]]], other: Iterable[str]) -> list[tuple[str, Optional[str]]]:
    """The (op name, op type) of one GE dump's ops that are fusions of the other dump's ops: an op the other dump
    does not hold whose type is a fusion's (AutomaticBufferFusionOp), or whose name is the other's op names joined
    (GE names a UB fusion so) or `{first member}_ub_fusion`. Names are the sanitized ones of the file names."""
    other = set(other)
    splitter = NameSplitter(sorted(other))
    found = []
    for name, op_type in ops:
        if name in other:
            continue
        truncated = name.endswith(UB_FUSION_SUFFIX) and name[: -len(UB_FUSION_SUFFIX)] in other
        if op_type in FUSION_OP_TYPES or truncated or splitter.splits(name):
            found.append((name, op_type))
    return sorted(found)


def golden_looks_fused(
    target_ops: Sequence[tuple[str, Optional[str]]], golden_ops: Sequence[tuple[str, Optional[str]]]
) -> str:
    """A warning ("" if none) when the golden GE dump holds fusions of the target's ops and the target none of the
    golden's: the fusion-on dump was given as the golden. The ops are (name, type) of a token of each."""
    golden_fused = fused_ops(golden_ops, (name for name, _ in target_ops))
    if not golden_fused or fused_ops(target_ops, (name for name, _ in golden_ops)):
        return ""
    name, op_type = golden_fused[0]
    some = f"{len(golden_fused)} golden ops are fusions" if len(golden_fused) > 1 else "a golden op is a fusion"
    return (
        f"the golden looks fusion-on and the target fusion-off: {some} of target ops ({name}, "
        f"{op_type or 'of unknown type'}{', …' if len(golden_fused) > 1 else ''}) and no target op is a fusion of "
        f"golden ops: -tp/-gp may be swapped; {SWAP_HINT}"
    )
