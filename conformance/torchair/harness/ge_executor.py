"""The GE executor behind the stubbed `torchair.core._torchair.TorchNpuGraphBase` (runs in torchair's process).

When a compiled model runs, torchair loads its GE graph into the executor and calls `run` once per step. This
executor saves what GE would have received — the serialized graph once, the input tensors of every run — for the
GE dump writer, and returns outputs computed by the harness's interpreter, so the model runs on as it would on
an NPU.
"""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import torch

from . import ge_interp
from .ge_graph import graph_from_proto, read_model_bytes
from .run_inputs import save_inputs

_TORCH_TO_NUMPY_VIA_FLOAT = {torch.bfloat16: ml_dtypes.bfloat16}


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    tensor = tensor.detach().cpu()
    if tensor.dtype in _TORCH_TO_NUMPY_VIA_FLOAT:
        return tensor.float().numpy().astype(_TORCH_TO_NUMPY_VIA_FLOAT[tensor.dtype])
    return tensor.numpy().copy()


def to_torch(array: np.ndarray) -> torch.Tensor:
    if array.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(array.astype(np.float32)).to(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(array))


class RecordingExecutor:
    def __init__(self, out_dir: Path, ir) -> None:
        self.out_dir = Path(out_dir)
        self.ir = ir
        self.graphs: dict = {}
        self.runs: dict[str, int] = {}

    def run(self, npu_graph, inputs: list, assigned_outputs: list) -> list:
        if any(t is not None for t in assigned_outputs):
            raise NotImplementedError(f"{npu_graph.name}: outputs assigned to inputs (ref data) are not modelled")
        name = npu_graph.name
        if name not in self.graphs:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            (self.out_dir / f"{name}.pb").write_bytes(npu_graph.serialized_model)
            self.graphs[name] = graph_from_proto(read_model_bytes(npu_graph.serialized_model, self.ir))
            self.runs[name] = 0
        run = self.runs[name]
        self.runs[name] += 1
        arrays = [to_numpy(t) for t in inputs]
        save_inputs(self.out_dir / name / f"run_{run}.npz", arrays)
        graph = self.graphs[name]
        return [to_torch(v) for v in ge_interp.net_outputs(graph, ge_interp.walk(graph, arrays))]
