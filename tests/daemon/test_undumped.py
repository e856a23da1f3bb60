"""A real `tcmp watch --drop-raw` process and GE dump files with tensors the writer did not dump (device address 0:
CANN's AICPU `OpDumpTask` skips them, keeping their sizes in the header): each file is summarized once it is
complete — never while it is still being written — its skipped tensors recorded as not dumped, and the raw file
deleted like any other. Expected summaries come from the values written (zlib CRC-32 of their little-endian bytes,
numpy min/max), not from tcmp's readers."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest
from daemon_testlib import crc, index_rows, wait_until

from tcmp.schemas.index import default_index_path
from tcmp.schemas.synth.ge_writer import NotDumped, TensorSpec, encode_ge_dump

GE_STEP = "msprobe_ge_dump/worldsize1_global_rank0/20261129083000/0/graph_1_0/1/0"
TS = 1764400000000001
DT_FLOAT, DT_FLOAT16 = 1, 2

X = (np.arange(24, dtype=np.float32).reshape(4, 6) / 4 - 2).astype(np.float32)
W = (np.arange(12, dtype=np.float32) / 8).astype(np.float32)
Y = (np.arange(20, dtype=np.float32) - 5).astype(np.float16)


def _files() -> dict[str, tuple[bytes, list[tuple]]]:
    """File name -> (bytes, expected tensor rows: io, index, kind, crc32, min, max, notes)."""

    def spec(values, dtype, dumped=True):
        return TensorSpec(values.astype(np.float64), dtype, dumped=dumped)

    def row(io, index, values):
        wide = values.astype(np.float64)
        return (io, index, "tensor", crc(values), float(wide.min()), float(wide.max()), None)

    skipped = '["not dumped: device address 0"]'
    files = {}
    data, _, _ = encode_ge_dump(  # a MatMul whose bias (input 1 here) is not connected
        "mm/1", [spec(X, DT_FLOAT), spec(W, DT_FLOAT, dumped=False), spec(W, DT_FLOAT)], [spec(Y, DT_FLOAT16)],
        dump_time=TS,
    )  # fmt: skip
    files[f"MatMulV2.mm_1.2.2.{TS}"] = data, [
        row("input", 0, X), ("input", 1, "not_dumped", None, None, None, skipped), row("input", 2, W),
        row("output", 0, Y),
    ]  # fmt: skip
    data, _, _ = encode_ge_dump(
        "split/1", [spec(X, DT_FLOAT)], [spec(W, DT_FLOAT, dumped=False), spec(Y, DT_FLOAT16)], dump_time=TS + 1,
        buffers=[b"\x11" * 96, NotDumped(64)],
    )  # fmt: skip
    files[f"SplitV.split_1.3.2.{TS + 1}"] = data, [
        row("input", 0, X), ("output", 0, "not_dumped", None, None, None, skipped), row("output", 1, Y),
    ]  # fmt: skip
    data, _, _ = encode_ge_dump(
        "gelu/1", [spec(X, DT_FLOAT)], [spec(X, DT_FLOAT)], dump_time=TS + 2,
        workspaces=[NotDumped(4096), b"\x22" * 40],
    )  # fmt: skip
    files[f"Gelu.gelu_1.4.2.{TS + 2}"] = data, [row("input", 0, X), row("output", 0, X)]
    return files


def _tensors(db: Path, path: Path) -> list[tuple]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return conn.execute(
            "SELECT t.io, t.io_index, t.kind, t.crc32, t.min, t.max, t.notes FROM tensors t "
            "JOIN files f ON f.id = t.file_id WHERE f.path = ? ORDER BY t.position",
            (str(path),),
        ).fetchall()
    finally:
        conn.close()


@pytest.mark.slow
def test_files_with_tensors_not_dumped_are_summarized_and_dropped(root, daemon):
    d = daemon(str(root), "--workers", "1", "--drop-raw", "--incomplete-timeout", "3")
    assert d.wait_for_log(f"full scan of {root} done"), d.log()
    step = root / GE_STEP
    step.mkdir(parents=True)
    files = _files()
    paths = {name: step / name for name in files}
    for name, (data, _) in files.items():  # each written in two parts, closed in between: still being written
        (length,) = np.frombuffer(data[:8], "<u8")
        with open(paths[name], "wb") as handle:
            handle.write(data[: 8 + int(length) + 10])  # the header and 10 bytes of the first payload
    time.sleep(1.5)  # the daemon looks at each (close-write events) and finds it short
    rows = index_rows(default_index_path(root))
    assert all(rows.get(str(p)) is None or rows[str(p)].state == "incomplete" for p in paths.values()), rows
    for name, (data, _) in files.items():
        (length,) = np.frombuffer(data[:8], "<u8")
        with open(paths[name], "ab") as handle:
            handle.write(data[8 + int(length) + 10 :])
    db = default_index_path(root)

    def done() -> bool:
        rows = index_rows(db)
        return all(str(p) in rows and rows[str(p)].raw_deleted for p in paths.values())

    assert wait_until(done, timeout=30), (index_rows(db), d.log()[-3000:])
    rows = index_rows(db)
    for name, (_, expected) in files.items():
        assert rows[str(paths[name])].state == "summarized" and rows[str(paths[name])].error is None
        assert not paths[name].exists()  # deleted with --drop-raw like any other file
        assert _tensors(db, paths[name]) == expected, name
        skipped = [r for r in expected if r[2] == "not_dumped"]
        assert all(json.loads(r[6]) == ["not dumped: device address 0"] for r in skipped)
    assert ": cut short: " not in d.log()  # none given up
    assert d.stop() == 0
