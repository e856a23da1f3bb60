"""What the harness knows about a model's two dumps, from what it built — never from tcmp's output.

- Values: the fault-free value of every GE tensor it wrote (ge_dump.GeTensor) and of every FX file torchair wrote.
  A pairing is right when the two hold the same tensor (`values_match`, or the element of a nested FX file the
  GE tensor's name points at); an item "has a partner" when some tensor of the other side in the same step holds
  its value — then "no partner" is wrong: the harness did not leave it out.
- Structure: torchair's FX graph as captured (what the FX dumper ran) and as converted (after torchair's FX
  passes), and the GE graph's `_fx_tensor_name`s. They say *why* an item has no partner: the torchair behaviour a
  "by design" reason must name. `Category.words` are the words such a reason must contain one of (the contract
  with the matcher's wording, case-insensitive).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Optional

import numpy as np

from .fx_files import FxFile, element, is_numeric
from .ge_dump import GeSide, GeTensor
from .values import same_elements, values_match


@dataclass(frozen=True)
class Category:
    name: str
    words: tuple[str, ...]

    def named_by(self, reason: str) -> bool:
        reason = reason.lower()
        return any(w in reason for w in self.words)


INPUT_COPY = Category("FX input copy", ("input",))
ARGUMENT = Category("non-tensor FX argument", ("argument", "scalar"))
STRING_ARGUMENT = Category("list argument saved as a string", ("string", "str(", "not a tensor"))
KWARG = Category("keyword argument (never dumped)", ("keyword", "kwarg"))
REMOVED_NOOP = Category("removed by remove_noop_ops", ("no-op", "noop"))
PATTERN_FUSED = Category("replaced by pattern fusion", ("fus", "pattern"))
VIEW_TO_RESHAPE = Category("view renamed to reshape", ("reshape",))
VIEW_IN_CONSUMER = Category("view built inside its consumer", ("view",))
SYM = Category("symbolic size node", ("sym",))
INNER_OP = Category("inner op of a converter expansion", ("inner", "expansion", "_fx_tensor_name"))
RETURNS_INPUT = Category(
    "name written over by a converter returning its input", ("returns its input", "overwr", "written over")
)
CONSTANT = Category("constant made by a converter", ("const",))
NESTED = Category("nested output the FX file cannot hold", ("nested", "dict", "pickle"))

_VIEW_TARGETS = {
    "aten.view.default", "aten.reshape.default", "aten._unsafe_view.default", "aten.permute.default",
    "aten.transpose.int", "aten.t.default", "aten.squeeze.dim", "aten.unsqueeze.default", "aten.expand.default",
    "aten.slice.Tensor", "aten.select.int", "aten.alias.default",
}  # fmt: skip
# a row's bench naming a GE file's input (tcmp's self check of a GE-inserted conversion)
_SELF_CHECK = re.compile(r"(?:Cast\()?(?P<file>\S+) input (?P<index>\d+)(?:\) .+)?")
_CONVERSIONS = ("cast", "transdata")  # GE's conversion op types (Cast, TransData, TransDataRNN, …), lower case
_RETURNS_INPUT_TARGETS = {"aten.expand.default", "aten.slice.Tensor", "aten.abs.default", "aten.logsumexp.default"}


class ModelTruth:
    def __init__(self, ge: GeSide, fx: list[FxFile], captured: dict, converted: dict) -> None:
        self.ge = ge
        self.fx = fx
        self.fx_by_name = {f.path.name: f for f in fx}
        self.captured = {n["name"]: n for nodes in captured.values() for n in nodes}
        self.converted = {n["name"]: n for nodes in converted.values() for n in nodes}
        self.ge_names = {t.fx_name for t in ge.tensors if t.io == "output" and t.fx_name}
        self.by_key = {(t.step, t.op, t.io, t.index): t for t in ge.tensors}
        self.by_file = {(t.file.name, t.io, t.index): t for t in ge.tensors}
        # {FX node name: the models.py lines its stack must name} (judge.expected_lines)
        self.source_lines: dict = {}

    def expected_stack_lines(self, op_name: str):
        """The models.py lines a row of GE op `op_name` must show in Stack Info: those of the FX node its outputs
        are named after (None when the harness does not know them: an op without a name, a sym node, …)."""
        try:
            op = self.ge.graph.op(op_name)
        except KeyError:
            return None
        for desc in op.output_descs:
            if desc.fx_name is not None:
                lines = self.source_lines.get(desc.fx_name.split("-", 1)[0])
                if lines:
                    return lines
        return None

    # -- values ------------------------------------------------------------------------------------------------

    @functools.cache  # noqa: B019 — one truth per model, kept for the whole evaluation
    def fx_value(self, name: str) -> Optional[np.ndarray]:
        try:
            value = self.fx_by_name[name].load()
        except Exception:
            return None
        return value if is_numeric(value) else None

    def _fx_candidates(self, f: FxFile) -> list[np.ndarray]:
        """f's value, and the elements a nested GE name can point at (a stacked list, a dict)."""
        out = []
        value = self.fx_value(f.path.name)
        if value is not None:
            out.append(value)
        nested = [n for n in self.ge_names if n.startswith(f.tensor_name + ".")]
        for name in nested:
            path = tuple(name[len(f.tensor_name) + 1 :].split("."))
            try:
                item = element(f.load(), path)
            except Exception:
                item = None
            if item is not None:
                out.append(item)
        return out

    def pair_is_right(self, t: GeTensor, fx_name: str) -> bool:
        """Whether the FX tensor a row names (`file.npy`, or `file.npy[k]`: element k of a stacked list file) holds
        the GE tensor's value."""
        element = None
        match = re.fullmatch(r"(?P<name>.+\.npy)\[(?P<element>\d+)\]", fx_name)
        if match is not None:
            fx_name, element = match["name"], int(match["element"])
        f = self.fx_by_name.get(fx_name)
        if f is None:
            return False
        if element is not None:
            value = self.fx_value(fx_name)
            return (
                value is not None and value.ndim > 0 and element < len(value) and values_match(t.value, value[element])
            )
        return any(values_match(t.value, v) or same_elements(t.value, v) for v in self._fx_candidates(f))

    def self_check_is_right(self, t: GeTensor, bench: str) -> bool:
        """Whether a row checks `t` against the input of a conversion whose outputs no FX tensor names (GE put it
        in, or the converter made it without `_fx_tensor_name`; the bench is `{file} input {j}` or
        `Cast({file} input {j}) …`) that, converted to t's dtype, holds t's value: tcmp's check of a cast against
        its own input, or of such a cast's output read by another op."""
        match = _SELF_CHECK.fullmatch(bench)
        if match is None:
            return False
        source = self.by_file.get((match["file"], "input", int(match["index"])))
        if source is None or not any(c in source.op_type.lower() for c in _CONVERSIONS):
            return False
        if any(x.fx_name for x in self.ge.tensors if x.file == source.file and x.io == "output"):
            return False
        return values_match(source.value.astype(t.value.dtype), t.value)

    def _from_constant(self, t: GeTensor) -> bool:
        return t.io == "input" and self.ge.graph.op(t.producer.producer).type in ("Const", "Constant")

    def fx_is_tensor_argument(self, f: FxFile) -> bool:
        """Whether an FX INPUT file holds a tensor argument (an FX node), not a Python value the dumper saved."""
        node = self.captured.get(f.node)
        if node is None or f.index[0] >= len(node["args"]):
            return False
        arg = node["args"][f.index[0]]
        if len(f.index) > 1:
            arg = arg[f.index[1]] if isinstance(arg, list) and f.index[1] < len(arg) else None
        return isinstance(arg, dict) and "node" in arg

    def ge_has_partner(self, t: GeTensor) -> bool:
        """A GE tensor has a partner when an FX tensor of its step holds its value. Inputs fed by a converter's
        Const have none: the FX side has the Python value the constant was made from, not a tensor."""
        if self._from_constant(t):
            return False
        return any(values_match(t.value, v) for f in self.fx if f.step == t.step for v in self._fx_candidates(f))

    def fx_has_partner(self, f: FxFile) -> bool:
        """An FX file has a partner when a GE tensor of its step holds its value; a non-tensor argument never has."""
        if f.io == "INPUT" and not self.fx_is_tensor_argument(f):
            return False
        values = self._fx_candidates(f)
        return any(values_match(t.value, v) for t in self.ge.tensors if t.step == f.step for v in values)

    # -- structure ---------------------------------------------------------------------------------------------

    def _named_in_ge(self, node: str) -> bool:
        return any(n.split("-", 1)[0] == node for n in self.ge_names)

    def _users(self, node: str, graph: dict) -> list[dict]:
        def refs(value):
            if isinstance(value, dict):
                if value.get("node") == node:
                    return True
                return any(refs(v) for v in value.get("dict", {}).values())
            if isinstance(value, list):
                return any(refs(v) for v in value)
            return False

        return [n for n in graph.values() if refs(n["args"]) or refs(list(n["kwargs"].values()))]

    def fx_category(self, f: FxFile) -> Optional[Category]:
        if f.io == "INPUT":
            if self.fx_is_tensor_argument(f):
                return INPUT_COPY
            return ARGUMENT if self.fx_value(f.path.name) is not None else STRING_ARGUMENT
        node = self.converted.get(f.node)
        if node is None:
            fused = [
                n for n in self.converted.values() if n["op"] == "call_function" and n["name"] not in self.captured
            ]
            return PATTERN_FUSED if fused else REMOVED_NOOP
        if node["target"] == "aten.reshape.default" and f.target == "aten.view.default":
            return VIEW_TO_RESHAPE
        if not self._named_in_ge(f.node):
            overwritten = any(
                u["target"] in _RETURNS_INPUT_TARGETS and self._named_in_ge(u["name"])
                for u in self._users(f.node, self.converted)
            )
            if overwritten:
                return RETURNS_INPUT
            if f.target in _VIEW_TARGETS:
                return VIEW_IN_CONSUMER
        return None

    def ge_category(self, t: GeTensor) -> Optional[Category]:
        if t.io == "output":
            if t.fx_name is None:
                return INNER_OP
            node = t.fx_name.split("-", 1)[0]
            if "aten.sym_size" in t.fx_name:
                return SYM
            if node not in self.captured:
                return PATTERN_FUSED
            target = t.fx_name.split("-", 1)[1].split(".OUTPUT.")[0]
            if target == "aten.reshape.default" and self.captured[node]["target"] == "aten.view.default":
                return VIEW_TO_RESHAPE
            if not t.fx_name.split(".OUTPUT.")[1].isdigit():  # OUTPUT.1.0 (list in a tuple), OUTPUT.out (dict)
                return NESTED
            return None
        if self._from_constant(t):
            return CONSTANT
        consumer = [d for d in self.ge.graph.op(t.op).output_descs if d.fx_name]
        for desc in consumer:
            fx_node = self.captured.get(desc.fx_name.split("-", 1)[0])
            tensor_kwargs = fx_node and any(isinstance(v, dict) and "node" in v for v in fx_node["kwargs"].values())
            if tensor_kwargs and not self.ge_has_partner(t):
                return KWARG
        return None
