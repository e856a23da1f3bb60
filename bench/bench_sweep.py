"""How the compare's cost grows with the dump (issue 26; not a test).

Sweeps one axis at a time from a base case of many small tensors (tcmp's synthetic GE vs FX dump, hidden size 16,
so the fixed costs per file, op and row are all there is): FX nodes per graph (default 1K, 10K, 100K), tokens
(1, 8, 64) at the smallest graph, ranks (1, 8) at the smallest graph and one token. Each case is compared twice
with the page written (the default): first with tcmp's graph cache empty (the graph text parsed), then again
(the graph cached). Printed per case: rows, dump MB, wall time of both compares, the first/second ratio
(target ≤ 1.2), time per row and per MB, and the peak RSS of the largest process of the compare (`wait4`'s
`ru_maxrss`: exact and costing the compare nothing, where sampling would) against the target of 2 × the
largest tensor + 200 MB.

The fits, against the base case measured in the same run (the ratios are what the targets are judged on):

- time per row of the first and of the second compare along the nodes axis, as a ratio to the smallest graph's
  (target: within ±20 %, i.e. no planning that grows with the graph), and the exponent b of wall ∝ rows^b from a
  least-squares fit in log space (1: linear);
- peak RSS along the tokens and ranks axes, as a ratio to the base case's (flat: ~1).

    python bench/bench_sweep.py [--work DIR] [--nodes 1000,10000,100000] [--tokens 1,8,64] [--ranks 1,8]
        [--jobs 1] [--repeat 3] [--keep]

A compare that takes less than a minute is run `--repeat` times (each first compare with the cache emptied
again) and its least time kept, its largest RSS.

`--jobs 1` (the default here) keeps the time per row free of the scheduling of two processes on a shared
machine; the dumps are written once under --work and reused.
"""

from __future__ import annotations

import argparse
import csv
import math
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

FX_NODES_PER_LAYER = 1364 / 80  # what tcmp's synthetic model has (80 layers: 1,364 FX nodes, counted)
HIDDEN, SEQ = 16, 12  # the smallest the synthetic model takes: per-file costs dominate
RSS_FLOOR_MB, TENSOR_FACTOR = 200.0, 2.0
PER_ROW_SPREAD, FIRST_OVER_SECOND = 0.20, 1.2
# Compares shorter than this are repeated (--repeat) and their least time kept: on a shared machine one run of a
# one-second compare moved by 2x between two sweeps, and the time per row is a ratio of such runs. A longer one
# runs for minutes, over which the machine's other work averages out.
REPEATED_UP_TO_S = 60.0


@dataclass(frozen=True)
class Case:
    nodes: int
    tokens: int
    ranks: int

    @property
    def name(self) -> str:
        return f"n{self.nodes}_t{self.tokens}_r{self.ranks}"


@dataclass(frozen=True)
class Run:
    wall: float
    cpu: float  # user + system time of the compare's processes
    peak_rss_mb: float

    def cost(self, clock: str) -> float:
        return self.cpu if clock == "cpu" else self.wall


@dataclass(frozen=True)
class Measured:
    case: Case
    fx_nodes: int
    rows: int
    dump_mb: float
    largest_tensor_mb: float
    first: Run
    second: Run

    @property
    def rss_target_mb(self) -> float:
        return TENSOR_FACTOR * self.largest_tensor_mb + RSS_FLOOR_MB


def write_dump(case: Case, root: Path) -> tuple[Path, Path, int]:
    """The case's dump under `root` (written once): target, golden and the FX nodes of its graph. Written by a
    spawned process: the writer grows to GBs on the largest graph, and a process forked from this one starts with
    this one's RSS as its `ru_maxrss`, which would then be every later compare's peak."""
    done = root / "written"
    if not done.exists():
        shutil.rmtree(root, ignore_errors=True)
        start = time.perf_counter()
        writer = multiprocessing.get_context("spawn").Process(target=_write_case, args=(case, root))
        writer.start()
        writer.join()
        if writer.exitcode != 0 or not done.exists():
            raise SystemExit(f"writing {case.name} failed (exit {writer.exitcode})")
        print(f"  {case.name}: written in {time.perf_counter() - start:.0f} s", flush=True)
    return root / "target" / "msprobe_ge_dump", root / "golden_fx" / "msprobe_fx_dump", int(done.read_text())


def _write_case(case: Case, root: Path) -> None:
    layers = max(1, round(case.nodes / FX_NODES_PER_LAYER))
    config = ScenarioConfig(
        model=ModelConfig(layers=layers, hidden=HIDDEN, seq=SEQ), tokens=case.tokens, ranks=case.ranks,
        write_fusion_off=False,
    )  # fmt: skip
    scenario = write_scenario(root, config)
    (root / "written").write_text(str(len(scenario.graphs[0].fx_nodes)))


