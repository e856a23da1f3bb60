"""GE's dump options JSON (docs/formats.md, "Dump options"): which ops GE selects for its data dump.

torchair (2.14) writes `ge_dump_data_json/dump_options_worldsize{N}_rank{r}_pid{pid}.json` in the run's working
directory and hands it to GE (`AclmdlSetDump`); users pass the same form as an acl.json (`dump_config_path`).
Both hold `dump.dump_list`: `{model_name, layer: [...]}` entries. GE's selection, reproduced here
(`DumpManager::SetDumpList`, `DumpProperties::IsNeedDump`, `DavinciModel::OpNeedDump`):

- no `dump_list` (or an empty one): every op of every model is dumped;
- an entry with an empty `model_name` applies its layers to every model, and then decides alone;
- otherwise a model is dumped only when an entry names it (GE's root graph name or its model name); an entry
  without layers dumps the whole model;
- a layer is an op *name*, matched exactly, against the op's name or one of its `_datadump_original_op_names`.

torchair's `torchair.scope.data_dump()` puts the op *types* of the ops in the scope into `layer`; GE still
compares them with op names, so what is dumped is the ops whose name equals such a type. tcmp follows GE.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tcmp.schemas import SLOTS
from tcmp.schemas.errors import DumpError

OPTIONS_DIR = "ge_dump_data_json"
OPTIONS_FILE = re.compile(r"dump_options_worldsize(\d+)_rank(\d+)_pid(\d+)\.json")
MAX_OPTIONS_BYTES = 4 << 20  # a dump list of 100k op names is well under this
MAX_DEPTH = 16  # the form nests 4 deep; a deeper file is not a dump options file
LEVELS_ABOVE = 4  # how far above the dump path tcmp looks for ge_dump_data_json/ (the run's cwd is usually above)


class DumpOptionsError(DumpError):
    """A dump options file that cannot be used: named with its path and what is wrong."""


@dataclass(frozen=True, **SLOTS)
class ModelLayers:
    """One `dump_list` entry: a model and its layers (empty: the whole model)."""

    model_name: str  # "" applies to every model
    layers: frozenset[str]


@dataclass(frozen=True, **SLOTS)
class DumpSelection:
    """What GE dumps under one options file."""

    path: Path
    entries: tuple[ModelLayers, ...]  # empty: everything is dumped

    def layers_for(self, model_names: Sequence[str]) -> Optional[frozenset[str]]:
        """The op names GE dumps in the model known by `model_names` (root graph name, model name); None when
        GE dumps all of its ops. An empty set: GE dumps none (the model is in no entry)."""
        if not self.entries:
            return None
        every = [e for e in self.entries if not e.model_name]
        if every:  # GE keeps one set per model name: the last entry of a name wins
            return every[-1].layers or None
        named = {e.model_name: e.layers for e in self.entries}
        for name in model_names:
            if name in named:
                return named[name] or None
        return frozenset()


def selects(layers: Optional[frozenset[str]], op_name: str, original_names: Iterable[str] = ()) -> bool:
    """GE's per-op test: its name or one of its original op names is a layer (None: everything is dumped)."""
    if layers is None:
        return True
    return op_name in layers or any(name in layers for name in original_names)


def _depth(text: str) -> int:
    """The deepest nesting of `[`/`{` outside strings, without parsing (json.loads recurses)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_DEPTH:
                return deepest
        elif ch in "]}":
            depth -= 1
    return deepest


def read_dump_options(path: Path) -> DumpSelection:
    """Read one dump options file (torchair's or an acl.json); DumpOptionsError when it cannot be used."""
    try:
        size = path.stat().st_size
        if size > MAX_OPTIONS_BYTES:
            raise DumpOptionsError(path, f"{size} bytes: larger than a dump options file can be ({MAX_OPTIONS_BYTES})")
        with path.open("rb") as fh:
            data = fh.read(MAX_OPTIONS_BYTES + 1)
    except OSError as exc:
        raise DumpOptionsError(path, f"cannot be read: {exc.strerror or exc}") from exc
    if len(data) > MAX_OPTIONS_BYTES:  # grew after stat
        raise DumpOptionsError(path, f"larger than a dump options file can be ({MAX_OPTIONS_BYTES} bytes)")
    text = data.decode("utf-8", errors="replace")
    if _depth(text) > MAX_DEPTH:
        raise DumpOptionsError(path, f"nested deeper than {MAX_DEPTH} levels: not a dump options file")
    try:
        root = json.loads(text)
    except ValueError as exc:
        raise DumpOptionsError(path, f"not JSON: {exc}") from exc
    return DumpSelection(path, _entries(root, path))


def _entries(root: object, path: Path) -> tuple[ModelLayers, ...]:
    if not isinstance(root, dict) or not isinstance(root.get("dump"), dict):
        raise DumpOptionsError(path, "expected an object with a \"dump\" object (torchair's or acl.json's form)")
    dump_list = root["dump"].get("dump_list", [])
    if not isinstance(dump_list, list):
        raise DumpOptionsError(path, '"dump.dump_list" is not a list')
    entries = []
    for k, entry in enumerate(dump_list):
        if not isinstance(entry, dict):
            raise DumpOptionsError(path, f'"dump.dump_list[{k}]" is not an object')
        model_name = entry.get("model_name", "")
        layers = entry.get("layer", [])
        if not isinstance(model_name, str):
            raise DumpOptionsError(path, f'"dump.dump_list[{k}].model_name" is not a string')
        if not isinstance(layers, list) or not all(isinstance(x, str) for x in layers):
            raise DumpOptionsError(path, f'"dump.dump_list[{k}].layer" is not a list of op names')
        entries.append(ModelLayers(model_name, frozenset(layers)))
    return tuple(entries)


@dataclass(frozen=True, **SLOTS)
class OptionsFile:
    path: Path
    world_size: int
    rank: int
    pid: int


def options_files(directory: Path) -> list[OptionsFile]:
    """torchair's options files in `directory`/ge_dump_data_json (none when it does not exist)."""
    found = []
    try:
        children = sorted((directory / OPTIONS_DIR).iterdir())
    except OSError:
        return []
    for child in children:
        match = OPTIONS_FILE.fullmatch(child.name)
        if match and child.is_file():
            found.append(OptionsFile(child, *(int(g) for g in match.groups())))
    return found


def find_dump_options(dump_path: Path, cwd: Path) -> list[OptionsFile]:
    """The options files of the run: in `ge_dump_data_json/` of the dump path or of up to LEVELS_ABOVE directories
    above it (the nearest that has any), else of the working directory."""
    for directory in (dump_path, *list(dump_path.parents)[:LEVELS_ABOVE]):
        found = options_files(directory)
        if found:
            return found
    return options_files(cwd)


def for_rank(files: Sequence[OptionsFile], rank: Optional[int]) -> Optional[OptionsFile]:
    """The rank's own file (rank 0 for a dump without rank directories); of several (several runs in one working
    directory), the newest."""
    own = [f for f in files if f.rank == (rank or 0)]
    if not own:
        return None
    return max(own, key=lambda f: (_mtime(f.path), f.pid))


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
