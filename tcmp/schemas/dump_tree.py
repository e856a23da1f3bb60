"""One dump file: its kind from its name, and its record (side, rank, token, model, run, op) from its name and path.

GE dumps lie under `msprobe_ge_dump/` or `msit_ge_dump/`, FX dumps under `msprobe_fx_dump/` or `msit_fx_dump/`,
aclgraph `.pt` dumps in torchair's `worldsize{W}_global_rank{R}` directory (`tcmp.schemas.acl_dump`);
where a path places a file is `tcmp.schemas.dump_places` (which declares the FX layout eras), walking a whole tree
is `tcmp.schemas.dump_outline`. Nothing is dropped silently: a file whose name looks like a dump but does not
parse, or a hashed name without a mapping row, is an `Unrecognized` with the reason.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from tcmp.schemas import SLOTS
from tcmp.schemas.acl_dump import ACL_MODEL, ACL_SUFFIX, AclFileName, acl_rank, parse_acl_file_name
from tcmp.schemas.dump_places import fx_place, ge_place, rank_of
from tcmp.schemas.dump_records import IO, Side
from tcmp.schemas.errors import DumpError, NameParseError
from tcmp.schemas.fx_dump import FxFileName, parse_fx_file_name
from tcmp.schemas.ge_names import (
    MAPPING_FILE,
    GeFileKind,
    GeFileName,
    is_hashed_name,
    read_mapping,
    resolve_ge_file_name,
)
from tcmp.schemas.graph_names import (
    GraphFileName,
    parse_graph_file_name,
)

GE_ROOT_NAMES = ("msprobe_ge_dump", "msit_ge_dump")
FX_ROOT_NAMES = ("msprobe_fx_dump", "msit_fx_dump")
INDEX_DIR = ".tcmp"  # the daemon's index lives here; never part of a dump

_GRAPH_NUMBER = re.compile(r"^graph_(\d+)")
# Files that live in dump trees but are not dumps: configs, logs, editor swap files, reports.
_IGNORED_SUFFIXES = (".txt", ".json", ".log", ".swp", ".cfg", ".py", ".xlsx", ".pbtxt", ".tmp", ".lock")


class FileKind(str, enum.Enum):
    GE_BINARY = "ge_binary"
    GE_STATS_CSV = "ge_stats_csv"
    GE_MIN_MAX_NPZ = "ge_min_max_npz"
    FX_NPY = "fx_npy"
    FX_MIN_MAX_NPY = "fx_min_max_npy"
    GRAPH = "graph"
    ACL_PT = "acl_pt"  # a torch.save file of one FX node output (aclgraph)


# the files that hold raw tensors (the others hold summaries or a graph): what a tensor-mode compare can read and
# what `tcmp watch --drop-raw` may delete once summarized
RAW_TENSOR_KINDS = frozenset({FileKind.GE_BINARY, FileKind.FX_NPY, FileKind.ACL_PT})

_GE_KINDS = {
    GeFileKind.BINARY: FileKind.GE_BINARY,
    GeFileKind.STATS_CSV: FileKind.GE_STATS_CSV,
    GeFileKind.MIN_MAX_NPZ: FileKind.GE_MIN_MAX_NPZ,
}


@dataclass(frozen=True, **SLOTS)
class DumpFile:
    """One dump file with everything its path and name say about it.

    GE files hold all inputs and outputs of one op execution (`io`/`index` None); an FX file holds one tensor.
    `token` is 0-based. `run` is what tells two dumps written into one tree apart: the GE `{time}` directory;
    for FX, the graph directory (one per compiled GraphModule and run).
    """

    side: Side
    kind: FileKind
    path: Path
    rank: Optional[int]
    token: Optional[int]
    model: Optional[str]  # GE model directory name / FX graph directory name
    run: Optional[str]
    op_type: Optional[str]  # GE op type / FX target (None for aclgraph: its names do not say)
    op_name: str  # GE op name from the file name (sanitized) / FX node name (FX, aclgraph)
    io: Optional[IO]
    index: Optional[int]
    timestamp: Optional[int]
    name: Union[GeFileName, FxFileName, AclFileName, None]
    device: Optional[int] = None
    model_id: Optional[int] = None

    @property
    def graph_number(self) -> Optional[int]:
        """N of `graph_{N}` when the model/graph directory is named after the GE graph."""
        return graph_number_of(self.model or "")


def graph_number_of(model: str) -> Optional[int]:
    """N of `graph_{N}` when a GE model directory (or FX graph directory) is named after the GE graph."""
    match = _GRAPH_NUMBER.match(model)
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class GraphFile:
    path: Path
    name: GraphFileName


@dataclass(frozen=True)
class Unrecognized:
    """A file that looks like part of the dump but cannot be used, and why."""

    path: Path
    reason: str


def in_rank_directory(path: Path) -> bool:
    """Does the path lie in a `worldsize{W}_[global_]rank{R}` directory (its rank read from it, not from a device)?"""
    return rank_of(path.parts) is not None


def _ge_record(kind: FileKind, path: Path, parts: tuple[str, ...], name: GeFileName) -> DumpFile:
    rank, step, model, run, device, model_id = ge_place(parts)
    return DumpFile(
        side=Side.GE,
        kind=kind,
        path=path,
        rank=rank,
        token=step,
        model=model,
        run=run,
        op_type=name.op_type,
        op_name=name.op_name,
        io=None,
        index=None,
        timestamp=name.timestamp,
        name=name,
        device=device,
        model_id=model_id,
    )


def _fx_record(
    kind: FileKind, path: Path, parts: tuple[str, ...], name: FxFileName, token_base: Optional[int]
) -> Union[DumpFile, Unrecognized]:
    place = fx_place(parts, token_base)
    if isinstance(place, str):
        return Unrecognized(path, place)
    rank, token, graph = place
    return DumpFile(
        side=Side.FX,
        kind=kind,
        path=path,
        rank=rank,
        token=token,
        model=graph,
        run=graph,
        op_type=name.target,
        op_name=name.node,
        io=name.io,
        index=name.index,
        timestamp=int(name.timestamp) if name.timestamp.isdigit() else None,
        name=name,
    )


def _acl_record(path: Path, parts: tuple[str, ...], name: AclFileName) -> Union[DumpFile, Unrecognized]:
    rank = acl_rank(parts)
    if isinstance(rank, str):
        return Unrecognized(path, rank)
    return DumpFile(
        side=Side.ACL,
        kind=FileKind.ACL_PT,
        path=path,
        rank=rank,
        token=name.counter,
        model=ACL_MODEL,
        run=None,
        op_type=None,
        op_name=name.node,
        io=IO.OUTPUT,
        index=0,
        timestamp=None,
        name=name,
        device=name.device,
    )


def classify_name(name: str) -> Optional[FileKind]:
    """The kind of dump file a name is (before parsing it), None for files that are not dumps."""
    if name == MAPPING_FILE or name.startswith("."):
        return None
    if name.endswith(ACL_SUFFIX):
        return FileKind.ACL_PT
    if parse_graph_file_name(name) is not None:
        return FileKind.GRAPH
    if name.endswith("_min_max.npy"):
        return FileKind.FX_MIN_MAX_NPY
    if name.endswith(".npy"):
        return FileKind.FX_NPY
    if name.endswith("_min_max.npz"):
        return FileKind.GE_MIN_MAX_NPZ
    if name.endswith(".csv"):
        return FileKind.GE_STATS_CSV if name.count(".") >= 4 or is_hashed_name(name) else None
    if name.endswith(_IGNORED_SUFFIXES):
        return None
    if is_hashed_name(name) or name.count(".") >= 3:
        return FileKind.GE_BINARY
    return None


def locate(
    path: Union[str, Path],
    *,
    mapping: Optional[dict[str, str]] = None,
    fx_token_base: Optional[int] = None,
) -> Union[DumpFile, GraphFile, Unrecognized, None]:
    """Classify one file by its name and place it by its path; None for files that are not part of a dump.

    `mapping` is its directory's mapping.csv (read here when a hashed name needs it and none is given).
    """
    path = path if isinstance(path, Path) else Path(path)  # Path(a_path) re-parses the whole path
    kind = classify_name(path.name)
    if kind is None:
        return None
    return locate_classified(path, path.name, kind, path.parent.parts, mapping, fx_token_base)


def locate_classified(
    path: Path,
    name: str,
    kind: FileKind,
    parts: tuple[str, ...],
    mapping: Optional[dict[str, str]],
    fx_token_base: Optional[int],
) -> Union[DumpFile, GraphFile, Unrecognized]:
    """`locate` for a file already classified, with its directory's `parts` (computed once per directory)."""
    try:
        if kind is FileKind.GRAPH:
            return GraphFile(path, parse_graph_file_name(name))  # type: ignore[arg-type]
        if kind is FileKind.ACL_PT:
            return _acl_record(path, parts, parse_acl_file_name(name))
        if kind in (FileKind.FX_NPY, FileKind.FX_MIN_MAX_NPY):
            return _fx_record(kind, path, parts, parse_fx_file_name(name), fx_token_base)
        if is_hashed_name(name):
            mapping = mapping if mapping is not None else read_mapping(path.parent)
            if not mapping:
                raise NameParseError(path, f"hashed long name but no {MAPPING_FILE} beside it")
        resolved = resolve_ge_file_name(name, mapping or {})
        return _ge_record(_GE_KINDS[resolved.kind], path, parts, resolved)
    except DumpError as exc:
        return Unrecognized(path, exc.message)
