"""Stack Info from the capture helper's FX stack files (tcmp.schemas.fx_stacks), for the graph the compare uses.

torchair writes no stack into its graph files; `tcmp.daemon.capture.npu_backend` records each FX node's stack
into `tcmp_fx_stacks_{pid}.json` beside them. A graph file is bound to one recorded graph: among the stack files
in its directory, the entries of its pid (2.14's graph file names carry one) and of its number (the GraphDef's
`graph_N`, every torchair version). Where the pid and the number single one out, that one; else the one sharing
most FX node names with the graph's `_fx_tensor_name`s — at least half of them, else none (another process's
graph, a file left from another run). Each GE op then gets the
stack of the FX node it is named after; an op named after a node of torchair's pattern fusion (which the
recorded graph, taken before torchair's FX passes, does not have) gets the stack of the node the pattern started
from, the n-th fused node of a pattern in graph order taking the n-th such node. Ops that already carry a stack
keep it; without a stack file nothing changes (Stack Info N/A).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Optional

from tcmp.compare.rules.torchair import PATTERN_BY_FUSED
from tcmp.schemas.fx_stacks import FxStackGraph, StackFileError, read_stack_file, stack_files_in
from tcmp.schemas.graph import Graph
from tcmp.schemas.graph_names import parse_graph_file_name

MIN_SHARE = 0.5  # of the graph's named FX nodes the recorded graph must have
_GRAPH_NAME = re.compile(r"graph_(\d+)")


def _named_nodes(graph: Graph) -> list[tuple[str, str]]:
    """(node name, target) of the FX tensors the graph's ops are named after, in op order, once each."""
    seen, out = set(), []
    for op in graph.ops:
        for desc in op.outputs:
            fx = desc.fx_tensor
            if fx is not None and fx.node_key not in seen:
                seen.add(fx.node_key)
                out.append((fx.node_key.partition("-")[0], fx.target))
    return out


def bind(graph: Graph, files: Sequence, notes: list[str]) -> Optional[FxStackGraph]:
    """The recorded graph `graph` was compiled from, from the stack files `files` (paths); None if none fits."""
    name = parse_graph_file_name(graph.path.name)
    number_match = _GRAPH_NAME.fullmatch(graph.name or "")
    number = int(number_match[1]) if number_match else (name.number if name is not None else None)
    pid = name.pid if name is not None else None
    nodes = {node for node, _ in _named_nodes(graph)}
    if not nodes:
        return None
    best, best_share, numbered = None, 0.0, []
    for path in files:
        try:
            stack_file = read_stack_file(path)
        except StackFileError as exc:
            note = f"stack file {path} unusable, Stack Info left out: {exc.message}"
            if note not in notes:  # every graph file beside it asks again
                notes.append(note)
            continue
        if pid is not None and stack_file.pid is not None and stack_file.pid != pid:
            continue
        for recorded in stack_file.graphs:
            if number is not None and recorded.number is not None:
                if recorded.number != number:
                    continue
                if pid is not None and stack_file.pid == pid:
                    numbered.append(recorded)
            share = len(nodes & set(recorded.by_node())) / len(nodes)
            if share > best_share:
                best, best_share = recorded, share
    if len(numbered) == 1:  # the graph of that number in that process: whatever torchair's passes renamed
        return numbered[0]
    return best if best_share >= MIN_SHARE else None


def _pattern_stacks(graph: Graph, recorded: FxStackGraph) -> dict[str, str]:
    """Stacks of the pattern-fused nodes the graph is named after: the n-th fused node of a pattern (graph order)
    takes the stack of the n-th recorded node of the pattern's anchor target, when the counts agree."""
    fused: dict[str, list[str]] = defaultdict(list)
    for node, target in _named_nodes(graph):
        if target in PATTERN_BY_FUSED:
            fused[target].append(node)
    out: dict[str, str] = {}
    for target, nodes in fused.items():
        anchor = PATTERN_BY_FUSED[target].anchor
        anchors = [stack for key, stack in recorded.nodes if key.partition("-")[2] == anchor]
        if len(anchors) == len(nodes):
            out.update(zip(nodes, anchors))
    return out


def with_stacks(graph: Graph, notes: list[str]) -> Graph:
    """`graph` with each op's stack_info filled from the stack files beside it (unchanged without one)."""
    files = stack_files_in(Path(graph.path).parent)
    recorded = bind(graph, files, notes) if files else None
    if recorded is None:
        return graph
    stacks = {**_pattern_stacks(graph, recorded), **recorded.by_node()}
    ops = []
    for op in graph.ops:
        stack = op.stack_info
        if stack is None:
            nodes = [d.fx_tensor.node_key.partition("-")[0] for d in op.outputs if d.fx_tensor is not None]
            stack = next((stacks[n] for n in nodes if n in stacks), None)
        ops.append(op if stack == op.stack_info else replace(op, stack_info=stack))
    return replace(graph, ops=tuple(ops))
