"""Dump scope: which ops GE was told to dump (tcmp.schemas.dump_options), per rank, for the compare to list the
golden tensors of the others as out of scope rather than as having no partner."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Optional

from tcmp.compare.collect.fusion import GraphView
from tcmp.compare.records import CompareError
from tcmp.schemas.dump_options import (
    DumpOptionsError,
    DumpSelection,
    find_dump_options,
    for_rank,
    read_dump_options,
    selects,
)

NOT_SELECTED = "not selected for dump (dump_layer)"
OUTPUT_MARK = ".OUTPUT."  # torchair's _fx_tensor_name: {node.name}-{node.target}.OUTPUT.{i}


def dump_selections(
    given: Optional[Path], target_root: Path, ranks: Iterable[Optional[int]], notes: list[str]
) -> dict[Optional[int], DumpSelection]:
    """The selection each target rank was dumped under: `given` (--dump-options) for all of them, else each rank's
    own torchair options file found beside the dump or in the working directory. A file found but unusable is a
    note (the compare goes on without scope), a given one an error."""
    ranks = list(ranks)
    if given is not None:
        try:
            selection = read_dump_options(given)
        except DumpOptionsError as exc:
            raise CompareError(f"--dump-options {given}: {exc.message}", usage=True) from exc
        notes.append(f"dump scope from {given}")
        return {rank: selection for rank in ranks}
    found = find_dump_options(target_root, Path.cwd())
    selections: dict[Optional[int], DumpSelection] = {}
    for rank in ranks:
        own = for_rank(found, rank)
        if own is None:
            continue
        try:
            selections[rank] = read_dump_options(own.path)
        except DumpOptionsError as exc:
            notes.append(f"dump options {own.path} unusable, dump scope not applied: {exc.message}")
            continue
        notes.append(f"dump scope from {own.path}")
    return selections


def unselected_nodes(view: Optional[GraphView], layers: Optional[frozenset[str]]) -> frozenset[str]:
    """The FX nodes (`{name}-{target}`) whose tensors GE did not dump under `layers`: every graph op that carries
    one of the node's outputs (`_fx_tensor_name`) is unselected. A node with one selected op is in scope: its
    missing tensors have no partner."""
    if view is None or layers is None:
        return frozenset()
    selected: set[str] = set()
    unselected: set[str] = set()
    for op in view.graph.ops:
        chosen = selects(layers, op.name, op.original_op_names)
        for out in op.outputs:
            if out.fx_tensor_name and OUTPUT_MARK in out.fx_tensor_name:
                node = out.fx_tensor_name.split(OUTPUT_MARK, 1)[0]
                (selected if chosen else unselected).add(node)
    return frozenset(unselected - selected)
