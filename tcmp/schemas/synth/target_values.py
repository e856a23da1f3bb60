"""The target-side values of a synthetic scenario, per rank and token: the golden values with relative noise,
ulp noise (the few units in the last place another kernel's rounding moves a result by) and the faults, local or
propagated downstream."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np

from tcmp.schemas.dtypes import DataType
from tcmp.schemas.synth.faults import VALUE_FAULTS, Fault, FaultKind, apply_fault
from tcmp.schemas.synth.model import ModelGraph, ModelValues, OpKind, TensorRef, cann_cast, round_to


@dataclass(frozen=True)
class TargetNoise:
    """What moves the target's values off the golden ones (the fields of `ScenarioConfig` of the same names)."""

    seed: int
    noise: float
    ulp_noise: int
    faults: Sequence[Fault]
    propagate_faults: bool


def descendants(graph: ModelGraph, roots: set[str]) -> set[str]:
    found = set(roots)
    for op in graph.ge_ops:  # ops are in topological order
        if any(ref.op in found for ref in op.inputs):
            found.add(op.name)
    return found - roots


class TargetValues:
    """Target-side values of one rank and token: golden, with noise, with propagated faults.

    Each tensor is drawn once, so an op's dumped input is exactly its producer's dumped output.
    """

    def __init__(self, settings: TargetNoise, graph: ModelGraph, values: ModelValues, rank: int, token: int) -> None:
        self.values = values
        self.noise = settings.noise
        self.rng = np.random.default_rng([settings.seed, rank, token, 7])
        self.ulp_noise = settings.ulp_noise
        self.ulp_rng = np.random.default_rng([settings.seed, rank, token, 11])  # own stream: `noise` draws unchanged
        self.dtypes = {TensorRef(o.name, i): d for o in graph.ge_ops for i, d in enumerate(o.output_dtypes)}
        self.kinds = {o.name: o.kind for o in graph.ge_ops}
        self.passed_through = {TensorRef(o.name, 0): o.inputs[0] for o in graph.ge_ops if o.kind is OpKind.INSERTED}
        # a Cast the model computes as a plain cast (some scale their input too): the device casts what it was given
        self.casts = {
            TensorRef(o.name, 0): o.inputs[0]
            for o in graph.ge_ops
            if o.type == "Cast"
            and o.kind is OpKind.COMPUTE
            and np.array_equal(
                values.tensors[TensorRef(o.name, 0)], round_to(values.tensors[o.inputs[0]], o.output_dtypes[0])
            )
        }
        self.faults = {f.op: f for f in settings.faults if f.applies(rank, token)}
        self.propagate = settings.propagate_faults
        # a GE-inserted Cast writes what the cast computes from its input as dumped (noise and upstream faults in)
        self.inserted_casts = {op.name: op for op in graph.ge_ops if op.kind is OpKind.INSERTED and op.type == "Cast"}
        # op -> the faults its outputs carry, upstream first: an op below a 3 % error that itself makes NaN has both
        self.propagated: dict[str, list[Fault]] = {}
        self._cache: dict[tuple[TensorRef, int], np.ndarray] = {}
        if self.propagate:
            members = {g.name: g.members for g in graph.fusion_groups}
            position = {op.name: i for i, op in enumerate(graph.ge_ops)}
            spreads = (FaultKind.REL_ERROR, FaultKind.NAN, FaultKind.INF)
            spreading = [f for f in self.faults.values() if f.kind in spreads]
            roots_of = {f.op: set(members.get(f.op, (f.op,))) for f in spreading}
            spreading.sort(key=lambda f: min(position.get(r, len(position)) for r in roots_of[f.op]))
            for fault in spreading:
                roots = roots_of[fault.op]
                for name in roots | descendants(graph, roots):
                    self.propagated.setdefault(name, []).append(fault)

    def golden(self, ref: TensorRef, execution: int = 0) -> np.ndarray:
        if execution and (ref.op, execution) in self.values.repeats:
            return self.values.repeats[(ref.op, execution)][ref.index]
        return self.values.tensors[ref]

    def target(self, ref: TensorRef, execution: int = 0) -> np.ndarray:
        key = (ref, execution)
        if key not in self._cache and ref.op in self.inserted_casts:
            op = self.inserted_casts[ref.op]
            value = cann_cast(self.target(op.inputs[0], execution), op.output_dtypes[ref.index])
            for fault in self.propagated.get(ref.op, ()):
                if fault.op == ref.op:  # the upstream ones are in its input already
                    value = apply_fault(fault, value)
            self._cache[key] = value
        if key not in self._cache:
            value = self.golden(ref, execution)
            if self.ulp_noise and ref in self.passed_through:
                value = self.target(self.passed_through[ref])
            elif self.ulp_noise and ref in self.casts:
                value = round_to(self.target(self.casts[ref]), self.dtypes[ref])
            elif self.ulp_noise and self.kinds[ref.op] in (OpKind.COMPUTE, OpKind.INNER):
                value = ulp_moved(value, self.dtypes[ref], self.ulp_noise, self.ulp_rng)
            if self.noise and value.dtype.kind == "f":
                value = value * (1.0 + self.rng.uniform(-self.noise, self.noise, value.shape))
            for fault in self.propagated.get(ref.op, ()):
                value = apply_fault(fault, value)
            self._cache[key] = value
        return self._cache[key]

    def local_fault(self, op_name: str) -> Optional[Fault]:
        """The fault to apply to the op's own outputs when writing them (propagated ones are already in)."""
        fault = self.faults.get(op_name)
        if fault is None or fault.kind not in VALUE_FAULTS:
            return None
        return None if self.propagate and fault.kind is not FaultKind.SHAPE else fault


# (explicit mantissa bits, smallest normal exponent) of the float dtypes the model uses
_FLOAT_BITS = {
    int(DataType.DT_FLOAT16): (10, -14),
    int(DataType.DT_FLOAT): (23, -126),
    int(DataType.DT_BF16): (7, -126),
}


def ulp_of(value: np.ndarray, dtype: int) -> np.ndarray:
    """One unit in the last place of `dtype` at each element of `value` (a value of that dtype, held in float64):
    2^(exponent - mantissa bits), the exponent no lower than the smallest normal one (subnormals share its step)."""
    bits, emin = _FLOAT_BITS[dtype]
    _, exponent = np.frexp(np.asarray(value, dtype=np.float64))  # |v| = m·2^e with m in [0.5, 1)
    return np.ldexp(1.0, np.maximum(exponent - 1, emin) - bits)


def ulp_moved(value: np.ndarray, dtype: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """`value` (a value of `dtype`, in float64) with each nonzero finite element moved by a whole number j in
    [-k, k] of its own ulps, to a value of `dtype`: where v + j·ulp(v) is not one (a step up across a power of two,
    where the grid is coarser), |j| is lowered until it is. Zeros stay zero."""
    if dtype not in _FLOAT_BITS:
        return value
    value = np.asarray(value, dtype=np.float64)
    steps = rng.integers(-k, k + 1, size=value.shape)
    ulp = ulp_of(value, dtype)
    for _ in range(k):
        off_grid = round_to(value + steps * ulp, dtype) != value + steps * ulp
        steps = np.where(off_grid, steps - np.sign(steps), steps)
    return np.where((value == 0) | ~np.isfinite(value), value, value + steps * ulp)
