"""aclgraph dump files: the `torch.save` file torch_npu's `save_npugraph_tensor` writes for each FX node output
torchair saves in reduce-overhead / npugraph_ex mode (docs/formats.md, "aclgraph dumps").

torchair inserts `save_npugraph_tensor(n, save_path="{dump dir}/{n.name}.pt")` after every FX node with tensor
metadata; the dump directory is `{dump_path}/worldsize{W}_global_rank{R}`. torch_npu derives the file name:

    {node}_device_{d}_{k}.pt   an NPU tensor of device d, k-th save to that path in the process (one per replay)
    {node}_{k}.pt              a CPU tensor
    {node}_device_{d}.pt       overwrite=True (torchair never passes it), NPU
    {node}.pt                  overwrite=True, CPU

Node names may end in `_N` themselves (`add_1`): the trailing `_{k}` is always the counter. The overwrite forms
cannot be told from the counted ones by name (`x_device_0.pt` is also node `x_device`, save 0 of a CPU tensor;
`add_1.pt` is also node `add`, save 1): since torchair never writes them, a name is read as a counted form whenever
it can be, and a `.pt` without a trailing `_{k}` is refused (it holds the last replay only, no token).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional, Union

from tcmp.schemas import SLOTS
from tcmp.schemas.dump_places import RANK_DIR
from tcmp.schemas.errors import NameParseError

ACL_SUFFIX = ".pt"
ACL_MODEL = "aclgraph"  # the model label of an aclgraph dump: one directory holds every graph of the process

_NPU_NAME = re.compile(r"(?P<node>.+)_device_(?P<device>\d+)_(?P<counter>\d+)\.pt", re.DOTALL)
_CPU_NAME = re.compile(r"(?P<node>.+)_(?P<counter>\d+)\.pt", re.DOTALL)


@dataclass(frozen=True, **SLOTS)
class AclFileName:
    node: str  # FX node name (`add_1`, `getitem_3`, `arg0_1`)
    device: Optional[int]  # NPU device index; None for a CPU tensor's file
    counter: int  # k-th save of this node to this directory in the process: the token, one save per replay


def parse_acl_file_name(name: str) -> AclFileName:
    """Split an aclgraph `.pt` name; NameParseError for one without a save counter (see the module's rule)."""
    match = _NPU_NAME.fullmatch(name)
    if match is not None:
        return AclFileName(match["node"], int(match["device"]), int(match["counter"]))
    match = _CPU_NAME.fullmatch(name)
    if match is not None:
        return AclFileName(match["node"], None, int(match["counter"]))
    raise NameParseError(
        name,
        "not an aclgraph dump file name ({node}_device_{d}_{k}.pt or {node}_{k}.pt): without a save counter k it "
        "was written with overwrite=True, which keeps the last replay only and says no token",
    )


OUTSIDE_RANK_DIR = "aclgraph .pt file outside a worldsize{W}_global_rank{R} directory (torchair's dump directory)"


def acl_rank(parts: tuple[str, ...]) -> Union[int, str]:
    """The rank of an aclgraph file's directory (`parts`), which must be torchair's `worldsize{W}_global_rank{R}`
    itself; why not otherwise."""
    match = RANK_DIR.match(parts[-1]) if parts else None
    return int(match.group(2)) if match else OUTSIDE_RANK_DIR


@dataclass(frozen=True)
class SharedCounter:
    """A node saved more often than the directory's least-saved node. Every node of one graph is saved once per
    replay, so the counts differ only when several graphs of the process save a node of this name into this
    directory (torch_npu keeps one counter per path, which then counts all their saves together), or when the dump
    was still being written or lost files: which save is which token cannot be told."""

    node: str
    saves: int
    fewest: int

    @property
    def reason(self) -> str:
        return (
            f"node {self.node} saved {self.saves} times, other nodes of this directory {self.fewest} times: several "
            "graphs of the process save a node of this name here and share torch_npu's one save counter per path "
            "(or the dump was unfinished), so which save is which token cannot be told; not compared"
        )


def shared_counters(names: Sequence[AclFileName]) -> dict[str, SharedCounter]:
    """The nodes of one directory saved more often than its least-saved node (see SharedCounter)."""
    saves = Counter(n.node for n in names)
    fewest = min(saves.values(), default=0)
    return {node: SharedCounter(node, count, fewest) for node, count in saves.items() if count > fewest}
