"""The catalogue: small models, each exercising one way torchair's converter or dumpers shape what a compare sees.

Runs in the harness's torch environment, after torch_npu (the stand-in) and torchair are imported. Each model is
built from a fixed seed and fed inputs made from (model, step), so the two runs of a model (the GE conversion and
the FX data dump, in separate processes) see the same weights and the same inputs, as a user's two runs would.

`fault_op_types` name the GE op the harness corrupts in the GE dump (ge_dump.fault_op picks one with a named
output); its float outputs are changed and nothing else, so it must be the first divergence of its token.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch_npu  # the stand-in: provides torch.ops.npu.*
from torch._C import DispatchKey
from torch._ops import HigherOrderOperator
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import ProxyTorchDispatchMode, track_tensor_tree


@dataclass(frozen=True)
class CatalogueModel:
    name: str
    exercises: str  # the torchair behaviour this model puts in front of the matcher
    build: Callable[[], torch.nn.Module]
    make_inputs: Callable[[torch.Generator, int], tuple]  # (generator, step) -> forward arguments
    fault_op_types: tuple[str, ...]  # GE op types to fault, in preference (see ge_dump.fault_op)
    steps: int = 2
    dynamic: bool = False
    config: dict = field(default_factory=dict)  # CompilerConfig attribute path -> value
    min_version: tuple = ()  # (major, minor): older torchair cannot convert the model ...
    min_version_why: str = ""  # ... because of this
    # the pattern-fused FX targets torchair 2.14's pattern pass must put into the converted graph (exactly these;
    # older torchair has no pattern pass and must fuse nothing) — checked, so a model that stops triggering its
    # pattern is a harness error, not a silent pass
    fuses: tuple[str, ...] = ()
    # register the patterns torchair registers for this mode too (pattern_util._apply_pattern_passes), as a
    # process that compiled a graph in that mode first has them: the registration is process-wide
    patterns_of_mode: str = ""

    def inputs(self, step: int) -> tuple:
        generator = torch.Generator().manual_seed(zlib.crc32(f"{self.name}/{step}".encode()))
        return self.make_inputs(generator, step)


def _randn(generator: torch.Generator, *shape: int, dtype=torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=generator).to(dtype)


class _Fn(torch.nn.Module):
    """A model that is one function plus fixed weights (weights become GE graph inputs, as parameters do)."""

    def __init__(self, fn: Callable, **weights: torch.Tensor) -> None:
        super().__init__()
        self.fn = fn
        for name, value in weights.items():
            self.register_parameter(name, torch.nn.Parameter(value, requires_grad=False))

    def forward(self, *args):
        return self.fn(self, *args)


def _weights(seed: int, **shapes) -> dict:
    generator = torch.Generator().manual_seed(seed)
    out = {}
    for name, (shape, dtype) in shapes.items():
        if dtype in (torch.int32, torch.int64):
            out[name] = torch.randint(-3, 4, shape, generator=generator).to(dtype)
        else:
            out[name] = (torch.randn(*shape, generator=generator) * 0.3).to(dtype)
    return out


def _positive(weights: dict, *names: str) -> dict:
    """Scales that divide (quantization): |w| + 0.5, never near zero."""
    return {k: (v.abs() + 0.5).to(v.dtype) if k in names else v for k, v in weights.items()}


# ---------------------------------------------------------------------------------------------------------------
# The model bodies


class Attention(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.q = torch.nn.Linear(16, 16)
        self.k = torch.nn.Linear(16, 16)
        self.v = torch.nn.Linear(16, 16)
        self.requires_grad_(False)

    def forward(self, x, mask):
        q, k, v = self.q(x), self.k(x), self.v(x)
        scores = torch.matmul(q, k.transpose(-1, -2)) / 4.0
        scores = scores.masked_fill(mask, -1e4)
        return torch.matmul(torch.softmax(scores, dim=-1), v) + x


def _rms_norm_decomposed(m, x):
    x32 = x.float()
    variance = x32.pow(2).mean(-1, keepdim=True)
    normed = x32 * torch.rsqrt(variance + 1e-6)
    return m.w * normed.to(torch.float16)


def _npu_rms_norm(m, x, residual):
    y, _rstd = torch_npu.npu_rms_norm(x, m.w, 1e-6)
    return y + residual


def _add_rms_norm_cast(m, x1, x2):
    y, _rstd, x = torch_npu.npu_add_rms_norm(x1, x2, m.w)
    return y.to(torch.float32) * 2.0, y, x


def _norm_block(x, residual, w, proj):
    """A decoder-ish block: residual add + RMS norm, the normed tensor cast up to float32 for a projection."""
    y, _rstd, h = torch_npu.npu_add_rms_norm(x, residual, w)
    mixed = (y.to(torch.float32) @ proj).to(torch.float16)
    return mixed + y, h


def _add_rms_norm_cast_x2(m, x, residual):
    a, h = _norm_block(x, residual, m.w1, m.p1)
    b, h2 = _norm_block(a, h, m.w2, m.p2)
    return b, h2


def _add_rms_norm_cast_view(m, x1, x2):
    y, _rstd, x = torch_npu.npu_add_rms_norm(x1, x2, m.w)
    h = y.size(-1)
    return y.view(-1, h).to(torch.float32) * 2.0, y, x


def _add_rms_norm_dynamic_quant(m, x1, x2):
    y, _rstd, x = torch_npu.npu_add_rms_norm(x1, x2, m.w)
    q, scale = torch_npu.npu_dynamic_quant(y, smooth_scales=m.smooth)
    return q, scale * 2.0, x


def _add_rms_norm_dynamic_quant_flatten(m, x1, x2):
    y, _rstd, x = torch_npu.npu_add_rms_norm(x1, x2, m.w)
    q, scale = torch_npu.npu_dynamic_quant(y.flatten(0, 1))
    return q, scale.view(-1, 1), x


def _add_rms_norm_quant(m, x1, x2):
    y, _rstd, x = torch_npu.npu_add_rms_norm(x1, x2, m.w)
    q = torch_npu.npu_quantize(y, m.scales, m.offsets, 1, -1, True)  # dtype 1: torch.int8's ScalarType number
    return q, x * 2.0


def _transpose_batchmatmul(m, x):
    return torch.bmm(x, m.w).transpose(0, 1) * 2.0


def _split(m, x):
    a, b, c = torch.split(x, [4, 4, 8], dim=-1)
    return a * b, c + 1.0


def _max_dim(m, x):
    values, indices = x.max(dim=-1)
    return values * 2.0, indices


def _views(m, x):
    b, s, h = x.shape
    heads = x.view(b, s, 2, h // 2).permute(0, 2, 1, 3)  # (b, 2, s, h/2)
    flat = heads.reshape(b * 2, s, h // 2)
    return torch.bmm(flat, flat.transpose(1, 2)).view(b, 2, s, s).sum(1)


def _transpose_t(m, x):
    y = x.t() @ m.w  # (16, 8) @ (8, 8)
    return y.transpose(0, 1) * 3.0


def _dynamic(m, x):
    y = torch.relu(x @ m.w)
    return y * x.shape[0]


def _noop_slice_expand(m, x):
    y = torch.tanh(x)
    z = y[:, : y.shape[1]]  # a full slice: remove_noop_ops drops it
    w = z.expand(y.shape[0], y.shape[1])  # an expand to its own shape: survives, its converter returns its input
    return w * 2.0


def _kwarg_attention(m, q, k, v, mask):
    out, _lse = torch_npu.npu_fused_infer_attention_score(
        q, k, v, atten_mask=mask, num_heads=2, scale=0.25, input_layout="BSH"
    )
    return out * 1.5


def _bf16(m, x):
    return torch.nn.functional.gelu(x @ m.w) + x


def _index_none(m, x, idx):
    return x[:, idx] * 2.0


def _read_twice(m, x):
    return (x + x) * torch.sigmoid(x)


def _returns_input(m, x):
    y = torch.relu(x) + 1.0
    return y.expand(4, 8) * 3.0  # the expand converter returns `y`, whose GE tensor then carries expand's name


# ---------------------------------------------------------------------------------------------------------------
# Custom ops: one returning (Tensor, Tensor[]), one returning a dict (a higher-order operator: torch operator
# schemas cannot return a dict)


@torch.library.custom_op("tcmp_harness::scale_and_halves", mutates_args=())
def scale_and_halves(x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    half = x.shape[-1] // 2
    return x * 2.0, [x[..., :half].clone(), x[..., half:].clone()]


@scale_and_halves.register_fake
def _scale_and_halves_fake(x):
    half = x.shape[-1] // 2
    return torch.empty_like(x), [x.new_empty((*x.shape[:-1], half)), x.new_empty((*x.shape[:-1], half))]


def _register_custom_converters() -> None:
    """torchair converters for the custom ops, built from torchair's GE op builders as a user would."""
    import torchair
    from torchair._ge_concrete_graph import ge_apis as ge
    from torchair.ge import DataType

    @torchair.register_fx_node_ge_converter(torch.ops.tcmp_harness.scale_and_halves.default)
    def _convert_scale_and_halves(x, meta_outputs=None):
        half = meta_outputs[1][0].size[-1]
        sizes = ge.Const([half, half], dtype=DataType.DT_INT64)
        halves = ge.SplitV(x, sizes, ge.Const(-1, dtype=DataType.DT_INT32), num_split=2)
        return ge.Mul(x, ge.Const(2.0, dtype=DataType.DT_FLOAT)), list(halves)

    @torchair.register_fx_node_ge_converter(scale_and_aux)
    def _convert_scale_and_aux(x, meta_outputs=None):
        return {
            "out": ge.Mul(x, ge.Const(2.0, dtype=DataType.DT_FLOAT)),
            "aux": ge.Add(x, ge.Const(1.0, dtype=DataType.DT_FLOAT)),
        }


