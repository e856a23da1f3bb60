"""One torchair version's models after their capture: write the GE side, run `tcmp compare`, judge (tcmp's venv).

    python -m harness.judge --version 2.14.0 --runs WORK/runs/2.14.0 --torchair DIR --tcmp PATH --out FILE

A process of its own per version: torchair's generated `ge_ir` protobuf module registers `ge_ir.proto` in
protobuf's default descriptor pool, and two versions' differing files of that name cannot share one process.
Writes {"results": [...], "notes": {model: why it has no counts}, "acl_notes": [[model, mode, why]]} to --out;
the aclgraph runs of a model are judged after its GE run (acl_judge.py), each a line of its own (its mode).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import asdict
from pathlib import Path

from . import acl_judge, dump_scope, evaluate, fx_files, ge_dump, ge_graph, ge_interp, graph_count, truth
from .versions import version as version_of

# The targets torchair 2.14's pattern replacements create (patterns/*.py, replace_fn): a node of one of them in the
# converted graph is a pattern fusion.
PATTERN_FUSED_TARGETS = frozenset(
    {
        "npu.npu_add_rms_norm_cast.default",
        "npu.npu_add_rms_norm_dynamic_quant.default",
        "npu.npu_add_rms_norm_quant.default",
        "npu.npu_transpose_batchmatmul.default",
    }
)
PATTERN_PASS_SINCE = (2, 14)  # torchair 2.5.1 has no pattern pass

# the clean run (the same GE dump without the fault) and its report, beside ge/ and report/
CLEAN_GE_DIR = "ge_clean"
CLEAN_REPORT_DIR = "report_clean"

# the compiled model's outputs (GE = the harness's interpreter) against eager torch, relative to the outputs' size
EAGER_TOLERANCE = 2e-2


def _cause(error: str) -> str:
    """The line of a traceback that says what went wrong: the harness's own exception if it is one."""
    lines = [line for line in error.strip().splitlines() if line.strip()]
    for marker in ("harness.", "Error:", "Error"):
        found = [line for line in lines if marker in line and not line.startswith(" ")]
        if found:
            return found[-1]
    return lines[-1] if lines else "no message"


def _args(node: dict) -> list:
    return [a["node"] for a in node["args"] if isinstance(a, dict) and "node" in a]


def expected_lines(record: dict, fused_nodes) -> dict:
    """{FX node name: the models.py lines its Stack Info must name}: the n-th node of a target in the captured
    graph is the n-th eager call of that target (targets whose counts differ are left out); a pattern-fused node
    of the converted graph takes the lines of the captured node sharing most of its inputs (the node the pattern
    started from)."""
    captured = [n for nodes in record["fx_graphs_captured"].values() for n in nodes if n["op"] == "call_function"]
    calls: dict = {}
    for target, lines in record.get("eager_calls", []):
        calls.setdefault(target, []).append(lines)
    nodes_of: dict = {}
    for node in captured:
        nodes_of.setdefault(node["target"], []).append(node)
    out = {}
    for target, nodes in nodes_of.items():
        if len(calls.get(target, ())) == len(nodes):
            out.update((node["name"], tuple(lines)) for node, lines in zip(nodes, calls[target]))
    converted = [n for nodes in record["fx_graphs_converted"].values() for n in nodes]
    for fused in (n for n in converted if n["name"] in fused_nodes):
        shared = [(len(set(_args(fused)) & set(_args(n))), n["name"]) for n in captured if n["name"] in out]
        best = max(shared, default=(0, None))
        if best[0] > 0 and [s for s, _ in shared].count(best[0]) == 1:
            out[fused["name"]] = out[best[1]]
    return out


def _check_fusions(key: str, record: dict) -> None:
    """The pattern fusions torchair made are exactly those the catalogue model exists for (none before 2.14)."""
    made = sorted(
        n["target"] for nodes in record["fx_graphs_converted"].values() for n in nodes
        if n["op"] == "call_function" and n["target"] in PATTERN_FUSED_TARGETS
    )  # fmt: skip
    has_pass = tuple(int(p) for p in key.split(".")[:2]) >= PATTERN_PASS_SINCE
    expected = sorted(record.get("fuses", ())) if has_pass else []
    if made != expected:
        raise ge_dump.HarnessError(f"torchair's pattern pass fused {made or 'nothing'}, the model is built for "
                                   f"{expected or 'no fusion'}")  # fmt: skip


