"""torchair's graph dump of an aclgraph (`schemas.acl_graph_dump`) for an optimized-stage target: which node and
output each saved getitem takes. Looked for as the GE graph files are: `--graph` (a file, or a directory), else the
target path, else the working directory (torchair's `graph_dump.path` default), top level only."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Optional

from tcmp.compare.records import CompareError
from tcmp.schemas.acl_graph_dump import AclGraphDump, parse_graph_dump_name, read_graph_dumps
from tcmp.schemas.errors import DumpError


def _dumps_in(place: Path, rank: int) -> list[Path]:
    try:
        entries = sorted(place.iterdir())
    except OSError:
        return []
    found = []
    for path in entries:
        name = parse_graph_dump_name(path.name)
        if name is not None and name.stage == "optimized" and name.rank == rank and path.is_file():
            found.append(path)
    return found


def acl_graph_dump(
    target_root: Path, given: Optional[Path], rank: Optional[int], saved: Callable[[], Iterable[str]], notes: list[str]
) -> Optional[AclGraphDump]:
    """The optimized graph dumps of `rank` (None: a dump without rank directories, rank 0), read; None when there
    are none. One that is unreadable, or lacks a node the dump saves (`saved()`, listed only when there is a
    graph dump: another run's graph, left in the working directory), is said in a note and not used: it would pair
    getitems with the wrong outputs."""
    if given is not None and given.is_file():
        paths = [given]
    else:
        places = [given] if given is not None else [target_root, Path.cwd()]
        paths = next((found for place in places if (found := _dumps_in(place, rank or 0))), [])
    if not paths:
        return None
    try:
        dump = read_graph_dumps(paths)
    except DumpError as exc:
        if given is not None:
            raise CompareError(f"--graph {given}: {exc}", usage=True) from exc
        notes.append(f"torchair's graph dump not used: {exc}")
        return None
    where = paths[0].name if len(paths) == 1 else f"{len(paths)} files ({paths[0].name}, …)"
    missing = sorted(n for n in set(saved()) if not dump.has_node(n))
    if missing:
        lacks = f"it has no node {missing[0]}, which the dump saves"
        if given is not None:
            raise CompareError(f"--graph {given}: not the graph of this aclgraph dump: {lacks}", usage=True)
        notes.append(f"torchair's graph dump {where} not used: {lacks} (a graph of another run?)")
        return None
    notes.append(f"rank {rank or 0}: the getitems the optimized stage saves, read from torchair's graph dump {where}")
    return dump
