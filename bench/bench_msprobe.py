"""msprobe (PyPI `mindstudio-probe`) as the speed baseline of `tcmp compare --mode torchair` (not a test).

msprobe's `compare -m torchair` is the reference tcmp's command line mirrors. It runs from its own venv,
build/msprobe-venv (`sh bench/msprobe_env.sh`); without that venv this script prints how to get it and stops.
What msprobe 26.2.0 can do on this machine with tcmp's synthetic torchair dump is measured every run:

1. As installed, it stops before reading a file: `acc_compare` calls `set_msaccucmp_path_from_cann`
   (msprobe/infer/utils/acc_cmp.py), which raises OSError unless $TOOLCHAIN_HOME or $ASCEND_TOOLKIT_HOME names a
   CANN toolkit with tools/operator_cmp/compare.
2. Given a stand-in toolkit whose tools/operator_cmp/compare is msprobe's own bundled msaccucmp
   (msprobe/msaccucmp, the same package CANN ships there), it goes on, but reads every GE dump file through
   `BigDumpDataParser._parse_dump_to_json` (msprobe/msaccucmp/dump_parse/big_dump_data.py), which parses the
   protobuf header with CANN's C library libascend_dump_parser.so (tools/adump/lib64): not installable here, so
   CompareError 11 on the first file, GE vs FX and GE vs GE (fusion off) alike.
3. The one GE format msprobe reads without CANN is the nano dump (TLV header, parsed in Python by
   `NanoDumpDataHandler`), which torchair never writes. So the script transcodes the target and fusion-off dumps
   to nano (same names and payload bytes; header from tcmp's reader) and times msprobe against tcmp on that copy:
   a stand-in for msprobe with CANN, whose C header parser would take the place of the Python TLV one.

Measured in the same run (the compared files read into the page cache before each timed compare; msprobe keeps
no graph cache, so each of its runs is a first compare; tcmp's are first compares too, its graph cache removed
before each):

- plain reading of the compared files (bench/baseline.py), warm and cold (dropped from the page cache first);
- GE vs FX and GE vs GE (fusion off), tensor mode (msprobe's torchair compare has no other data mode): msprobe on
  the nano copy; tcmp on the nano copy and on the original dump, on every core and with `--jobs 1` (msprobe
  runs one process for one rank); the report rows each wrote (msprobe matches fewer tensors than tcmp);
- where msprobe runs as installed (a CANN toolkit on the machine: not exercised here), msprobe on the original
  dump as well.

    python bench/bench_msprobe.py [--work DIR] [--layers N] [--tokens N] [--hidden N] [--seq N] [--repeat N]
        [--msprobe-venv DIR] [--keep]
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
import shutil
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench_compare import drop_from_cache, read_all, run_measured

from tcmp.schemas.dump_records import IO
from tcmp.schemas.errors import DumpError
from tcmp.schemas.ge_dump import read_ge_dump
from tcmp.schemas.ge_header import GeTensor
from tcmp.schemas.ge_nano import NANO_INPUTS_TAG, NANO_OUTPUTS_TAG, NANO_TO_PROTO_DTYPE
from tcmp.schemas.host import usable_cpus
from tcmp.schemas.synth.faults import Fault, FaultKind
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_VENV = ROOT / "build" / "msprobe-venv"
NANO_MAGIC, NANO_VERSION = 0x5A5A5A5A, 1
PROTO_TO_NANO_DTYPE = {proto: nano for nano, proto in NANO_TO_PROTO_DTYPE.items()}
NOT_DUMP_SUFFIXES = (".txt", ".csv", ".json", ".npy", ".pkl")
CANN_VARIABLES = ("TOOLCHAIN_HOME", "ASCEND_TOOLKIT_HOME")
SPEEDUP_TARGET, SPEEDUP_FLOOR = 12.0, 10.0  # issue 26: the first compare with its page against msprobe


def _tlv(tag: int, payload: bytes) -> bytes:
    return struct.pack("<II", tag, len(payload)) + payload


def _shapes(tensor: GeTensor) -> bytes:
    shape, original = tensor.shape, tensor.original_shape
    return _tlv(0, struct.pack(f"<{len(shape)}Q", *shape)) + _tlv(1, struct.pack(f"<{len(original)}Q", *original))


def nano_dump(path: Path) -> bytes:
    """The GE dump at `path` as a nano dump (docs/formats.md, "Nano dumps"): its tensors' dtypes, formats, shapes and
    origin names in a TLV header, then the same payload bytes."""
    dump = read_ge_dump(path)
    with open(path, "rb") as handle:
        data = handle.read()
    blocks = []
    for io, tensors in ((IO.INPUT, dump.inputs), (IO.OUTPUT, dump.outputs)):
        records = [struct.pack("<I", len(tensors))]
        for tensor in tensors:
            dtype, tlvs = PROTO_TO_NANO_DTYPE[tensor.data_type], _shapes(tensor)
            if io is IO.INPUT:
                records.append(struct.pack("<iiiQQQI", dtype, tensor.format, 0, 0, 0, tensor.size, len(tlvs)))
            else:
                origin = tensor.original_op
                if origin is not None and origin.name:
                    tlvs += _tlv(2, origin.name.encode() + b"\0")
                index = origin.output_index if origin is not None else 0
                records.append(
                    struct.pack("<iiiiiiQQQI", dtype, tensor.format, 0, index, dtype, tensor.format, 0, 0, tensor.size,
                                len(tlvs))
                )  # fmt: skip
            records.append(tlvs)
        blocks.append(b"".join(records))
    header = (
        struct.pack("<II", NANO_MAGIC, NANO_VERSION)
        + _tlv(NANO_INPUTS_TAG, blocks[0])
        + _tlv(NANO_OUTPUTS_TAG, blocks[1])
    )
    payload = b"".join(data[t.offset : t.offset + t.size] for t in dump.tensors if t.dumped)
    return struct.pack("<Q", len(header)) + header + payload


def nano_copy(source: Path, destination: Path) -> int:
    """Copy the dump tree `source` to `destination` with every GE dump file transcoded to nano (other files as
    they are; tcmp's graph caches left out). Returns the number of files transcoded."""
    transcoded = 0
    for directory, subdirectories, files in os.walk(source):
        subdirectories[:] = [d for d in subdirectories if d != ".tcmp"]
        here = destination / Path(directory).relative_to(source)
        here.mkdir(parents=True, exist_ok=True)
        for name in files:
            path = Path(directory) / name
            if name.endswith(NOT_DUMP_SUFFIXES):
                shutil.copy2(path, here / name)
                continue
            try:
                data = nano_dump(path)
            except DumpError:
                shutil.copy2(path, here / name)
                continue
            (here / name).write_bytes(data)
            transcoded += 1
    return transcoded


def remove_graph_caches() -> None:
    """The graph cache of the compares run here (`main` points XDG_CACHE_HOME into the work directory)."""
    shutil.rmtree(Path(os.environ["XDG_CACHE_HOME"]) / "tcmp" / "graphs", ignore_errors=True)


def report_rows(out: Path, pattern: str) -> int:
    """Rows of the one CSV report in `out` whose name matches `pattern` (cells may span lines)."""
    reports = sorted(out.glob(pattern))
    if len(reports) != 1:
        raise SystemExit(f"expected one report {pattern} in {out}, found {[p.name for p in reports]}")
    with open(reports[0], newline="") as handle:
        return sum(1 for _ in csv.reader(handle)) - 1


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def failure(done) -> str:
    """Why msprobe stopped: its last line (the exception), and the log line naming a library it could not load."""
    output = f"{done.stdout}\n{done.stderr}"
    unloaded = [line.strip() for line in output.splitlines() if "Failed to load" in line]
    return last_line(done.stderr or done.stdout) + (f" (logged: {unloaded[0]})" if unloaded else "")


@dataclass(frozen=True)
class Timed:
    seconds: float  # median wall time
    low: float  # the fastest and the slowest run: the spread a loaded machine gives
    high: float
    # median CPU seconds (user + system) of the waited-for process tree, steadier than wall time under load; with
    # --jobs > 1 it may miss tcmp's workers (children of a fork server that is not waited for): --jobs 1 is exact
    cpu: float
    rows: int  # rows of the report

    @property
    def spread(self) -> str:
        return f"{self.low:.1f}-{self.high:.1f}"


class Msprobe:
    """`msprobe compare -m torchair` from its own venv; with `toolkit`, $TOOLCHAIN_HOME names a stand-in CANN
    toolkit whose tools/operator_cmp/compare is msprobe's bundled msaccucmp."""

    def __init__(self, venv: Path, work: Path) -> None:
        self.executable = venv / "bin" / "msprobe"
        sites = sorted((venv / "lib").glob("python3*/site-packages/msprobe/msaccucmp"))
        if not sites:
            raise SystemExit(f"no msprobe/msaccucmp in {venv}: rebuild it with `sh bench/msprobe_env.sh`")
        self.toolkit = work / "cann-standin"
        compare = self.toolkit / "tools" / "operator_cmp" / "compare"
        compare.parent.mkdir(parents=True, exist_ok=True)
        if not compare.is_symlink():
            compare.symlink_to(sites[0], target_is_directory=True)

    def environment(self, standin: bool) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in CANN_VARIABLES}
        if standin:
            env["TOOLCHAIN_HOME"] = str(self.toolkit)
        return env

    def run(self, target: Path, golden: Path, out: Path, standin: bool):
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        command = [str(self.executable), "compare", "-m", "torchair", "-tp", str(target), "-gp", str(golden),
                   "-o", str(out)]  # fmt: skip
        elapsed, _, done = run_measured(command, sample_memory=False, env=self.environment(standin))
        # msprobe logs an error and writes no report for some failures yet exits 0: the report decides
        failed = done.returncode != 0 or not list(out.glob("msprobe_cmp_report_*.csv"))
        return elapsed, done, failed


