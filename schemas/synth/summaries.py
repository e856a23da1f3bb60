"""Summary-only variants of a written dump tree, as users produce them to save disk:

- the msprobe appendix script (spec/dump-formats.md §6): every FX `.npy` becomes `{stem}_min_max.npy` holding
  `[min, max]`, every GE dump file `{name}_min_max.npz` with `inputs`/`outputs` rows of `[min, max]`; originals
  are deleted;
- GE stats mode (`dump_data="stats"`): every GE dump file becomes `{name}.csv` with the runtime's columns.

The statistics are computed with plain numpy from the tensors as read; these are test inputs, whose expected
compare results come from the scenario's manifest, not from these files.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from tcmp.schemas.dtypes import to_float32
from tcmp.schemas.errors import DumpError
from tcmp.schemas.ge_dump import open_ge_dump
from tcmp.schemas.layout import FileKind, discover
from tcmp.schemas.stats_files import STATS_COLUMNS


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
            np.savez(str(f.path) + "_min_max.npz", **{k: np.array(v, dtype=np.float64) for k, v in rows.items()})
        else:
            continue
        f.path.unlink()
        converted += 1
    return converted


def to_stats_csv(root: Path) -> int:
    """Replace every GE dump file under `root` by the stats-mode CSV the runtime would have written."""
    converted = 0
    for f in discover(root).ge_files:
        if f.kind is not FileKind.GE_BINARY:
            continue
        try:
            with open_ge_dump(f.path) as reader:
                lines = []
                for t in reader.dump.tensors:
                    described = [t.io.value.capitalize(), t.index, t.size, t.dtype_name, t.format_name,
                                 "[" + ",".join(map(str, t.nd_shape)) + "]"]  # fmt: skip
                    if not t.dumped:  # the runtime leaves the statistics of a device address 0 empty
                        lines.append(described + [""] * 7)
                        continue
                    values = to_float32(np.asarray(reader.load(t).array)).astype(np.float64).reshape(-1)
                    finite = values[np.isfinite(values)]
                    lines.append([
                        *described,
                        repr(float(finite.max())) if finite.size else "nan",
                        repr(float(finite.min())) if finite.size else "nan",
                        repr(float(finite.mean())) if finite.size else "nan",
                        values.size, int(np.isnan(values).sum()), int(np.isneginf(values).sum()),
                        int(np.isposinf(values).sum()),
                    ])  # fmt: skip
        except DumpError:  # damaged files stay as they are
            continue
        with open(str(f.path) + ".csv", "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(STATS_COLUMNS)
            writer.writerows(lines)
        f.path.unlink()
        converted += 1
    return converted
