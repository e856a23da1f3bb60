"""Benchmark of `tcmp compare --mode torchair` (issue 3; not a test).

A synthetic dump pair of about 2,000 GE ops x 2 tokens with ~32K-element activations (≈1.5 GB for both sides) is
written once into a work directory; then, in the same run:

- baseline: plainly reading every byte of both dumps (1 MiB chunks into a reused buffer), page cache warm;
- `tcmp compare` in tensor mode (a subprocess, both cores), wall time as a ratio to the baseline (the warm-cache
  "<= 3x" target is retired: see bench/README.md);
- the first compare of the dump (its graph files parsed: the graph cache removed) against a second one (the
  graph cached): target <= 1.2x;
- the same in statistics mode;
- tensor mode again with `--jobs 1`: one process instead of a main process, a fork server and two workers, the
  memory side of the trade-off;
- cold: the plain read and the tensor-mode compare again, each after the dumps were dropped from the page cache
  (`posix_fadvise(POSIX_FADV_DONTNEED)` on every file): the usual case for a dump of hundreds of GB, which
  cannot stay cached between the inference that wrote it and the compare;
- the floor under the ratio: in one more compare (in this process, one job, not timed as a whole), the CPU time of
  the work no implementation can skip, timed call by call: the compiled pair loop that reads every compared pair's
  elements once for all its metrics and stats (`c_loops.pair_sums`), and the conversion of device formats
  (FRACTAL_NZ, NC1HWC0, ...) back to ND (`to_nd`). Spread over the cores and added to the plain read (spread too),
  it is the least a compare could take; what lies above it is per-file and per-row work;
- the lean Python pass (bench/lean_floor.py): every token passed once with tuples and no layers, the least any
  compare written in Python could take per file here (a lower bound: it skips checks, matching and the report);
- peak memory of each, sampled from /proc every 20 ms over the process tree in one more run (not timed: the
  sampling takes CPU from the compare): PSS summed (shared pages split between the processes, the memory really
  used) against the target 2 x the largest tensor + 200 MB, and RSS summed (which counts shared pages once per
  process) for reference.

The memory target holds "whatever the dump size": a dump grows with its tokens (and ranks), so `--tokens 8
--hidden 32 --seq 12` (80K small files) against `--tokens 2 --hidden 32 --seq 12` (20K) shows what the file count
costs.

    python bench/bench_compare.py [--work DIR] [--layers N] [--tokens N] [--hidden N] [--seq N] [--keep]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Optional

from baseline import drop_cache, read_plainly
from lean_floor import lean_floor

from tcmp.compare.collect.inputs import collect
from tcmp.compare.execute.run import run_compare
from tcmp.compare.judge import metrics
from tcmp.compare.report.outcome import CompareOptions, DataMode
from tcmp.schemas import ge_dump
from tcmp.schemas.host import usable_cpus
from tcmp.schemas.synth.faults import Fault, FaultKind
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario


def read_all(roots) -> int:
    return read_plainly(os.path.join(d, name) for root in roots for d, _, files in os.walk(root) for name in files)


def drop_from_cache(roots) -> None:
    for root in roots:
        for directory, _, files in os.walk(root):
            for name in files:
                drop_cache(os.path.join(directory, name))


def tree_memory(pid: int) -> tuple[int, int]:
    """(RSS, PSS) in bytes, summed over a process and all its descendants. RSS counts pages shared between the
    processes (numpy, the interpreter) once per process; PSS splits them, so its sum is the memory really used."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    parent = int(handle.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    rss = pss = 0
    stack = [pid]
    while stack:
        current = stack.pop()
        stack.extend(children.get(current, ()))
        try:
            with open(f"/proc/{current}/smaps_rollup") as handle:
                for line in handle:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1]) * 1024
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1]) * 1024
        except OSError:
            continue
    return rss, pss


