"""A stand-in for an inference run that dumps: writes FX `.npy` and GE binary dump files into a dump tree, each
in several chunks, new step directories created right before they are written into (as torchair does).

Run as its own process by the daemon tests:

    python dump_writer.py ROOT MANIFEST --files N [--seed S] [--rate FILES_PER_S] [--ge-every K]

After the last byte of a file is written and the file closed, one JSON line goes to MANIFEST (flushed): the path
and, per tensor, what a correct summary must say — computed here from the values written, independently of tcmp's
readers (zlib.crc32 of the raw little-endian bytes, numpy min/max in float64, numel).
"""

from __future__ import annotations

import argparse
import io
import json
import random
import sys
import time
import zlib
from pathlib import Path

import numpy as np

FX_DIR = "msprobe_fx_dump/worldsize1_global_rank0/gm_20261129083000000000_dump"
GE_DIR = "msprobe_ge_dump/worldsize1_global_rank0/20261129083000/0/graph_1_0/1"
FILES_PER_STEP = 250


def _expected(io_name: str, index: int, values: np.ndarray) -> list:
    wide = values.astype(np.float64)
    return [io_name, index, zlib.crc32(np.ascontiguousarray(values).tobytes()), float(wide.min()),
            float(wide.max()), int(values.size)]  # fmt: skip


def _npy_bytes(values: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, values)
    return buffer.getvalue()


def _fx_file(step_dir: Path, n: int, rng: np.random.Generator) -> tuple[Path, bytes, list]:
    dtype = np.float16 if n % 2 else np.float32
    values = (rng.standard_normal(int(rng.integers(16, 2048))) * 3).astype(dtype)
    ts = 20261129083000000000 + n * 17
    path = step_dir / f"op_{n}-aten.mul.Tensor.OUTPUT.0.{ts}.npy"
    return path, _npy_bytes(values), [_expected("output", 0, values)]


def _ge_file(step_dir: Path, n: int, rng: np.random.Generator) -> tuple[Path, bytes, list]:
    from tcmp.schemas.synth.ge_writer import TensorSpec, encode_ge_dump  # the synthetic GE writer

    inputs = [(rng.standard_normal(int(rng.integers(8, 512))) * 2).astype(np.float16)]
    outputs = [(rng.standard_normal(int(rng.integers(8, 512))) * 2).astype(np.float32)]
    dtype_codes = {np.dtype(np.float16): 2, np.dtype(np.float32): 1}  # DT_FLOAT16, DT_FLOAT
    data, _, _ = encode_ge_dump(
        f"layer.{n}/Mul",
        [TensorSpec(v.astype(np.float64), dtype_codes[v.dtype]) for v in inputs],
        [TensorSpec(v.astype(np.float64), dtype_codes[v.dtype]) for v in outputs],
        dump_time=1764400000000000 + n,
    )
    path = step_dir / f"Mul.layer_{n}_Mul.{n + 2}.2.{1764400000000000 + n}"
    expected = [_expected("input", i, v) for i, v in enumerate(inputs)]
    expected += [_expected("output", i, v) for i, v in enumerate(outputs)]
    return path, data, expected


def _write_in_chunks(path: Path, data: bytes, rng: random.Random) -> None:
    """Three chunks, sometimes one open with flushes in between, sometimes an open/append/close per chunk."""
    cuts = sorted(rng.sample(range(1, len(data)), 2)) if len(data) > 3 else [len(data), len(data)]
    chunks = [data[: cuts[0]], data[cuts[0] : cuts[1]], data[cuts[1] :]]
    if rng.random() < 0.5:
        with open(path, "wb") as handle:
            for chunk in chunks:
                handle.write(chunk)
                handle.flush()
                time.sleep(rng.random() * 0.002)
    else:
        for i, chunk in enumerate(chunks):
            with open(path, "wb" if i == 0 else "ab") as handle:
                handle.write(chunk)
            time.sleep(rng.random() * 0.002)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("root", type=Path)
    parser.add_argument("manifest", type=Path)
    parser.add_argument("--files", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rate", type=float, default=0.0, help="files per second (0: as fast as possible)")
    parser.add_argument("--ge-every", type=int, default=10, help="every K-th file is a GE binary dump")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    chunk_rng = random.Random(args.seed)
    started = time.monotonic()
    with open(args.manifest, "a", encoding="utf-8") as manifest:
        for n in range(args.files):
            step = n // FILES_PER_STEP
            is_ge = args.ge_every and n % args.ge_every == 0
            step_dir = args.root / (GE_DIR if is_ge else FX_DIR) / str(step)
            step_dir.mkdir(parents=True, exist_ok=True)  # a fresh directory, written into at once
            path, data, expected = (_ge_file if is_ge else _fx_file)(step_dir, n, rng)
            _write_in_chunks(path, data, chunk_rng)
            manifest.write(json.dumps({"path": str(path), "size": len(data), "tensors": expected}) + "\n")
            manifest.flush()
            if args.rate:
                delay = started + (n + 1) / args.rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
