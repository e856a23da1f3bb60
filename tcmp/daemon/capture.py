"""Switch torchair's dumps on in the layout tcmp reads (optional extra `npu`).

    import torch_npu, torchair
    from tcmp.daemon.capture import enable_ge_dump, enable_fx_dump, npu_backend
    config = enable_ge_dump("/data/dumps/run1", steps=[0, 1], fusion_off=False)   # target
    model = torch.compile(model, backend=npu_backend(config))   # torchair's backend, recording FX stacks

- GE dump (graph mode): `config.dump_config` (enable_dump, dump_path = `<root>/msprobe_ge_dump`, dump_mode,
  dump_step "0|1|2-5", dump_layer "op1 op2") plus `config.debug.graph_dump` (txt, same directory: the graph
  files the compare matches with; torchair before 2025-05 has no `path` option and writes them to the working
  directory), and optionally `config.fusion_config.fusion_switch_file` — the fusion-off switch file turns the
  fused run into a golden.
- FX dump (eager fallback, the usual golden): `config.debug.data_dump` (type npy, path = `<root>/msprobe_fx_dump`,
  filter = a callable node -> node | None; tcmp builds one from op-name substrings, as msprobe's op list does).
- FX stacks (the compare's Stack Info): torchair writes no stack into its graph files. `npu_backend(config)` is
  `torchair.get_npu_backend(compiler_config=config)` that also records, when torchair compiles a graph, each FX
  node's `node.meta["stack_trace"]` (the user's Python stack, as dynamo records it) into
  `tcmp_fx_stacks_{pid}.json` beside the graph dump (`config.debug.graph_dump.path`, else the working directory).
  The format is tcmp.schemas.fx_stacks': `{"format": "tcmp-fx-stacks", "version": 1, "pid": P, "graphs":
  [{"number": N or null, "nodes": [["{node}-{target}", "stack"], ...]}, ...]}`, one graph per compile in compile
  order, N being torchair's graph counter (its GE graph `graph_N`). It is recorded where torchair hands the
  graph AOT traced to its compiler (`torchair.npu_fx_compiler.get_compiler`, read by torchair's backend at each
  compile in every torchair version): the backend swaps in, for the duration of its own call only, a
  `get_compiler` whose compiler records the graph's nodes and then compiles it with torchair's own compiler.
  Nothing torchair compiles or runs changes. Use it for the run whose graph files the compare reads (the GE
  target, a fusion-off golden); a data-dump run writes no graph file to bind the stacks to.

torch_npu and torchair are imported only when a config has to be created (torchair ships inside torch_npu and is
importable once torch_npu is); pass `config=` to configure an existing CompilerConfig.
"""

from __future__ import annotations

import enum
import functools
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable, Optional, Union

from tcmp.schemas.files import write_atomically
from tcmp.schemas.fx_stacks import FxStackGraph, write_stack_file

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


def _has_option(options: Any, name: str) -> bool:
    """Whether a torchair config section has an option (older torchair lacks some; setting one raises)."""
    try:
        getattr(options, name)
    except (AttributeError, ValueError):
        return False
    return True


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
    return write_atomically(path, json.dumps(FUSION_OFF, indent=4) + "\n")  # never through a planted link


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
    if _has_option(config.debug.graph_dump, "path"):  # torchair before 2025-05 writes to the working directory
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


# --- FX stacks -----------------------------------------------------------------------------------------------


def graph_dump_dir(config: Any) -> Path:
    """Where torchair writes this config's graph files: `debug.graph_dump.path`, else the working directory."""
    path = getattr(config.debug.graph_dump, "path", None) if _has_option(config.debug.graph_dump, "path") else None
    path = getattr(path, "value", path)  # an OptionValue in some torchair versions
    return Path(path) if path else Path(os.getcwd())


