"""Benchmark of the readers' caps on hostile inputs (issue 23, item 7; not a test).

Each case runs in a process of its own, started by a small wrapper process that reports the case's peak RSS (the
largest process of it: getrusage(RUSAGE_CHILDREN) in the wrapper, which a process exec'd from this one, already
big, would not give: exec records the pre-exec memory's high-water mark), its CPU time, and its wall time from
spawn to exit (interpreter start-up included: the first baseline measures it alone). A reader case also reports
the reader's own wall time, the figure the "within 10 s" target is about on a loaded machine. The hostile files
are the issue's: a 4 KB `_min_max.npz` inflating to 2,000,000 [min, max] rows (before: 2 min 50 s, 2.5 GB), a 60 MB
`.npy` whose header lists 20 M dims (before: 5.9 GB), a graph text over its cap (sparse; a 75 MB one cost 1.6 GB
before there was a cap). Each is set against a normal file of the same kind in the same run: a 4 KB npz of real
rows, a 60 MB float32 `.npy` read and summarized, a graph text under the limit. Then `tcmp watch --once --workers 1`
on a tree of the three hostile files, against the same tree of the normal ones. Target: every hostile case <= 300 MB
peak RSS and <= 10 s of CPU (wall time is the machine's load's).

    python bench/bench_hostile_inputs.py [--work DIR]
"""

from __future__ import annotations

import argparse
import io
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from tcmp.schemas.limits import MAX_GRAPH_TEXT_BYTES
from tcmp.schemas.synth.graph_writer import graph_file_name
from tcmp.schemas.synth.hostile import (
    write_big_graph_text,
    write_npy_many_dims,
    write_npz_bomb,
    write_oversized_graph_text,
)

RSS_LIMIT_MB = 300
TIME_LIMIT_S = 10.0
GE_DIR = "msprobe_ge_dump/worldsize1_global_rank0/20261129083000/0/graph_1_0/1/0"
FX_DIR = "msprobe_fx_dump/worldsize1_global_rank0/gm_20261129083000000000_dump/0"
NPZ_NAME = "Mul.mul_3.12.2.1764400000000050_min_max.npz"
NPY_NAME = "op_1-aten.add.Tensor.OUTPUT.0.20261129083000000001.npy"
GRAPH_NAME = graph_file_name(1, 0, 7, "20261129083000000000")

READ = {  # (import, read): only the read is timed
    "npz": ("from tcmp.schemas.stats_files import read_ge_min_max_npz as read", "print(len(read(path)[0]))"),
    "npy": ("from tcmp.schemas.fx_dump import read_fx_value as read", "print(float(read(path).array.min()))"),
    "graph": ("from tcmp.schemas.graph_reader import read_graph as read", "print(len(read(path).ops))"),
    "nothing": ("import tcmp.schemas.stats_files, tcmp.schemas.graph_reader", "pass"),
}
CHILD = """
import sys, time
from pathlib import Path
{imports}
path = Path(sys.argv[1])
started = time.perf_counter()
try:
    {read}
except Exception as exc:
    print(type(exc).__name__, exc.message if hasattr(exc, "message") else exc)
print("READ_S", time.perf_counter() - started)
"""
WRAPPER = """
import resource, subprocess, sys, time
started = time.monotonic()
done = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(done.stdout)
print("MEASURED", time.monotonic() - started, usage.ru_maxrss, usage.ru_utime + usage.ru_stime)
"""


@dataclass(frozen=True)
class Measured:
    case: str
    wall_s: float
    read_s: Optional[float]
    cpu_s: float
    peak_rss_mb: float
    said: str


def run_child(case: str, argv: list[str]) -> Measured:
    done = subprocess.run([sys.executable, "-c", WRAPPER, *argv], capture_output=True, text=True, check=True)
    lines = done.stdout.strip().splitlines()
    _, wall, peak_kb, cpu = lines[-1].split()
    read = [float(line.split()[1]) for line in lines if line.startswith("READ_S ")]
    said = [line for line in lines[:-1] if line.strip() and not line.startswith("READ_S ")]
    return Measured(case, float(wall), read[0] if read else None, float(cpu), int(peak_kb) / 1024,
                    said[-1][:100] if said else "")  # fmt: skip


def read_case(case: str, kind: str, path: Path) -> Measured:
    imports, read = READ[kind]
    return run_child(case, [sys.executable, "-c", CHILD.format(imports=imports, read=read), str(path)])


def normal_npz(path: Path) -> Path:
    rows = np.random.default_rng(0).normal(size=(120, 2))
    buffer = io.BytesIO()
    np.savez_compressed(buffer, inputs=rows, outputs=rows[:8])
    path.write_bytes(buffer.getvalue())
    return path


def normal_npy(path: Path, size: int) -> Path:
    np.save(path, np.random.default_rng(0).normal(size=size // 4).astype(np.float32))
    return path


def write_tree(root: Path, files: dict[str, Path]) -> Path:
    (root / GE_DIR).mkdir(parents=True)
    (root / FX_DIR).mkdir(parents=True)
    for name, target in (("npz", root / GE_DIR / NPZ_NAME), ("npy", root / FX_DIR / NPY_NAME),
                         ("graph", root / GRAPH_NAME)):  # fmt: skip
        shutil.copyfile(files[name], target)
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=None, help="where the files are written (default: a temp dir)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tcmp-hostile-", dir=args.work))
    try:
        hostile = {
            "npz": write_npz_bomb(work / "bomb_min_max.npz", rows=2_000_000),
            "npy": write_npy_many_dims(work / "dims.npy", 20_000_000),
            "graph": write_oversized_graph_text(work / "big_graph.txt", MAX_GRAPH_TEXT_BYTES + (27 << 20)),
        }
        normal = {
            "npz": normal_npz(work / "normal_min_max.npz"),
            "npy": normal_npy(work / "normal.npy", hostile["npy"].stat().st_size),
            "graph": write_big_graph_text(work / "normal_graph.txt", 8 << 20),
        }
        results = [read_case("interpreter + readers imported (baseline)", "nothing", work)]
        for kind in ("npz", "npy", "graph"):
            for label, files in (("hostile", hostile), ("normal", normal)):
                size = files[kind].stat().st_size
                results.append(read_case(f"{kind} {label} ({size / 2**20:.3g} MB on disk)", kind, files[kind]))
        for label, files in (("hostile", hostile), ("normal", normal)):
            tree = write_tree(work / f"tree_{label}", files)
            command = [sys.executable, "-m", "tcmp", "watch", str(tree), "--once", "--workers", "1"]
            results.append(run_child(f"tcmp watch --once, the three {label} files", command))
        print(f"graph text limit {MAX_GRAPH_TEXT_BYTES / 2**20:.0f} MB; targets: <= {RSS_LIMIT_MB} MB, <= "
              f"{TIME_LIMIT_S:.0f} s per hostile case")  # fmt: skip
        print(f"{'case':<52} {'wall s':>7} {'read s':>7} {'CPU s':>6} {'peak RSS MB':>12}  result")
        for r in results:
            read = f"{r.read_s:.3f}" if r.read_s is not None else "-"
            print(f"{r.case:<52} {r.wall_s:>7.2f} {read:>7} {r.cpu_s:>6.2f} {r.peak_rss_mb:>12.0f}  {r.said}")
        bad = [r for r in results if "hostile" in r.case and (r.peak_rss_mb > RSS_LIMIT_MB or r.cpu_s > TIME_LIMIT_S)]
        print("targets met" if not bad else f"targets missed: {', '.join(r.case for r in bad)}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
