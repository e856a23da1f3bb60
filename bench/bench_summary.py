"""The daemon's numbers: summary throughput, close-to-commit latency under a 200 MB/s writer, idle CPU at 1M files.

    python bench/bench_summary.py [--size-mb 64] [--files 3] [--repeats 3] [--latency-seconds 20]
                                  [--idle-files 1000000] [--idle-seconds 60] [--skip-latency] [--skip-idle]

1. Throughput, one core (BLAS limited to one thread), files warm in the page cache, median of `--repeats`:
   - raw:     every file read start to end with `readinto` of 1 MiB into one reused buffer;
   - summary: `summarize_file(locate(path), engine=COMPILED)`, what a daemon worker does per file (numel, min,
              max, mean, L2, NaN/inf counts and the CRC-32 of every tensor);
   - numpy:   the same with the numpy engine (where the C extension is not built), for reference;
   - CRC alone: isal's CRC-32 of the file's bytes, 256 KiB at a time: the chunked path's CRC, for reference (on
              CPUs with AVX2/F16C/PCLMULQDQ the compiled engine computes its own, fused with the moments);
   - appendix (fp16/fp32 .npy only): `np.load` + `min` + `max`, the appendix script's per-file work.
   Cases: GE binary dumps (ND; their payloads sit at arbitrary, unaligned offsets) and FX .npy files, fp16 and
   fp32. Targets (issue 4): fp32 summary >= 0.6x raw; fp16 >= 1.5 GB/s or >= 10x the appendix.
2. Latency: `tcmp watch --drop-raw` (default workers) on an empty root while a writer process writes fp16 .npy
   files at 200 MB/s (4 MiB files, then 256 KiB files); per file, the time from the writer's close() to the first
   moment its row is visible to a reader polling the index every 10 ms. p50/p99/max, and the daemon's CPU. The
   writer starts once the daemon logs "workers ready" (steady state); `workers up` is how long that took after
   the start-up scan, the wait the first files of a dump see when the daemon starts together with the inference.
3. Idle: an index holding `--idle-files` summarized-and-deleted files (rows created directly with SQL, as the
   daemon would have left them; creating and summarizing a million real files would take an hour) over a tree of
   the empty step directories they lived in (250 files per directory, as the raw files are gone); the daemon is
   started, its start-up scan awaited, then its CPU time (main process and workers) is measured while nothing
   happens, over `--idle-seconds` (which includes one reconcile scan at the default 60 s interval).
   Target: < 1 % of a core.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one core: set before numpy loads its BLAS

import argparse
import mmap
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import numpy as np
from baseline import read_plainly
from isal.isal_zlib import crc32

from tcmp.schemas.dump_tree import DumpFile, locate
from tcmp.schemas.index import IndexWriter, default_index_path
from tcmp.schemas.synth.ge_writer import TensorSpec, write_ge_dump
from tcmp.summaries.moments import COMPILED, NUMPY, Engine, warm
from tcmp.summaries.summarize import summarize_file

GE_STEP = "msprobe_ge_dump/worldsize1_global_rank0/20261129083000/0/graph_1_0/1/0"
GM_DIR = "gm_20261129083000000000_dump"
FX_GRAPH = f"msprobe_fx_dump/worldsize1_global_rank0/{GM_DIR}"
DT_FLOAT, DT_FLOAT16 = 1, 2


# ----------------------------------------------------------------------------------------------------------------
# 1. throughput


@dataclass(frozen=True)
class Case:
    dtype: type
    kind: str  # "GE" | "FX"

    @property
    def label(self) -> str:
        return f"{np.dtype(self.dtype).name} {self.kind}"


def _write_case(directory: Path, case: Case, files: int, size_mb: int) -> list[Path]:
    rng = np.random.default_rng(0)
    count = (size_mb << 20) // np.dtype(case.dtype).itemsize
    paths = []
    for n in range(files):
        values = (rng.standard_normal(count) * 3).astype(case.dtype)
        if case.kind == "GE":
            path = directory / GE_STEP / f"Mul.mul_{case.label.replace(' ', '_')}_{n}.{n + 2}.2.{1764400000000000 + n}"
            code = DT_FLOAT16 if case.dtype == np.float16 else DT_FLOAT
            write_ge_dump(path, f"mul/{n}", [], [TensorSpec(values.astype(np.float64), code)], dump_time=1)
        else:
            path = directory / FX_GRAPH / "0" / f"mul_{n}-aten.mul.Tensor.OUTPUT.{n}.{20261129083000000000 + n}.npy"
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, values)
        paths.append(path)
    return paths


def _raw_read(paths: list[Path]) -> None:
    read_plainly(paths)


def _summaries(files: list[DumpFile], engine: Engine) -> None:
    for file in files:
        summarize_file(file, engine=engine)


def _crc_only(paths: list[Path]) -> None:
    """The CRC-32 every summary includes, alone: 256 KiB at a time over the mapped file, as the summary does."""
    for path in paths:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as mapped:
            view, crc = memoryview(mapped), 0
            for start in range(0, len(view), 1 << 18):
                crc = crc32(view[start : start + (1 << 18)], crc)
            view.release()


def _appendix(paths: list[Path]) -> None:
    for path in paths:
        values = np.load(path)
        values.min()
        values.max()


def _rate(work: Callable[[], None], nbytes: int, repeats: int) -> float:
    work()  # warm: page cache, code paths
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return nbytes / statistics.median(times) / 1e9


def throughput(directory: Path, files: int, size_mb: int, repeats: int) -> None:
    print(f"\n1. summary throughput, one core, {files} files x {size_mb} MiB per case, warm, median of {repeats}")
    warm(COMPILED)  # as a daemon worker does at start
    header = (
        f"{'case':10s} {'raw GB/s':>9s} {'summary GB/s':>13s} {'ratio':>6s} {'numpy':>6s} {'CRC alone':>10s}"
        f" {'np.load+min+max':>16s} {'x':>6s}  target"
    )
    print(header)
    print("-" * len(header))
    appendix: dict[str, float] = {}
    for case in (Case(np.float16, "FX"), Case(np.float32, "FX"), Case(np.float16, "GE"), Case(np.float32, "GE")):
        dtype = np.dtype(case.dtype).name
        paths = _write_case(directory, case, files, size_mb)
        nbytes = sum(p.stat().st_size for p in paths)
        dump_files = [locate(p) for p in paths]
        assert all(isinstance(f, DumpFile) for f in dump_files)
        raw = _rate(lambda paths=paths: _raw_read(paths), nbytes, repeats)
        summary = _rate(lambda files=dump_files: _summaries(files, COMPILED), nbytes, repeats)  # type: ignore[misc]
        numpy_engine = _rate(lambda files=dump_files: _summaries(files, NUMPY), nbytes, repeats)  # type: ignore[misc]
        crc = _rate(lambda paths=paths: _crc_only(paths), nbytes, repeats)
        if case.kind == "FX":  # the appendix script reads .npy files; GE rows are judged against the same dtype
            appendix[dtype] = _rate(lambda paths=paths: _appendix(paths), nbytes, repeats)
        ratio, speedup = summary / raw, summary / appendix[dtype]
        if case.dtype == np.float32:
            target, met = ">= 0.6x raw", ratio >= 0.6
        else:
            target, met = ">= 1.5 GB/s or >= 10x appendix", summary >= 1.5 or speedup >= 10
        print(f"{case.label:10s} {raw:9.2f} {summary:13.2f} {ratio:6.2f} {numpy_engine / raw:6.2f} {crc / raw:9.2f}x "
              f"{appendix[dtype]:16.2f} {speedup:6.1f}  {target}: {'met' if met else 'NOT met'}")  # fmt: skip
        for path in paths:
            path.unlink()
    print("(ratio, numpy, CRC alone: to raw. CRC alone is isal's, which the chunked path adds to the moments.")
    print(" np.load+min+max: measured on the .npy files of the same dtype; GE rows reuse the FX figure)")


# ----------------------------------------------------------------------------------------------------------------
# Daemon helpers


def _start_daemon(root: Path, log: Path, *args: str) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tcmp", "watch", str(root), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=log.parent,
        )


def _wait_for(log: Path, text: str, timeout: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if log.exists() and text in log.read_text(errors="replace"):
            return time.monotonic() - start
        time.sleep(0.05)
    raise TimeoutError(f"{text!r} not in {log} after {timeout} s:\n{log.read_text(errors='replace')[-2000:]}")


def _group_cpu_seconds(pgid: int) -> float:
    """utime + stime of every live process of the daemon's process group (main process and workers)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # fields after the command: state ppid pgrp ...; utime/stime are 14/15
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _stop(process: subprocess.Popen) -> int:
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        return -9


