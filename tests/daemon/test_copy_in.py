"""Dump trees copied in by tools that set the source's old mtime after writing the content (`shutil.copytree`,
`cp -a`, `tar x`), against real daemon processes (issue 18, item 4).

A file whose mtime is set while a worker reads it "changed while it was read": it must simply be read again, not
be judged "unchanged for 5 min" by that old mtime and given up at once. A file whose mtime is set after its
summary was committed is no longer the file summarized: the attribute change (IN_ATTRIB) must bring it back at
once. The reconcile interval is an hour in these tests, so no bound below depends on it."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest
from daemon_testlib import fx_path, index_rows, npy_bytes, wait_until, worker_pids, write_fx

from tcmp.schemas.dump_tree import RAW_TENSOR_KINDS, classify_name
from tcmp.schemas.index import default_index_path
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

NO_RECONCILE = ("--reconcile-interval", "3600")
HALF_AN_HOUR_S = 1800


def _mtime_ns(db: Path, path: Path) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return conn.execute("SELECT mtime_ns FROM files WHERE path = ?", (str(path),)).fetchone()[0]
    finally:
        conn.close()


@pytest.mark.slow
def test_a_dump_tree_copied_in_with_copytree_ends_summarized_and_freed(root, tmp_path, daemon):
    staging = tmp_path / "staging"
    config = ScenarioConfig(model=ModelConfig(layers=3, hidden=256, seq=96), tokens=3, write_fusion_off=False)
    write_scenario(staging, config)
    old = time.time() - HALF_AN_HOUR_S  # the source is half an hour old: copy2 gives every copy that mtime
    sources = [p for p in staging.rglob("*") if p.is_file()]
    for path in sources:
        os.utime(path, (old, old))
    d = daemon(str(root), "--workers", "2", "--drop-raw", *NO_RECONCILE)
    assert d.wait_for_log(f"full scan of {root} done"), d.log()
    shutil.copytree(staging, root / "copy")  # copy2 per file: the content, then copystat (the old mtime)
    copied = {root / "copy" / p.relative_to(staging): classify_name(p.name) for p in sources}
    raw = [p for p, kind in copied.items() if kind in RAW_TENSOR_KINDS]
    others = [p for p, kind in copied.items() if kind is not None and kind not in RAW_TENSOR_KINDS]
    assert len(raw) > 100 and others  # GE binaries and FX tensors; graph files
    db = default_index_path(root)

    def done() -> bool:
        rows = index_rows(db)
        finished = all(str(p) in rows and rows[str(p)].state == "summarized" for p in raw + others)
        return finished and not any(p.exists() for p in raw)

    assert wait_until(done, timeout=90, interval=0.5), d.log()[-4000:]
    rows = index_rows(db)
    assert [r for r in rows.values() if r.state != "summarized"] == []
    assert {rows[str(p)].raw_deleted for p in raw} == {1}  # freed, and the index says so
    assert all(p.exists() for p in others)  # graph files are kept
    assert "gave up" not in d.log() and ": cut short: " not in d.log()
    assert d.stop() == 0


def _mapped_by(pids: list[int], path: Path) -> int | None:
    """The worker that has `path` mapped (a worker reads a .npy file through np.memmap)."""
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps") as maps:
                if str(path) in maps.read():
                    return pid
        except OSError:
            continue
    return None


@pytest.mark.slow
def test_a_file_whose_old_mtime_is_set_while_a_worker_reads_it_is_read_again(root, daemon):
    """The race of a fast copy, made certain: the worker is caught with the file mapped, held there (SIGSTOP)
    while the file gets its old mtime, and let go."""
    d = daemon(str(root), "--workers", "1", "--drop-raw", *NO_RECONCILE)
    assert d.wait_for_log("workers ready (1)"), d.log()
    (worker,) = worker_pids(d.pid)
    db = default_index_path(root)
    old_ns = time.time_ns() - HALF_AN_HOUR_S * 1_000_000_000
    caught = None
    values = np.arange(16 << 20, dtype=np.float32)  # 64 MiB: the read lasts ~10 ms
    for n in range(20):
        path = fx_path(root, 0, n)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(npy_bytes(values))  # closed: read at once
        deadline = time.monotonic() + 5
        while caught is None and time.monotonic() < deadline and path.exists():
            if _mapped_by([worker], path) is not None:
                os.kill(worker, signal.SIGSTOP)
                try:
                    os.utime(path, ns=(old_ns, old_ns))
                finally:
                    os.kill(worker, signal.SIGCONT)
                caught = path
        if caught is not None:
            break
    assert caught is not None, "never caught the worker reading"

    def summarized_as_it_is_now() -> bool:
        row = index_rows(db).get(str(caught))
        return row is not None and row.state == "summarized" and not caught.exists()

    assert wait_until(summarized_as_it_is_now, timeout=30), (index_rows(db).get(str(caught)), d.log()[-3000:])
    assert _mtime_ns(db, caught) == old_ns  # the summary is of the file as it ended up
    assert "gave up waiting" not in d.log()
    assert d.stop() == 0


def test_an_attribute_change_after_the_summary_brings_the_file_back_at_once(root, daemon):
    d = daemon(str(root), "--workers", "1", *NO_RECONCILE)
    assert d.wait_for_log(f"full scan of {root} done"), d.log()
    db = default_index_path(root)
    path = write_fx(root, 0, 1)
    assert wait_until(lambda: str(path) in index_rows(db) and index_rows(db)[str(path)].summaries == 1, timeout=15)
    old_ns = time.time_ns() - HALF_AN_HOUR_S * 1_000_000_000
    os.utime(path, ns=(old_ns, old_ns))  # what copystat does just after the content was written
    assert wait_until(lambda: _mtime_ns(db, path) == old_ns, timeout=10), d.log()[-3000:]
    assert index_rows(db)[str(path)].summaries == 2 and index_rows(db)[str(path)].state == "summarized"
    assert d.stop() == 0