def node_stacks(graph: Any) -> tuple[tuple[str, str], ...]:
    """(`{node}-{target}`, stack) of every node of an FX graph that has a recorded stack, in graph order."""
    out = []
    for node in graph.nodes:
        stack = node.meta.get("stack_trace") if hasattr(node, "meta") else None
        if stack:
            out.append((f"{node.name}-{node.target}", str(stack)))
    return tuple(out)


class StackRecorder:
    """The FX stacks of one process's compiles, rewritten to its stack file after each one."""

    def __init__(self, directory: Union[str, Path], pid: Optional[int] = None) -> None:
        self.directory = Path(directory)
        self.pid = pid  # None: the recording process's (torchair names graph files after the compiling process)
        self.graphs: list[FxStackGraph] = []

    def record(self, graph: Any, number: Optional[int]) -> Path:
        self.graphs.append(FxStackGraph(number, node_stacks(graph)))
        self.directory.mkdir(parents=True, exist_ok=True)
        return write_stack_file(self.directory, self.pid if self.pid is not None else os.getpid(), self.graphs)


class _RecordingCompiler:
    """torchair's compiler for one backend call: records the FX graph it is given, then compiles it unchanged."""

    def __init__(self, compiler: Any, recorder: StackRecorder, counter: Callable[[], Optional[int]]) -> None:
        self._compiler, self._recorder, self._counter = compiler, recorder, counter

    def __call__(self, gm: Any, example_inputs: Any) -> Any:
        before = self._counter()
        compiled = self._compiler(gm, example_inputs)
        after = self._counter()
        # the graph's number: torchair's counter moved by one for this compile (a GE graph or an FX dumper)
        number = after if before is not None and after == before + 1 else None
        self._recorder.record(gm.graph, number)
        return compiled

    def __getattr__(self, name: str) -> Any:  # set_arg_pos_to_source, codegen, config, …
        return getattr(self._compiler, name)


class _StacksDuringCompile:
    """For the duration of one backend call: torchair's `get_compiler` returns a recording compiler."""

    def __init__(self, compiler_module: Any, recorder: StackRecorder) -> None:
        self.module, self.recorder = compiler_module, recorder

    def _counter(self) -> Optional[int]:
        value = getattr(self.module, "_GLOBAL_GRAPH_ID", None)
        return value if isinstance(value, int) else None

    def __enter__(self) -> None:
        self.original = self.module.get_compiler

        def get_compiler(*args: Any, **kwargs: Any) -> Any:
            return _RecordingCompiler(self.original(*args, **kwargs), self.recorder, self._counter)

        self.module.get_compiler = get_compiler

    def __exit__(self, *exc: object) -> None:
        self.module.get_compiler = self.original


def npu_backend(config: Any, *, custom_decompositions: Optional[dict] = None, torchair: Any = None) -> Callable:
    """`torchair.get_npu_backend(compiler_config=config)` that records each compiled graph's FX stacks into
    `tcmp_fx_stacks_{pid}.json` beside the graph dump (see the module docstring). `torchair`: the module to use
    (default: imported through torch_npu)."""
    torchair = torchair if torchair is not None else load_torchair()
    kwargs = {"compiler_config": config}
    if custom_decompositions:
        kwargs["custom_decompositions"] = custom_decompositions
    backend = torchair.get_npu_backend(**kwargs)
    compiler_module = sys.modules.get("torchair.npu_fx_compiler") or getattr(torchair, "npu_fx_compiler", None)
    if compiler_module is None or not callable(getattr(compiler_module, "get_compiler", None)):
        raise CaptureUnavailable("this torchair has no torchair.npu_fx_compiler.get_compiler to record FX stacks at")
    recorder = StackRecorder(graph_dump_dir(config))

    @functools.wraps(backend)
    def recording_backend(gm: Any, example_inputs: Any, **options: Any) -> Any:
        with _StacksDuringCompile(compiler_module, recorder):
            return backend(gm, example_inputs, **options)

    recording_backend.stack_recorder = recorder  # type: ignore[attr-defined]
    return recording_backend
