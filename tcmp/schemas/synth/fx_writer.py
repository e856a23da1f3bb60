"""FX dump trees as torchair's `_NpuFxDumper` writes them, in every layout era (docs/formats.md, "FX dumps").

One `np.save` per positional argument and output of each FX node call: `{node}-{target}.INPUT.{i}[.{j}].{ts}.npy`
and `.OUTPUT.{k}.{ts}.npy`, one 20-digit UTC timestamp per call. List arguments get one file per element;
scalars and int lists become numeric arrays, None a pickled object array, strings a unicode array. bf16 tensors
are saved as float32, as torchair does since 2024-10.
"""

from __future__ import annotations

import enum
from pathlib import Path

import numpy as np

from tcmp.schemas.synth.model import FX_SAVE_DTYPE, ArgKind, ModelGraph, ModelValues, TensorRef

FX_BASE_TIMESTAMP = 20261129083000000000  # %Y%m%d%H%M%S%f


class FxEra(str, enum.Enum):
    """FX dump layouts, newest first; all but RANKED number their step directories from 1."""

    RANKED = "ranked"  # ≥ 2025-08: msprobe_fx_dump/worldsize{W}_global_rank{R}/gm_{ts}_dump/{step}/
    MSPROBE_DATA_DUMP = "msprobe_data_dump"  # 7.1.0: msprobe_fx_dump/data_dump/{step+1}/gm_{ts}_dump/
    CWD_DATA_DUMP = "cwd_data_dump"  # < 7.1.0: data_dump/{step+1}/gm_{ts}_dump/ under the working directory
    STEP_GM = "step_gm"  # 2024-03-19: {step+1}/gm_{ts}_dump/
    GM_STEP = "gm_step"  # 2023-10 … 2024-02: gm_{ts}_dump/{step+1}/

    @property
    def token_base(self) -> int:
        return 0 if self is FxEra.RANKED else 1


class FxWriter:
    def __init__(self, root: Path, era: FxEra, world_size: int = 1) -> None:
        if era is not FxEra.RANKED and world_size > 1:
            raise ValueError(f"the {era.value} FX layout has no rank directories; it cannot hold {world_size} ranks")
        self.root, self.era, self.world_size = Path(root), era, world_size
        self.calls = 0

    @property
    def dump_root(self) -> Path:
        """The directory a user passes as the golden path."""
        if self.era in (FxEra.RANKED, FxEra.MSPROBE_DATA_DUMP):
            return self.root / "msprobe_fx_dump"
        return self.root

    def step_dir(self, rank: int, graph: int, token: int) -> Path:
        gm = f"gm_{FX_BASE_TIMESTAMP + 1_000_000 * (rank * 100 + graph)}_dump"
        step = str(token + self.era.token_base)
        if self.era is FxEra.RANKED:
            return self.dump_root / f"worldsize{self.world_size}_global_rank{rank}" / gm / step
        if self.era is FxEra.MSPROBE_DATA_DUMP:
            return self.dump_root / "data_dump" / step / gm
        if self.era is FxEra.CWD_DATA_DUMP:
            return self.root / "data_dump" / step / gm
        if self.era is FxEra.STEP_GM:
            return self.root / step / gm
        return self.root / gm / step

    def write_token(self, rank: int, graph_number: int, token: int, graph: ModelGraph, values: ModelValues) -> None:
        directory = self.step_dir(rank, graph_number, token)
        directory.mkdir(parents=True, exist_ok=True)
        save_dtype = {
            TensorRef(op.name, i): FX_SAVE_DTYPE[d] for op in graph.ge_ops for i, d in enumerate(op.output_dtypes)
        }
        for node in graph.fx_nodes:
            for execution in range(node.repeat):
                self.calls += 1
                ts = FX_BASE_TIMESTAMP + token * 10_000_000 + self.calls * 17
                prefix = directory / node.key
                for i, arg in enumerate(node.args):
                    if arg.kind is ArgKind.TENSOR:
                        ref = arg.refs[0]
                        np.save(f"{prefix}.INPUT.{i}.{ts}.npy", values.tensors[ref].astype(save_dtype[ref]))
                    elif arg.kind is ArgKind.LIST:
                        for j, ref in enumerate(arg.refs):
                            np.save(f"{prefix}.INPUT.{i}.{j}.{ts}.npy", values.tensors[ref].astype(save_dtype[ref]))
                    elif arg.kind is ArgKind.NONE:
                        np.save(f"{prefix}.INPUT.{i}.{ts}.npy", np.array(None), allow_pickle=True)
                    else:  # scalars, int lists and strings: np.array(x), as the dumper's _as_numpy does
                        np.save(f"{prefix}.INPUT.{i}.{ts}.npy", np.array(arg.scalar))
                for k, (ref, dtype) in enumerate(zip(node.output_refs, node.output_dtypes)):
                    value = values.tensors[ref]
                    if execution:
                        value = values.repeats[(ref.op, execution)][ref.index]
                    np.save(f"{prefix}.OUTPUT.{k}.{ts}.npy", np.asarray(value).astype(dtype))
