"""Benchmark of `tcmp compare --cluster` (issue 16; not a test).

An 8-rank dump (tensor mode, raw files) split over 2 simulated nodes on this machine: two Ray worker nodes with one
CPU each, each in a mount namespace of its own where its 4 ranks lie at one common path (node-local disks; as root,
like tests/cluster), and a head with no CPU for units. In the same run:

- Ray's fixed cost: starting the head and the two nodes, connecting, and the first round of node tasks (Ray
  starts a worker process per node);
- the local compare of the whole dump on this machine (`--jobs 2`: the same two CPUs) against the cluster compare
  of the same ranks where they lie (2 nodes x 1 CPU), and the ratio (medians of `--repeat` runs);
- the driver's memory during the cluster compare of 4 ranks and of 8 (tracemalloc peak of the Python heap, and
  the growth of the driver's RSS high-water mark): the rows stream into the report files, so what may grow with
  the ranks is each rank's worst rows and divergences, not its rows.

    python bench/bench_cluster.py [--work DIR] [--layers N] [--hidden N] [--tokens N] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "cluster"))

from ray_nodes import RayCluster

from tcmp.compare.cluster.run import run_cluster_compare
from tcmp.compare.execute.run import run_compare
from tcmp.compare.report.outcome import CompareOptions, DataMode
from tcmp.compare.report.writers import ReportChoice, chosen_formats
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

TARGET, GOLDEN = "target/msprobe_ge_dump", "golden_fx/msprobe_fx_dump"
RANK_DIR = "worldsize8_global_rank{}"


def link_ranks(full: Path, into: Path, ranks) -> None:
    """The dump's trees with only `ranks` (hard links: no copy), and every graph file."""
    for side in (TARGET, GOLDEN):
        (into / side).mkdir(parents=True)
        for entry in (full / side).iterdir():
            if entry.is_file():
                (into / side / entry.name).hardlink_to(entry)
        for rank in ranks:
            shutil.copytree(full / side / RANK_DIR.format(rank), into / side / RANK_DIR.format(rank),
                            copy_function=lambda a, b: Path(b).hardlink_to(a))  # fmt: skip


def _pid() -> int:
    return os.getpid()


def maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cluster_run(options: CompareOptions, address: str, out: Path) -> tuple[float, float, float]:
    """(seconds, tracemalloc peak MB, RSS high-water growth MB) of one cluster compare in this process."""
    rss = maxrss_mb()
    tracemalloc.start()
    start = time.perf_counter()
    done = run_cluster_compare(options, address, out, formats=chosen_formats(ReportChoice(html=False)))
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    assert done.complete, done.not_compared
    return seconds, peak, maxrss_mb() - rss


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", type=Path)
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="tcmp-bench-cluster-"))
    full, view = work / "full", work / "view"
    node_dirs = [work / "node0", work / "node1"]
    try:
        t0 = time.perf_counter()
        if not (full / TARGET).exists():
            model = ModelConfig(layers=args.layers, hidden=args.hidden, seq=args.seq)
            write_scenario(full, ScenarioConfig(model=model, ranks=8, tokens=args.tokens, write_fusion_off=False))
        for k, node_dir in enumerate(node_dirs):
            shutil.rmtree(node_dir, ignore_errors=True)
            node_dir.mkdir(parents=True)
            (node_dir / "node.json").write_text(json.dumps({"node": k}))
            link_ranks(full, node_dir / "r8", range(4 * k, 4 * k + 4))  # node 0: ranks 0-3, node 1: 4-7
            link_ranks(full, node_dir / "r4", range(2 * k, 2 * k + 2))  # node 0: ranks 0-1, node 1: 2-3
        view.mkdir(exist_ok=True)
        size = sum(p.stat().st_size for p in full.rglob("*") if p.is_file())
        print(f"dump: 8 ranks x {args.tokens} tokens, {size / 1e9:.2f} GB; written in {time.perf_counter() - t0:.1f} s")

        out = work / "out"
        locals_ = []
        for k in range(args.repeat):
            start = time.perf_counter()
            run_compare(CompareOptions(full / TARGET, full / GOLDEN, mode=DataMode.TENSOR, jobs=2), out / f"local{k}",
                        formats=chosen_formats(ReportChoice(html=False)))  # fmt: skip
            locals_.append(time.perf_counter() - start)
        local = statistics.median(locals_)
        print(f"local compare, 8 ranks, --jobs 2: {local:.2f} s (median of {args.repeat})")

        cluster = RayCluster(work, view, node_dirs, head_cpus=0)
        try:
            start = time.perf_counter()
            cluster.start()
            started = time.perf_counter() - start
            start = time.perf_counter()
            for k in range(2):
                cluster.on_worker(k, _pid)  # a worker process on each node
            warm = time.perf_counter() - start
            print(f"Ray start-up: head + 2 nodes {started:.1f} s, first task on each node {warm:.2f} s")
            opts = {r: CompareOptions(view / f"r{r}" / TARGET, view / f"r{r}" / GOLDEN, mode=DataMode.TENSOR)
                    for r in (4, 8)}  # fmt: skip
            cluster_run(opts[8], cluster.address, out / "warm")  # the nodes' workers import tcmp once
            runs = {}
            for r in (4, 8):
                measured = [cluster_run(opts[r], cluster.address, out / f"cluster{r}_{k}") for k in range(args.repeat)]
                runs[r] = tuple(statistics.median(m[i] for m in measured) for i in range(3))
        finally:
            cluster.stop()
        seconds8, peak8, rss8 = runs[8]
        seconds4, peak4, rss4 = runs[4]
        print(f"cluster compare, 8 ranks on 2 nodes x 1 CPU: {seconds8:.2f} s = {seconds8 / local:.2f}x the local "
              f"compare (fixed part: the 4-rank compare took {seconds4:.2f} s)")  # fmt: skip
        print(f"driver, 4 ranks: tracemalloc peak {peak4:.1f} MB, RSS high-water +{rss4:.0f} MB")
        print(f"driver, 8 ranks: tracemalloc peak {peak8:.1f} MB, RSS high-water +{rss8:.0f} MB "
              f"({peak8 / peak4:.2f}x the 4-rank peak)")  # fmt: skip
        per_unit = (seconds8 - seconds4) / (4 * args.tokens)
        print(f"marginal cost per unit on the cluster: {per_unit:.3f} s; fixed per compare: "
              f"{seconds4 - per_unit * 4 * args.tokens:.2f} s")  # fmt: skip
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
