"""What GE dumps under the dump options torchair wrote: the harness's own reading of GE's selection, so that the
synthetic GE side holds only the ops a real GE would have dumped.

torchair 2.14 (`_set_dump_options_json`, before the graph is loaded) writes
`ge_dump_data_json/dump_options_worldsize{N}_rank{r}_pid{pid}.json` in the conversion run's working directory
(`ge/`): `{"dump": {..., "dump_list": [{"model_name": <GE graph name>, "layer": [...]}]}}`, `layer` holding the
words of `dump_config.dump_layer` and the op *types* of the ops marked by `torchair.scope.data_dump()`. GE
(hicann/ge `DumpManager::SetDumpList`, `DumpProperties::IsNeedDump`, `DavinciModel::OpNeedDump`) then dumps an op
when its *name* (or an original op name) is a layer of an entry naming its model, or of an entry without a model
name; a model no entry names is not dumped; an entry without layers, or no dump_list, dumps everything.
Written from GE's source, not from tcmp's reader.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

OPTIONS_DIR = "ge_dump_data_json"


def options_file(ge_dir: Path) -> Optional[Path]:
    """The one options file the conversion run wrote (None: torchair wrote none, e.g. torchair 2.5.1)."""
    found = sorted((ge_dir / OPTIONS_DIR).glob("dump_options_*.json"))
    if len(found) > 1:
        raise RuntimeError(f"{ge_dir}: {len(found)} dump options files, the conversion run writes one")
    return found[0] if found else None


def dumped_names(ge_dir: Path, graph_name: str) -> Optional[frozenset]:
    """The op names GE dumps in `graph_name`; None: all of them."""
    path = options_file(ge_dir)
    if path is None:
        return None
    dump_list = json.loads(path.read_text())["dump"].get("dump_list") or []
    if not dump_list:
        return None
    by_model: dict = {}
    for entry in dump_list:  # GE keeps one layer set per model name, the last given
        by_model[entry.get("model_name", "")] = frozenset(entry.get("layer", []))
    if "" in by_model:
        return by_model[""] or None
    if graph_name not in by_model:
        return frozenset()
    return by_model[graph_name] or None
