"""Finding graph text files: torchair-named ones in a tree or directory, a file named on the command line, and
text files that are GE graphs by their content; torchair's graph dumps of other types, to name when none is found.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Union

from tcmp.schemas.dump_outline import graph_file_order, outline, walk
from tcmp.schemas.dump_tree import GraphFile
from tcmp.schemas.graph_names import (
    SNIFF_BYTES,
    GraphFileName,
    GraphKind,
    GraphNameForm,
    graph_name_by_content,
    is_other_graph_dump,
    looks_like_ge_graph_text,
    parse_graph_file_name,
)


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
        return tuple(sorted((GraphFile(Path(p), n) for p, n in found if n is not None), key=graph_file_order))
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
    return tuple(sorted(found, key=graph_file_order))


def other_graph_dumps(path: Union[str, Path], top_level_only: bool = False) -> tuple[Path, ...]:
    """torchair graph dumps of type "pbtxt" or "py" under a path: what to name when no text graph is found."""
    found: list[Path] = []
    for directory, entries in walk(Path(path)):
        found += [directory / e.name for e in entries if is_other_graph_dump(e.name)]
        if top_level_only:
            break
    return tuple(sorted(found))