def tree_sizes(*roots: Path) -> tuple[int, int]:
    """Bytes of every file under `roots`, and of the largest FX tensor (.npy)."""
    total = largest = 0
    for root in roots:
        for directory, _, files in os.walk(root):
            for name in files:
                size = os.stat(os.path.join(directory, name)).st_size
                total += size
                if name.endswith(".npy"):
                    largest = max(largest, size)
    return total, largest


def compare(target: Path, golden: Path, out: Path, cache: Path, jobs: int) -> Run:
    """One `tcmp compare` (page written): its wall time and the peak RSS of its largest process."""
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    command = [sys.executable, "-m", "tcmp", "compare", "-m", "torchair", "-tp", str(target), "-gp", str(golden),
               "-o", str(out), "--jobs", str(jobs)]  # fmt: skip
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    assert process.stdout is not None
    output = process.stdout.read()  # the child's own pipe: read to the end, then reaped with its rusage
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"compare failed ({process.returncode}):\n{output.decode(errors='replace')}")
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


def report_rows(out: Path) -> int:
    rows = 0
    for path in out.glob("tcmp_compare_rank*.csv"):
        if path.name.endswith(("_unmatched.csv",)):
            continue
        with open(path, newline="") as handle:
            rows += sum(1 for _ in csv.reader(handle)) - 1
    return rows


def least(runs: list[Run]) -> Run:
    """The repeats of one compare as one run: its least wall and CPU time (what it costs without the machine's
    other work), its largest peak RSS."""
    return Run(min(r.wall for r in runs), min(r.cpu for r in runs), max(r.peak_rss_mb for r in runs))


def measure(case: Case, work: Path, jobs: int, repeat: int) -> Measured:
    """Both compares of a case, `repeat` times over (only once where the first took over REPEATED_UP_TO_S)."""
    target, golden, fx_nodes = write_dump(case, work / "dumps" / case.name)
    total, largest = tree_sizes(target, golden)
    cache, out = work / "cache" / case.name, work / "reports" / case.name
    firsts: list[Run] = []
    seconds: list[Run] = []
    while len(firsts) < repeat and not (firsts and firsts[0].wall > REPEATED_UP_TO_S):
        shutil.rmtree(cache, ignore_errors=True)  # first compare: the graph text parsed
        firsts.append(compare(target, golden, out, cache, jobs))
        seconds.append(compare(target, golden, out, cache, jobs))
    return Measured(case, fx_nodes, report_rows(out), total / 1e6, largest / 1e6, least(firsts), least(seconds))


