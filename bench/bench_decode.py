"""Decode + convert throughput of the GE dump reader, as a ratio to a chunked raw read of the same file.

    python bench/bench_decode.py [--size-mb 64] [--repeats 15] [--cold-repeats 5] [--dir DIR] [--no-cold]

For fp16, bf16 and fp32 tensors of `--size-mb` MiB in ND and FRACTAL_NZ (C0 = 32 bytes, as GE packs them), a GE
dump file is written with the synthetic writer, then, alternating within each repetition:

- raw:    the file read start to end with `readinto` of 1 MiB into one reused buffer;
- decode: `open_ge_dump` + `load` of the tensor to an ND array, *materialized*: every byte of the result has
          passed through the CPU once, as in the raw read. A FRACTAL_NZ result is a fresh array the conversion
          has written in full, so nothing more is done. An ND result is a read-only view of the file's memory
          map, which costs nothing until it is read, so it is copied 1 MiB at a time into one reused buffer:
          the same work the raw read does, which keeps the ratio about the reader and not about where the
          bytes go next. (A reduction over fp16/bf16 values would time numpy's float16 arithmetic instead, and
          a copy into a 64 MiB array the DRAM write bandwidth, which the raw read with its 1 MiB buffer does
          not pay.)
- (info) decode + read pass: the same load followed by a uint64 sum over every byte of the result, for every
          case alike (so NZ pays one extra pass over its output).

Each figure is the median of the repetitions. Warm: the file is in the page cache (one untimed read first).
Cold: before every timed run the file's pages are dropped with posix_fadvise(POSIX_FADV_DONTNEED) after an
fsync; if that has no effect here (cold raw no slower than warm raw) the table says so.
Targets (issue 2): ND >= 0.8x raw, FRACTAL_NZ -> ND >= 0.3x raw, warm. The result is checked against the
writer's expected values once per case before timing.
"""

from __future__ import annotations

import argparse
import mmap
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
from baseline import CHUNK, drop_cache, read_plainly

from tcmp.schemas.dtypes import DataType
from tcmp.schemas.formats import Format
from tcmp.schemas.ge_dump import open_ge_dump
from tcmp.schemas.synth.ge_writer import TensorSpec, write_ge_dump

TARGETS = {int(Format.ND): 0.8, int(Format.FRACTAL_NZ): 0.3}


