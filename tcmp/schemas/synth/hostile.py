"""Small files that claim a huge amount of work (issue 23, item 7), for the tests and the benchmark of the
readers' caps (`tcmp.schemas.limits`): a deflated `.npz` whose 4 KB inflate to millions of [min, max] rows, an
`.npy` whose header lists millions of dims, a graph text file past the size the reader parses.

Each is written byte by byte here (zipfile, struct), not by the readers under test."""

from __future__ import annotations

import os
import struct
import zipfile
from pathlib import Path

from tcmp.schemas.synth.graph_writer import GraphOpSpec, OutputSpec, build_graph_def, graph_text


def npy_bytes_of(descr: str, shape: tuple[int, ...], payload: bytes) -> bytes:
    """An .npy file (format 2.0: a 4-byte header length) laid out as np.save lays it out."""
    dims = f"{shape[0]}," if len(shape) == 1 else ", ".join(str(d) for d in shape)  # repr of a tuple
    return _npy(descr, dims.encode("ascii"), payload)


def _npy(descr: str, dims: bytes, payload: bytes) -> bytes:
    header = b"{'descr': '" + descr.encode("ascii") + b"', 'fortran_order': False, 'shape': (" + dims + b"), }"
    padding = -(len(header) + 1 + 12) % 64
    encoded = header + b" " * padding + b"\n"
    return b"\x93NUMPY\x02\x00" + struct.pack("<I", len(encoded)) + encoded + payload


def write_npz_bomb(path: Path, rows: int = 2_000_000) -> Path:
    """A `_min_max.npz` whose `inputs` member is `rows` int8 [min, max] pairs of zeros: ~4 KB on disk for 2 M rows."""
    member = npy_bytes_of("|i1", (rows, 2), bytes(rows * 2))
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("inputs.npy", member)
    return path


def write_npy_many_dims(path: Path, ndim: int = 20_000_000) -> Path:
    """An `.npy` of one float32 whose header lists `ndim` dims of 1 (~3 bytes a dim: 60 MB for 20 M)."""
    path.write_bytes(_npy("<f4", b"1, " * (ndim - 1) + b"1", b"\0\0\0\0"))  # as bytes: 60 MB, not 20 M ints
    return path


def big_graph_text(size: int) -> str:
    """A graph text of chained Add ops (protobuf's own printer for two, the second repeated by name), at least
    `size` bytes."""
    head, first, second = graph_text(build_graph_def("big", [_add(0), _add(1)])).split("op {")
    parts, length, k = [head, "op {" + first], len(head) + len(first), 1
    while length < size:
        block = "op {" + second.replace('"add_1"', f'"add_{k}"').replace('"add_0:0"', f'"add_{k - 1}:0"')
        parts.append(block)
        length += len(block)
        k += 1
    return "".join(parts)


def write_big_graph_text(path: Path, size: int) -> Path:
    path.write_text(big_graph_text(size), encoding="utf-8")
    return path


def write_oversized_graph_text(path: Path, size: int) -> Path:
    """A graph text that claims `size` bytes: a small graph, then zeros to that size (a sparse file: a cap on the
    size is checked before any byte is read, so a gigabyte costs no disk)."""
    write_big_graph_text(path, 1 << 10)
    os.truncate(path, size)
    return path


def _add(k: int) -> GraphOpSpec:
    inputs = (f"add_{k - 1}:0",) if k else ()
    return GraphOpSpec(name=f"add_{k}", type="Add", inputs=inputs, outputs=(OutputSpec(None, 0, (8,)),))
