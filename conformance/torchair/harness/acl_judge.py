"""The aclgraph runs of one model: `tcmp compare` of each against its golden, judged against acl_side's truth.

Per model and aclgraph run (capture.ACL_RUNS; the truth, fault and faulted copy come from acl_side.py, in the
torch venv), in tcmp's venv:
- `<run>` vs the FX dump (`fx/`): target the faulted copy `<run>_fault/`, then the clean run (`<run>/` as torchair
  wrote it);
- the optimized stage vs the original stage (`ro_optimized` vs `ro_original`, the original's clean tree as golden);
- the same for torch_npu's npugraph_ex backend (`ngx_original`, `ngx_optimized` vs the FX dump).
The checks are evaluate.py's, on `.pt` files: false FAIL (a FAIL row on a file the harness did not fault), fault
FAILs and fault first (every token holding the faulted node's file), ops missing (a file in neither the table
nor the unmatched file), no partner w/ partner (an unmatched "no partner" item whose value a file of the other
side of the same step holds, or that a torchair behaviour explains: a graph input, a getitem, a pattern-fused
node, an FX input copy, a node torchair's passes removed, a multi-output node's output — from torchair's graphs),
by design w/o reason (a "by design" item whose reason names none of its behaviour's words), clean FAIL / clean
first divergence. A row pairing a file with a golden that does
not hold its value, or holds another step's, is a wrong pair (info); a "by design" item whose value the other
side holds is counted too (info: by design w/ partner).
"""

from __future__ import annotations

import ast
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Optional

from .evaluate import _API, CompareOutput, ModelResult, _clean_run, run_tcmp

# the torchair behaviours behind an aclgraph item without a partner, from torchair's graphs (read via gc after the
# runs): (name, words one of which a "by design" reason must contain)
GRAPH_INPUT = ("graph input", ("input", "placeholder"))
GETITEM = ("getitem of a multi-output node", ("getitem", "multi-output"))
FUSED = ("pattern fusion", ("fus", "pattern"))
FX_INPUT = ("FX input copy", ("input",))
MULTI_OUTPUT = ("output of a multi-output node", ("multi-output", "getitem"))
REMOVED = ("node removed by torchair's passes", ("no-op", "noop", "remov", "fus", "pattern"))
PATTERN_FUSED_TARGETS = frozenset(
    {
        "npu.npu_add_rms_norm_cast.default",
        "npu.npu_add_rms_norm_dynamic_quant.default",
        "npu.npu_add_rms_norm_quant.default",
        "npu.npu_transpose_batchmatmul.default",
    }
)  # judge.PATTERN_FUSED_TARGETS (judge imports this module)

FAULT_SUFFIX = "_fault"  # acl_side.FAULT_SUFFIX (that module needs torch)
# (table mode, target run, golden: "fx" or another run); the mode names the run in the table's mode column
PAIRS = (
    ("reduce-overhead original", "ro_original", "fx"),
    ("reduce-overhead optimized", "ro_optimized", "fx"),
    ("optimized vs original", "ro_optimized", "ro_original"),
    ("npugraph_ex original", "ngx_original", "fx"),
    ("npugraph_ex optimized", "ngx_optimized", "fx"),
)
EAGER_TOLERANCE = 2e-2
COMPARE_JOBS = 6  # judge.EAGER_TOLERANCE: the stand-in's replay against eager torch


def stage_options(run: str, golden: str) -> tuple[str, ...]:
    """The stage flags a user passes for these dumps: what torchair's `data_dump_stage` was for each aclgraph side
    (in the optimized stage a save's counter counts captures, not steps: tcmp needs to be told)."""
    flags: tuple[str, ...] = ()
    if run.endswith("_optimized"):
        flags += ("--target-stage", "optimized")
    if golden != "fx" and golden.endswith("_optimized"):
        flags += ("--golden-stage", "optimized")
    return flags