class _Timed:
    """A function that adds up the time spent in it."""

    def __init__(self, function) -> None:
        self.function, self.seconds, self.calls = function, 0.0, 0

    def __call__(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return self.function(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start
            self.calls += 1


def essential_work(target: Path, golden: Path) -> tuple[float, _Timed, _Timed]:
    """One tensor-mode compare in this process (one job, no report) with its compiled pair loop and its device
    format conversions timed call by call: (the compare's wall time, the loop, the conversions)."""
    fused, convert = metrics.c_loops, ge_dump.to_nd
    if fused is None:
        raise SystemExit("tcmp.summaries.compiled is not built: no floor to measure")
    pair_sums, to_nd = _Timed(fused.pair_sums), _Timed(convert)
    metrics.c_loops = type("TimedFused", (), {"pair_sums": staticmethod(pair_sums)})
    ge_dump.to_nd = to_nd
    try:
        start = time.perf_counter()
        run_compare(CompareOptions(target, golden, mode=DataMode.TENSOR, jobs=1))
        return time.perf_counter() - start, pair_sums, to_nd
    finally:
        metrics.c_loops, ge_dump.to_nd = fused, convert


def run_measured(
    command: list[str], sample_memory: bool, env: Optional[dict[str, str]] = None
) -> tuple[float, tuple[int, int], subprocess.CompletedProcess]:
    """Wall time, and with `sample_memory` the peak (RSS, PSS) of the process tree. Sampling reads every
    process's smaps_rollup 50 times a second, which takes CPU from the compare on a small machine: the timed
    runs do not sample. `env`: the child's environment (None: this one's)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    peak = (0, 0)
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            rss, pss = tree_memory(process.pid)
            peak = (max(peak[0], rss), max(peak[1], pss))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    if sample_memory:
        sampler.start()
    out, err = process.communicate()
    elapsed = time.perf_counter() - start
    done.set()
    if sample_memory:
        sampler.join()
    return elapsed, peak, subprocess.CompletedProcess(command, process.returncode, out, err)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, help="work directory (default: a temporary one)")
    parser.add_argument("--layers", type=int, default=160, help="model layers (~12.5 GE ops each)")
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="tcmp-bench-compare-"))
    os.environ["XDG_CACHE_HOME"] = str(work / "cache")  # tcmp's graph cache, emptied where a first compare is timed
    scenario_root = work / "dump"
    try:
        t0 = time.perf_counter()
        if not (scenario_root / "target").exists():
            config = ScenarioConfig(
                model=ModelConfig(layers=args.layers, hidden=args.hidden, seq=args.seq),
                tokens=args.tokens,
                write_fusion_off=False,
                faults=(Fault("layers.1/MatMul_1", FaultKind.REL_ERROR), Fault("SoftmaxV2_7", FaultKind.NAN)),
            )
            write_scenario(scenario_root, config)
        target = scenario_root / "target" / "msprobe_ge_dump"
        golden = scenario_root / "golden_fx" / "msprobe_fx_dump"
        files = sum(len(f) for root in (target, golden) for _, _, f in os.walk(root))
        ge_ops = sum(len(f) for _, _, f in os.walk(target)) - 2
        print(f"dump: {files} files, ~{ge_ops} GE op executions; written in {time.perf_counter() - t0:.1f} s")
        largest = max(p.stat().st_size for root in (target, golden) for p in root.rglob("*") if p.is_file())

        read_all([target, golden])  # warm the page cache
        reads = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            size = read_all([target, golden])
            reads.append(time.perf_counter() - start)
        baseline = statistics.median(reads)
        print(f"plain read of both dumps: {size / 1e9:.2f} GB in {baseline:.3f} s ({size / baseline / 1e9:.2f} GB/s)")

        tcmp = [sys.executable, "-m", "tcmp"]
        cores = usable_cpus()
        runs = (("tensor", cores), ("statistics", cores), ("tensor", 1))  # the last: one process, for memory
        results = {}
        for mode, jobs in runs:
            times, peak_memory = [], (0, 0)
            for run in range(args.repeat + 1):  # the timed repetitions, then one run sampling memory
                out = work / f"report_{mode}_{jobs}"
                shutil.rmtree(out, ignore_errors=True)
                elapsed, peak, done = run_measured(
                    [*tcmp, "compare", "-m", "torchair", "-tp", str(target), "-gp", str(golden), "-o", str(out),
                     "--data-mode", mode, "--jobs", str(jobs)],
                    sample_memory=run == args.repeat,
                )  # fmt: skip
                if done.returncode != 0:
                    print(done.stdout, done.stderr)
                    return 1
                if run < args.repeat:
                    times.append(elapsed)
                else:
                    peak_memory = peak
            results[(mode, jobs)] = (statistics.median(times), peak_memory)
            print(done.stdout.splitlines()[1] if len(done.stdout.splitlines()) > 1 else done.stdout)

        def tensor_compare(out: Path) -> Optional[float]:
            """One tensor-mode compare on every core: its wall time (None, after printing why, if it failed)."""
            shutil.rmtree(out, ignore_errors=True)
            elapsed, _, done = run_measured(
                [*tcmp, "compare", "-m", "torchair", "-tp", str(target), "-gp", str(golden), "-o", str(out),
                 "--data-mode", "tensor", "--jobs", str(cores)],
                sample_memory=False,
            )  # fmt: skip
            if done.returncode != 0:
                print(done.stdout, done.stderr)
                return None
            return elapsed

        # The first compare of a dump parses its graph files; later ones find them in the graph cache.
        cache_dirs = [Path(os.environ["XDG_CACHE_HOME"]) / "tcmp" / "graphs"]
        first_runs, second_runs = [], []
        for _ in range(args.repeat):
            for directory in cache_dirs:
                shutil.rmtree(directory, ignore_errors=True)
            for runs_list in (first_runs, second_runs):
                elapsed = tensor_compare(work / "report_first")
                if elapsed is None:
                    return 1
                runs_list.append(elapsed)
        first, second = statistics.median(first_runs), statistics.median(second_runs)
        graph_bytes = sum(g.stat().st_size for g in target.rglob("dynamo_*.txt"))

        cold_reads, cold_compares = [], []
        for _ in range(args.repeat):
            drop_from_cache([target, golden])
            start = time.perf_counter()
            read_all([target, golden])
            cold_reads.append(time.perf_counter() - start)
            drop_from_cache([target, golden])
            elapsed = tensor_compare(work / "report_cold")
            if elapsed is None:
                return 1
            cold_compares.append(elapsed)
        cold_read, cold_compare = statistics.median(cold_reads), statistics.median(cold_compares)

        wall_one_job, pair_loop, conversions = essential_work(target, golden)
        lean = lean_floor(collect(target, golden), str(work / "lean_rows.csv"))

        rss_target = 2 * largest + 200e6
        print()
        print(f"{'measure':<34}{'value':>12}{'ratio / target':>22}")
        print(f"{'plain read (baseline)':<34}{baseline:>11.2f}s{'1.00x':>22}")
        for (mode, jobs), (elapsed, _) in results.items():
            label = f"{mode}-mode compare, --jobs {jobs}"
            print(f"{label:<34}{elapsed:>11.2f}s{elapsed / baseline:>15.2f}x")
        floor = baseline / cores + (pair_loop.seconds + conversions.seconds) / cores
        print(f"{'floor: read + loop + to_nd':<34}{floor:>11.2f}s{floor / baseline:>15.2f}x")
        print(f"  (in a one-job compare of {wall_one_job:.2f} s: pair loop {pair_loop.seconds:.2f} s in "
              f"{pair_loop.calls} calls, to_nd {conversions.seconds:.2f} s in {conversions.calls} calls; "
              f"both and the read spread over {cores} cores)")  # fmt: skip
        lean_wall = lean.floor(cores)
        print(f"{'lean Python pass (lower bound)':<34}{lean_wall:>11.2f}s{lean_wall / baseline:>15.2f}x")
        print(f"  (bench/lean_floor.py: {lean.pairs} pairs, tokens {', '.join(f'{t:.2f}' for t in lean.tokens)} s, "
              f"spread over {cores} cores, + {lean.imports:.2f} s to start Python and import numpy and protobuf; "
              "no listing checks, matching, or report)")  # fmt: skip
        print(
            f"{'first compare (graph not cached)':<34}{first:>11.2f}s{first / second:>15.2f}x of the second (<= 1.2x)"
        )
        print(f"{'second compare (graph cached)':<34}{second:>11.2f}s{'1.00x':>22}")
        print(f"  (graph text: {graph_bytes / 1e6:.1f} MB in {len(cache_dirs)} files)")
        print(f"{'cold: plain read':<34}{cold_read:>11.2f}s{'1.00x':>22}")
        print(f"{f'cold: tensor-mode compare, --jobs {cores}':<34}{cold_compare:>11.2f}s"
              f"{cold_compare / cold_read:>15.2f}x (<= 3x)")  # fmt: skip
        if cold_read < 2 * baseline:
            print("(the cold runs were not cold: posix_fadvise did not drop the dumps from the page cache here)")
        for (mode, jobs), (_, (rss, pss)) in results.items():
            print(f"{f'peak PSS, {mode}, --jobs {jobs}':<34}{pss / 1e6:>10.0f}MB{pss / rss_target:>15.2f} of "
                  f"{rss_target / 1e6:.0f} MB (RSS summed over processes: {rss / 1e6:.0f} MB)")  # fmt: skip
        print(f"largest tensor file: {largest / 1e6:.2f} MB")
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
