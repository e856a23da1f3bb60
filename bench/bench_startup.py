"""Start-up costs of tcmp's commands and of their worker processes, each against a baseline run in the same run.

    python bench/bench_startup.py [--work DIR] [--layers 8] [--repeat 5] [--big]

Every figure is a median of `--repeat` runs of the real command line in a process of its own, measured from
outside (wall time from the spawn of the process); one untimed run of each comes first (page cache, bytecode).

(a) CLI start-up: from the exec of `tcmp compare` on a small dump to its first open of a file under the dump (an
    audit hook, `sys.addaudithook`, installed by a `python -c` wrapper that then calls tcmp's command line; the
    process ends there). Baseline: `python -c "import numpy"`. Target: at most 0.3 s more than the baseline (what
    tcmp adds to the numpy every command needs).
(b) Worker start-up. Compare: `tcmp compare --jobs 2` against `--jobs 1` on the same small dump, whole runs (the
    difference is what its one forked worker costs such a compare; no target). Watch: a daemon (`tcmp watch`, not
    `--once`) on a tree of one file, `--workers 1` against `--workers 0`, from the spawn to the file's row in the
    index (read-only polling, every 5 ms). Target: <= 1.1x (the first file does not wait for the worker). The
    worker's own start-up is the daemon's "workers ready (1) after N s" line, printed.
(c) `tcmp watch --once` on a small tree (`--layers 8`: 1,596 files, 6 MB, written by tcmp.schemas.synth),
    `--workers 2` against `--workers 0`. Target: <= 1.1x.
(d) With `--big` only: the same on 3.7 GB (five copies of a dump of 2,048-wide activations, written to --work),
    where the workers must start and pay off. Target: < 1.0x.

The children run without PYTHONDONTWRITEBYTECODE: an installed tcmp has its bytecode compiled, and without it
each run would compile tcmp's sources again. The `tcmp` console script next to this interpreter is used where
there is one (a spawned worker then runs it again as multiprocessing's `__mp_main__`), else `python -m tcmp`.
Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from tcmp.schemas.index import default_index_path
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import Scenario, ScenarioConfig, write_scenario

CLI_TARGET_S = 0.3
RATIO_TARGET = 1.1
FIRST_OPEN = """
import os, sys, time
dumps = tuple(os.path.realpath(p) + os.sep for p in sys.argv[1:3])

def first_open(event, args):
    if event == "open" and isinstance(args[0], str) and os.path.realpath(args[0]).startswith(dumps):
        if os.path.isfile(args[0]):
            os.write(2, f"FIRST_OPEN {time.monotonic()}\\n".encode())
            os._exit(0)

sys.addaudithook(first_open)
sys.argv = ["tcmp", *sys.argv[3:]]
from tcmp.cli import main
main()
"""
READY = re.compile(r"workers ready \(\d+\) after ([0-9.]+) s")


@dataclass(frozen=True)
class Row:
    label: str
    seconds: float
    baseline: float
    target: Optional[str] = None  # what the row must meet, as printed
    met: Optional[bool] = None
    extra: str = ""


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["COLUMNS"] = "200"
    return env


def tcmp_command() -> list[str]:
    script = Path(sys.executable).parent / "tcmp"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "tcmp"]


def median(measure: Callable[[], float], repeat: int) -> float:
    measure()  # untimed: page cache, bytecode
    return statistics.median(measure() for _ in range(repeat))


def wall(command: Sequence[str], cwd: Path, ok: tuple[int, ...] = (0,)) -> float:
    started = time.monotonic()
    done = subprocess.run(command, cwd=cwd, env=child_env(), capture_output=True, text=True)
    seconds = time.monotonic() - started
    if done.returncode not in ok:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}: {done.stderr[-2000:]}")
    return seconds


def to_first_open(scenario: Scenario, out: Path) -> float:
    command = [sys.executable, "-c", FIRST_OPEN, str(scenario.target), str(scenario.golden_fx), "compare", "-tp",
               str(scenario.target), "-gp", str(scenario.golden_fx), "-o", str(out)]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(command, cwd=out.parent, env=child_env(), capture_output=True, text=True)
    found = [line.split()[1] for line in done.stderr.splitlines() if line.startswith("FIRST_OPEN ")]
    if not found:
        raise SystemExit(f"the compare read no dump file: {done.stderr[-2000:]}")
    return float(found[0]) - started


def summarized_rows(index: Path) -> int:
    try:
        connection = sqlite3.connect(f"file:{index}?mode=ro", uri=True, timeout=0.05)
        try:
            return int(connection.execute("SELECT count(*) FROM files WHERE state = 'summarized'").fetchone()[0])
        finally:
            connection.close()
    except sqlite3.Error:  # not created yet, or being created
        return 0


def daemon_to_first_file(root: Path, workers: int, log: Path, timeout: float = 120.0) -> float:
    """A `tcmp watch` daemon on `root` (one file): from its spawn to the file's row in the index."""
    shutil.rmtree(root / ".tcmp", ignore_errors=True)
    index = default_index_path(root)
    with open(log, "w") as stderr:
        started = time.monotonic()
        daemon = subprocess.Popen([*tcmp_command(), "watch", str(root), "--workers", str(workers)], cwd=root.parent,
                                  env=child_env(), stdout=subprocess.DEVNULL, stderr=stderr)  # fmt: skip
        try:
            while summarized_rows(index) < 1:
                if daemon.poll() is not None or time.monotonic() - started > timeout:
                    raise SystemExit(f"the daemon summarized nothing: {log.read_text()[-2000:]}")
                time.sleep(0.005)
            seconds = time.monotonic() - started
            if workers:  # the worker's own start-up, as the daemon logs it
                deadline = time.monotonic() + timeout
                while not READY.search(log.read_text()) and daemon.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.05)
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=60)
    return seconds


