"""torchair's graph dump of an aclgraph: which node and output each getitem takes.

With `config.debug.graph_dump.type = "py"` torchair's aclgraph converter writes the FX graph after its passes
(fx2acl_converter `dump`: `fx_graph.print_readable(False)`, the text torch prints for a GraphModule) to
`{graph_dump.path}/dynamo_optimized_{graph}_rank_{r}_pid_{pid}_ts_{ts}.py`, before it inserts the dump's saves.
Each node is one assignment of `forward`:

    npu_add_rms_norm_dynamic_quant_default = torch.ops.npu.npu_add_rms_norm_dynamic_quant.default(arg1_1, …)
    getitem_5: "i8[2, 3, 16]" = npu_add_rms_norm_dynamic_quant_default[0]

An aclgraph dump saves the getitem users of a multi-output node (`getitem_5_device_0_0.pt`), whose names say
neither node nor output; this file does. It is read as text, line by line, never imported or run; lines that are no
node assignment (comments, the signature, `return`) are skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tcmp.schemas.errors import DumpError

GRAPH_DUMP_NAME = re.compile(
    r"dynamo_(?P<stage>optimized|original)_(?P<graph>.+)_rank_(?P<rank>\d+)_pid_(?P<pid>\d+)(?:_ts_(?P<ts>\d+))?\.py"
)
MAX_GRAPH_DUMP_BYTES = 1 << 30  # a 100K-node graph prints some tens of MB
MAX_LINE = 1 << 20
_ASSIGNMENT = re.compile(r"\s+(?P<name>[A-Za-z_]\w*)(?:\s*:\s*\"[^\"]*\")?\s*=\s*(?P<value>.+)")
_GETITEM = re.compile(r"(?P<source>[A-Za-z_]\w*)\[(?P<index>\d+)\]\s*(?:;.*)?")
_CALL = re.compile(r"torch\.ops\.(?P<target>[\w.]+)\(")
_FORWARD = re.compile(r"\s+def forward\(self(?P<args>.*)\):\s*")
_ARGUMENT = re.compile(r",\s*(?P<name>[A-Za-z_]\w*)(?:\s*:\s*\"[^\"]*\")?")


@dataclass(frozen=True)
class GraphDumpName:
    stage: str  # "optimized" | "original"
    graph: str
    rank: int
    pid: int


@dataclass(frozen=True)
class GetItem:
    source: str  # the node it takes an output of
    index: int


@dataclass(frozen=True)
class AclGraphDump:
    """What one or more graph dumps of a rank say: each getitem's node and output, each op node's target. A name two
    graphs of the process use differently is left out of both maps (`ambiguous`)."""

    getitems: Mapping[str, GetItem]
    targets: Mapping[str, str]  # op node -> `npu.npu_add_rms_norm_dynamic_quant.default`
    ambiguous: frozenset[str]
    inputs: frozenset[str] = frozenset()  # the graphs' inputs (`forward`'s parameters: `arg0_1`, …)

    def has_node(self, name: str) -> bool:
        return name in self.getitems or name in self.targets or name in self.inputs or name in self.ambiguous


def parse_graph_dump_name(name: str) -> Optional[GraphDumpName]:
    match = GRAPH_DUMP_NAME.fullmatch(name)
    if match is None:
        return None
    return GraphDumpName(match["stage"], match["graph"], int(match["rank"]), int(match["pid"]))


def _lines(path: Path) -> Iterable[str]:
    try:
        size = path.stat().st_size
        if size > MAX_GRAPH_DUMP_BYTES:
            raise DumpError(path, f"a graph dump of {size} bytes, over the {MAX_GRAPH_DUMP_BYTES} tcmp reads")
        with open(path, encoding="utf-8", errors="replace") as fh:
            while True:
                line = fh.readline(MAX_LINE)
                if not line:
                    return
                if len(line) >= MAX_LINE and not line.endswith("\n"):
                    raise DumpError(path, f"a graph dump line over {MAX_LINE} characters")
                yield line.rstrip("\n")
    except OSError as exc:
        raise DumpError(path, f"graph dump unreadable: {exc.strerror or exc}") from exc


def read_graph_dumps(paths: Iterable[Path]) -> AclGraphDump:
    """The getitems and op targets of these graph dumps (one rank's graphs) merged."""
    getitems: dict[str, GetItem] = {}
    targets: dict[str, str] = {}
    ambiguous: set[str] = set()
    inputs: set[str] = set()
    for path in paths:
        for line in _lines(path):
            forward = _FORWARD.fullmatch(line)
            if forward is not None:
                inputs.update(m["name"] for m in _ARGUMENT.finditer(forward["args"]))
                continue
            match = _ASSIGNMENT.fullmatch(line)
            if match is None:
                continue
            name, value = match["name"], match["value"]
            item = _GETITEM.fullmatch(value)
            call = _CALL.match(value)
            if item is not None:
                found = GetItem(item["source"], int(item["index"]))
                if getitems.setdefault(name, found) != found:
                    ambiguous.add(name)
            elif call is not None and targets.setdefault(name, call["target"]) != call["target"]:
                ambiguous.add(name)
    for name in ambiguous:
        getitems.pop(name, None)
        targets.pop(name, None)
    return AclGraphDump(getitems, targets, frozenset(ambiguous), frozenset(inputs))  # dicts: units pickle it
