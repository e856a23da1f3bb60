"""Which token each capture of an aclgraph optimized stage holds, told by the shapes its files have.

torch_npu fixes a save's path when the graph is captured and every replay writes that file again, so capture k's
files (save counter k) hold its last replay. torchair captures a graph again for other input shapes; every token
replays the one capture of its shapes. Against a dump of the same tokens in order (torchair's FX dump, or the
original stage), a capture therefore holds the last token whose saved shapes are the capture's.

The shapes are read node by node (a header each, or the index's summary where `tcmp watch` deleted the file), only
until every capture is told apart: a capture's candidates are the tokens no node's shape rules out, and it is placed
at its last candidate once that token is no other capture's candidate (every token was replayed by some capture, so
that token is this capture's, and the last of them). Captures that no node tells apart (two captures of the same
shapes) are not placed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Optional

from tcmp.schemas.dump_records import IO, FileSummary, Side
from tcmp.schemas.dump_tree import DumpFile
from tcmp.schemas.errors import DumpError
from tcmp.schemas.fx_dump import read_npy_header
from tcmp.schemas.torch_save import probe_torch_save

Shape = tuple[int, ...]


def saved_nodes(files: Sequence[DumpFile]) -> dict[str, DumpFile]:
    """Node name -> the file of its output 0 (an aclgraph file is one node's output; an FX dump has OUTPUT.i files
    and its nodes' INPUT copies)."""
    nodes: dict[str, DumpFile] = {}
    for f in files:
        if f.side is Side.ACL or (f.io is IO.OUTPUT and f.index == 0):
            nodes.setdefault(f.op_name, f)
    return nodes


def _shape(f: DumpFile, stored: Mapping[Path, FileSummary]) -> Optional[Shape]:
    summary = stored.get(f.path)
    if summary is not None:
        return summary.tensors[0].shape if summary.tensors else None
    try:
        if f.side is Side.FX:
            return tuple(read_npy_header(f.path).shape)
        headers = probe_torch_save(f.path)
    except (DumpError, OSError):  # the compare says what is wrong with the file; here it tells nothing apart
        return None
    return headers[0].shape if len(headers) == 1 else None


def _placed(candidates: Mapping[int, set[int]]) -> dict[int, int]:
    """capture -> its token, for the captures whose last candidate is no other capture's candidate."""
    placed = {}
    for capture, tokens in candidates.items():
        if tokens:
            last = max(tokens)
            if not any(last in other for c, other in candidates.items() if c != capture):
                placed[capture] = last
    return placed


def place_captures(
    captures: Mapping[int, Mapping[str, DumpFile]],
    capture_stored: Mapping[Path, FileSummary],
    tokens: Mapping[int, Mapping[str, DumpFile]],
    token_stored: Mapping[Path, FileSummary],
) -> dict[int, int]:
    """capture counter -> the token its files hold, for the captures the shapes tell apart. `captures` and
    `tokens`: node name -> file (`saved_nodes`) per capture of the optimized stage and per token of the other dump."""
    candidates = {c: set(tokens) for c in captures}
    nodes = sorted({n for files in captures.values() for n in files if any(n in t for t in tokens.values())})
    token_shapes: dict[tuple[int, str], Optional[Shape]] = {}
    for node in nodes:
        if len(_placed(candidates)) == len(captures):
            break
        for capture, files in captures.items():
            if node not in files or len(candidates[capture]) == 0:
                continue
            shape = _shape(files[node], capture_stored)
            if shape is None:
                continue
            kept = set()
            for token in candidates[capture]:
                theirs = tokens[token].get(node)
                if theirs is None:  # not dumped in that token: no evidence either way
                    kept.add(token)
                    continue
                if (token, node) not in token_shapes:
                    token_shapes[(token, node)] = _shape(theirs, token_stored)
                if token_shapes[(token, node)] in (None, shape):
                    kept.add(token)
            candidates[capture] = kept
    return _placed(candidates)
