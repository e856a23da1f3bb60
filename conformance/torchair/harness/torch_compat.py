"""Shims that let an older torchair run on the newer torch the harness installs (the only torch this machine can
install quickly). Each restores one name torch renamed or removed since the torch that torchair was built for; none
changes torchair. `apply` runs before torchair is imported.
"""

from __future__ import annotations


def _hint_int() -> None:
    # torch 2.14 renamed symbolic_shapes.hint_int to optimization_hint; torchair 2.5.1 imports the old name
    import torch.fx.experimental.symbolic_shapes as symbolic_shapes

    if not hasattr(symbolic_shapes, "hint_int"):
        symbolic_shapes.hint_int = symbolic_shapes.optimization_hint


SHIMS = {"hint_int": _hint_int}


def apply(names) -> None:
    for name in names:
        SHIMS[name]()
