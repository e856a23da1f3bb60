"""Bad input and faults, against a real daemon process whose file permissions apply (as root: capabilities
dropped). Each fault gives a clear log line, is recorded instead of retried forever, and the daemon keeps serving
the rest."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from daemon_testlib import fx_path, index_rows, npy_bytes, unprivileged, wait_until, write_fx

from tcmp.schemas.index import IndexWriter, default_index_path

GE_STEP = "msprobe_ge_dump/worldsize1_global_rank0/20261129083000/0/graph_1_0/1/0"


def _summarized(db: Path, *paths: Path) -> bool:
    rows = index_rows(db)
    return all(rows.get(str(p)) is not None and rows[str(p)].state == "summarized" for p in paths)


@pytest.mark.slow
def test_bad_files_are_recorded_once_and_the_daemon_keeps_serving(root, tmp_path, daemon):
    d = daemon(str(root), "--workers", "1", "--drop-raw", "--incomplete-timeout", "2", prefix=tuple(unprivileged()))
    assert d.wait_for_log(f"full scan of {root} done"), d.log()
    data = npy_bytes(np.arange(256, dtype=np.float32))
    truncated = fx_path(root, 0, 1)
    truncated.parent.mkdir(parents=True)
    truncated.write_bytes(data[: len(data) * 2 // 3])  # the writer died: it will never be complete
    corrupt = root / GE_STEP / "Mul.mul_1.2.2.1764400000000001"
    corrupt.parent.mkdir(parents=True)
    corrupt.write_bytes(b"\x20\x00\x00\x00\x00\x00\x00\x00" + os.urandom(64))
    unreadable = fx_path(root, 0, 2)
    fd = os.open(unreadable, os.O_WRONLY | os.O_CREAT, 0o000)  # mode 000 from the start: never readable
    os.write(fd, data)
    os.close(fd)
    outside = tmp_path / "outside.npy"
    outside.write_bytes(data)
    link = fx_path(root, 0, 3)
    link.symlink_to(outside)
    good = write_fx(root, 0, 4)
    db = default_index_path(root)

    def settled() -> bool:
        rows = index_rows(db)
        states = {p: rows[str(p)].state if str(p) in rows else None for p in (truncated, corrupt, unreadable, good)}
        return states == {truncated: "error", corrupt: "error", unreadable: "error", good: "summarized"}

    assert wait_until(settled, timeout=30), (index_rows(db), d.log()[-3000:])
    rows = index_rows(db)
    cut_short = rows[str(truncated)].error
    assert cut_short.startswith("cut short: ") and "still being written" not in cut_short
    assert "DumpCorrupt" in rows[str(corrupt)].error
    assert rows[str(unreadable)].error == "cannot read: Permission denied"
    assert str(link) not in rows
    log = d.log()
    assert f"{truncated}: cut short" in log and f"{corrupt}: DumpCorrupt" in log
    assert f"{unreadable}: cannot read: Permission denied" in log
    assert f"{link} is a symlink to {outside}, outside the watched root {root}: not followed" in log
    attempts = {p: r.attempts for p, r in rows.items()}
    time.sleep(4)  # well past the back-off of a file still being retried
    later = write_fx(root, 0, 5)  # ... and the daemon still serves
    assert wait_until(lambda: _summarized(db, later), timeout=15), d.log()[-3000:]
    assert {p: r.attempts for p, r in index_rows(db).items() if p in attempts} == attempts
    assert d.log().count(f"{truncated}: cut short") == 1
    assert truncated.exists() and corrupt.exists() and unreadable.exists() and outside.exists()
    assert not good.exists() and not later.exists()  # summarized raw files go (--drop-raw), nothing else
    assert d.process.poll() is None
    assert d.stop() == 0


@pytest.mark.slow
def test_read_only_locked_and_deleted_indexes_leave_the_other_roots_served(tmp_path, daemon):
    roots = {}
    for name in ("readonly", "live", "doomed"):
        roots[name] = Path(os.path.realpath(tmp_path / name))
        roots[name].mkdir()
    readonly_db = default_index_path(roots["readonly"])
    IndexWriter(readonly_db).close()
    readonly_db.chmod(0o444)
    readonly_db.parent.chmod(0o555)
    try:
        _read_only_locked_deleted(roots, daemon)
    finally:
        readonly_db.parent.chmod(0o755)


def _read_only_locked_deleted(roots: dict[str, Path], daemon) -> None:
    live, doomed = roots["live"], roots["doomed"]
    d = daemon(*(str(r) for r in roots.values()), "--workers", "1", "--drop-raw", prefix=tuple(unprivileged()))
    assert d.wait_for_log(f"full scan of {live} done") and d.wait_for_log(f"full scan of {doomed} done"), d.log()
    assert f"cannot open the index {default_index_path(roots['readonly'])} for writing" in d.log()
    stranded = write_fx(roots["readonly"], 0, 1)
    live_db = default_index_path(live)

    # locked: another process holds the write lock; summaries wait in memory, raw files stay
    blocker = sqlite3.connect(live_db, timeout=1)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        waiting = [write_fx(live, 0, n) for n in range(5)]
        assert d.wait_for_log(f"index {live_db} is locked by another process", timeout=20), d.log()[-3000:]
        assert all(p.exists() for p in waiting)  # nothing deleted before its summary is committed
    finally:
        blocker.rollback()
        blocker.close()
    assert wait_until(lambda: _summarized(live_db, *waiting), timeout=30), d.log()[-3000:]
    assert wait_until(lambda: not any(p.exists() for p in waiting), timeout=10)

    # deleted: a watched root disappears with its index
    write_fx(doomed, 0, 1)
    assert wait_until(lambda: _summarized(default_index_path(doomed), fx_path(doomed, 0, 1)), timeout=15)
    shutil.rmtree(doomed)
    assert d.wait_for_log(f"watched directory {doomed} was deleted", timeout=15), d.log()[-3000:]
    after = write_fx(live, 1, 9)
    assert wait_until(lambda: _summarized(live_db, after), timeout=15), d.log()[-3000:]
    doomed.mkdir()  # it comes back: watched and indexed again, in a new index
    assert d.wait_for_log(f"watched directory {doomed} is back", timeout=15)
    again = write_fx(doomed, 0, 2)
    assert wait_until(lambda: _summarized(default_index_path(doomed), again), timeout=45), d.log()[-3000:]
    assert stranded.exists() and d.process.poll() is None
    assert d.stop() == 0


def test_once_exits_3_when_its_index_cannot_be_written(root, tmp_path):
    """Issue 18, item 3: nothing could be summarized because of the index, so `--once` failed: exit 3, one line
    that says why (not "0 files summarized" and exit 0 after an error promising retries every 30 s)."""
    good = write_fx(root, 0, 1)
    cases = {"index directory read-only": root / ".tcmp", "dump root read-only": root}
    (root / ".tcmp").mkdir()
    for case, read_only in cases.items():
        read_only.chmod(0o555)
        try:
            result = subprocess.run(
                [*unprivileged(), sys.executable, "-m", "tcmp", "watch", str(root), "--once", "--workers", "0"],
                capture_output=True, text=True, timeout=60, cwd=tmp_path,
            )  # fmt: skip
        finally:
            read_only.chmod(0o755)
        assert result.returncode == 3, (case, result.stderr)
        errors = [line for line in result.stderr.splitlines() if "error" in line.lower()]
        expected = f"error: cannot write the index {default_index_path(root)}: "
        assert len(errors) == 1 and errors[0].startswith(expected), (case, result.stderr)
        assert "Permission denied" in errors[0] and f"nothing under {root} was summarized" in errors[0]
        assert "retrying" not in result.stderr
        assert good.exists() and not default_index_path(root).exists()
        if case == "index directory read-only":
            (root / ".tcmp").rmdir()  # the next case: no .tcmp/ at all, in a root that cannot get one
