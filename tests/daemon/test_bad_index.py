"""An index that is locked, read-only or damaged is waited out or refused, never a crash (issue 23, items 5 and 6):
real `tcmp watch` / `tcmp status` processes, an SQLite file locked by another real process (BEGIN EXCLUSIVE),
`chattr +i` for an immutable index (skipped only where the file system refuses chattr), and garbled files."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from daemon_testlib import index_rows, wait_until, write_fx

from tcmp.schemas.index import IndexWriter, default_index_path

HOLD_LOCK = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], timeout=5)
conn.execute("BEGIN EXCLUSIVE")
conn.execute("INSERT INTO roots (path, added_ns) VALUES ('held', 0)")  # a write: the lock is really taken
print("locked", flush=True)
sys.stdin.read()  # until the test closes our stdin
conn.rollback()
"""


def _summarized(db: Path, *paths: Path) -> bool:
    rows = index_rows(db)
    return all(str(p) in rows and rows[str(p)].state == "summarized" for p in paths)


def _chattr(flag: str, *paths: Path) -> None:
    result = subprocess.run(["chattr", flag, *map(str, paths)], capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"this file system refuses chattr {flag}: {result.stderr.strip()}")


def _index_files(db: Path) -> list[Path]:
    return [p for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")) if p.exists()]


def _watch(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tcmp", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd)  # fmt: skip


def test_an_index_locked_by_another_process_at_start_is_waited_for(root, tmp_path, daemon):
    db = default_index_path(root)
    IndexWriter(db).close()
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(db)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "locked"
        files = [write_fx(root, 0, n) for n in range(3)]
        d = daemon(str(root), "--workers", "1", "--drop-raw")
        assert d.wait_for_log(f"index {db} is locked by another process", timeout=60), d.log()[-3000:]
        time.sleep(2)
        assert d.process.poll() is None, d.log()[-3000:]  # waiting, not dead
        assert all(p.exists() for p in files)  # nothing deleted while nothing can be committed
        assert "Traceback" not in d.log() and "writer failed" not in d.log()
        assert d.log().count("is locked by another process") == 1  # one line, not one per retry
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert wait_until(lambda: _summarized(db, *files), timeout=60), d.log()[-3000:]
    assert wait_until(lambda: not any(p.exists() for p in files), timeout=20)  # deleted once committed
    assert d.stop() == 0


def test_an_index_made_immutable_mid_run_stops_the_daemon_with_exit_3_not_sigbus(root, daemon):
    db = default_index_path(root)
    first = write_fx(root, 0, 1)
    d = daemon(str(root), "--workers", "1", "--drop-raw", "--stall-limit", "3")
    assert wait_until(lambda: _summarized(db, first), timeout=60), d.log()[-3000:]
    assert wait_until(lambda: not first.exists(), timeout=20)
    frozen = _index_files(db)
    assert Path(f"{db}-shm") in frozen  # the mapped file whose write faults with SIGBUS
    _chattr("+i", *frozen)
    try:
        later = [write_fx(root, 1, n) for n in range(4)]
        code = d.process.wait(timeout=90)
        log = d.log()
    finally:
        subprocess.run(["chattr", "-i", *map(str, frozen)], check=False)
    assert code == 3, log[-3000:]  # not -7 (SIGBUS)
    assert all(p.exists() for p in later)  # nothing deleted without a commit
    errors = [line for line in log.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"index {db} cannot be written" in errors[0] and "immutable" in errors[0], log
    assert "records not committed, no raw file deleted" in errors[0]
    assert "Traceback" not in log


def test_an_immutable_index_at_start_is_refused_in_one_line_with_exit_3(root, tmp_path):
    db = default_index_path(root)
    IndexWriter(db).close()
    kept = write_fx(root, 0, 1)
    _chattr("+i", *_index_files(db))
    try:
        result = _watch("watch", str(root), "--workers", "0", "--drop-raw", "--stall-limit", "2", cwd=tmp_path)
    finally:
        subprocess.run(["chattr", "-i", *map(str, _index_files(db))], check=False)
    assert result.returncode == 3, result.stderr
    assert "Traceback" not in result.stderr and "writer failed" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and str(db) in errors[0] and "immutable" in errors[0], result.stderr
    assert kept.exists()


def _garble(db: Path, how: str) -> None:
    data = bytearray(db.read_bytes())
    if how == "not a database":
        data[:16] = b"garbage garbage!"
    else:  # every page but the first (the schema): SQLite finds out when a query reads one
        page = int.from_bytes(data[16:18], "big")
        data[page:] = os.urandom(len(data) - page)
    db.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["not a database", "garbled pages"])
def test_a_damaged_index_is_one_line_and_exit_3_for_watch_and_status(root, tmp_path, how):
    for n in range(40):  # a few pages of rows
        write_fx(root, 0, n)
    once = _watch("watch", str(root), "--once", "--workers", "0", cwd=tmp_path)
    assert once.returncode == 0, once.stderr
    db = default_index_path(root)
    _garble(db, how)
    garbled = db.read_bytes()
    again = write_fx(root, 1, 1)

    status = _watch("status", str(root), cwd=tmp_path)
    assert status.returncode == 3 and "internal error" not in status.stderr, status.stderr
    assert status.stderr.strip().count("\n") == 0 and "damaged" in status.stderr and str(db) in status.stderr
    verbose = _watch("-v", "status", str(root), cwd=tmp_path)
    assert verbose.returncode == 3 and "Traceback" in verbose.stderr  # -v: the traceback too

    for args in (("--once",), ()):  # one pass, and the daemon: refused, not retried forever
        result = _watch("watch", str(root), "--workers", "0", *args, cwd=tmp_path, timeout=90)
        assert result.returncode == 3, (args, result.stderr)
        assert "Traceback" not in result.stderr, result.stderr
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and str(db) in errors[0] and "damaged" in errors[0], (args, result.stderr)
        assert again.exists() and db.read_bytes() == garbled  # refused: not written to, nothing deleted