def once(root: Path, workers: int) -> float:
    shutil.rmtree(root / ".tcmp", ignore_errors=True)
    return wall([*tcmp_command(), "watch", str(root), "--once", "--workers", str(workers)], root.parent)


def one_file_tree(scenario: Scenario, root: Path) -> Path:
    source = next(p for p in sorted(scenario.golden_fx.rglob("*.npy")))
    target = root / source.relative_to(scenario.root)
    target.parent.mkdir(parents=True)
    shutil.copyfile(source, target)
    return root


def ratio_row(label: str, seconds: float, baseline: float, target: Optional[float], extra: str = "",
              below: bool = False) -> Row:  # fmt: skip
    """`target`: the ratio it may reach (`below`: must stay under)."""
    if target is None:
        return Row(label, seconds, baseline, extra=extra)
    ratio = seconds / baseline
    met = ratio < target if below else ratio <= target
    return Row(label, seconds, baseline, f"{'<' if below else '<='} {target:.1f}x", met, extra)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=None, help="where the dumps are written (default: a temp dir)")
    parser.add_argument("--layers", type=int, default=8, help="layers of the small tree (8: 1,596 files, 6 MB)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--big", action="store_true", help="also (d): 3.7 GB, where the workers must pay off")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tcmp-startup-", dir=args.work))
    try:
        tiny = write_scenario(work / "tiny", ScenarioConfig(model=ModelConfig(layers=1), tokens=2))
        small = write_scenario(work / "small", ScenarioConfig(model=ModelConfig(layers=args.layers), tokens=2))
        one = one_file_tree(tiny, work / "one")
        out = work / "out"
        rows: list[Row] = []

        numpy_s = median(lambda: wall([sys.executable, "-c", "import numpy"], work), args.repeat)
        cli_s = median(lambda: to_first_open(tiny, out), args.repeat)
        rows.append(Row("(a) tcmp compare: exec to its first dump file read", cli_s, numpy_s,
                        f"<= +{CLI_TARGET_S} s", cli_s - numpy_s <= CLI_TARGET_S))  # fmt: skip

        compare = [*tcmp_command(), "compare", "-tp", str(tiny.target), "-gp", str(tiny.golden_fx), "-o", str(out)]
        jobs = {n: median(lambda n=n: wall([*compare, "--jobs", str(n)], work, ok=(0, 1)), args.repeat) for n in (1, 2)}
        rows.append(ratio_row("(b) tcmp compare --jobs 2 vs --jobs 1, small dump", jobs[2], jobs[1], None))

        logs: list[str] = []

        def first_file(workers: int) -> float:
            log = work / f"daemon{workers}.log"
            seconds = daemon_to_first_file(one, workers, log)
            logs.append(log.read_text())
            return seconds

        daemon = {n: median(lambda n=n: first_file(n), args.repeat) for n in (0, 1)}
        ready = [float(m.group(1)) for text in logs for m in READY.finditer(text)]
        said = f"workers ready after {statistics.median(ready):.2f} s (median)" if ready else "no 'workers ready' line"
        rows.append(ratio_row("(b) tcmp watch --workers 1 vs 0: spawn to first file", daemon[1], daemon[0],
                              RATIO_TARGET, said))  # fmt: skip

        files = [p for p in small.root.rglob("*") if p.is_file()]
        size = f"{len(files):,} files, {sum(p.stat().st_size for p in files) / 1e6:.1f} MB"
        runs = {n: median(lambda n=n: once(small.root, n), args.repeat) for n in (0, 2)}
        rows.append(ratio_row(f"(c) watch --once --workers 2 vs 0 ({size})", runs[2], runs[0], RATIO_TARGET))

        if args.big:
            big = work / "big"
            copy = write_scenario(work / "big_copy", ScenarioConfig(model=ModelConfig(layers=2, hidden=2048, seq=256)))
            for n in range(5):
                shutil.copytree(copy.root, big / f"copy{n}")
            shutil.rmtree(copy.root)
            runs = {n: median(lambda n=n: once(big, n), max(1, args.repeat // 2)) for n in (0, 2)}
            total = sum(p.stat().st_size for p in big.rglob("*") if p.is_file())
            rows.append(ratio_row(f"(d) watch --once --workers 2 vs 0 ({total / 1e9:.1f} GB)", runs[2], runs[0], 1.0,
                                  below=True))  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"tcmp run as: {' '.join(tcmp_command())}; medians of {args.repeat}; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")  # fmt: skip
    print(f"{'case':<62} {'s':>7} {'baseline s':>11} {'ratio':>6}  target")
    for row in rows:
        verdict = "" if row.met is None else (" met" if row.met else " MISSED")
        print(f"{row.label:<62} {row.seconds:>7.2f} {row.baseline:>11.2f} {row.seconds / row.baseline:>5.2f}x  "
              f"{row.target or '-'}{verdict}  {row.extra}")  # fmt: skip
    print("baselines: (a) python -c 'import numpy'; (b), (c), (d) the same command with one worker fewer / none")
    missed = [row.label for row in rows if row.met is False]
    print("targets met" if not missed else f"targets missed: {'; '.join(missed)}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
