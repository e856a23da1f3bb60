"""What torchair does between the FX graph it dumps and the GE graph it converts, as tables the matcher reads.

Each table is taken from the source it names (torchair 2.14 as shipped in torch-npu 2.14.0,
`torch_npu/dynamo/torchair/`; torch 2.14's inductor for remove_noop_ops), and each is exercised by the real-torchair
harness (conformance/torchair). The FX dumper runs the graph module as captured; GE converts
`_optimize_fx(deepcopy(gm))` (npu_fx_compiler.py), so the two sides differ exactly where these passes act.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

# Converters that can `return self` (ge_converter/aten/{expand,slice,abs,logsumexp,_fft_c2c,
# _foreach_round_off_number}.py): the GE tensor they return is their input's, so `_set_fx_tensor_names` writes the
# consumer node's name over the producer's.
RETURNS_INPUT_TARGETS = frozenset(
    {
        "aten.expand.default", "aten.slice.Tensor", "aten.slice.str", "aten.abs.default", "aten.abs.out",
        "aten.logsumexp.default", "aten.logsumexp.out", "aten._fft_c2c.default", "aten._fft_c2c.out",
        "aten._foreach_ceil.default", "aten._foreach_floor.default", "aten._foreach_frac.default",
        "aten._foreach_round.default", "aten._foreach_trunc.default",
    }
)  # fmt: skip

# torch._inductor.fx_passes.post_grad.remove_noop_ops (torchair's `_optimize_noop_ops`, on by default): nodes
# that are no-ops for their arguments (a full slice, an expand or view to the same shape, …) vanish from the
# converted graph; the FX dump still has them.
NOOP_TARGETS = frozenset(
    {
        "aten.slice.Tensor", "aten.slice_scatter.default", "aten.repeat.default", "aten.constant_pad_nd.default",
        "prims.convert_element_type.default", "prims.device_put.default", "aten.ceil.default", "aten.floor.default",
        "aten.round.default", "aten.trunc.default", "aten.pow.Tensor_Scalar", "aten.cat.default",
        "aten.view.default", "aten.view.dtype", "aten.copy.default", "aten.alias.default", "aten.clone.default",
        "aten.expand.default",
    }
)  # fmt: skip

# View ops: with view optimization on (`experimental_config.enable_view_optimize`, the default) torchair skips them
# in conversion (_ge_concrete_graph/continguous_utils.py) and builds the Reshape/Transpose inside the consumer's
# conversion, where nothing names it.
VIEW_TARGETS = frozenset(
    {
        "aten.view.default", "aten._unsafe_view.default", "aten.reshape.default", "aten.permute.default",
        "aten.transpose.int", "aten.t.default", "aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default",
        "aten.unsqueeze.default", "aten.expand.default", "aten.slice.Tensor", "aten.select.int",
        "aten.alias.default", "aten.as_strided.default", "aten.split.Tensor", "aten.split_with_sizes.default",
        "aten.unbind.int", "aten.narrow.default", "aten.diagonal.default",
    }
)  # fmt: skip
# The GE op types those views become.
VIEW_OP_TYPES = frozenset(
    {"Reshape", "Transpose", "TransposeD", "ExpandDims", "Squeeze", "Unsqueeze", "Flatten", "BroadcastTo", "Expand",
     "StridedSlice", "StridedSliceD", "Slice", "SliceD", "GatherV2", "Identity", "AsStrided", "ViewCopy"}
)  # fmt: skip

# `_optimize_sym_input` (max-autotune) computes symbolic sizes in the graph: GE has Shape/Gather ops named after
# `sym_size` nodes the FX dumper never writes (they have no converter of their own in the dumped module).
_SYM_TARGET = re.compile(r"aten\.sym_(size|numel|stride|storage_offset)\b")

# `_view_to_reshape` (always on) retargets every aten.view.default to aten.reshape.default in the converted graph.
VIEW_TARGET, RESHAPE_TARGET = "aten.view.default", "aten.reshape.default"


def is_sym_target(target: str) -> bool:
    return _SYM_TARGET.match(target) is not None


@dataclass(frozen=True)
class ReplacedOutput:
    """Where an output of a pattern-fused node came from: output `index` of the replaced node whose target is one of
    `target` (the anchor's, or the consumer's)."""

    target: tuple[str, ...]  # the replaced node's possible targets
    index: int


@dataclass(frozen=True)
class FusionPattern:
    """One of torchair's pattern replacements (patterns/*.py, registered by pattern_util._apply_pattern_passes).

    The fused node takes the anchor node's inputs and the consumer's other ones (the quant scales, the smooth
    scales); the consumer is the node fed by the anchor's output 0 — directly, or, in a pattern's view form, through
    an `aten.view.default` of it (the cast of `y.view(-1, h)`, the dynamic quant of `y.flatten(0, 1)`), so that the
    consumer's outputs hold the fused outputs' elements in another shape. `viewed_after` lists the consumer outputs
    the view form's pattern also views (`scale.view(-1, 1)`): those view nodes are replaced too."""

    fused: str
    anchor: str
    consumer: tuple[str, ...]  # the consumer's possible targets (empty: none)
    outputs: tuple[Optional[ReplacedOutput], ...]  # per fused output; None: the replaced nodes had no such output
    source: str
    viewed_after: tuple[int, ...] = ()


