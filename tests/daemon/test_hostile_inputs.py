"""Small files that claim a huge amount of work are refused at a bounded cost (issue 23, item 7): a 4 KB
`_min_max.npz` that inflates to 2,000,000 [min, max] rows, a 60 MB `.npy` whose header lists 20 M dims and an
80 MB graph text, summarized by a real `tcmp watch --once`, whose peak RSS (the largest of its processes, from
getrusage in a parent of its own) and wall time are bounded, and whose index records each as refused."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from daemon_testlib import fx_path, index_rows
from dump_writer import GE_DIR

from tcmp.schemas.index import default_index_path
from tcmp.schemas.limits import MAX_GRAPH_TEXT_BYTES, MAX_NPY_HEADER_BYTES, MAX_TENSORS_PER_FILE
from tcmp.schemas.synth.graph_writer import graph_file_name
from tcmp.schemas.synth.hostile import (
    write_npy_many_dims,
    write_npz_bomb,
    write_oversized_graph_text,
)

PEAK_RSS_LIMIT_KB = 300 * 1024

MEASURED = """
import resource, subprocess, sys, time
started = time.monotonic()
code = subprocess.run(sys.argv[1:]).returncode
print(code, time.monotonic() - started, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def _tensor_rows(db: Path) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT count(*) FROM tensors").fetchone()[0])
    finally:
        conn.close()


def test_hostile_files_are_refused_by_watch_in_bounded_memory_and_time(root, tmp_path):
    npz = root / GE_DIR / "0" / "Mul.mul_3.12.2.1764400000000050_min_max.npz"
    npz.parent.mkdir(parents=True)
    write_npz_bomb(npz, rows=2_000_000)
    assert npz.stat().st_size < 8192
    npy = fx_path(root, 0, 1)
    npy.parent.mkdir(parents=True)
    write_npy_many_dims(npy, 20_000_000)
    graph = write_oversized_graph_text(
        root / graph_file_name(1, 0, 7, "20261129083000000000"), MAX_GRAPH_TEXT_BYTES + (32 << 20)
    )
    assert graph.stat().st_size > MAX_GRAPH_TEXT_BYTES

    command = [sys.executable, "-m", "tcmp", "watch", str(root), "--once", "--workers", "1"]
    result = subprocess.run([sys.executable, "-c", MEASURED, *command], capture_output=True, text=True,
                            timeout=150, cwd=tmp_path)  # fmt: skip
    code, wall, peak_kb = result.stdout.split()
    assert int(code) == 1, result.stderr  # files failed, the run did its job
    assert int(peak_kb) <= PEAK_RSS_LIMIT_KB, f"peak RSS {int(peak_kb) // 1024} MB"
    assert float(wall) < 120  # the npz alone took 2 min 50 s before (interpreter start-up dominates now)

    db = default_index_path(root)  # the header: all but the magic, its length field and one float32
    rows = index_rows(db)
    npy_header = npy.stat().st_size - 12 - 4
    expected = {
        npz: f"inputs: a table of 2,000,000 rows larger than the limit of {MAX_TENSORS_PER_FILE:,} rows",
        npy: f".npy header of {npy_header:,} bytes larger than the limit of {MAX_NPY_HEADER_BYTES:,} bytes",
        graph: f"graph text of {graph.stat().st_size:,} bytes larger than the limit of {MAX_GRAPH_TEXT_BYTES:,} bytes",
    }
    for path, text in expected.items():
        row = rows[str(path)]
        assert row.state == "error" and f"refused: {text}" in row.error, (path, row)
    assert _tensor_rows(db) == 0  # not 2,000,000
    assert all(p.exists() for p in expected)  # failed files are never deleted