def _nodes(graphs: dict) -> dict:
    return {n["name"]: n for nodes in graphs.values() for n in nodes}


def _target_category(node: str, target_graph: dict):
    found = target_graph.get(node)
    if found is None:
        return None
    if found["op"] == "placeholder":
        return GRAPH_INPUT
    if "getitem" in found["target"]:
        return GETITEM
    return FUSED if found["target"] in PATTERN_FUSED_TARGETS else None


def _golden_category(item: dict, target_graph: dict, golden_graph: dict):
    node = item["Op Name"]
    if item["IO"] == "input":
        return FX_INPUT
    if node not in target_graph and node in golden_graph and golden_graph[node]["op"] == "call_function":
        if isinstance(golden_graph[node]["val"], list):  # a removed multi-output node: either reason is true
            return (REMOVED[0], REMOVED[1] + MULTI_OUTPUT[1])
        return REMOVED
    users = [n for n in target_graph.values() if {"node": node} in n["args"] and "getitem" in n["target"]]
    return MULTI_OUTPUT if users else None


def _golden_partners(file: dict, golden: str, truth: dict) -> list:
    if golden == "fx":
        return file["fx_partners"]
    return file.get("partners_in", {}).get(golden, [])


def evaluate_acl(version: str, model: str, mode: str, truth: dict, golden: str, compared: CompareOutput,
                 clean: CompareOutput, golden_partnered: set, graphs: tuple = ({}, {})) -> ModelResult:  # fmt: skip
    """`graphs`: torchair's FX graphs of the target run and of the golden ({name: node}), which say why an item
    has no partner."""
    target_graph, golden_graph = graphs
    result = ModelResult(version, model, refused=compared.refused, mode=mode)
    _clean_run(result, clean)
    if compared.refused is not None:
        return result
    by_name = {Path(f["file"]).name: f for f in truth["files"]}
    # the token a report names is the step the file holds (the counter k counts captures in the optimized stage)
    fault_tokens = {f["step"] for f in truth["files"] if f["faulted"]}
    in_table, fault_failed = set(), set()
    for row in compared.table:
        match = _API.match(row["API Name"])
        if match is None:
            raise ValueError(f"an API Name the harness cannot read: {row['API Name']}")
        result.rows += 1
        failed = row["Result"] == "FAIL"
        result.fails += failed
        target_name, bench = ast.literal_eval(row["Data Name"])[:2]
        file = by_name.get(Path(target_name).name)
        label = f"{row['API Name']} (token {row['Token']}) vs {bench}: {row['Result']}, cos {row.get('Cosine')}"
        if file is None:
            result.wrong_pairs.append(f"{label}: no such aclgraph file was written")
            continue
        in_table.add(file["file"])
        if failed and not file["faulted"]:
            result.false_fails.append(label)
        if failed and file["faulted"]:
            fault_failed.add(file["step"])
        # a pair is right when the golden tensor holds the file's value, or its elements in another shape (a
        # pattern's view form), which tcmp compares element by element
        right = [*_golden_partners(file, golden, truth), *(file["fx_reshaped_partners"] if golden == "fx" else ())]
        if Path(bench).name not in {Path(p).name.split("[")[0] for p in right}:
            result.wrong_pairs.append(f"{label}: the golden does not hold this file's value (step {file['step']})")
    result.fault_fails = bool(fault_tokens) and fault_failed == fault_tokens
    firsts = {(int(d["token"]), d["op"]) for d in (compared.summary or {}).get("first_divergence", [])
              if d.get("op") is not None}  # fmt: skip
    result.fault_first = bool(fault_tokens) and all((k, truth["fault_node"]) in firsts for k in fault_tokens)
    unmatched_files = set()
    for item in compared.unmatched:
        label = (
            f"{item['Side']} {item['Op Name']} {item['IO']} {item['Index']} (token {item['Token']}): {item['Reason']}"
        )
        if item["Side"] == "target":
            file = by_name.get(Path(item["Path"]).name)
            if file is None:
                continue
            unmatched_files.add(file["file"])
            partnered = bool(_golden_partners(file, golden, truth))
            category = _target_category(item["Op Name"], target_graph)
        else:
            partnered = _golden_key(item, golden) in golden_partnered
            category = _golden_category(item, target_graph, golden_graph)
        if item["Kind"] == "no partner" and partnered:
            result.unexplained_no_partner.append(label)
        elif item["Kind"] == "no partner" and category is not None:
            result.unexplained_no_partner.append(f"{label} [a torchair behaviour: {category[0]}]")
        named = category is not None and any(word in item["Reason"].lower() for word in category[1])
        if item["Kind"] == "by design" and category is not None and not named:
            result.by_design_without_reason.append(f"{label} [expected: {category[0]}]")
        if item["Kind"] == "by design" and partnered:
            result.by_design_with_partner.append(label)
    result.missing_ops = [f["file"] for f in truth["files"] if f["file"] not in in_table | unmatched_files]
    return result