# ----------------------------------------------------------------------------------------------------------------
# 2. latency

_WRITER = r"""
import io, sys, time, numpy as np
root, out, size, rate, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
buffer = io.BytesIO(); np.save(buffer, (np.random.default_rng(0).standard_normal(size // 2) * 3).astype(np.float16))
payload = buffer.getvalue()
step = f"{root}/msprobe_fx_dump/worldsize1_global_rank0/gm_20261129083000000000_dump"
import os
per_second = rate / len(payload)
with open(out, "w") as log:
    start = time.monotonic(); n = 0
    while time.monotonic() - start < seconds:
        directory = f"{step}/{n // 200}"
        os.makedirs(directory, exist_ok=True)
        path = f"{directory}/m_{n}-aten.mul.Tensor.OUTPUT.0.{20261129083000000000 + n}.npy"
        with open(path, "wb") as handle:
            handle.write(payload)
        log.write(f"{path} {time.time_ns()}\n")
        n += 1
        delay = start + n / per_second - time.monotonic()
        if delay > 0:
            time.sleep(delay)
"""


def latency(directory: Path, seconds: float) -> None:
    print(f"\n2. close-to-commit latency, writer at 200 MB/s for {seconds:.0f} s, `tcmp watch --drop-raw`")
    print(f"{'file size':>10s} {'files':>6s} {'MB/s':>6s} {'p50 ms':>7s} {'p99 ms':>7s} {'max ms':>7s} "
          f"{'daemon CPU':>11s} {'not seen':>9s} {'workers up':>11s}")  # fmt: skip
    for size in (4 << 20, 256 << 10):
        root = directory / f"latency-{size}"
        root.mkdir()
        log = directory / f"latency-{size}.log"
        daemon = _start_daemon(root, log, "--drop-raw")
        try:
            _wait_for(log, f"full scan of {root} done", 60)
            warm_up = _wait_for(log, "workers ready", 120)
            cpu_before, wall_before = _group_cpu_seconds(daemon.pid), time.monotonic()
            closes = directory / f"closes-{size}.txt"
            writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(root), str(closes), str(size),
                                       str(200e6), str(seconds)])  # fmt: skip
            seen = _poll_rows(default_index_path(root), writer)
            time.sleep(2.0)
            for path, first in _poll_once(default_index_path(root)).items():
                seen.setdefault(path, first)  # rows that became visible only after the writer stopped
            cpu = (_group_cpu_seconds(daemon.pid) - cpu_before) / (time.monotonic() - wall_before)
        finally:
            _stop(daemon)
        written = {}
        for line in closes.read_text().splitlines():
            path, closed = line.rsplit(" ", 1)
            written[path] = int(closed)
        delays = sorted((seen[p] - written[p]) / 1e6 for p in written if p in seen)
        missing = len(written) - len(delays)
        rate = len(written) * size / seconds / 1e6
        p50, p99 = np.percentile(delays, 50), np.percentile(delays, 99)
        print(f"{size >> 10:>7d} KiB {len(written):6d} {rate:6.0f} {p50:7.1f} {p99:7.1f} {max(delays):7.1f} "
              f"{cpu * 100:9.0f} % {missing:9d} {warm_up:9.1f} s")  # fmt: skip
        shutil.rmtree(root, ignore_errors=True)