_CASTS = ("aten._to_copy.default", "npu._npu_dtype_cast.default", "npu.npu_dtype_cast.default")
_ANCHOR = ("npu.npu_add_rms_norm.default",)

# torch >= 2.6 only (`_apply_pattern_passes` returns early before). The bmm-transpose and add-rms-norm-quant patterns
# are registered only outside max-autotune — into a process-wide pass manager, so once a reduce-overhead graph was
# compiled they apply to max-autotune graphs of the same process too.
PATTERNS = (
    # add_rms_norm_cast.py: y, _, xOut = npu_add_rms_norm(x1, x2, gamma); y_cast = cast(y, fp32)
    #   -> y_cast, y, _, xOut = npu_add_rms_norm_cast(x1, x2, gamma)   (view form: cast(y.view(-1, h)))
    FusionPattern(
        "npu.npu_add_rms_norm_cast.default", "npu.npu_add_rms_norm.default", _CASTS,
        (ReplacedOutput(_CASTS, 0), ReplacedOutput(_ANCHOR, 0), ReplacedOutput(_ANCHOR, 1), ReplacedOutput(_ANCHOR, 2)),
        "patterns/add_rms_norm_cast.py",
    ),
    # add_rms_norm_quant.py: y, _, x_out = npu_add_rms_norm(...); y_out = npu_quantize(y, ...)
    #   -> y1, _, x_out = npu_add_rms_norm_quant(...)
    FusionPattern(
        "npu.npu_add_rms_norm_quant.default", "npu.npu_add_rms_norm.default", ("npu.npu_quantize.default",),
        (ReplacedOutput(("npu.npu_quantize.default",), 0), None, ReplacedOutput(_ANCHOR, 2)),
        "patterns/add_rms_norm_quant.py",
    ),
    # add_rms_norm_dynamic_quant.py: y, _, xOut = npu_add_rms_norm(...); yOut, scale1Out = npu_dynamic_quant(y)
    #   -> yOut, _, xOut, scale1Out, _ = npu_add_rms_norm_dynamic_quant(...)
    # (pattern2, the view form: npu_dynamic_quant(y.flatten(0, 1)) and scale1Out.view(-1, 1))
    FusionPattern(
        "npu.npu_add_rms_norm_dynamic_quant.default", "npu.npu_add_rms_norm.default",
        ("npu.npu_dynamic_quant.default",),
        (ReplacedOutput(("npu.npu_dynamic_quant.default",), 0), None, ReplacedOutput(_ANCHOR, 2),
         ReplacedOutput(("npu.npu_dynamic_quant.default",), 1), None),
        "patterns/add_rms_norm_dynamic_quant.py", viewed_after=(1,),
    ),
    # batch_matmul_transpose.py: transpose(bmm(x1, x2), ...) -> npu_transpose_batchmatmul(x1, x2, perm_x1=...)
    FusionPattern(
        "npu.npu_transpose_batchmatmul.default", "aten.bmm.default", ("aten.transpose.int",),
        (ReplacedOutput(("aten.transpose.int",), 0),),
        "patterns/batch_matmul_transpose.py",
    ),
)  # fmt: skip
PATTERN_BY_FUSED = {p.fused: p for p in PATTERNS}


def _letters(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


# GE op types a view's converter builds, by the aten op (ge_converter/aten/{view,permute,transpose,…}.py).
_VIEW_TYPES = {
    "view": ("Reshape",), "unsafeview": ("Reshape",), "reshape": ("Reshape",), "permute": ("Transpose",),
    "transpose": ("Transpose",), "t": ("Transpose",), "unsqueeze": ("ExpandDims", "Unsqueeze", "Reshape"),
    "squeeze": ("Squeeze", "Reshape"), "expand": ("BroadcastTo", "Expand"),
}  # fmt: skip


def type_fits_target(op_type: str, target: str) -> bool:
    """Whether a GE op type plausibly comes from an FX target's converter (`Tanh` / `aten.tanh.default`,
    `SoftmaxV2` / `aten._softmax.default`, `Reshape` / `aten.view.default`): the aten op's name, letters only,
    within the type's or the other way round, or a view's GE op."""
    parts = target.split(".")
    name = _letters(parts[1] if len(parts) > 1 else target)
    kind = _letters(op_type)
    return bool(name) and (name in kind or kind in name or op_type in _VIEW_TYPES.get(name, ()))
