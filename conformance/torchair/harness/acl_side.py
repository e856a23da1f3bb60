"""The aclgraph side of one model after its runs: the truth about every `.pt` torchair wrote, and one fault.

Runs in the harness's torch environment (the files are read with torch's own `torch.load`, not with tcmp's
reader), after the captures. For each aclgraph run `OUT/<model>/<run>/` (the tree as torchair and the stand-in's
save_npugraph_tensor wrote it, kept unchanged as the clean target) it writes
    <run>_fault/      a copy with the fault: every file of one node rewritten (real torch.save) with
                      `1.5·v + 0.5·roll(v) + 0.25` in the file's dtype — nothing else changes, so that node is the
                      first divergence of every token it is in
    <run>.truth.json  per file: node, counter k, the step whose values it holds (the last step that wrote it:
                      capture.py's `writes`), whether a golden file of that step holds its value; and per golden
                      FX file whether a file of the run holds its value
The fault node: the first node in torchair's graph order whose file holds a float tensor and whose FX file
(`{node}-{target}.OUTPUT.0`) exists, i.e. a node both sides name, not a view if there is another; else (an
optimized graph whose every saved node is a getitem or renamed) the first whose value an FX file holds.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import torch

from .fx_files import element, fx_files, is_numeric
from .values import same_elements, values_match

PT_NAME = re.compile(r"^(?P<node>.+)_device_(?P<device>\d+)_(?P<k>\d+)\.pt$")  # torch_npu's NPU path form
RANK_DIR = "worldsize1_global_rank0"
FAULT_SUFFIX = "_fault"


def _numpy(tensor: torch.Tensor) -> np.ndarray:
    return (tensor.float() if tensor.dtype == torch.bfloat16 else tensor).numpy()


def _fx_values(fx_root: Path) -> dict:
    """{step: [(FX file name, array)]}: every numeric tensor of the FX dump, elements of stacked files included."""
    out: dict = {}
    for f in fx_files(fx_root):
        value = f.load()
        if value.dtype == object:  # a pickled dict or list of tensors
            inner = value.item() if value.shape == () else list(value)
            parts = [str(k) for k in inner] if isinstance(inner, dict) else [str(i) for i in range(len(inner))]
            items = [(f"{f.path.name}[{p}]", element(value, (p,))) for p in parts]
            items = [(n, v) for n, v in items if v is not None]
        else:
            items = [(f.path.name, value)] if is_numeric(value) else []
        out.setdefault(f.step, []).extend(items)
    return out


def _held_steps(writes: list) -> dict:
    """{relative path: the last step that wrote it}."""
    held = {}
    for step, paths in enumerate(writes):
        for path in paths:
            held[path] = step
    return held


def _fault_value(tensor: torch.Tensor) -> torch.Tensor:
    v = tensor.double()
    return (1.5 * v + 0.5 * torch.roll(v.reshape(-1), 1).reshape(v.shape) + 0.25).to(tensor.dtype).contiguous()


_VIEW_TARGETS = re.compile(
    r"aten\.(_?(unsafe_)?view|t|transpose|permute|expand|reshape|slice|select|alias|"
    r"squeeze|unsqueeze|detach|as_strided)\."
)


def _fault_node(nodes: list, files: list, fx_by_step: dict) -> str:
    """A compute node both sides name, else a view both name, else any node an FX file holds the value of."""
    fx_names = {name.split("-", 1)[0] for items in fx_by_step.values() for name, _ in items if ".OUTPUT.0." in name}
    floats = {f["node"]: f for f in files if f["float"]}
    computed = [n for n in nodes if n["op"] == "call_function" and n["name"] in floats]
    for choice in (
        [n for n in computed if n["name"] in fx_names and not _VIEW_TARGETS.match(n["target"])],
        [n for n in computed if n["name"] in fx_names],
        [n for n in computed if floats[n["name"]]["fx_partners"]],
    ):
        if choice:
            return choice[0]["name"]
    raise RuntimeError("no node of the aclgraph dump holds a float tensor an FX file holds too")


def prepare_run(model_dir: Path, run: str, result: dict) -> dict:
    root = model_dir / run
    held = _held_steps(result.get("writes", []))
    fx_by_step = _fx_values(model_dir / "fx")
    files, values = [], {}
    for path in sorted((root / RANK_DIR).glob("*.pt")):
        match = PT_NAME.match(path.name)
        relative = str(path.relative_to(root))
        if match is None or relative not in held:
            raise RuntimeError(f"a file the aclgraph run did not write as torch_npu names them: {relative}")
        tensor = torch.load(path, weights_only=True)
        value = _numpy(tensor)
        values[relative] = (tensor, value)
        step = held[relative]
        partners = [name for name, fx in fx_by_step.get(step, []) if values_match(value, fx)]
        reshaped = [name for name, fx in fx_by_step.get(step, []) if same_elements(value, fx)]
        files.append({
            "file": relative, "node": match["node"], "k": int(match["k"]), "step": step,
            "dtype": str(tensor.dtype).replace("torch.", ""), "shape": list(tensor.shape),
            "float": tensor.is_floating_point() and tensor.numel() > 0, "fx_partners": partners,
            "fx_reshaped_partners": reshaped,
        })  # fmt: skip
    nodes = [n for graph in result["fx_graphs"].values() for n in graph]
    fault_node = _fault_node(nodes, files, fx_by_step)
    faulted_root = model_dir / f"{run}{FAULT_SUFFIX}"
    shutil.rmtree(faulted_root, ignore_errors=True)
    shutil.copytree(root, faulted_root)
    for f in files:
        f["faulted"] = f["node"] == fault_node
        if f["faulted"]:
            torch.save(_fault_value(values[f["file"]][0]), faulted_root / f["file"])
    held_by_step: dict = {}
    for f in files:
        held_by_step.setdefault(f["step"], []).append(values[f["file"]][1])
    fx_partnered = sorted(
        f"{step}/{name}" for step, items in fx_by_step.items() for name, fx in items
        if any(values_match(v, fx) for v in held_by_step.get(step, []))
    )  # fmt: skip
    truth = {"run": run, "fault_node": fault_node, "files": files, "fx_partnered": fx_partnered,
             "steps_dumped": sorted(held_by_step)}  # fmt: skip
    return truth, values


# the stage pairs judged besides each stage against the FX dump: (target run, golden run)
RUN_PAIRS = (("ro_optimized", "ro_original"),)


def _cross_partners(target: tuple, golden: tuple, target_run: str, golden_run: str) -> None:
    """Which golden-run files hold each target-run file's value in the same step, and the converse."""
    (t_truth, t_values), (g_truth, g_values) = target, golden
    for t in t_truth["files"]:
        t["partners_in"] = {golden_run: [
            Path(g["file"]).name for g in g_truth["files"]
            if g["step"] == t["step"] and values_match(t_values[t["file"]][1], g_values[g["file"]][1])
        ]}  # fmt: skip
    for g in g_truth["files"]:
        g["partnered_by"] = {target_run: any(
            Path(g["file"]).name in t["partners_in"][golden_run] for t in t_truth["files"]
        )}  # fmt: skip


def prepare_model(model_dir: Path, acl_runs: dict) -> dict:
    """{run: truth, or {"error": why}} for every aclgraph run of the model."""
    prepared, out = {}, {}
    for run, result in acl_runs.items():
        if not result.get("ok"):
            out[run] = {"error": (result.get("error") or "no result").strip().splitlines()[-1]}
            continue
        try:
            prepared[run] = prepare_run(model_dir, run, result)
        except Exception as exc:  # the harness's own failure for this run, named in the table
            out[run] = {"error": f"{type(exc).__name__}: {exc}"}
    for target_run, golden_run in RUN_PAIRS:
        if target_run in prepared and golden_run in prepared:
            _cross_partners(prepared[target_run], prepared[golden_run], target_run, golden_run)
    for run, (truth, _values) in prepared.items():
        (model_dir / f"{run}.truth.json").write_text(json.dumps(truth, indent=1))
        out[run] = truth
    return out
