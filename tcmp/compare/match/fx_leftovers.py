"""Why an FX file of a compared token pairs with no GE tensor, from what the GE → FX matcher learnt about the token:
the copies it took, the nodes torchair's passes removed, fused or renamed (torchair_rules), the arguments that are
no tensors. Files it cannot explain are left to the caller's default ("no partner")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tcmp.compare.match.fx_side import FxSide
from tcmp.compare.records import UnmatchedKind
from tcmp.compare.rules.torchair import NOOP_TARGETS, VIEW_TARGETS
from tcmp.schemas.dump_records import IO
from tcmp.schemas.dump_tree import DumpFile
from tcmp.schemas.fx_dump import FxFileName
from tcmp.schemas.graph import Graph

_SMALL_LIST = 64  # elements: a size or dims list, not a tensor of data


@dataclass(frozen=True)
class FxFindings:
    """What the GE → FX matcher learnt about a token, once it has matched every target execution."""

    fx: FxSide
    graph: Graph
    replaced_keys: Mapping[str, str]  # FX node key -> the pattern-fused node that replaced it
    written_over: Mapping[str, str]  # FX node key whose converter returned its input -> the producer's key
    named_keys: Mapping[str, int]  # FX node keys some graph op output is named after


def golden_reasons(learnt: FxFindings, files: Sequence[DumpFile]) -> dict[Path, tuple[str, UnmatchedKind]]:
    fx = learnt.fx
    call_of = {}
    for calls in fx.calls.values():
        for c in calls:
            for f in (*(x[2] for x in c.inputs), *(x[1] for x in c.outputs)):
                call_of[f.path] = c
    reasons: dict[Path, tuple[str, UnmatchedKind]] = {}
    dict_keys = _dict_output_keys(learnt)
    for f in files:
        name = f.name
        call = call_of.get(f.path)
        if not isinstance(name, FxFileName) or call is None:
            continue
        why = _reason(learnt, f, name, call, dict_keys)
        if why is not None:
            reasons[f.path] = (why, UnmatchedKind.BY_DESIGN)
    return reasons


def _dict_output_keys(learnt: FxFindings) -> frozenset[str]:
    """FX nodes whose result is a dict: torchair names its entries on the GE side by key (`OUTPUT.out`), never by
    an index, while the FX dumper saves the whole dict as the one file `OUTPUT.0` (`[result]`, a pickled array)."""
    names = [o.fx_tensor for op in learnt.graph.ops for o in op.outputs if o.fx_tensor is not None]
    indexed = {n.node_key for n in names if n.output_index is not None}
    return frozenset(n.node_key for n in names if n.output_index is None and n.node_key not in indexed)


def _reason(learnt: FxFindings, f: DumpFile, name: FxFileName, call, dict_keys: frozenset[str]) -> Optional[str]:
    fx, key, target = learnt.fx, name.key, name.target
    if f.path in fx.copies:
        return f"FX input copy of the tensor in {fx.copies[f.path].name}: the GE input is compared with that output"
    if key in learnt.replaced_keys:
        if name.io is IO.INPUT:  # a dim or size argument of a replaced node is no tensor of the fusion either
            plain = _plain_argument(fx, f, name, target)
            if plain is not None:
                return plain
        fused = learnt.replaced_keys[key]
        return (
            f"{name.io.value} {name.index} of {key}, a node torchair's pattern fusion replaced by {fused}; the fused "
            "op's tensors are compared with what this node computed"
        )
    if name.io is IO.INPUT:
        return _argument(fx, f, name, target)
    if key in learnt.written_over:
        return (
            f"{key}'s converter returns its input, so its name was written over the GE tensor of "
            f"{learnt.written_over[key]}, which is compared instead (the same tensor)"
        )
    if key in dict_keys and name.io is IO.OUTPUT and name.index == 0:
        return (
            f"output 0 of {key}: a dict output, which the FX dumper pickles whole into this one file; its entries "
            "are GE tensors named by key (OUTPUT.<key>), listed by design on the target side"
        )
    if key in learnt.named_keys:
        return None
    if target in NOOP_TARGETS and _same_shape(fx, call):
        return (
            f"{key}: a no-op: torchair's remove_noop_ops takes it out before conversion, or its converter returned "
            "its input and the next node's name was written over it (GE has no op named after it)"
        )
    if target in VIEW_TARGETS:
        return (
            f"{key}: a view; torchair's _view_to_reshape makes views reshapes, and with view optimization builds them "
            "inside their consumer's conversion, so no GE op is named after it"
        )
    return (
        f"{key} names no GE tensor in the graph: its converter set no _fx_tensor_name on what it returned (torchair "
        "before 2.14 names no element of a list output, and no output that is not a tensor)"
    )


def _plain_argument(fx, f: DumpFile, name: FxFileName, target: str) -> Optional[str]:
    """Why an FX input file holds no tensor (a string, a scalar, a view's size list), or None."""
    shape = fx.shape(f)
    if shape is None:
        return None
    at = _input_label(name)
    if not shape.numeric:
        return f"{at}: a non-tensor argument the FX dumper saved as a string or an object (e.g. a list holding None)"
    if shape.shape == ():
        return f"{at}: a scalar argument, not a tensor (GE takes it as an attribute or a constant)"
    if _small_ints(shape) and name.index >= 1 and target in VIEW_TARGETS | NOOP_TARGETS:
        return f"{at}: a non-tensor argument, a list of sizes or dims the FX dumper saved as an array"
    return None


def _argument(fx, f: DumpFile, name: FxFileName, target: str) -> Optional[str]:
    plain = _plain_argument(fx, f, name, target)
    shape = fx.shape(f)
    if plain is not None or shape is None:
        return plain
    at = _input_label(name)
    if _small_ints(shape):
        return (
            f"{at}: a small integer argument — a list the FX dumper saved as an array, or an input copy of an "
            "index tensor compared through its producer"
        )
    return f"{at}: an input copy of an argument tensor; GE inputs are compared with their producers' FX outputs"


def _input_label(name: FxFileName) -> str:
    return f"FX input {name.index}{'' if name.sub_index is None else f'.{name.sub_index}'} of {name.key}"


def _small_ints(shape) -> bool:
    return shape.kind in "iub" and len(shape.shape) == 1 and shape.shape[0] <= _SMALL_LIST


def _same_shape(fx, call) -> bool:
    first = next((f for i, j, f in call.inputs if i == 0 and j is None), None)
    out = call.output(0)
    if first is None or out is None:
        return False
    a, b = fx.shape(first), fx.shape(out)
    return a is not None and b is not None and a.shape == b.shape
