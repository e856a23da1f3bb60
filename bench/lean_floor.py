"""The least a compare written in Python could take on bench_compare's dump: a lower bound, not a compare.

Each token is passed once with plain tuples and no layers: its directories listed with `os.scandir` and one regular
expression per name; each GE header read with one `pread` and parsed by protobuf; for each pair, the GE payload read
once per file and viewed with `np.frombuffer` (device formats through `to_nd`), the .npy read with one `read` and
its header parsed once per distinct header, the compiled pair loop (with the compare's own reuse of an input that
repeats its producer's output), and one CSV line. It checks nothing, handles only what bench_compare writes (GE
binaries, FX .npy files, one file per op), and matching is not timed: the pairs come from tcmp's own planning.

What lies between this and tcmp's time is the price of the design (typed records between layers, checks, caches,
the report); what lies between it and bench_compare's floor (the read, the pair loop and to_nd) is what Python
itself costs per file and per pair, taken in the fewest steps this author found.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import ml_dtypes
import numpy as np
from isal import isal_zlib

from tcmp.compare.collect.inputs import CompareInputs
from tcmp.compare.execute.units import Plan, plan_unit, plan_units
from tcmp.compare.judge.metrics import _FUSED_KINDS
from tcmp.schemas.dtypes import DataType, decode_payload
from tcmp.schemas.dump_records import IO
from tcmp.schemas.dump_tree import FileKind
from tcmp.schemas.formats import PLAIN_FORMATS, to_nd
from tcmp.schemas.proto import DumpData
from tcmp.summaries import compiled as _fused

_FX_NAME = re.compile(r"(.+)\.(?:INPUT\.(\d+)(?:\.\d+)?|OUTPUT\.(\d+))\.(\d+)\.npy")
_NPY_HEADER = re.compile(rb"\{'descr': '([<>|=][a-zA-Z]\d*)', 'fortran_order': False, 'shape': \(([\d, ]*)\), \} *\n")
_GE_DTYPES = {
    DataType.DT_FLOAT: np.dtype("<f4"),
    DataType.DT_FLOAT16: np.dtype("<f2"),
    DataType.DT_BF16: np.dtype(ml_dtypes.bfloat16),
    DataType.DT_INT32: np.dtype("<i4"),
    DataType.DT_INT64: np.dtype("<i8"),
}  # the rest through tcmp's decoder
_IMPORTS = "import numpy, ml_dtypes, isal.isal_zlib, tcmp.summaries.compiled, tcmp.schemas.formats, tcmp.schemas.proto"

# (dtype code, format, sub-format, device shape, original shape, offset of the payload in the file, bytes)
GeTensor = tuple[int, int, int, tuple[int, ...], tuple[int, ...], int, int]


@dataclass(frozen=True)
class LeanTimes:
    imports: float  # a fresh interpreter started, importing numpy, protobuf and the compiled loop, nothing else
    tokens: tuple[float, ...]  # each token's pass
    pairs: int

    def floor(self, cores: int) -> float:
        """Wall time with the tokens spread over `cores` as if perfectly balanced."""
        return self.imports + sum(self.tokens) / cores


def _list(directories: Sequence[str]) -> list[tuple[str, str]]:
    """(path, key) of every dump file: the FX node key, or the GE op name."""
    names = []
    for directory in directories:
        with os.scandir(directory) as entries:
            for entry in entries:
                name = entry.name
                if name.endswith(".npy"):
                    match = _FX_NAME.fullmatch(name)
                    names.append((f"{directory}/{name}", match.group(1) if match else name))
                elif name.count(".") >= 4:
                    names.append((f"{directory}/{name}", name.split(".")[1]))
    return names


def _headers(paths: Sequence[str]) -> dict[str, tuple[list[GeTensor], list[GeTensor], int]]:
    headers = {}
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            head = os.pread(fd, 16 << 10, 0)
        finally:
            os.close(fd)
        length = int.from_bytes(head[:8], "little")
        dump = DumpData.FromString(head[8 : 8 + length])
        offset = 8 + length
        inputs: list[GeTensor] = []
        outputs: list[GeTensor] = []
        for tensors, described in ((inputs, dump.input), (outputs, dump.output)):
            for t in described:
                shape, original = tuple(t.shape.dim), tuple(t.original_shape.dim)
                tensors.append((t.data_type, t.format, t.sub_format, shape, original, offset, t.size))
                offset += t.size
        headers[path] = (inputs, outputs, offset)
    return headers


class _Payloads:
    """The payloads of the GE file last read (a pair's inputs and outputs come from one file in a row)."""

    def __init__(self, headers) -> None:
        self.headers, self.path, self.data, self.start = headers, None, b"", 0

    def tensor(self, path: str, is_input: bool, index: int) -> np.ndarray:
        inputs, outputs, end = self.headers[path]
        if path != self.path:
            first = (inputs or outputs)[0][5]
            fd = os.open(path, os.O_RDONLY)
            try:
                self.data = os.pread(fd, end - first, first)
            finally:
                os.close(fd)
            self.path, self.start = path, first
        code, fmt, sub_format, shape, original, offset, size = (inputs if is_input else outputs)[index]
        numel = math.prod(shape)
        dtype = _GE_DTYPES.get(code)
        if dtype is None:
            view = memoryview(self.data)[offset - self.start : offset - self.start + size]
            flat = decode_payload(view, code, numel).array
        else:
            flat = np.frombuffer(self.data, dtype, numel, offset - self.start)
        if fmt in PLAIN_FORMATS or not original:
            return flat.reshape(shape)
        return to_nd(flat, fmt, sub_format, shape, original).array


def _npy(path: str, known: dict[bytes, tuple[np.dtype, tuple[int, ...]]]) -> np.ndarray:
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.read(fd, os.fstat(fd).st_size)
    finally:
        os.close(fd)
    length = int.from_bytes(data[8:10], "little")
    header = data[10 : 10 + length]
    meta = known.get(header)
    if meta is None:
        match = _NPY_HEADER.fullmatch(header)
        shape = tuple(int(d) for d in match.group(2).split(b",") if d.strip())
        meta = known[header] = (np.dtype(match.group(1).decode()), shape)
    return np.frombuffer(data, meta[0], math.prod(meta[1]), 10 + length).reshape(meta[1])


def _aligned(array: np.ndarray) -> np.ndarray:
    return array if array.flags.aligned and array.flags.c_contiguous else np.array(array)


def _pass(directories: Sequence[str], pairs: Sequence[tuple], out) -> None:
    names = _list(directories)
    headers = _headers([path for path, _ in names if not path.endswith(".npy")])
    payloads, known, reused = _Payloads(headers), {}, {}
    for npu_path, npu_input, npu_index, bench_path, bench_fx, bench_input, bench_index, label in pairs:
        npu = _aligned(payloads.tensor(npu_path, npu_input, npu_index))
        bench = _npy(bench_path, known) if bench_fx else payloads.tensor(bench_path, bench_input, bench_index)
        if bench.dtype == np.float64 and bench.ndim == 0:
            bench = bench.astype(npu.dtype)  # a scalar argument, at the NPU's precision
        bench = _aligned(bench)
        npu_kind, bench_kind = _FUSED_KINDS.get(npu.dtype), _FUSED_KINDS.get(bench.dtype)
        if npu_kind is None or bench_kind is None or npu.size != bench.size:
            out.write(f"{label},{npu.dtype},{bench.dtype},N/A\n")
            continue
        npu_bytes = npu.reshape(-1).view(np.uint8)
        key = (bench_path, bench_index, isal_zlib.crc32(npu_bytes))
        sums = reused.get(key)
        if sums is None:
            sums = reused[key] = _fused.pair_sums(npu_bytes, npu_kind, bench.reshape(-1).view(np.uint8), bench_kind)
        n_max, n_min, n_sum, nn, b_max, b_min, b_sum, bb, dot, d_max, d_min, dd, rel, one, five, _ulps = sums
        n = npu.size
        cosine = dot / math.sqrt(nn * bb) if nn and bb else math.nan
        out.write(
            f"{label},{npu.dtype},{bench.dtype},{list(npu.shape)},{list(bench.shape)},{cosine:.6f},"
            f"{math.sqrt(dd):.6f},{max(d_max, -d_min):.6f},{rel:.6f},{one / n:.6f},{five / n:.6f},{n_max},{n_min},"
            f"{n_sum / n},{math.sqrt(nn)},{b_max},{b_min},{b_sum / n},{math.sqrt(bb)},"
            f"{'pass' if cosine > 0.99 else 'fail'}\n"
        )


def _plain_pairs(plan: Plan) -> list[tuple]:
    return [
        (str(p.npu.files[0].path), p.npu.io is IO.INPUT, p.npu.index, str(p.bench.files[0].path),
         p.bench.files[0].kind is FileKind.FX_NPY, p.bench.io is IO.INPUT, p.bench.index, p.api_name)
        for p in plan.pairs
    ]  # fmt: skip


def lean_floor(inputs: CompareInputs, out_path: str) -> LeanTimes:
    """Pass every token of `inputs` once, lean (see the module's docstring), writing the lines to `out_path`."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", _IMPORTS], check=True)
    imports = time.perf_counter() - started
    tokens, count = [], 0
    with open(out_path, "w") as out:
        for binding in inputs.bindings:
            for unit in plan_units(binding, inputs)[0]:
                plan = plan_unit(unit, keep_rows=False)
                if not isinstance(plan, Plan):
                    continue
                pairs = _plain_pairs(plan)
                if any(len(p.npu.files) != 1 or len(p.bench.files) != 1 for p in plan.pairs):
                    raise SystemExit("lean floor: FFTS+ slice files are not part of bench_compare's dump")
                directories = [str(d.path) for d in (*unit.target_dirs, *unit.golden_dirs)]
                started = time.perf_counter()
                _pass(directories, pairs, out)
                tokens.append(time.perf_counter() - started)
                count += len(pairs)
    return LeanTimes(imports, tuple(tokens), count)
