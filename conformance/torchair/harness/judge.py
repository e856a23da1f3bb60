"""One torchair version's models after their capture: write the GE side, run `tcmp compare`, judge (tcmp's venv).

    python -m harness.judge --version 2.14.0 --runs WORK/runs/2.14.0 --torchair DIR --tcmp PATH --out FILE

A process of its own per version: torchair's generated `ge_ir` protobuf module registers `ge_ir.proto` in
protobuf's default descriptor pool, and two versions' differing files of that name cannot share one process.
Writes {"results": [...], "notes": {model: why it has no counts}} to --out.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import asdict
from pathlib import Path

from . import evaluate, fx_files, ge_dump, ge_graph, ge_interp, truth
from .versions import version as version_of

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


def judge_model(key: str, model_dir: Path, ir, tcmp: Path, rank_dirs: bool) -> evaluate.ModelResult:
    record = json.loads((model_dir / "capture.json").read_text())
    for mode in ("ge_run", "fx_run"):
        if not record[mode]["ok"]:
            raise ge_dump.HarnessError(f"torchair's {mode[:2]} run failed: {_cause(record[mode].get('error', ''))}")
    drift = record["ge_run"]["max_rel_diff_to_eager"]
    if not drift <= EAGER_TOLERANCE:
        raise ge_dump.HarnessError(f"the GE run's outputs differ from eager torch by {drift:.3g} (relative)")
    for stale in (model_dir / "ge").iterdir():  # a previous GE side, or tcmp's graph cache
        if stale.is_dir():
            shutil.rmtree(stale)
    shutil.rmtree(model_dir / "report", ignore_errors=True)
    fx = fx_files.fx_files(model_dir / "fx")
    side = ge_dump.write_ge_side(model_dir, ir, fx, tuple(record["fault_op_types"]), rank_dirs)
    model_truth = truth.ModelTruth(side, fx, record["fx_graphs_captured"], record["fx_graphs_converted"])
    compared = evaluate.run_tcmp(tcmp, model_dir / "ge", model_dir / "fx", model_dir / "report")
    return evaluate.evaluate(key, model_dir.name, model_truth, compared)


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
    results, notes = [], {}
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
        print(f"  {name:22s} judged", flush=True)
    if not names:
        notes["*"] = "HARNESS ERROR: the capture did not start"
    args.out.write_text(json.dumps({"results": results, "notes": notes}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