class _ScaleAndAux(HigherOrderOperator):
    """A higher-order operator returning {"out": 2x, "aux": x + 1}: traced as one FX node whose value is a dict."""

    def __init__(self) -> None:
        super().__init__("tcmp_harness_scale_and_aux")

    def __call__(self, x):
        return super().__call__(x)


scale_and_aux = _ScaleAndAux()


def _scale_and_aux_eager(x):
    return {"out": x * 2.0, "aux": x + 1.0}


scale_and_aux.py_impl(DispatchKey.CompositeExplicitAutograd)(_scale_and_aux_eager)
scale_and_aux.fallthrough(DispatchKey.AutogradCPU)


@scale_and_aux.py_impl(ProxyTorchDispatchMode)
def _scale_and_aux_proxy(mode, x):
    out = scale_and_aux(x)
    proxy = mode.tracer.create_proxy("call_function", scale_and_aux, (mode.tracer.unwrap_proxy(x),), {})
    return track_tensor_tree(out, proxy, constant=None, tracer=mode.tracer)


@scale_and_aux.py_impl(FakeTensorMode)
def _scale_and_aux_fake(mode, x):
    with mode:
        return _scale_and_aux_eager(x)


@scale_and_aux.py_functionalize_impl
def _scale_and_aux_functional(ctx, x):
    with ctx.redispatch_to_next():
        out = scale_and_aux(ctx.unwrap_tensors(x))
    return ctx.wrap_tensors(out)