def _golden_key(item: dict, golden: str) -> Optional[str]:
    """How acl_side names a golden file in `fx_partnered` / `partnered_by`: `{step}/{file name}` for FX files
    (the step from the FX directory), the file name for an aclgraph golden."""
    path = Path(item["Path"])
    return f"{path.parent.name}/{path.name}" if golden == "fx" else path.name


def judge_acl(version: str, model_dir: Path, record: dict, tcmp: Path) -> tuple[list, dict]:
    """(results, {mode: note}) of the model's aclgraph pairs. Their compares run COMPARE_JOBS at a time: each is
    a process of its own, mostly waiting for a share of a loaded machine's cores."""
    results, notes = [], {}
    truths = record.get("acl_truth", {})
    planned = []
    for mode, run, golden in PAIRS:
        if run not in record.get("acl_runs", {}):
            continue
        truth = truths.get(run, {"error": "no truth"})
        golden_truth = truths.get(golden, {}) if golden != "fx" else {}
        why = truth.get("error") or golden_truth.get("error")
        drift = record["acl_runs"][run].get("max_rel_diff_to_eager")
        if why is None and not (drift is not None and drift <= EAGER_TOLERANCE):
            why = f"the {run} run's outputs differ from eager torch by {drift} (relative)"
        if why is not None:
            results.append(ModelResult(version, model_dir.name, mode=mode))
            notes[mode] = f"HARNESS ERROR: {run}: {why}"
            continue
        planned.append((mode, run, golden, truth, golden_truth))
    with ThreadPoolExecutor(COMPARE_JOBS) as pool:
        futures = []
        for _mode, run, golden, _truth, _golden_truth in planned:
            golden_dir = model_dir / golden
            suffix = run if golden == "fx" else f"{run}_vs_{golden}"
            report = model_dir / f"report_{suffix}"
            stages = stage_options(run, golden)
            futures.append((
                pool.submit(run_tcmp, tcmp, model_dir / f"{run}{FAULT_SUFFIX}", golden_dir, report, stages),
                pool.submit(run_tcmp, tcmp, model_dir / run, golden_dir, report.with_name(f"{report.name}_clean"),
                            stages),
            ))  # fmt: skip
        for (mode, run, golden, truth, golden_truth), (compared, clean) in zip(planned, futures):
            if golden == "fx":
                partnered = set(truth["fx_partnered"])
            else:
                partnered = {Path(f["file"]).name for f in golden_truth["files"] if f.get("partnered_by", {}).get(run)}
            graphs = (
                _nodes(record["acl_runs"][run]["fx_graphs"]),
                _nodes(record["fx_graphs_captured"] if golden == "fx" else record["acl_runs"][golden]["fx_graphs"]),
            )
            results.append(evaluate_acl(version, model_dir.name, mode, truth, golden, compared.result(),
                                        clean.result(), partnered, graphs))  # fmt: skip
    return results, notes
