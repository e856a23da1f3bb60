"""The names torchair has given its graph text files (spec/dump-formats.md §3.3).

torchair's `config.debug.graph_dump` (type "txt") writes `str(GraphDef)` to `{graph_dump.path}/{name}.txt`, where
`graph_dump.path` defaults to the working directory. The name has taken three forms (torchair's
`configs/debug_config.py` `full_path` and its callers in `npu_fx_compiler.py` / `fx2ge_converter.py`):

    2023-08 → 2024-01-04   dynamo_{ts}.txt                                   the converted graph only
    2024-01-04 → 2025-05   dynamo_{original|optimized}_graph_{ts}.txt        local time before 2025-02, then UTC
    since 2025-05-15       dynamo_{original|optimized}_graph_{N}_rank_{R}_pid_{P}_ts_{ts}.txt   (`_ts_` optional)

`ts` is `%Y%m%d%H%M%S%f`. The same option with type "pbtxt" or "py" writes other formats (a GE IR binary-ish
dump, Python code that builds the graph); those are recognised only so that a compare can say why it cannot use
them.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Optional

__all__ = ["GraphFileName", "GraphKind", "GraphNameForm", "is_other_graph_dump", "parse_graph_file_name"]


class GraphKind(str, enum.Enum):
    ORIGINAL = "original"  # dumped right after FX -> GE conversion
    OPTIMIZED = "optimized"  # dumped after torchair's own graph passes


class GraphNameForm(str, enum.Enum):
    DYNAMO = "dynamo_{ts}"  # 2023-08 → 2024-01
    KIND = "dynamo_{kind}_graph_{ts}"  # 2024-01 → 2025-05
    NUMBERED = "dynamo_{kind}_graph_{N}_rank_{R}_pid_{P}_ts_{ts}"  # since 2025-05
    GIVEN = "any name"  # a file the user named (`tcmp compare --graph FILE`)


@dataclass(frozen=True)
class GraphFileName:
    kind: GraphKind
    number: Optional[int]  # process-global counter from 1 (GE graph graph_{N}); None before 2025-05
    rank: Optional[int]  # None before 2025-05
    pid: Optional[int]
    timestamp: Optional[str]  # %Y%m%d%H%M%S%f as written; None when the writer left it out
    form: GraphNameForm = GraphNameForm.NUMBERED


_NUMBERED = re.compile(
    r"dynamo_(?P<kind>original|optimized)_graph_(?P<number>\d+)_rank_(?P<rank>\d+)_pid_(?P<pid>\d+)"
    r"(?:_ts_(?P<ts>\d+))?\.txt"
)
_KIND = re.compile(r"dynamo_(?P<kind>original|optimized)_graph_(?P<ts>\d+)\.txt")
_DYNAMO = re.compile(r"dynamo_(?P<ts>\d+)\.txt")
# The same dumps in graph_dump's other types: recognised, not read.
_OTHER_TYPE = re.compile(r"dynamo_(?:(?:original|optimized)_graph_[\w]*|\d+)\.(?:pbtxt|py)")


def parse_graph_file_name(name: str) -> Optional[GraphFileName]:
    """Recognise a torchair graph text file by its base name; None for anything else (`.py`/`.pbtxt` dumps too)."""
    if not name.startswith("dynamo_") or not name.endswith(".txt"):
        return None
    match = _NUMBERED.fullmatch(name)
    if match is not None:
        return GraphFileName(
            GraphKind(match["kind"]), int(match["number"]), int(match["rank"]), int(match["pid"]), match["ts"]
        )
    match = _KIND.fullmatch(name)
    if match is not None:
        return GraphFileName(GraphKind(match["kind"]), None, None, None, match["ts"], GraphNameForm.KIND)
    match = _DYNAMO.fullmatch(name)
    if match is not None:
        return GraphFileName(GraphKind.ORIGINAL, None, None, None, match["ts"], GraphNameForm.DYNAMO)
    return None


def is_other_graph_dump(name: str) -> bool:
    """A torchair graph dump of type "pbtxt" or "py": a graph file tcmp cannot read."""
    return name.startswith("dynamo_") and _OTHER_TYPE.fullmatch(name) is not None