@torch._dynamo.allow_in_graph
def _scale_and_aux_call(x):
    # dynamo cannot return a dict from a graph call; AOT traces through this and keeps the operator's dict node
    parts = scale_and_aux(x)
    return parts["out"], parts["aux"]


def _custom_dict(m, x):
    out, aux = _scale_and_aux_call(x)
    return out + 1.0, aux * out


def _custom_tuple_list(m, x):
    scaled, (lo, hi) = torch.ops.tcmp_harness.scale_and_halves(x)
    return scaled + 1.0, lo * hi


def _cond_branches(m, x):
    def then_branch(x):
        return torch.relu(x * 2.0) + 1.0

    def else_branch(x):
        return torch.sigmoid(x) - 1.0

    return torch.cond(x.sum() > 0, then_branch, else_branch, (x,)) * 3.0


def _while_loop(m, x, i):
    def cond_fn(i, x):
        return i < 3

    def body_fn(i, x):
        return i + 1, torch.tanh(x * 1.5) + 0.5

    from torch._higher_order_ops.while_loop import while_loop

    _, out = while_loop(cond_fn, body_fn, (i, x))
    return out * 2.0


# ---------------------------------------------------------------------------------------------------------------


def _fp16(g, *shape):
    return _randn(g, *shape, dtype=torch.float16)


def _dump_layer(m, x):
    b = (x + 1.0) * 2.0  # Add, Mul
    return torch.tanh(torch.relu(b)) * x  # Relu, Tanh, Mul_1


def _data_dump_scope(m, x):
    import torchair

    a = x * 3.0  # GE op Mul, outside the scope
    with torchair.scope.data_dump():
        b = torch.relu(a * 2.0)  # Mul_1 and Relu: torchair writes their types, "Mul" and "Relu", as layers
    return torch.tanh(b) + x


_SCOPE_SINCE = (2, 14)
_SCOPE_WHY = (
    "torchair 2.5.1 has no torchair.scope.data_dump() and writes no dump options JSON (dump_layer goes to GE as the "
    "ge.exec.dumpLayer option, which the stub GE does not apply)"
)

