"""The FX data dump as the harness knows it: every .npy file torchair's `_NpuFxDumper` wrote, by step.

The harness reads its own FX dump with its own few lines (not tcmp's readers): file names are
`{node}-{target}.{INPUT|OUTPUT}.{index}[.{sub}].{timestamp}.npy` (fx_dumper.py); the step is the directory the
dumper chose, whose layout depends on the torchair version (2.14: `worldsize1_global_rank0/graph_N/{step}/`,
steps from 0; before 2025-05: `data_dump/{step}/gm_{ts}_dump/`, steps from 1).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

_NAME = re.compile(r"^(?P<key>.+)\.(?P<io>INPUT|OUTPUT)\.(?P<index>\d+(?:\.\d+)*)\.(?P<ts>\d{14,})\.npy$")


@dataclass(frozen=True)
class FxFile:
    path: Path
    step: int  # the GE run (0-based) this file belongs to
    key: str  # "{node}-{target}", e.g. "mul-aten.mul.Tensor"
    io: str  # "INPUT" | "OUTPUT"
    index: tuple[int, ...]  # (i,) or (i, j) for an element of a list argument

    @property
    def node(self) -> str:
        return self.key.split("-", 1)[0]

    @property
    def target(self) -> str:
        return self.key.split("-", 1)[1]

    @property
    def tensor_name(self) -> str:
        """As `_fx_tensor_name` would spell it: `{key}.{io}.{index}`."""
        return f"{self.key}.{self.io}.{'.'.join(map(str, self.index))}"

    def load(self) -> np.ndarray:
        return np.load(self.path, allow_pickle=True)


def _step_of(path: Path, root: Path) -> int:
    """The 0-based step of a file from its directories."""
    parts = path.relative_to(root).parts[:-1]
    if parts and parts[0] == "data_dump":  # data_dump/{step from 1}/gm_{ts}_dump/
        return int(parts[1]) - 1
    return int(parts[-1])  # worldsize1_global_rank0/graph_N/{step from 0}/


def fx_files(root: Path) -> list[FxFile]:
    out = []
    for path in sorted(Path(root).rglob("*.npy")):
        match = _NAME.match(path.name)
        if match is None:
            raise ValueError(f"an FX dump file name the harness does not know: {path}")
        out.append(
            FxFile(
                path=path,
                step=_step_of(path, Path(root)),
                key=match["key"],
                io=match["io"],
                index=tuple(int(i) for i in match["index"].split(".")),
            )
        )
    return out


def is_numeric(value: np.ndarray) -> bool:
    return value.dtype.kind in "fiub"


def element(value: np.ndarray, path: tuple) -> Optional[np.ndarray]:
    """The element `path` of an FX output file that holds a nested value: a stacked array (a list of tensors
    saved by np.save) or a pickled dict; None when the file cannot hold it."""
    for part in path:
        if value.dtype == object and value.shape == ():
            value = value.item()
        if isinstance(value, dict):
            if part not in value:
                return None
            value = value[part]
        elif isinstance(value, (list, tuple)) or (isinstance(value, np.ndarray) and value.ndim > 0):
            index = int(part)
            if index >= len(value):
                return None
            value = value[index]
        else:
            return None
        if not isinstance(value, np.ndarray):
            value = np.asarray(value.detach().cpu().float().numpy() if hasattr(value, "detach") else value)
    return value if is_numeric(value) else None