def judge_model(key: str, model_dir: Path, ir, tcmp: Path, rank_dirs: bool) -> evaluate.ModelResult:
    record = json.loads((model_dir / "capture.json").read_text())
    for mode in ("ge_run", "fx_run"):
        if not record[mode]["ok"]:
            raise ge_dump.HarnessError(f"torchair's {mode[:2]} run failed: {_cause(record[mode].get('error', ''))}")
    drift = record["ge_run"]["max_rel_diff_to_eager"]
    if not drift <= EAGER_TOLERANCE:
        raise ge_dump.HarnessError(f"the GE run's outputs differ from eager torch by {drift:.3g} (relative)")
    _check_fusions(key, record)
    graph_count.check_graph_counts(model_dir, ir)  # tcmp's reader = torchair's protobuf, subgraphs included
    ge_root = model_dir / "ge"
    for where in (ge_root, ge_root / ge_dump.GE_DUMP_DIR):  # a previous GE side, or tcmp's graph cache
        for stale in where.iterdir() if where.is_dir() else ():
            # torchair's dump options (ge_dump_data_json/) are the conversion run's, not a previous GE side
            if stale.is_dir() and stale.name not in (ge_dump.GE_DUMP_DIR, dump_scope.OPTIONS_DIR):
                shutil.rmtree(stale)
    for stale in (CLEAN_GE_DIR, "report", CLEAN_REPORT_DIR):
        shutil.rmtree(model_dir / stale, ignore_errors=True)
    # the clean run's directory: the conversion run's graph files and FX stack file, a GE dump without the fault
    shutil.copytree(ge_root, model_dir / CLEAN_GE_DIR, symlinks=True)
    fx = fx_files.fx_files(model_dir / "fx")
    fused_nodes = frozenset(
        n["name"] for nodes in record["fx_graphs_converted"].values() for n in nodes
        if n["target"] in PATTERN_FUSED_TARGETS
    )  # fmt: skip
    fault_types = tuple(record["fault_op_types"])
    side = ge_dump.write_ge_side(model_dir, ir, fx, fault_types, rank_dirs, fused_nodes)
    ge_dump.write_ge_side(model_dir, ir, fx, fault_types, rank_dirs, fused_nodes, model_dir / CLEAN_GE_DIR, False)
    model_truth = truth.ModelTruth(side, fx, record["fx_graphs_captured"], record["fx_graphs_converted"])
    model_truth.source_lines = expected_lines(record, fused_nodes)
    compared = evaluate.run_tcmp(tcmp, model_dir / "ge", model_dir / "fx", model_dir / "report")
    clean = evaluate.run_tcmp(tcmp, model_dir / CLEAN_GE_DIR, model_dir / "fx", model_dir / CLEAN_REPORT_DIR)
    return evaluate.evaluate(key, model_dir.name, model_truth, compared, clean)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", required=True)
    parser.add_argument("--runs", required=True, type=Path)
    parser.add_argument("--torchair", required=True, type=Path)
    parser.add_argument("--tcmp", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    torchair_version = version_of(args.version)
    ir = ge_graph.load_ir_module(args.torchair / "torchair")
    results, notes, acl_notes_out = [], {}, []
    catalogue = args.runs / "catalogue.json"
    listed = json.loads(catalogue.read_text()) if catalogue.exists() else {"models": [], "skipped": {}}
    names = listed["models"]
    for name, why in listed["skipped"].items():
        results.append(asdict(evaluate.ModelResult(args.version, name)))
        notes[name] = why
    for name in names:
        model_dir = args.runs / name
        try:
            if not (model_dir / "capture.json").exists():
                raise ge_dump.HarnessError("the capture did not finish this model")
            result = judge_model(args.version, model_dir, ir, args.tcmp, torchair_version.ge_rank_dirs)
        except (ge_dump.HarnessError, ge_interp.UnknownGeOp) as exc:
            result = evaluate.ModelResult(args.version, name)
            notes[name] = f"HARNESS ERROR: {exc}"
        results.append(asdict(result))
        if (model_dir / "capture.json").exists():  # the aclgraph runs: their own lines of the table
            acl_results, acl_notes = acl_judge.judge_acl(
                args.version, model_dir, json.loads((model_dir / "capture.json").read_text()), args.tcmp
            )
            results.extend(asdict(r) for r in acl_results)
            acl_notes_out.extend([name, mode, note] for mode, note in acl_notes.items())
        print(f"  {name:22s} judged", flush=True)
    if not names:
        notes["*"] = "HARNESS ERROR: the capture did not start"
    args.out.write_text(json.dumps({"results": results, "notes": notes, "acl_notes": acl_notes_out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