def child_cpu() -> float:
    """CPU seconds used so far by this process's waited-for children and their waited-for descendants."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_msprobe(msprobe: Msprobe, target: Path, golden: Path, out: Path, repeat: int, standin: bool) -> Timed:
    times, cpu = [], []
    for _ in range(repeat):
        read_all([target, golden])  # the page cache warm for every timed run alike
        before = child_cpu()
        elapsed, done, failed = msprobe.run(target, golden, out, standin)
        cpu.append(child_cpu() - before)
        if failed:
            raise SystemExit(f"msprobe failed on {target}: {failure(done)}")
        times.append(elapsed)
    rows = report_rows(out, "msprobe_cmp_report_*.csv")
    return Timed(statistics.median(times), min(times), max(times), statistics.median(cpu), rows)


def time_tcmp(target: Path, golden: Path, out: Path, jobs: int, repeat: int) -> Timed:
    times, cpu = [], []
    for _ in range(repeat):
        remove_graph_caches()
        read_all([target, golden])
        shutil.rmtree(out, ignore_errors=True)
        command = [sys.executable, "-m", "tcmp", "compare", "-m", "torchair", "-tp", str(target), "-gp", str(golden),
                   "-o", str(out), "--data-mode", "tensor", "--jobs", str(jobs)]  # fmt: skip
        before = child_cpu()
        elapsed, _, done = run_measured(command, sample_memory=False)
        cpu.append(child_cpu() - before)
        if done.returncode != 0:
            raise SystemExit(f"tcmp compare failed: {done.stdout}\n{done.stderr}")
        times.append(elapsed)
    rows = report_rows(out, "tcmp_compare_rank*[0-9].csv")
    return Timed(statistics.median(times), min(times), max(times), statistics.median(cpu), rows)


def plain_reads(roots: Sequence[Path], repeat: int) -> tuple[float, float, int]:
    """(warm, cold) median seconds to read every file under `roots`, and the bytes."""
    read_all(roots)
    warm, cold, size = [], [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        size = read_all(roots)
        warm.append(time.perf_counter() - start)
        drop_from_cache(roots)
        start = time.perf_counter()
        read_all(roots)
        cold.append(time.perf_counter() - start)
    return statistics.median(warm), statistics.median(cold), size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, help="work directory (default: a temporary one)")
    parser.add_argument("--layers", type=int, default=160, help="model layers (~12.5 GE ops each)")
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1, help="runs per measure (median); msprobe's take minutes")
    parser.add_argument("--msprobe-venv", type=Path, default=DEFAULT_VENV)
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    if not (args.msprobe_venv / "bin" / "msprobe").exists():
        print(f"msprobe baseline skipped: no msprobe in {args.msprobe_venv}; create it with `sh bench/msprobe_env.sh`")
        return 0
    work = args.work or Path(tempfile.mkdtemp(prefix="tcmp-bench-msprobe-"))
    os.environ["XDG_CACHE_HOME"] = str(work / "cache")  # tcmp's graph cache: a first compare parses every graph
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # both tools as installed: their bytecode compiled once, kept
    try:
        return measure(args, work)
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)


def measure(args: argparse.Namespace, work: Path) -> int:
    original, nano = work / "dump", work / "nano"
    t0 = time.perf_counter()
    if not (original / "target").exists():
        config = ScenarioConfig(
            model=ModelConfig(layers=args.layers, hidden=args.hidden, seq=args.seq),
            tokens=args.tokens,
            faults=(Fault("layers.1/MatMul_1", FaultKind.REL_ERROR), Fault("SoftmaxV2_7", FaultKind.NAN)),
        )
        write_scenario(original, config)
    if not (nano / "golden_ge").exists():
        shutil.rmtree(nano, ignore_errors=True)
        for side in ("target", "golden_ge"):
            nano_copy(original / side, nano / side)
    fx = original / "golden_fx" / "msprobe_fx_dump"
    trees = {
        name: (root / "target" / "msprobe_ge_dump", root / "golden_ge" / "msprobe_ge_dump")
        for name, root in (("original", original), ("nano", nano))
    }
    files = sum(len(f) for d, _, f in os.walk(trees["original"][0]) if ".tcmp" not in Path(d).parts)
    print(f"dump: {files} target files, golden FX and fusion-off GE; written and transcoded to nano in "
          f"{time.perf_counter() - t0:.1f} s ({work})")  # fmt: skip

    msprobe = Msprobe(args.msprobe_venv, work)
    print("\nmsprobe on the dump as torchair writes it (GE dumps with a protobuf header):")
    failures, runs_as_installed = [], set()
    for standin, what in ((False, "as installed"), (True, "TOOLCHAIN_HOME = a stand-in with msprobe's msaccucmp")):
        for golden_name, golden in (("FX", fx), ("fusion-off GE", trees["original"][1])):
            elapsed, done, failed = msprobe.run(trees["original"][0], golden, work / "msprobe_original", standin)
            if not standin and failed:
                failures.append(elapsed)
            elif not standin:
                runs_as_installed.add(golden_name)  # a CANN toolkit here: msprobe is timed on the real dump too
            verdict = f"FAILS: {failure(done)}" if failed else "runs"
            print(f"  {what}, GE vs {golden_name}: exit {done.returncode} after {elapsed:.1f} s, {verdict}")

    cores = usable_cpus()
    nano_target, nano_golden_ge = trees["nano"]
    print(f"\nmsprobe and tcmp on the nano copy (tensor mode; tcmp's graph cache removed; {args.repeat} run(s) each):")
    rows = []
    for golden_name, nano_golden, original_golden in (
        ("FX", fx, fx),
        ("fusion-off GE", nano_golden_ge, trees["original"][1]),
    ):
        warm, cold, size = plain_reads([nano_target, nano_golden], args.repeat)
        baseline = time_msprobe(msprobe, nano_target, nano_golden, work / "msprobe_nano", args.repeat, True)
        with_cann = None
        if golden_name in runs_as_installed:
            with_cann = time_msprobe(msprobe, trees["original"][0], original_golden, work / "msprobe_original",
                                     args.repeat, False)  # fmt: skip
        out = work / "tcmp"
        tcmp_runs = [
            (f"tcmp, nano copy, --jobs {cores}", time_tcmp(nano_target, nano_golden, out, cores, args.repeat)),
            ("tcmp, nano copy, --jobs 1", time_tcmp(nano_target, nano_golden, out, 1, args.repeat)),
            (f"tcmp, original dump, --jobs {cores}", time_tcmp(trees["original"][0], original_golden, out, cores,
                                                                args.repeat)),
        ]  # fmt: skip
        rows.append((golden_name, size, warm, cold, baseline, with_cann, tcmp_runs))

    width = 46
    print(f"\n{'GE vs ...: measure':<{width}}{'seconds':>9}{'min-max':>12}{'rows':>8}{'/ msprobe':>11}"
          f"{'/ cold read':>13}{'CPU s':>8}{'CPU / msprobe':>15}")  # fmt: skip
    for golden_name, size, warm, cold, baseline, with_cann, tcmp_runs in rows:
        print(f"{f'{golden_name}: plain read, warm ({size / 1e9:.2f} GB)':<{width}}{warm:>9.2f}")
        print(f"{f'{golden_name}: plain read, cold':<{width}}{cold:>9.2f}{'':>31}{1:>12.2f}x")
        label = f"{golden_name}: msprobe 26.2.0, nano copy"
        print(f"{label:<{width}}{baseline.seconds:>9.2f}{baseline.spread:>12}{baseline.rows:>8}{1:>10.2f}x"
              f"{baseline.seconds / cold:>12.2f}x{baseline.cpu:>8.1f}{1:>14.2f}x")  # fmt: skip
        others = [("msprobe 26.2.0 with CANN, original dump", with_cann)] if with_cann is not None else []
        for what, timed in others + tcmp_runs:
            label = f"{golden_name}: {what}"
            print(f"{label:<{width}}{timed.seconds:>9.2f}{timed.spread:>12}{timed.rows:>8}"
                  f"{timed.seconds / baseline.seconds:>10.2f}x{timed.seconds / cold:>12.2f}x{timed.cpu:>8.1f}"
                  f"{timed.cpu / baseline.cpu:>14.2f}x")  # fmt: skip
    for golden_name, _, _, _, baseline, _, tcmp_runs in rows:
        first = tcmp_runs[-1][1]  # the original dump on every core: what a user runs (a first compare, page written)
        speedup, cpu_speedup = baseline.seconds / first.seconds, baseline.cpu / first.cpu
        print(f"target, GE vs {golden_name}: tcmp's first compare (original dump, page written) is {speedup:.1f}x "
              f"msprobe's on the nano copy in wall time, {cpu_speedup:.1f}x in CPU time  [>= {SPEEDUP_TARGET:.0f}x: "
              f"{'met' if speedup >= SPEEDUP_TARGET else 'MISSED'}; floor {SPEEDUP_FLOOR:.0f}x]")  # fmt: skip
    if failures:
        print(
            f"(msprobe's start-up alone, importing torch and its modules: about {min(failures):.1f} s, the time it "
            "took to fail above)"
        )
    print(f"(load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())} on {cores} usable cores)")
    if rows and rows[0][3] < 2 * rows[0][2]:
        print("(the cold reads were not cold: posix_fadvise did not drop the files from the page cache here)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
