"""The names torchair has given its graph text files (docs/formats.md, "Graph file names").

torchair's `config.debug.graph_dump` (type "txt") writes `str(GraphDef)` to `{graph_dump.path}/{name}.txt`, where
`graph_dump.path` defaults to the working directory. The name has taken three forms (torchair's
`configs/debug_config.py` `full_path` and its callers in `npu_fx_compiler.py` / `fx2ge_converter.py`):

    2023-08 → 2024-01-04   dynamo_{ts}.txt                                   the converted graph only
    2024-01-04 → 2025-05   dynamo_{original|optimized}_graph_{ts}.txt        local time before 2025-02, then UTC
    since 2025-05-15       dynamo_{original|optimized}_graph_{N}_rank_{R}_pid_{P}_ts_{ts}.txt   (`_ts_` optional)

`ts` is `%Y%m%d%H%M%S%f`. The same option with type "pbtxt" writes another text format (`convert_to_pbtxt` in
torchair's `_ge_concrete_graph/utils.py`: TensorFlow `node { op: … }` blocks for TensorBoard, each attribute and
tensor desc flattened into one string), with type "py" Python code that builds the graph; those are recognised
only so that a compare can say why it cannot use them. A text file named otherwise (a renamed copy, a test's
`dynamo_original_graph_{ts}_test.txt`) is told to be a GE graph by its first KB (`looks_like_ge_graph_text`).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Optional

__all__ = [
    "SNIFF_BYTES",
    "GraphFileName",
    "GraphKind",
    "GraphNameForm",
    "graph_name_by_content",
    "is_other_graph_dump",
    "looks_like_ge_graph_text",
    "parse_graph_file_name",
]


class GraphKind(str, enum.Enum):
    ORIGINAL = "original"  # dumped right after FX -> GE conversion
    OPTIMIZED = "optimized"  # dumped after torchair's own graph passes


class GraphNameForm(str, enum.Enum):
    DYNAMO = "dynamo_{ts}"  # 2023-08 → 2024-01
    KIND = "dynamo_{kind}_graph_{ts}"  # 2024-01 → 2025-05
    NUMBERED = "dynamo_{kind}_graph_{N}_rank_{R}_pid_{P}_ts_{ts}"  # since 2025-05
    GIVEN = "any name"  # a file the user named (`tcmp compare --graph FILE`)
    CONTENT = "a .txt file holding a GE graph"  # named otherwise, found by its content


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


SNIFF_BYTES = 1024  # enough for a GraphDef's name and its first op's name and type
# `str(GraphDef)` and a printed ModelDef: `op {` blocks holding `type: "…"`; torchair's pbtxt has `node {` with `op:`.
_GE_OP_BLOCK = re.compile(rb"^[ \t]*op[ \t]*\{[ \t]*\r?$", re.MULTILINE)
_GE_OP_TYPE = re.compile(rb'^[ \t]*type:[ \t]*"', re.MULTILINE)
_RANK_IN_NAME = re.compile(r"_rank_?(\d+)(?:_|\.|$)")


def looks_like_ge_graph_text(head: bytes) -> bool:
    """Is this (a file's first SNIFF_BYTES) the protobuf text format of a GE graph (a GraphDef or ModelDef)?"""
    block = _GE_OP_BLOCK.search(head)
    return block is not None and _GE_OP_TYPE.search(head, block.end()) is not None


def graph_name_by_content(name: str) -> GraphFileName:
    """What can be told from the name of a graph text file found by its content: optimized when the name says so
    (else original), the rank of a `_rank_{R}` in it; bound by content, never by a number."""
    kind = GraphKind.OPTIMIZED if "optimized" in name else GraphKind.ORIGINAL
    rank = _RANK_IN_NAME.search(name)
    return GraphFileName(kind, None, int(rank.group(1)) if rank else None, None, None, GraphNameForm.CONTENT)
