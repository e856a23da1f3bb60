"""`torch.ops.npu.save_npugraph_tensor` with torch_npu 2.14's schema and the file its NPU path writes.

torchair's aclgraph dump (`_acl_concrete_graph/utils.py` `insert_save_npugraph_tensor`) puts one call per FX node
output into the graph. torch_npu (`torch_npu/npu/graphs.py`) implements it for an NPU tensor as: build the file
path now (`_build_save_npugraph_tensor_path(save_path, device_index, overwrite)`: `{stem}_device_{d}_{k}{suffix}`,
k a per-path counter), copy the tensor to a contiguous CPU tensor on a side stream, and launch a host function
that rebuilds it from the copied bytes (`torch.frombuffer(buffer, dtype).reshape(shape)`,
`_materialize_npugraph_tensor_arg`) and `torch.save`s it (`_save_callback_pending`). Under graph capture the host
function runs at each replay, with the path fixed at capture.

No torch_npu code is in this repository: the path builder and the host function are taken at run time from the
torch-npu wheel's own `torch_npu/npu/graphs.py` (extracted beside torchair by the harness, harness/env_build.py),
their source compiled into a small namespace, and called as the NPU path calls them, with device index 0. What
they cannot take from the wheel is the C++ `_launch_host_func_pending`, which turns the pointer spec
(`host_tensor_ptr`) into the buffer spec (`host_tensor_buffer`) the host function reads: here the buffer is the
bytes of the contiguous CPU copy.
"""

from __future__ import annotations

import ast
import os
import sys
import threading
from datetime import datetime
from pathlib import Path

import torch
from torch.fx.node import has_side_effect

WHEEL_GRAPHS = Path("torch_npu_wheel") / "npu" / "graphs.py"  # under a directory of sys.path (the torchair root)
_TAKEN = (
    "_build_save_npugraph_tensor_path",
    "_materialize_npugraph_tensor_arg",
    "_save_callback_pending",
    "_save_npugraph_tensor_lock",
    "_save_npugraph_tensor_counters",
    "_NPUGRAPH_TENSOR_BUFFER_SPEC_MARKER",
)


def _wheel_namespace():
    """None when the wheel's graphs.py has no save_npugraph_tensor (torch-npu 2.5.1: its torchair has no
    aclgraph dump either)."""
    for entry in sys.path:
        source_file = Path(entry) / WHEEL_GRAPHS
        if source_file.is_file():
            break
    else:
        return None
    tree = ast.parse(source_file.read_text(), filename=str(source_file))
    taken = []
    for node in tree.body:
        is_function = isinstance(node, ast.FunctionDef) and node.name in _TAKEN
        is_global = isinstance(node, ast.Assign) and any(getattr(t, "id", None) in _TAKEN for t in node.targets)
        if is_function or is_global:
            taken.append(node)
    names = {n.name if isinstance(n, ast.FunctionDef) else n.targets[0].id for n in taken}
    if not names:  # torch-npu 2.5.1's graphs.py: no save_npugraph_tensor at all
        return None
    if names != set(_TAKEN):
        raise RuntimeError(f"stand-in: {source_file} lacks {sorted(set(_TAKEN) - names)}")
    namespace = {"os": os, "threading": threading, "datetime": datetime, "torch": torch}
    exec(compile(ast.Module(body=taken, type_ignores=[]), str(source_file), "exec"), namespace)
    return namespace


_wheel = _wheel_namespace()
DEVICE_INDEX = 0  # torch.npu.current_device() of the stand-in
# every file written, in order (the harness notes per step which files a step wrote: the truth of which step a
# file holds when a later save writes over it)
WRITTEN: list = []


def _buffer_spec(tensor: torch.Tensor):
    """What torch_npu's host-function launcher hands the callback: the bytes of the contiguous CPU copy."""
    cpu = tensor.detach().to("cpu", memory_format=torch.contiguous_format)
    data = bytearray(cpu.reshape(-1).view(torch.uint8).numpy().tobytes()) if cpu.numel() else bytearray()
    return (_wheel["_NPUGRAPH_TENSOR_BUFFER_SPEC_MARKER"], data, tuple(cpu.shape), cpu.dtype)


def _host_function(inputs, final_path):
    """The host function's work, run when the NPU would run it: copy now, save from the copied bytes."""

    def run():
        spec = [_buffer_spec(t) for t in inputs] if isinstance(inputs, (list, tuple)) else _buffer_spec(inputs)
        _wheel["_save_callback_pending"](spec, final_path)
        WRITTEN.append(final_path)

    return run


def _final_path(save_path, overwrite):
    return _wheel["_build_save_npugraph_tensor_path"](save_path, DEVICE_INDEX, overwrite)


def _save(input, save_path=None, overwrite=False):
    if not isinstance(input, torch.Tensor):
        return
    _host_function(input, _final_path(save_path, overwrite))()


def _save_list(input, save_path=None, overwrite=False):
    _host_function(list(input), _final_path(save_path, overwrite))()


def is_save_op(func) -> bool:
    if _lib is None:
        return False
    return func in (torch.ops.npu.save_npugraph_tensor.default, torch.ops.npu.save_npugraph_tensor.tensor_list)


def save_at_replay(func, args, kwargs):
    """Under capture: the path is built now, the save runs at every replay (npu/graphs.py)."""
    inputs = args[0] if func is torch.ops.npu.save_npugraph_tensor.default else list(args[0])
    path = _final_path(kwargs.get("save_path"), kwargs.get("overwrite", False))
    return _host_function(inputs, path)


def _register():
    lib = torch.library.Library("npu", "FRAGMENT")
    lib.define("save_npugraph_tensor(Tensor input, *, str? save_path=None, bool overwrite=False) -> ()")
    lib.define("save_npugraph_tensor.tensor_list(Tensor[] input, *, str? save_path=None, bool overwrite=False) -> ()")
    lib.impl("save_npugraph_tensor", _save, "CPU")
    lib.impl("save_npugraph_tensor.tensor_list", _save_list, "CPU")
    has_side_effect(torch.ops.npu.save_npugraph_tensor.default)
    has_side_effect(torch.ops.npu.save_npugraph_tensor.tensor_list)

    @torch.library.register_fake("npu::save_npugraph_tensor")
    def _save_fake(input, *, save_path=None, overwrite=False):
        pass

    @torch.library.register_fake("npu::save_npugraph_tensor.tensor_list")
    def _save_list_fake(input, *, save_path=None, overwrite=False):
        pass

    return lib


_lib = _register() if _wheel is not None else None
