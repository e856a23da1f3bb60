"""The inputs of each GE run, as the stub executor received them: saved in torchair's process (torch), read by
the GE dump writer (tcmp's environment, no torch). bfloat16 is stored as float32 (exact) with the dtype names."""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np


def save_inputs(path: Path, arrays: list) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    stored = {
        f"input_{i}": (a.astype(np.float32) if a.dtype == ml_dtypes.bfloat16 else a) for i, a in enumerate(arrays)
    }
    np.savez(path, **stored)
    path.with_suffix(".json").write_text(json.dumps([str(a.dtype) for a in arrays]))


def load_inputs(path: Path) -> list:
    dtypes = json.loads(Path(path).with_suffix(".json").read_text())
    with np.load(path) as stored:
        return [
            stored[f"input_{i}"].astype(ml_dtypes.bfloat16) if name == "bfloat16" else stored[f"input_{i}"]
            for i, name in enumerate(dtypes)
        ]
