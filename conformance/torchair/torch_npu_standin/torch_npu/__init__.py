"""A stand-in for the `torch_npu` package, so that torchair's Python code runs as it does beside torch_npu.

torchair switches several behaviours on `'torch_npu' in sys.modules` — its pattern fusion passes among them
(`patterns/add_rms_norm_cast.py`) — and converts torch_npu's `npu::` operators. The real torch_npu is a C++
bridge to the NPU and cannot load here, so this package provides only what torchair asks of it:

- the `npu::` operators the catalogue calls, each with torch_npu's name and schema (the arguments the catalogue
  passes; names and defaults as in torchair's converter docstrings), implemented on CPU (`_cpu_ops`), so dynamo
  captures them and torchair's own converters convert them; and those of torchair's pattern passes (the fused
  ones and what they replace: `_quant_ops`, torch_npu 2.14's schemas, CPU kernels from its documented formulas);
- `torch_npu.npu`: device id 0, a device name, the hf32 switches and the CANN version check torchair reads;
  the NPU graph capture of its aclgraph path, run on CPU (`npu/graphs.py`, `_C`), and `save_npugraph_tensor`,
  its aclgraph dump op, writing what torch_npu's NPU path writes with torch_npu's own code (`_save_op`);
- `Tensor.is_npu`, which torch_npu adds to torch's tensor class (False: every tensor here is a CPU tensor).

Nothing of torchair is replaced by it.
"""

import torch

from . import _C, _cpu_ops, _save_op, npu  # noqa: F401 — registering the operators is the import's purpose

__version__ = "standin"

# torch_npu binds its Python API straight to the operators (torch_npu/utils/custom_ops.py): no Python frame of
# torch_npu's own stands between the user's line and the op in a stack trace
npu_rms_norm = torch.ops.npu.npu_rms_norm
npu_add_rms_norm = torch.ops.npu.npu_add_rms_norm
npu_dtype_cast = torch.ops.npu.npu_dtype_cast
_npu_dtype_cast = torch.ops.npu._npu_dtype_cast
npu_fused_infer_attention_score = torch.ops.npu.npu_fused_infer_attention_score
npu_quantize = torch.ops.npu.npu_quantize
npu_dynamic_quant = torch.ops.npu.npu_dynamic_quant
npu_add_rms_norm_quant = torch.ops.npu.npu_add_rms_norm_quant
npu_add_rms_norm_dynamic_quant = torch.ops.npu.npu_add_rms_norm_dynamic_quant
npu_transpose_batchmatmul = torch.ops.npu.npu_transpose_batchmatmul


def get_npu_format(tensor):
    return 2  # ACL_FORMAT_ND: CPU tensors have no internal format


if not hasattr(torch, "npu"):  # torch_npu registers itself as torch's `npu` device module (converters read it)
    torch.npu = npu

if not hasattr(torch.Tensor, "is_npu"):
    torch.Tensor.is_npu = property(lambda self: self.device.type == "npu")


def npugraph_ex_backend(gm, example_inputs, **kwargs):
    """torch_npu's `npugraph_ex` dynamo backend (torch_npu/dynamo/__init__.py `_exec`): npugraph_ex's compiler
    with its mode set, the `options` of torch.compile passed on. npugraph_ex is the wheel's own package."""
    import npugraph_ex

    config = npugraph_ex.CompilerConfig()
    config.mode = "npugraph_ex"
    return npugraph_ex.get_npu_backend(compiler_config=config)(gm, example_inputs, **kwargs)


torch._dynamo.register_backend(npugraph_ex_backend, "npugraph_ex")