@dataclass(frozen=True)
class Case:
    dtype: int
    dtype_label: str
    itemsize: int
    format: int

    @property
    def label(self) -> str:
        return f"{self.dtype_label} {'ND' if self.format == Format.ND else 'NZ->ND'}"

    @property
    def c0(self) -> int:
        return 32 // self.itemsize  # one 32-byte block per C0 run, as GE packs fp16/bf16 (16) and fp32 (8)

    def shape(self, size_bytes: int) -> tuple[int, int]:
        columns = 8192 if self.itemsize == 2 else 4096
        return (size_bytes // self.itemsize // columns, columns)  # multiples of 16: no NZ padding


CASES = tuple(
    Case(int(dtype), label, itemsize, int(fmt))
    for dtype, label, itemsize in ((DataType.DT_FLOAT16, "fp16", 2), (DataType.DT_BF16, "bf16", 2),
                                   (DataType.DT_FLOAT, "fp32", 4))
    for fmt in (Format.ND, Format.FRACTAL_NZ)
)  # fmt: skip


@dataclass(frozen=True)
class Timing:
    raw: float
    decode: float
    decode_read_pass: float


def write_case(case: Case, directory: Path, size_bytes: int) -> tuple[Path, np.ndarray]:
    """The dump file of one case and the ND values a correct reader must return (float64)."""
    values = np.random.default_rng(case.dtype * 100 + case.format).standard_normal(case.shape(size_bytes))
    spec = TensorSpec(values.astype(np.float32), case.dtype, case.format, c0=case.c0)
    path = directory / f"Bench.{case.dtype_label}_{case.format}.1.2.1764400000000000"
    written = write_ge_dump(path, "bench", [], [spec], dump_time=1)
    with open(path, "rb+") as handle:
        os.fsync(handle.fileno())  # dirty pages cannot be dropped for the cold runs
    return path, written.outputs[0].expected


def raw_read(path: Path, buffer: memoryview) -> int:
    return read_plainly((path,), buffer)


def _maps_the_file(array: np.ndarray) -> bool:
    """True when `array` is a view of a memory map (lazy: its bytes have not been read yet)."""
    base: object = array
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    return isinstance(base, mmap.mmap)


def load(path: Path) -> np.ndarray:
    with open_ge_dump(path) as reader:
        loaded = reader.load(reader.dump.outputs[0])
    assert not loaded.raw and not loaded.layout_flagged, loaded.notes
    return loaded.array


def decode(path: Path, buffer: np.ndarray) -> np.ndarray:
    array = load(path)
    if _maps_the_file(array):
        data = array.reshape(-1).view(np.uint8)
        for start in range(0, data.size, buffer.size):
            chunk = data[start : start + buffer.size]
            np.copyto(buffer[: chunk.size], chunk)
    return array


def decode_read_pass(path: Path) -> int:
    array = np.ascontiguousarray(load(path))
    return int(np.add.reduce(array.reshape(-1).view(np.uint8).view(np.uint64)))


def timed(run: Callable[[], object], before: Optional[Callable[[], None]]) -> float:
    if before is not None:
        before()
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def measure(path: Path, repeats: int, cold: bool) -> Timing:
    size = path.stat().st_size
    buffer = memoryview(bytearray(CHUNK))
    scratch = np.zeros(CHUNK, dtype=np.uint8)
    before = (lambda: drop_cache(path)) if cold else None
    raw_read(path, buffer)  # warm the page cache (and the code paths)
    decode(path, scratch)
    samples: dict[str, list[float]] = {"raw": [], "decode": [], "read_pass": []}
    for _ in range(repeats):  # interleaved, so drift in the machine's load hits all three alike
        samples["raw"].append(timed(lambda: raw_read(path, buffer), before))
        samples["decode"].append(timed(lambda: decode(path, scratch), before))
        samples["read_pass"].append(timed(lambda: decode_read_pass(path), before))
    return Timing(*(size / statistics.median(samples[key]) for key in ("raw", "decode", "read_pass")))


def check(case: Case, path: Path, expected: np.ndarray) -> None:
    array = load(path)
    if array.shape != expected.shape or not np.array_equal(array.astype(np.float64), expected):
        raise SystemExit(f"{case.label}: the reader's result differs from the writer's values")


def fadvise_works(path: Path, buffer: memoryview) -> bool:
    """Whether dropping the file's pages makes a read slower (it does not in some containers)."""
    raw_read(path, buffer)
    warm = min(timed(lambda: raw_read(path, buffer), None) for _ in range(3))
    cold = min(timed(lambda: raw_read(path, buffer), lambda: drop_cache(path)) for _ in range(3))
    return cold > 1.5 * warm


def report(title: str, rows: list[tuple[Case, Timing]]) -> bool:
    print(f"\n{title}")
    header = f"{'case':<12} {'raw GB/s':>9} {'decode GB/s':>12} {'ratio':>6} {'target':>7}  {'':4} {'+read pass':>11}"
    print(header)
    print("-" * len(header))
    ok = True
    for case, timing in rows:
        ratio = timing.decode / timing.raw
        target = TARGETS[case.format]
        verdict = "ok" if ratio >= target else "MISS"
        ok &= ratio >= target
        print(
            f"{case.label:<12} {timing.raw / 1e9:9.2f} {timing.decode / 1e9:12.2f} {ratio:6.2f} {target:6.1f}x  "
            f"{verdict:4} {timing.decode_read_pass / timing.raw:10.2f}x"
        )
    return ok


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=64, help="payload size per tensor (MiB)")
    parser.add_argument("--repeats", type=int, default=15, help="timed runs per measurement (median)")
    parser.add_argument("--cold-repeats", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None, help="where to write the dump files (default: a temp dir)")
    parser.add_argument("--no-cold", action="store_true", help="skip the cold-cache runs")
    args = parser.parse_args(argv)
    size_bytes = args.size_mb << 20

    with tempfile.TemporaryDirectory(prefix="tcmp-bench-", dir=args.dir) as tmp:
        directory = Path(tmp)
        print(f"{len(CASES)} cases of {args.size_mb} MiB in {directory}; python {sys.version.split()[0]}, "
              f"numpy {np.__version__}, {os.cpu_count()} CPUs")  # fmt: skip
        warm_rows, cold_rows = [], []
        cold = not args.no_cold and hasattr(os, "posix_fadvise")
        for case in CASES:
            path, expected = write_case(case, directory, size_bytes)
            check(case, path, expected)
            del expected
            if cold and not fadvise_works(path, memoryview(bytearray(CHUNK))):
                print("posix_fadvise(POSIX_FADV_DONTNEED) does not drop the page cache here: no cold runs")
                cold = False
            warm_rows.append((case, measure(path, args.repeats, cold=False)))
            if cold:
                cold_rows.append((case, measure(path, args.cold_repeats, cold=True)))
            path.unlink()
        ok = report(f"warm page cache (median of {args.repeats})", warm_rows)
        if cold_rows:
            report(f"cold page cache via POSIX_FADV_DONTNEED (median of {args.cold_repeats}; informative)", cold_rows)
    print("\ntargets (warm): " + ("all met" if ok else "MISSED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