def _poll_once(db: Path) -> dict[str, int]:
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        rows = conn.execute("SELECT path FROM files WHERE state = 'summarized'").fetchall()
        conn.close()
    except sqlite3.OperationalError:
        return {}
    now = time.time_ns()
    return {path: now for (path,) in rows}


def _poll_rows(db: Path, writer: subprocess.Popen) -> dict[str, int]:
    """First time each row is visible to a reader, polling every 10 ms until the writer is done."""
    seen: dict[str, int] = {}
    conn: Optional[sqlite3.Connection] = None
    last_id = 0
    while writer.poll() is None:
        time.sleep(0.01)
        if conn is None:
            if not db.exists():
                continue
            conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            rows = conn.execute(
                "SELECT id, path FROM files WHERE state = 'summarized' AND id > ? ORDER BY id", (last_id,)
            ).fetchall()
        except sqlite3.OperationalError:
            continue
        now = time.time_ns()
        for row_id, path in rows:
            seen.setdefault(path, now)
            last_id = max(last_id, row_id)
    if conn is not None:
        conn.close()
    return seen


# ----------------------------------------------------------------------------------------------------------------
# 3. idle CPU with a big index


def _fake_index(root: Path, files: int, per_directory: int = 250) -> None:
    """Rows as the daemon leaves them for summarized and deleted FX files, plus the empty step directories."""
    steps = (files + per_directory - 1) // per_directory
    for step in range(steps):
        (root / FX_GRAPH / str(step)).mkdir(parents=True)
    db = default_index_path(root)
    IndexWriter(db).close()  # the schema, as the daemon creates it
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO roots (path, added_ns) VALUES (?, ?)", (str(root), time.time_ns()))
    now = time.time_ns()

    def file_rows():
        for n in range(files):
            name = f"op_{n}-aten.add.Tensor.OUTPUT.0.{20261129083000000000 + n}.npy"
            path = root / FX_GRAPH / str(n // per_directory) / name
            yield (n + 1, str(path), 1000 + n, 4224, now, "fx", "fx_npy", 0, n // per_directory, GM_DIR, GM_DIR,
                   f"op_{n}", "aten.add.Tensor", "output", 0, "summarized", 1, 1, 1, 4224, 1, now)  # fmt: skip

    conn.executemany(
        "INSERT INTO files (id, path, inode, size, mtime_ns, side, kind, rank, token, model, run, op_name, op_type, "
        "io, io_index, state, attempts, summaries, raw_deleted, bytes, commit_seq, indexed_ns) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        file_rows(),
    )
    conn.executemany(
        "INSERT INTO tensors (file_id, position, io, io_index, kind, dtype, shape, has_summary, numel, min, max, "
        "mean, l2norm, nan_count, inf_count, crc32, float_flags) VALUES (?, 0, 'output', 0, 'tensor', 'float32', "
        "'32,32', 1, 1024, -3.0, 3.0, 0.0, 32.0, 0, 0, ?, 0)",
        ((n + 1, n) for n in range(files)),
    )
    conn.execute("INSERT INTO commits (seq, committed_ns, files, bytes, raw_deleted, raw_deleted_bytes) "
                 "VALUES (1, ?, ?, ?, ?, ?)", (now, files, files * 4224, files, files * 4224))  # fmt: skip
    conn.commit()
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()


def idle(directory: Path, files: int, seconds: float) -> None:
    print(f"\n3. idle CPU: index with {files:,} summarized files (raw deleted), "
          f"{(files + 249) // 250:,} empty step directories, measured over {seconds:.0f} s")  # fmt: skip
    root = directory / "idle"
    start = time.monotonic()
    _fake_index(root, files)
    print(f"   index created in {time.monotonic() - start:.0f} s "
          f"({default_index_path(root).stat().st_size / 2**20:.0f} MiB)")  # fmt: skip
    log = directory / "idle.log"
    daemon = _start_daemon(root, log, "--drop-raw")
    try:
        ready = _wait_for(log, f"full scan of {root} done", 600)
        time.sleep(2.0)  # let the last of the start-up work settle
        cpu_before, wall_before = _group_cpu_seconds(daemon.pid), time.monotonic()
        time.sleep(seconds)
        cpu = (_group_cpu_seconds(daemon.pid) - cpu_before) / (time.monotonic() - wall_before)
        rss = _rss_mib(daemon.pid)
    finally:
        code = _stop(daemon)
    verdict = "met" if cpu < 0.01 else "NOT met"
    print(f"   start-up scan done after {ready:.1f} s; idle CPU {cpu * 100:.3f} % of a core (target < 1 %: {verdict}); "
          f"main process RSS {rss:.0f} MiB; exit code {code}")  # fmt: skip


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=64)
    parser.add_argument("--files", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency-seconds", type=float, default=20.0)
    parser.add_argument("--idle-files", type=int, default=1_000_000)
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-idle", action="store_true")
    parser.add_argument("--dir", type=Path, default=None, help="work directory (default: a temporary one)")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="tcmp-bench-summary-", dir=args.dir))
    work = Path(os.path.realpath(work))
    print(f"cores: {os.cpu_count()}, numpy {np.__version__}, work directory {work}")
    try:
        throughput(work, args.files, args.size_mb, args.repeats)
        if not args.skip_latency:
            latency(work, args.latency_seconds)
        if not args.skip_idle:
            idle(work, args.idle_files, args.idle_seconds)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
