"""Runs the catalogue through the real torchair, twice per model, as a user (or msprobe) does.

    python -m harness.capture --version 2.14.0 --out WORK/2.14.0 [--models a,b] [--jobs 2]

Runs in the harness's torch environment with the extracted torchair (compiled extensions stubbed) and the
torch_npu stand-in on the path. torch and torchair are imported once; every run is a forked child, so each starts
as a fresh process would (torchair's graph counter at 1, dynamo's caches empty) and two run at once on two cores.

Per model, under OUT/<model>/:
    ge/        the conversion run, in this directory, configured by tcmp's capture helpers (enable_ge_dump,
               npu_backend): torchair's graph dump (`dynamo_*graph*.txt`, in msprobe_ge_dump/, or here for
               torchair before 2025-05) and tcmp's FX stack file beside it; GE is the harness's executor
               (ge_executor.py), which saves to executed/ the graph torchair loaded and the inputs of every run;
               the GE dump tree is written into msprobe_ge_dump/ later (ge_dump.py)
    fx/        the FX data dump run, in this directory: torchair's `_NpuFxDumper` writes its .npy files
    capture.json   what both runs did: steps, the FX graphs as captured and as converted, errors
Both runs get the dump directory as their working directory, which every torchair version honours (older ones
have no `path` option and write there), as msprobe's dump directories are.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
import time
import traceback
from pathlib import Path

import torch
import torch_npu  # the stand-in; must be imported before torchair, as torch_npu is

from . import acl_side, fx_record, source_lines, torch_compat
from .versions import version as version_of

MODES = ("ge", "fx")
# aclgraph dump runs: run name -> (torchair mode, dump_config.data_dump_stage); each its own directory OUT/<model>/<run>
ACL_RUNS = {
    "ro_original": ("reduce-overhead", "original"),
    "ro_optimized": ("reduce-overhead", "optimized"),
    "ngx_original": ("npugraph_ex", "original"),
    "ngx_optimized": ("npugraph_ex", "optimized"),
}


def _set_option(config, path: str, value) -> None:
    *parents, leaf = path.split(".")
    for name in parents:
        config = getattr(config, name)
    setattr(config, leaf, value)


def _max_rel_diff(got, want) -> float:
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    worst = 0.0
    for g, w in zip(got, want):
        g, w = g.double(), w.double()
        if g.shape != w.shape:
            return float("inf")
        scale = w.abs().max().item() if w.numel() else 0.0
        diff = (g - w).abs().max().item() if w.numel() else 0.0
        worst = max(worst, diff / (scale + 1e-6))
    return worst


REPO = Path(__file__).resolve().parents[3]


def tcmp_capture():
    """tcmp's capture helpers (tcmp.daemon.capture), imported from the repository: its package directories map
    onto `tcmp.*` (pyproject's package-dir) through the `tcmp` package's search path. Nothing of tcmp beyond the
    standard library is needed for them, so the harness's torch environment does without installing tcmp."""
    if "tcmp" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "tcmp", REPO / "tcmp" / "__init__.py", submodule_search_locations=[str(REPO / "tcmp"), str(REPO)]
        )
        package = importlib.util.module_from_spec(spec)
        sys.modules["tcmp"] = package
        spec.loader.exec_module(package)
    return importlib.import_module("tcmp.daemon.capture")


def _register_patterns_of(mode: str) -> None:
    """What torchair's pattern pass registers when it optimizes a graph compiled in `mode` (torchair 2.14 registers
    npu_transpose_batchmatmul and npu_add_rms_norm_quant only outside max-autotune): its own `_apply_pattern_passes`
    on an empty graph. The registration is process-wide (lru_cache, one PatternMatcherPass), so the GE graphs
    compiled after it get those patterns too, as in a process that compiled a `mode` graph first."""
    import torchair

    try:
        from torchair.patterns.pattern_util import _apply_pattern_passes
    except ImportError:  # older torchair has no pattern pass
        return
    config = torchair.CompilerConfig()
    config.mode = mode
    graph = torch.fx.Graph()
    graph.output(None)
    _apply_pattern_passes(torch.fx.GraphModule(torch.nn.Module(), graph), config=config)