_CAST_FUSED = "npu.npu_add_rms_norm_cast.default"
# torchair 2.5.1 and 2.14.0 have no converter for the control-flow higher-order operators (no `cond`/`while_loop`
# in `_ge_concrete_graph/ge_converter/`): both runs are n/a until a torchair that converts them
_NO_CONTROL_FLOW_CONVERTER = (2, 15)
_NO_COND_WHY = (
    "torchair converts no torch.cond (2.14.0: RuntimeError: Failed to auto-generated converter for cond to AscendIR: "
    "cond is not an instance of OpOverload and does not support auto-generate converter; 2.5.1: RuntimeError: "
    "Unsupported torch op cond by ge)"
)
_NO_WHILE_WHY = (
    "torchair converts no while_loop (2.14.0: RuntimeError: Failed to auto-generated converter for while_loop to "
    "AscendIR: while_loop is not an instance of OpOverload and does not support auto-generate converter; 2.5.1: "
    "RuntimeError: Unsupported torch op while_loop by ge)"
)


def catalogue() -> tuple[CatalogueModel, ...]:
    _register_custom_converters()
    f16, f32, bf16 = torch.float16, torch.float32, torch.bfloat16
    return (
        CatalogueModel(
            "attention",
            "matmul, softmax and a boolean mask; Linear layers as addmm; the softmax's expand returns its input",
            Attention,
            lambda g, s: (_randn(g, 2, 8, 16), torch.rand(8, 8, generator=g) > 0.7),
            fault_op_types=("SoftmaxV2",),
        ),
        CatalogueModel(
            "rms_norm_decomposed",
            "rms_norm written out: the converters' inner Cast/Mul ops carry no _fx_tensor_name",
            lambda: _Fn(_rms_norm_decomposed, **_weights(2, w=((16,), f16))),
            lambda g, s: (_fp16(g, 4, 16),),
            fault_op_types=("Rsqrt",),
        ),
        CatalogueModel(
            "npu_rms_norm",
            "torch_npu.npu_rms_norm: one GE RmsNorm with two outputs",
            lambda: _Fn(_npu_rms_norm, **_weights(3, w=((16,), f16))),
            lambda g, s: (_fp16(g, 4, 16), _fp16(g, 4, 16)),
            fault_op_types=("RmsNorm",),
        ),
        CatalogueModel(
            "add_rms_norm_cast",
            "npu_add_rms_norm + cast to float32: pattern fusion makes one AddRmsNormCast without FX files",
            lambda: _Fn(_add_rms_norm_cast, **_weights(4, w=((16,), f16))),
            lambda g, s: (_fp16(g, 4, 16), _fp16(g, 4, 16)),
            fault_op_types=("AddRmsNormCast", "AddRmsNorm"),
            fuses=(_CAST_FUSED,),
        ),
        CatalogueModel(
            "add_rms_norm_cast_x2",
            "two decoder-ish blocks: two AddRmsNormCast of one pattern in one graph, told apart by graph order",
            lambda: _Fn(
                _add_rms_norm_cast_x2,
                **_weights(11, w1=((16,), f16), p1=((16, 16), f32), w2=((16,), f16), p2=((16, 16), f32)),
            ),
            lambda g, s: (_fp16(g, 4, 16), _fp16(g, 4, 16)),
            fault_op_types=("AddRmsNormCast", "AddRmsNorm"),
            fuses=(_CAST_FUSED, _CAST_FUSED),
        ),
        CatalogueModel(
            "add_rms_norm_cast_view",
            "npu_add_rms_norm + y.view(-1, h).to(float32): the pattern's view form (extra_check: h = x1's last dim)",
            lambda: _Fn(_add_rms_norm_cast_view, **_weights(12, w=((16,), f16))),
            lambda g, s: (_fp16(g, 2, 3, 16), _fp16(g, 2, 3, 16)),
            fault_op_types=("AddRmsNormCast", "AddRmsNorm"),
            fuses=(_CAST_FUSED,),
        ),
        CatalogueModel(
            "add_rms_norm_dynamic_quant",
            "npu_add_rms_norm + npu_dynamic_quant(smooth_scales): fused into AddRmsNormDynamicQuant (int8 + scale)",
            lambda: _Fn(
                _add_rms_norm_dynamic_quant, **_positive(_weights(13, w=((16,), f16), smooth=((16,), f16)), "smooth")
            ),
            lambda g, s: (_fp16(g, 4, 16), _fp16(g, 4, 16)),
            fault_op_types=("AddRmsNormDynamicQuant", "AddRmsNorm"),
            fuses=("npu.npu_add_rms_norm_dynamic_quant.default",),
        ),
        CatalogueModel(
            "add_rms_norm_dynamic_quant_flatten",
            "npu_add_rms_norm + flatten(0, 1) + npu_dynamic_quant + scale.view(-1, 1): the pattern's second form",
            lambda: _Fn(_add_rms_norm_dynamic_quant_flatten, **_weights(14, w=((16,), f16))),
            lambda g, s: (_fp16(g, 2, 3, 16), _fp16(g, 2, 3, 16)),
            fault_op_types=("AddRmsNormDynamicQuant", "AddRmsNorm"),
            fuses=("npu.npu_add_rms_norm_dynamic_quant.default",),
        ),
        CatalogueModel(
            "add_rms_norm_quant",
            "npu_add_rms_norm + npu_quantize: torchair registers this pattern only outside max-autotune; GE keeps both",
            lambda: _Fn(
                _add_rms_norm_quant,
                **_positive(_weights(15, w=((16,), f16), scales=((16,), f32), offsets=((16,), torch.int32)), "scales"),
            ),
            lambda g, s: (_fp16(g, 4, 16), _fp16(g, 4, 16)),
            fault_op_types=("AddRmsNorm",),
            min_version=(2, 14),
            min_version_why="torchair 2.5.1's npu_quantize converter takes torch_npu 2.5.1's ScalarType dtype; the "
            "stand-in has torch_npu 2.14's `int dtype` (RuntimeError: Not supportted output dtype)",
        ),
        CatalogueModel(
            "transpose_batchmatmul",
            "bmm + transpose(0, 1) -> TransposeBatchMatMul, with the patterns a reduce-overhead graph registers first",
            lambda: _Fn(_transpose_batchmatmul, **_weights(16, w=((2, 128, 128), f16))),
            lambda g, s: (_fp16(g, 2, 4, 128),),
            fault_op_types=("TransposeBatchMatMul", "BatchMatMul", "BatchMatMulV2"),
            fuses=("npu.npu_transpose_batchmatmul.default",),
            patterns_of_mode="reduce-overhead",
        ),
        CatalogueModel(
            "split",
            "split_with_sizes: a list output, one GE SplitV with three outputs",
            lambda: _Fn(_split),
            lambda g, s: (_randn(g, 4, 16),),
            fault_op_types=("SplitV",),
        ),
        CatalogueModel(
            "max_dim",
            "max.dim: two outputs of different dtypes",
            lambda: _Fn(_max_dim),
            lambda g, s: (_randn(g, 4, 16),),
            fault_op_types=("ArgMaxWithValue",),
        ),
        CatalogueModel(
            "custom_tuple_list",
            "a custom op returning (Tensor, Tensor[]): GE names OUTPUT.0, OUTPUT.1.0, OUTPUT.1.1",
            lambda: _Fn(_custom_tuple_list),
            lambda g, s: (_randn(g, 4, 16),),
            fault_op_types=("Mul", "Add"),
        ),
        CatalogueModel(
            "custom_dict",
            "a custom operator returning a dict: GE names OUTPUT.out, OUTPUT.aux; the FX file is one pickled dict",
            lambda: _Fn(_custom_dict),
            lambda g, s: (_randn(g, 4, 8),),
            fault_op_types=("Add",),  # the dict's own outputs have no FX file that holds them
            min_version=(2, 14),
            min_version_why="older torchair's set_ge_outputs accepts no mapping (AssertionError on a dict)",
        ),
        CatalogueModel(
            "views_optimized",
            "view/permute/reshape/transpose with view optimization on: views are built inside their consumers",
            lambda: _Fn(_views),
            lambda g, s: (_randn(g, 2, 4, 8),),
            fault_op_types=("BatchMatMul",),
        ),
        CatalogueModel(
            "views_unoptimized",
            "the same views with view optimization off: each view converts to its own GE op",
            lambda: _Fn(_views),
            lambda g, s: (_randn(g, 2, 4, 8),),
            fault_op_types=("BatchMatMul",),
            config={"experimental_config.enable_view_optimize": False},
        ),
        CatalogueModel(
            "transpose_t",
            "t() and transpose(): Transpose ops and MatMul",
            lambda: _Fn(_transpose_t, **_weights(5, w=((8, 8), f32))),
            lambda g, s: (_randn(g, 8, 16),),
            fault_op_types=("MatMul", "MatMulV2"),
        ),
        CatalogueModel(
            "dynamic",
            "dynamic shapes: symbolic sizes become sym_size nodes, two steps of different batch",
            lambda: _Fn(_dynamic, **_weights(6, w=((8, 8), f32))),
            lambda g, s: (_randn(g, 3 + 2 * s, 8),),
            fault_op_types=("Relu",),
            dynamic=True,
        ),
        CatalogueModel(
            "noop_slice_expand",
            "a full slice (removed by remove_noop_ops) and an expand to its own shape (its converter returns input)",
            lambda: _Fn(_noop_slice_expand),
            lambda g, s: (_randn(g, 4, 8),),
            fault_op_types=("Tanh",),
        ),
        CatalogueModel(
            "kwarg_attention",
            "npu_fused_infer_attention_score with the kwarg-only atten_mask the FX dumper does not write",
            lambda: _Fn(_kwarg_attention),
            lambda g, s: (_fp16(g, 1, 4, 8), _fp16(g, 1, 4, 8), _fp16(g, 1, 4, 8), torch.rand(4, 4, generator=g) > 0.7),
            fault_op_types=("FusedInferAttentionScore",),
        ),
        CatalogueModel(
            "bf16",
            "bfloat16 tensors (the FX dumper saves them as float32)",
            lambda: _Fn(_bf16, **_weights(7, w=((16, 16), bf16))),
            lambda g, s: (_randn(g, 4, 16, dtype=bf16),),
            fault_op_types=("Gelu",),
        ),
        CatalogueModel(
            "index_none",
            "x[:, idx]: aten.index with [None, idx], an argument the FX dumper saves as a string",
            lambda: _Fn(_index_none),
            lambda g, s: (_randn(g, 4, 8), torch.randint(0, 8, (3,), generator=g)),
            fault_op_types=("IndexByTensor", "Index", "GatherV2"),
        ),
        CatalogueModel(
            "read_twice",
            "x + x: one GE op reading one graph input on two inputs",
            lambda: _Fn(_read_twice),
            lambda g, s: (_randn(g, 4, 8),),
            fault_op_types=("Sigmoid",),
        ),
        CatalogueModel(
            "cond_branches",
            "torch.cond: GE If with then/else subgraphs; a step of each sign takes each branch",
            lambda: _Fn(_cond_branches),
            lambda g, s: (_randn(g, 4, 8).abs() * (1 if s == 0 else -1),),
            fault_op_types=("Relu", "Sigmoid"),
            min_version=_NO_CONTROL_FLOW_CONVERTER,
            min_version_why=_NO_COND_WHY,
        ),
        CatalogueModel(
            "while_loop",
            "torch while_loop: GE While with cond/body subgraphs; the body runs 3 times a step",
            lambda: _Fn(_while_loop),
            lambda g, s: (_randn(g, 4, 8), torch.zeros((), dtype=torch.int64)),
            fault_op_types=("Tanh",),
            min_version=_NO_CONTROL_FLOW_CONVERTER,
            min_version_why=_NO_WHILE_WHY,
        ),
        CatalogueModel(
            "returns_input",
            "expand to its own shape after add: the converter returns its input, the Add carries expand's name",
            lambda: _Fn(_returns_input),
            lambda g, s: (_randn(g, 4, 8),),
            fault_op_types=("Relu",),
        ),
        CatalogueModel(
            "dump_layer",
            "dump_config.dump_layer = 'Mul Tanh': GE dumps those two ops only, the others' FX tensors are out of scope",
            lambda: _Fn(_dump_layer),
            lambda g, s: (_randn(g, 4, 8),),
            fault_op_types=("Tanh",),
            config={"dump_config.dump_layer": "Mul Tanh"},
            min_version=_SCOPE_SINCE,
            min_version_why=_SCOPE_WHY,
        ),
        CatalogueModel(
            "data_dump_scope",
            "torchair.scope.data_dump() around Mul_1 and Relu: torchair lists their types, GE dumps the ops so named "
            "(Mul outside the scope, Relu), not Mul_1",
            lambda: _Fn(_data_dump_scope),
            lambda g, s: (_randn(g, 4, 8),),
            fault_op_types=("Relu",),
            min_version=_SCOPE_SINCE,
            min_version_why=_SCOPE_WHY,
        ),
    )