def log_fit_exponent(xs: list[float], ys: list[float]) -> float:
    """b of y = a * x^b, least squares in log space."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def print_table(results: list[Measured], clock: str) -> None:
    print(f"{'case':<18}{'FX nodes':>9}{'rows':>8}{'MB':>7}{'1st wall':>9}{'2nd wall':>9}{'1st cpu':>9}{'2nd cpu':>9}"
          f"{'1st/2nd':>8}{'ms/row':>8}{'s/MB':>7}{'RSS 1st':>8}{'RSS 2nd':>8}{'RSS tgt':>8}")  # fmt: skip
    for m in results:
        second = m.second.cost(clock)
        print(f"{m.case.name:<18}{m.fx_nodes:>9}{m.rows:>8}{m.dump_mb:>7.0f}{m.first.wall:>9.2f}{m.second.wall:>9.2f}"
              f"{m.first.cpu:>9.2f}{m.second.cpu:>9.2f}{m.first.cost(clock) / second:>8.2f}"
              f"{1e3 * second / m.rows:>8.3f}{second / m.dump_mb:>7.3f}{m.first.peak_rss_mb:>8.0f}"
              f"{m.second.peak_rss_mb:>8.0f}{m.rss_target_mb:>8.0f}")  # fmt: skip


def print_targets(results: list[Measured], fixed: Measured, base: Case, clock: str) -> None:
    """The targets, each as a ratio to a baseline of this run. Time per row is net of the fixed cost: the
    compare of a one-layer dump (`fixed`), measured here too, is subtracted (time and rows)."""
    print(f"\ntargets ({clock} time; ratios against the base case {base.name} of this run; time per row net of the "
          f"fixed cost, {fixed.second.cost(clock):.2f} s for the {fixed.rows} rows of a one-layer dump):")  # fmt: skip
    nodes_axis = sorted((m for m in results if (m.case.tokens, m.case.ranks) == (base.tokens, base.ranks)),
                        key=lambda m: m.case.nodes)  # fmt: skip
    for label, pick in (("first", lambda run: run.first), ("second", lambda run: run.second)):
        net = [(pick(m).cost(clock) - pick(fixed).cost(clock)) / (m.rows - fixed.rows) for m in nodes_axis]
        ratios = [value / net[0] for value in net]
        spread_ok = all(abs(r - 1) <= PER_ROW_SPREAD for r in ratios)
        shown = ", ".join(f"{m.case.nodes}: {1e3 * v:.3f} ms ({r:.2f}x)" for m, v, r in zip(nodes_axis, net, ratios))
        exponent = (log_fit_exponent([m.rows for m in nodes_axis], [pick(m).cost(clock) for m in nodes_axis])
                    if len(nodes_axis) > 1 else 1.0)  # fmt: skip
        print(f"  time per row, {label} compare, by FX nodes: {shown}  [within ±{PER_ROW_SPREAD:.0%} of the smallest"
              f" graph's: {verdict(spread_ok)}]; {clock} ∝ rows^{exponent:.2f}")  # fmt: skip
    worst = max(results, key=lambda m: m.first.cost(clock) / m.second.cost(clock))
    ratio = worst.first.cost(clock) / worst.second.cost(clock)
    print(f"  first / second compare, the worst case ({worst.case.name}): {ratio:.2f}  [≤ {FIRST_OVER_SECOND}: "
          f"{verdict(ratio <= FIRST_OVER_SECOND)}]")  # fmt: skip
    reference = next(m for m in results if m.case == base)
    axes = (("tokens", lambda c: c.tokens, lambda c: c.ranks == base.ranks),
            ("ranks", lambda c: c.ranks, lambda c: c.tokens == base.tokens))  # fmt: skip
    for axis, pick_axis, on_axis in axes:
        line = sorted((m for m in results if m.case.nodes == base.nodes and on_axis(m.case)),
                      key=lambda m: pick_axis(m.case))  # fmt: skip
        shown = ", ".join(f"{pick_axis(m.case)}: {m.first.peak_rss_mb / reference.first.peak_rss_mb:.2f}" for m in line)
        print(f"  peak RSS of the first compare by {axis} (x the base case's {reference.first.peak_rss_mb:.0f} MB): "
              f"{shown}")  # fmt: skip
    worst_rss = max(results, key=lambda m: max(m.first.peak_rss_mb, m.second.peak_rss_mb) / m.rss_target_mb)
    ratio = max(worst_rss.first.peak_rss_mb, worst_rss.second.peak_rss_mb) / worst_rss.rss_target_mb
    print(f"  peak RSS / (2 x the largest tensor + 200 MB), the worst case ({worst_rss.case.name}): {ratio:.2f}  "
          f"[≤ 1: {verdict(ratio <= 1)}]")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, help="work directory (default: a temporary one)")
    parser.add_argument("--nodes", default="1000,10000,100000", help="FX nodes per graph, comma-separated")
    parser.add_argument("--tokens", default="1,8,64", help="tokens at the smallest graph, comma-separated")
    parser.add_argument("--ranks", default="1,8", help="ranks at the smallest graph and one token")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="what the time targets are judged on (cpu: user + system time, steadier on a shared "
        "machine; with --jobs 1 the same as wall time on a quiet one)",
    )
    parser.add_argument("--repeat", type=int, default=3, help=f"runs of each compare under {REPEATED_UP_TO_S:.0f} s")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    nodes = sorted(int(n) for n in args.nodes.split(","))
    tokens = sorted(int(n) for n in args.tokens.split(","))
    ranks = sorted(int(n) for n in args.ranks.split(","))
    base = Case(nodes[0], tokens[0], ranks[0])
    cases = list(dict.fromkeys(
        [Case(n, base.tokens, base.ranks) for n in nodes] + [Case(base.nodes, t, base.ranks) for t in tokens]
        + [Case(base.nodes, base.tokens, r) for r in ranks]
    ))  # fmt: skip
    work = args.work or Path(tempfile.mkdtemp(prefix="tcmp-bench-sweep-"))
    try:
        print(f"{len(cases)} cases, --jobs {args.jobs}, hidden {HIDDEN}, seq {SEQ}; dumps under {work}", flush=True)
        fixed = measure(Case(1, 1, 1), work, args.jobs, args.repeat)  # one layer: the fixed cost of a compare
        results = []
        for case in cases:
            results.append(measure(case, work, args.jobs, args.repeat))
            m = results[-1]
            print(f"  {case.name}: {m.rows} rows, first {m.first.wall:.1f} s, second {m.second.wall:.1f} s",
                  flush=True)  # fmt: skip
        print()
        print_table([fixed, *results], args.clock)
        print_targets(results, fixed, base, args.clock)
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
