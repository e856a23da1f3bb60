"""Switch torchair's dumps on in the layout tcmp reads (optional extra `npu`).

    import torch_npu, torchair
    from tcmp.daemon.capture import enable_ge_dump, enable_fx_dump
    config = enable_ge_dump("/data/dumps/run1", steps=[0, 1], fusion_off=False)   # target
    npu_backend = torchair.get_npu_backend(compiler_config=config)

- GE dump (graph mode): `config.dump_config` (enable_dump, dump_path = `<root>/msprobe_ge_dump`, dump_mode,
  dump_step "0|1|2-5", dump_layer "op1 op2") plus `config.debug.graph_dump` (txt, same directory: the graph
  files the compare matches with), and optionally `config.fusion_config.fusion_switch_file` — the fusion-off
  switch file turns the fused run into a golden.
- FX dump (eager fallback, the usual golden): `config.debug.data_dump` (type npy, path = `<root>/msprobe_fx_dump`,
  filter = a callable node -> node | None; tcmp builds one from op-name substrings, as msprobe's op list does).

torch_npu and torchair are imported only when a config has to be created (torchair ships inside torch_npu and is
importable once torch_npu is); pass `config=` to configure an existing CompilerConfig.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable, Optional, Union

GE_DUMP_DIR = "msprobe_ge_dump"
FX_DUMP_DIR = "msprobe_fx_dump"
FUSION_OFF_FILE = "fusion_off.json"
# GE's fusion switch file: every graph and UB fusion pass the runtime allows to be switched off
FUSION_OFF = {"Switch": {"GraphFusion": {"ALL": "off"}, "UBFusion": {"ALL": "off"}}}

# torchair's own validation of these options (configs/dump_config.py), checked here first for a clearer message
_DUMP_STEP = re.compile(r"^(((\d+)|(\d+-{0,1}\d+))\|{0,1})*$")
_DUMP_LAYER = re.compile(r'^[0-9a-zA-Z_" "/\\.]*$')

StepSpec = Union[int, tuple[int, int]]  # one step, or an inclusive range


class CaptureUnavailable(ImportError):
    """torch_npu (and the torchair it ships) is not importable here."""


class DumpMode(str, enum.Enum):
    INPUT = "input"
    OUTPUT = "output"
    ALL = "all"


def load_torchair() -> Any:
    """`import torch_npu, torchair`, or CaptureUnavailable saying what to install."""
    try:
        import torch_npu  # noqa: F401  (registers `torchair`, which lives inside the torch_npu wheel)
        import torchair
    except ImportError as exc:
        raise CaptureUnavailable(
            "the capture helpers need torch_npu, which ships torchair: install it in the environment that runs "
            "the model (`pip install 'tcmp[npu]'`, matching your torch and CANN versions); "
            f"import failed with: {exc}"
        ) from exc
    return torchair


def _new_config(config: Optional[Any]) -> Any:
    return config if config is not None else load_torchair().CompilerConfig()


def format_steps(steps: Sequence[StepSpec]) -> str:
    """[0, 1, (2, 5)] -> "0|1|2-5", the `dump_step` syntax."""
    parts = []
    for step in steps:
        if isinstance(step, tuple):
            first, last = step
            if not 0 <= first <= last:
                raise ValueError(f"step range {step}: need 0 <= first <= last")
            parts.append(f"{first}-{last}")
        else:
            if step < 0:
                raise ValueError(f"step {step}: steps count from 0")
            parts.append(str(step))
    text = "|".join(parts)
    if not _DUMP_STEP.match(text):
        raise ValueError(f"dump_step {text!r} is not valid for torchair")
    return text


def write_fusion_off_switch(path: Union[str, Path]) -> Path:
    """Write GE's fusion switch file that turns graph and UB fusion off (for a fusion-off golden run)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(FUSION_OFF, indent=4) + "\n", encoding="utf-8")
    return path


def enable_ge_dump(
    root: Union[str, Path],
    *,
    mode: DumpMode = DumpMode.ALL,
    steps: Sequence[StepSpec] = (),
    layers: Sequence[str] = (),
    fusion_off: bool = False,
    fusion_switch_file: Optional[Union[str, Path]] = None,
    config: Optional[Any] = None,
) -> Any:
    """A CompilerConfig (new, or `config` updated) that dumps GE graph-mode tensors and the graph text files
    under `<root>/msprobe_ge_dump`. `fusion_off` writes `<root>/fusion_off.json` and uses it."""
    if fusion_off and fusion_switch_file is not None:
        raise ValueError("give fusion_off or fusion_switch_file, not both")
    bad = [name for name in layers if not _DUMP_LAYER.match(name) or " " in name]
    if bad:
        raise ValueError(f"op names torchair does not accept in dump_layer: {bad}")
    dump_dir = Path(root) / GE_DUMP_DIR
    dump_dir.mkdir(parents=True, exist_ok=True)  # torchair requires an existing directory
    if fusion_off:
        fusion_switch_file = write_fusion_off_switch(Path(root) / FUSION_OFF_FILE)
    config = _new_config(config)
    dump = config.dump_config
    dump.enable_dump = True
    dump.dump_path = str(dump_dir)
    dump.dump_mode = DumpMode(mode).value
    if steps:
        dump.dump_step = format_steps(steps)
    if layers:
        dump.dump_layer = " ".join(layers)
    config.debug.graph_dump.type = "txt"
    config.debug.graph_dump.path = str(dump_dir)
    if fusion_switch_file is not None:
        config.fusion_config.fusion_switch_file = str(fusion_switch_file)
    return config


class OpNameFilter:
    """torchair's data_dump filter: keep FX nodes whose name contains one of the substrings (msprobe's op list)."""

    def __init__(self, substrings: Sequence[str]) -> None:
        self.substrings = tuple(substrings)

    def __call__(self, node: Any) -> Any:
        name = str(getattr(node, "name", ""))
        return node if any(s in name for s in self.substrings) else None


def enable_fx_dump(
    root: Union[str, Path],
    *,
    ops: Union[Sequence[str], Callable[[Any], Any], None] = None,
    config: Optional[Any] = None,
) -> Any:
    """A CompilerConfig (new, or `config` updated) that runs the FX graph eagerly and dumps every converted op's
    inputs and outputs as `.npy` under `<root>/msprobe_fx_dump`. `ops`: op-name substrings, or torchair's own
    filter callable (node -> node or None)."""
    dump_dir = Path(root) / FX_DUMP_DIR
    dump_dir.mkdir(parents=True, exist_ok=True)
    config = _new_config(config)
    data_dump = config.debug.data_dump
    data_dump.type = "npy"
    data_dump.path = str(dump_dir)
    if ops is not None:
        data_dump.filter = ops if callable(ops) else OpNameFilter(ops)
    return config
