"""tcmp's FX stack file: the user's Python stack behind every FX node torchair compiled, which torchair itself never
writes into a graph file (stacks exist only in its `.py` graph dump).

The capture helper (`tcmp.daemon.capture.npu_backend`) writes one file per process beside torchair's graph dump
(`config.debug.graph_dump.path`, else the working directory, where torchair puts the graph files):

    tcmp_fx_stacks_{pid}.json
    {"format": "tcmp-fx-stacks", "version": 1, "pid": 4242,
     "graphs": [{"number": 1, "nodes": [["add-aten.add.Tensor", "File \\"model.py\\", line 12, in forward\\n ..."],
                                         ...]},
                ...]}

- `graphs`: one entry per FX graph torchair compiled in the process, in compile order; `number` is torchair's
  process-wide graph counter for it (the N of the GE graph `graph_N` and of 2.14's `dynamo_*_graph_N_…` file
  names), or null when the helper could not read it.
- `nodes`: `[key, stack]` in graph order, for the nodes dynamo recorded a stack for (`node.meta["stack_trace"]`),
  `key` spelled as torchair spells `_fx_tensor_name`'s node part and the FX dump's file names: `{node}-{target}`.
  Node keys repeat across graphs (every graph has its `add-aten.add.Tensor`): a reader binds a graph file to an
  entry by graph number and pid where the graph file names them, and by the node names they share.

The file is rewritten whole (to a temporary name, then renamed) after each compile, so a reader never sees half of
it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from tcmp.schemas.errors import DumpError
from tcmp.schemas.files import write_atomically

FORMAT = "tcmp-fx-stacks"
VERSION = 1
_FILE_NAME = re.compile(r"tcmp_fx_stacks_(?P<pid>\d+)\.json")


class StackFileError(DumpError):
    """A stack file tcmp cannot use (not JSON, another format or version, malformed entries)."""


@dataclass(frozen=True)
class FxStackGraph:
    number: Optional[int]  # torchair's graph counter (GE graph `graph_N`), None when unknown
    nodes: tuple[tuple[str, str], ...]  # (`{node}-{target}`, stack) in graph order

    def by_node(self) -> dict[str, str]:
        """Stack by FX node name (the key's part before the first `-`): unique within a graph, and unchanged by
        the passes that retarget a node (torchair's view → reshape)."""
        return {key.partition("-")[0]: stack for key, stack in self.nodes}


@dataclass(frozen=True)
class FxStackFile:
    path: Path
    pid: Optional[int]
    graphs: tuple[FxStackGraph, ...]


def stack_file_name(pid: int) -> str:
    return f"tcmp_fx_stacks_{pid}.json"


def is_stack_file(name: str) -> bool:
    return _FILE_NAME.fullmatch(name) is not None


def stack_files_in(directory: Union[str, Path]) -> list[Path]:
    """The stack files directly in `directory`, by name."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    return [Path(directory) / name for name in names if is_stack_file(name)]


def _graph(entry: object, where: str, path: Path) -> FxStackGraph:
    if not isinstance(entry, dict) or not isinstance(entry.get("nodes"), list):
        raise StackFileError(path, f"{where}: not an object with a `nodes` list")
    number = entry.get("number")
    if number is not None and (not isinstance(number, int) or isinstance(number, bool)):
        raise StackFileError(path, f"{where}: `number` is {number!r}, not an integer or null")
    nodes = []
    for k, node in enumerate(entry["nodes"]):
        if not (isinstance(node, list) and len(node) == 2 and all(isinstance(part, str) for part in node)):
            raise StackFileError(path, f"{where}, node {k}: not a [key, stack] pair of strings")
        nodes.append((node[0], node[1]))
    return FxStackGraph(number, tuple(nodes))


def read_stack_file(path: Union[str, Path]) -> FxStackFile:
    """Read one stack file; StackFileError saying what is wrong with it."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise StackFileError(path, f"cannot read: {exc.strerror or exc}") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StackFileError(path, f"not JSON: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise StackFileError(path, f"not a {FORMAT} file")
    if data.get("version") != VERSION:
        raise StackFileError(path, f"version {data.get('version')!r}; this tcmp reads version {VERSION}")
    pid = data.get("pid")
    if pid is not None and (not isinstance(pid, int) or isinstance(pid, bool)):
        raise StackFileError(path, f"`pid` is {pid!r}, not an integer or null")
    graphs = data.get("graphs")
    if not isinstance(graphs, list):
        raise StackFileError(path, "no `graphs` list")
    return FxStackFile(path, pid, tuple(_graph(g, f"graph {i}", path) for i, g in enumerate(graphs)))


def write_stack_file(directory: Union[str, Path], pid: int, graphs: Sequence[FxStackGraph]) -> Path:
    """Write (replace) the stack file of process `pid` in `directory`; returns its path."""
    directory = Path(directory)
    data = {
        "format": FORMAT,
        "version": VERSION,
        "pid": pid,
        "graphs": [{"number": g.number, "nodes": [list(node) for node in g.nodes]} for g in graphs],
    }
    final = directory / stack_file_name(pid)
    write_atomically(final, json.dumps(data, indent=1))
    return final
