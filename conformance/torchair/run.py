"""Conformance with the real torchair: build the environment, run the catalogue, write the GE side, compare, judge.

    .venv/bin/python conformance/torchair/run.py [--work DIR] [--versions 2.14.0,2.5.1] [--models a,b]
                                                 [--tcmp PATH] [--jobs 2] [--keep-env]

Runs with tcmp's own environment (the repository's .venv): the GE side uses tcmp's synthetic GE writer, the
compare is `tcmp compare` as a subprocess. Everything torch needs runs in the harness's venv (harness/env_build).
Exit status: 0 when every acceptance check holds on every model and version, 1 when one does not, 2 when the
harness itself could not produce a trustworthy result for some model (see its message).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import env_build, evaluate, report
from harness.versions import VERSIONS, version

REPO = Path(__file__).resolve().parents[2]


class Clock:
    def __init__(self) -> None:
        self.start = time.monotonic()
        self.laps: list[tuple[str, float]] = []
        self._last = self.start

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.laps.append((name, now - self._last))
        self._last = now

    def text(self) -> str:
        parts = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self.laps)
        return f"total {time.monotonic() - self.start:.1f} s ({parts})"


def _capture(env: env_build.HarnessEnv, key: str, out: Path, models: str, jobs: int) -> None:
    environment = dict(os.environ, PYTHONPATH=env.pythonpath(key), OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    # torch turns its custom-op aliasing check from a warning into an error when `CI` is set (its own CI's
    # setting), and torch_npu's `npu_fused_infer_attention_score.out` returns its `out` tensors under a schema
    # that declares no alias, as the stand-in's does: a user's run gets the warning, so the harness's run must too
    environment["TORCHINDUCTOR_ERROR_ON_CUSTOM_OP_ALIASING"] = "0"
    command = [str(env.python), "-m", "harness.capture", "--version", key, "--out", str(out), "--jobs", str(jobs)]
    if models:
        command += ["--models", models]
    print(f"torchair {key}: running the catalogue", flush=True)
    subprocess.run(command, env=environment, check=False)  # per-model failures are in each capture.json


def _judge(key: str, out: Path, env: env_build.HarnessEnv, tcmp: Path) -> dict:
    """harness.judge for one version, in this environment (tcmp's) but a process of its own."""
    verdicts = out / "judged.json"
    command = [sys.executable, "-m", "harness.judge", "--version", key, "--runs", str(out), "--torchair",
               str(env.torchair_roots[key]), "--tcmp", str(tcmp), "--out", str(verdicts)]  # fmt: skip
    environment = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent))
    print(f"torchair {key}: GE side, tcmp compare, judgement", flush=True)
    proc = subprocess.run(command, env=environment, check=False)
    if proc.returncode != 0 or not verdicts.exists():
        return {"results": [], "notes": {"*": f"HARNESS ERROR: harness.judge exited {proc.returncode}"}}
    return json.loads(verdicts.read_text())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=REPO / "build" / "conformance-torchair")
    parser.add_argument("--versions", default=",".join(v.key for v in VERSIONS))
    parser.add_argument("--models", default="")
    parser.add_argument("--tcmp", type=Path, default=Path(sys.executable).parent / "tcmp")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    clock = Clock()
    versions = [version(k) for k in args.versions.split(",")]
    work = args.work.resolve()
    env = env_build.build(work, versions)
    clock.lap("environment")
    results, notes, harness_errors = [], {}, []
    for v in versions:
        out = work / "runs" / v.key
        shutil.rmtree(out, ignore_errors=True)
        _capture(env, v.key, out, args.models, args.jobs)
        clock.lap(f"torchair {v.key}")
        judged = _judge(v.key, out, env, args.tcmp)
        for entry in judged["results"]:
            results.append(evaluate.ModelResult(**entry))
        for model, note in judged["notes"].items():
            notes[(v.key, model, evaluate.GE_MODE)] = note
            if note.startswith("HARNESS ERROR"):
                harness_errors.append(f"{v.key} {model}: {note}")
            if model == "*":  # the capture of this version did not start
                results.append(evaluate.ModelResult(v.key, "*"))
        for model, mode, note in judged.get("acl_notes", []):
            notes[(v.key, model, mode)] = note
            if note.startswith("HARNESS ERROR"):
                harness_errors.append(f"{v.key} {model} {mode}: {note}")
        clock.lap(f"GE side + compare {v.key}")
    print()
    print(report.table(results, notes))
    print()
    print(report.examples(results))
    report.write_details(work / "results.json", results)
    print(f"\ndetails: {work / 'results.json'}; dumps and reports: {work / 'runs'}")
    print(f"timing: {clock.text()}")
    for line in harness_errors:
        print(f"harness error: {line}", file=sys.stderr)
    if harness_errors:
        return 2
    applicable = [r for r in results if not notes.get((r.version, r.model, r.mode), "").startswith("n/a")]
    return 0 if all(r.passed or evaluate.known_gap(r) for r in applicable) else 1


if __name__ == "__main__":
    sys.exit(main())
