"""A real `tcmp watch` process summarizes stats-mode CSVs as CANN's writers write them (hicann/runtime: the AICPU
`ProcessDumpStats`, the adump `AdxDumpRecord`): what each cell holds lands in the index, unavailable statistics
as NULL; a CSV with an unreadable cell is recorded as an error with the line and column; one the writer is still
appending to waits until its last line is complete."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from daemon_testlib import index_rows, wait_until

from tcmp.schemas.index import default_index_path

GE_STEP = "msprobe_ge_dump/worldsize1_global_rank0/20261129083000/0/graph_1_0/1/0"
GRAPH_HEADER = (
    "Input/Output,Index,Data Size,Data Type,Format,Shape,Max Value,Min Value,Avg Value,Count,Nan Count,"
    "Negative Inf Count,Positive Inf Count"
)
FILES = {
    # adump, Max|Min|Nan|L2norm after the default selection: Count named twice, rows one cell short; an NA row
    "MatMul.mm_1.2.2.1764400000000001.csv": (
        "Input/Output,Index,Data Size,Data Type,Format,Shape,Count,Max Value,Min Value,Count,Nan Count,l2norm\n"
        "Input,0,96,DT_FLOAT16,ND,4x12,3.5,-1.25,48,0,10.5\n"
        "Output,0,96,DT_BF16,ND,4x12,NA,NA,NA,48,NA\n"
    ),
    # AICPU: a scalar, and a bf16 tensor it has no statistics for
    "Add.add_2.3.2.1764400000000002.csv": (
        f"{GRAPH_HEADER}\nInput,0,2,DT_FLOAT16,ND,-,0.5,0.5,0.5,1,0,0,0\nOutput,0,2,-,ND,-,,,,,,,\n"
    ),
}
GARBLED = ("Mul.mul_3.4.2.1764400000000003.csv", f"{GRAPH_HEADER}\nInput,0,2,DT_FLOAT16,ND,-,0.5,zero,0.5,1,0,0,0\n")
GROWING = "Cast.cast_4.5.2.1764400000000004.csv"


def _tensors(db: Path, path: Path) -> list[tuple]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return conn.execute(
            "SELECT t.io, t.io_index, t.shape, t.numel, t.min, t.max, t.mean, t.l2norm, t.nan_count, t.inf_count "
            "FROM tensors t JOIN files f ON f.id = t.file_id WHERE f.path = ? ORDER BY t.position",
            (str(path),),
        ).fetchall()
    finally:
        conn.close()


@pytest.mark.slow
def test_watch_summarizes_stats_csvs_of_both_writers(root, daemon):
    d = daemon(str(root), "--workers", "1", "--incomplete-timeout", "30")
    assert d.wait_for_log(f"full scan of {root} done"), d.log()
    step = root / GE_STEP
    step.mkdir(parents=True)
    for name, text in (*FILES.items(), GARBLED):
        (step / name).write_text(text)
    growing = step / GROWING
    growing.write_text(f"{GRAPH_HEADER}\nOutput,0,4,DT_FLOAT,ND,2,1.5,-1.5,0,2,0,0")  # a line still being written
    db = default_index_path(root)

    def state(name: str):
        row = index_rows(db).get(str(step / name))
        return row.state if row else None

    assert wait_until(lambda: all(state(n) == "summarized" for n in FILES) and state(GARBLED[0]) == "error", 60)
    assert state(GROWING) != "summarized"
    with open(growing, "a") as handle:
        handle.write(",0\n")
    assert wait_until(lambda: state(GROWING) == "summarized", 60), d.log()
    d.stop()

    mm, add, cast = (_tensors(db, step / n) for n in (*FILES, GROWING))
    assert mm == [
        ("input", 0, "4,12", 48, -1.25, 3.5, None, 10.5, 0, None),  # the count is the cell before Nan Count
        ("output", 0, "4,12", 48, None, None, None, None, None, None),  # the NA row: its count, nothing else
    ]
    assert add == [
        ("input", 0, "", 1, 0.5, 0.5, 0.5, None, 0, 0),  # "-": a scalar, shape ()
        ("output", 0, "", None, None, None, None, None, None, None),
    ]
    assert cast == [("output", 0, "2", 2, -1.5, 1.5, 0.0, None, 0, 0)]
    error = index_rows(db)[str(step / GARBLED[0])].error
    assert "line 2, column 8 ('min value'): 'zero' is not a number" in error