def _run(model, mode: str, model_dir: Path) -> dict:
    import torchair
    from torchair._ge_concrete_graph import ge_ir_pb2
    from torchair.core import _torchair

    from .ge_executor import RecordingExecutor

    work = model_dir / mode
    work.mkdir(parents=True, exist_ok=True)
    os.chdir(work)
    compile_options = None  # torch.compile(options=): npugraph_ex's configuration
    config = torchair.CompilerConfig()
    for path, value in model.config.items():
        _set_option(config, path, value)
    if mode == "fx":
        config.debug.data_dump.type = "npy"
        backend = torchair.get_npu_backend(compiler_config=config)
    elif ACL_RUNS.get(mode, ("",))[0] == "npugraph_ex":
        # as a user does (torch_npu's npugraph_ex backend, its options: npugraph_ex/configs/compiler_config.py);
        # the model's torchair options have no npugraph_ex counterpart and are not set
        stage = ACL_RUNS[mode][1]
        backend = "npugraph_ex"  # registered with dynamo by torch_npu (the stand-in) on import
        compile_options = {"dump_tensor_data": True, "data_dump_stage": stage, "data_dump_dir": str(work)}
    elif mode in ACL_RUNS:
        # as a user does (torchair's dump_config, configs/dump_config.py): torchair's own passes insert the
        # save_npugraph_tensor calls; the dump lands in dump_path/worldsize1_global_rank0/
        config.mode, stage = ACL_RUNS[mode]
        config.dump_config.enable_dump = True
        config.dump_config.dump_path = str(work)
        config.dump_config.data_dump_stage = stage
        # and torchair's graph dump of the optimized graph (fx2acl_converter writes it for the optimized stage
        # only), from which tcmp reads which node and output each saved getitem takes
        config.debug.graph_dump.type = "py"
        config.debug.graph_dump.path = str(work)
        backend = torchair.get_npu_backend(compiler_config=config)
    else:
        # as a user does: tcmp's capture helpers switch the GE dump and the graph dump on (in ge/msprobe_ge_dump;
        # torchair before 2025-05 puts the graph files in the working directory, ge/) and record the FX stacks
        capture_helpers = tcmp_capture()
        config = capture_helpers.enable_ge_dump(work, config=config)
        backend = capture_helpers.npu_backend(config, torchair=torchair)
        _torchair.EXECUTOR = RecordingExecutor(model_dir / "executed", ge_ir_pb2)
    if mode == "ge" and model.patterns_of_mode:
        _register_patterns_of(model.patterns_of_mode)
    module = model.build().eval()
    compiled = torch.compile(module, backend=backend, dynamic=model.dynamic, fullgraph=True, options=compile_options)
    diffs, eager_calls, writes = [], [], []
    with torch.no_grad():
        for step in range(model.steps):
            inputs = model.inputs(step)
            got = compiled(*inputs)
            if mode in ACL_RUNS:  # the files this step's saves wrote (a later step may write over one)
                writes.append(sorted({os.path.relpath(p, work) for p in torch_npu._save_op.WRITTEN}))
                torch_npu._save_op.WRITTEN.clear()
            if step == 0 and mode == "ge":
                eager_calls = source_lines.eager_calls(module, inputs)
            diffs.append(_max_rel_diff(got, module(*inputs)))
    if mode == "fx":
        graphs = fx_record.captured_graphs()
    elif mode in ACL_RUNS:
        graphs = fx_record.aclgraph_graphs()
    else:
        graphs = fx_record.converted_graphs()
    result = {"ok": True, "max_rel_diff_to_eager": max(diffs), "fx_graphs": graphs, "eager_calls": eager_calls}
    if mode in ACL_RUNS:
        result["writes"] = writes
    return result


def _child(model, mode: str, model_dir: Path) -> None:
    """Runs in the forked process; never returns."""
    code = 1
    try:
        log = open(model_dir / f"{mode}.log", "w")  # noqa: SIM115 — the process ends with os._exit
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        result = _run(model, mode, model_dir)
        code = 0
    except BaseException:
        result = {"ok": False, "error": traceback.format_exc()}
    try:
        (model_dir / f"{mode}.result.json").write_text(json.dumps(result))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _run_all(models, out: Path, jobs: int, acl_runs=()) -> dict:
    # every conversion run before any FX run: a model's FX dump is younger than its GE side, as when a user (or
    # msprobe) dumps GE first, and the two runs of a model never overlap; the aclgraph runs come last
    pending = [(m, mode) for mode in (*MODES, *acl_runs) for m in models]
    running: dict[int, tuple] = {}
    results: dict = {}
    while pending or running:
        while pending and len(running) < jobs:
            model, mode = pending.pop(0)
            model_dir = out / model.name
            model_dir.mkdir(parents=True, exist_ok=True)
            pid = os.fork()
            if pid == 0:
                _child(model, mode, model_dir)
            running[pid] = (model, mode, time.monotonic())
        pid, _status = os.wait()
        model, mode, started = running.pop(pid)
        result_file = out / model.name / f"{mode}.result.json"
        result = json.loads(result_file.read_text()) if result_file.exists() else {"ok": False, "error": "no result"}
        result["seconds"] = round(time.monotonic() - started, 2)
        results[(model.name, mode)] = result
        state = "ok" if result["ok"] else "FAILED"
        print(f"  {model.name:22s} {mode}: {state} ({result['seconds']} s)", flush=True)
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--models", default="")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    torchair_version = version_of(args.version)
    torch_compat.apply(torchair_version.torch_shims)
    import torchair  # noqa: F401 — imported once, before the forks

    from .models import catalogue

    chosen = [m for m in catalogue() if not args.models or m.name in args.models.split(",")]
    this = tuple(int(part) for part in args.version.split(".")[:2])
    models = [m for m in chosen if this >= m.min_version]
    skipped = {m.name: f"n/a: {m.min_version_why}" for m in chosen if this < m.min_version}
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    (out / "catalogue.json").write_text(json.dumps({"models": [m.name for m in models], "skipped": skipped}))
    results = _run_all(models, out, args.jobs, torchair_version.aclgraph_runs)
    for model in models:
        ge, fx = results[(model.name, "ge")], results[(model.name, "fx")]
        record = {
            "model": model.name,
            "exercises": model.exercises,
            "steps": model.steps,
            "fault_op_types": list(model.fault_op_types),
            "fuses": list(model.fuses),
            "ok": ge["ok"] and fx["ok"],
            "ge_run": {k: v for k, v in ge.items() if k not in ("fx_graphs", "eager_calls")},
            "fx_run": {k: v for k, v in fx.items() if k != "fx_graphs"},
            "fx_graphs_captured": fx.get("fx_graphs", {}),
            "fx_graphs_converted": ge.get("fx_graphs", {}),
            "eager_calls": ge.get("eager_calls", []),
            # per aclgraph run: what it did and torchair's graphs holding the save calls (fx_record.aclgraph_graphs)
            "acl_runs": {run: results[(model.name, run)] for run in torchair_version.aclgraph_runs},
        }
        # the fault and the truth of each aclgraph run's files (read with torch here; judged in tcmp's venv)
        record["acl_truth"] = acl_side.prepare_model(out / model.name, record["acl_runs"])
        (out / model.name / "capture.json").write_text(json.dumps(record, indent=1))
    return 0 if all(r["ok"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
