"""Summary-only variants of a written dump tree, as users produce them to save disk:

- the msprobe appendix script (docs/formats.md, "min/max files"): every FX `.npy` becomes `{stem}_min_max.npy` holding
  `[min, max]`, every GE dump file `{name}_min_max.npz` with `inputs`/`outputs` rows of `[min, max]`; originals
  are deleted;
- GE stats mode (`dump_data="stats"`): every GE dump file becomes `{name}.csv` as CANN's AICPU or adump writer
  writes it (stats_csv.py).

The statistics are computed with plain numpy from the tensors as read; these are test inputs, whose expected
compare results come from the scenario's manifest, not from these files.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import numpy as np

from tcmp.schemas.dtypes import to_float32
from tcmp.schemas.dump_outline import discover
from tcmp.schemas.dump_tree import FileKind
from tcmp.schemas.errors import DumpError
from tcmp.schemas.ge_dump import open_ge_dump
from tcmp.schemas.synth.stats_csv import DEFAULT_SELECTION, AdumpStatsWriter, DumpedTensor, aicpu_stats_csv


def _min_max(array: np.ndarray) -> list[float]:
    values = to_float32(np.asarray(array)).astype(np.float64)
    return [float(values.min()), float(values.max())] if values.size else [0.0, 0.0]


def to_appendix_min_max(root: Path) -> int:
    """Convert every dump file under `root` like the appendix script does; returns the number converted."""
    converted = 0
    for f in discover(root).files:
        if f.kind is FileKind.FX_NPY:
            array = np.load(f.path, allow_pickle=True)
            if array.dtype.kind not in "biuf":
                continue  # the script would fail on None/str arguments too; leave them as they are
            np.save(str(f.path)[: -len(".npy")] + "_min_max", np.array(_min_max(array), dtype=array.dtype))
        elif f.kind is FileKind.GE_BINARY:
            try:
                with open_ge_dump(f.path) as reader:
                    parts = (("inputs", reader.dump.inputs), ("outputs", reader.dump.outputs))
                    rows = {io: [_min_max(reader.load(t).array) for t in items] for io, items in parts}
            except DumpError:  # a damaged file (or one with a tensor not dumped) stays as it is, as with the script
                continue
            arrays = {k: np.array(v, dtype=np.float64) for k, v in rows.items()}
            # numpy's stub types **kwds like its allow_pickle flag
            np.savez(str(f.path) + "_min_max.npz", **arrays)  # type: ignore[arg-type]
        else:
            continue
        f.path.unlink()
        converted += 1
    return converted


def to_stats_csv(
    root: Path, adump: Optional[AdumpStatsWriter] = None, selection: Sequence[str] = DEFAULT_SELECTION
) -> int:
    """Replace every GE dump file under `root` by the stats-mode CSV a CANN writer would have written: the AICPU
    writer's, or (`adump`) that adump writer's with the selected statistics (its state carries over from file to
    file, as in one process). Returns the number converted."""
    converted = 0
    for f in discover(root).ge_files:
        if f.kind is not FileKind.GE_BINARY:
            continue
        try:
            with open_ge_dump(f.path) as reader:
                tensors = []
                for t in reader.dump.tensors:
                    if not t.dumped:  # no payload: the runtime leaves the statistics of address 0 empty
                        tensors.append(DumpedTensor(t.io, t.index, t.size, t.data_type, t.format, t.shape, None))
                        continue
                    loaded = reader.load(t, nd=False)  # the writers summarize the device layout
                    values = None if loaded.raw else loaded.array
                    tensors.append(DumpedTensor(t.io, t.index, t.size, t.data_type, t.format, t.shape, values))
        except DumpError:  # damaged files stay as they are
            continue
        text = aicpu_stats_csv(tensors) if adump is None else adump.csv(tensors, selection)
        Path(str(f.path) + ".csv").write_text(text, encoding="utf-8")
        f.path.unlink()
        converted += 1
    return converted
