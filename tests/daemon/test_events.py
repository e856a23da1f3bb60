"""Real inotify, a real daemon process: files the kernel announces in awkward ways are all indexed.

The reconcile interval is 10 minutes in these tests, so only events (and, after an overflow, the reconcile the
overflow triggers) can find the files written after the start-up scan."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from daemon_testlib import FX_STEP, WRITER_SCRIPT, index_rows, npy_bytes, wait_until, write_fx

from tcmp.schemas.index import default_index_path

NO_RECONCILE = ("--reconcile-interval", "600")


def _all_summarized(db: Path, paths: list[Path]) -> bool:
    rows = index_rows(db)
    return all(str(p) in rows and rows[str(p)].state == "summarized" for p in paths)


def test_files_in_fresh_directories_and_files_renamed_into_place(root, daemon):
    d = daemon(str(root), "--workers", "2", *NO_RECONCILE)
    assert d.wait_for_log(f"full scan of {root} done"), d.log()
    fresh: list[Path] = []
    for step in range(40):  # like torchair: makedirs(step dir), then write into it at once
        for n in range(5):
            fresh.append(write_fx(root / "deep" / "a" / str(step) / "b", step, step * 10 + n))
    renamed: list[Path] = []
    step_dir = root / FX_STEP / "99"
    step_dir.mkdir(parents=True)
    for n in range(50):  # written under a temporary name, renamed into place: no close event for the final name
        final = step_dir / f"r_{n}-aten.mul.Tensor.OUTPUT.0.{20261129083000000000 + n}.npy"
        temporary = final.with_name(final.name + ".tmp")
        temporary.write_bytes(npy_bytes(np.full(4, n, np.float32)))
        os.rename(temporary, final)
        renamed.append(final)
    db = default_index_path(root)
    assert wait_until(lambda: _all_summarized(db, fresh + renamed), timeout=30), d.log()[-3000:]
    assert "reconcil" not in d.log()  # found through events alone
    assert {r.summaries for r in index_rows(db).values()} == {1}
    assert d.stop() == 0


@pytest.mark.slow
def test_a_queue_overflow_is_noticed_and_reconciled(root, daemon):
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    if limit > 200_000:
        pytest.skip(f"fs.inotify.max_queued_events={limit}: overflowing it takes too many files")
    d = daemon(str(root), "--workers", "2", *NO_RECONCILE)
    assert d.wait_for_log(f"full scan of {root} done"), d.log()
    step_dir = root / FX_STEP / "0"
    step_dir.mkdir(parents=True)
    payload = npy_bytes(np.arange(4, dtype=np.float16))
    count = limit // 2 + 1000
    paths = [step_dir / f"o_{n}-aten.add.Tensor.OUTPUT.0.{20261129083000000000 + n}.npy" for n in range(count)]
    d.send(signal.SIGSTOP)  # the daemon reads no events: two per file (create, close) fill the kernel queue
    try:
        for path in paths:
            path.write_bytes(payload)
    finally:
        d.send(signal.SIGCONT)
    assert d.wait_for_log("inotify queue overflowed", timeout=30), d.log()[-3000:]
    db = default_index_path(root)
    assert wait_until(lambda: _all_summarized(db, paths), timeout=120, interval=0.5), d.log()[-3000:]
    assert "reconcile of" in d.log() and len(index_rows(db)) == len(paths)
    assert d.stop() == 0


@pytest.mark.slow
def test_files_closed_several_times_are_summarized_once(root, tmp_path, daemon):
    """The writer appends in chunks, often closing the file in between: a close event arrives while the file is
    read, its 'incomplete' row is committed, then its summary waits for the next commit. That first commit must
    not count as the summary's (the dirty file was read and summarized again: two summaries in one batch broke
    every later commit, in two batches the file had `summaries` 2, as the kill -9 test once saw)."""
    d = daemon(str(root), "--workers", "2", "--drop-raw", *NO_RECONCILE)
    assert d.wait_for_log(f"full scan of {root} done"), d.log()
    manifest = tmp_path / "manifest.jsonl"
    subprocess.run([sys.executable, str(WRITER_SCRIPT), str(root), str(manifest), "--files", "2000", "--rate", "500",
                    "--seed", "7"], check=True, timeout=120)  # fmt: skip
    written = [json.loads(line)["path"] for line in manifest.read_text().splitlines()]
    db = default_index_path(root)

    def done() -> bool:
        return _all_summarized(db, [Path(p) for p in written]) and not any(os.path.exists(p) for p in written)

    assert wait_until(done, timeout=60), d.log()[-3000:]
    assert {index_rows(db)[p].summaries for p in written} == {1}
    assert "cannot be written" not in d.log()
    assert d.stop() == 0
