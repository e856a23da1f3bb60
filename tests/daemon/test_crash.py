"""Crash safety (the issue's acceptance test): a writer process produces 10,000 dump files in chunks while the
daemon (with --drop-raw) is killed with SIGKILL at 20 random moments and restarted.

At the end every file must be summarized exactly once (one row, summaries == 1, and its tensor statistics equal
what the writer computed from the values it wrote), and no raw file may have been deleted before its summary was
committed. The second part is checked three ways:

1. an independent witness: a watcher in this process sees every deletion (inotify IN_DELETE) and looks the file
   up in the index right then; a file deleted before its commit is not there yet;
2. the end state: a deletion ahead of its commit, with a kill in between, would leave a file that is gone and
   never summarized — the first check above catches that;
3. the daemon's own account: each deletion is logged (just before the unlink) with the commit it follows, which
   must be the commit that wrote the file's row.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import pytest
from daemon_testlib import WRITER_SCRIPT, index_rows, wait_until
from watchdog.events import DirCreatedEvent, FileDeletedEvent, FileSystemEventHandler
from watchdog.observers import Observer

from tcmp.schemas.index import default_index_path

FILES = 10_000
KILLS = 20
SEED = 20261129

# A worker whose daemon is killed while handing it its start-up data dies in multiprocessing's own bootstrap,
# before any tcmp code runs, and Python prints that. It is the kill's doing, not a fault of the daemon.
KILLED_AT_BIRTH = re.compile(
    r"Traceback \(most recent call last\):\n"
    r'  File "<string>", line 1, in <module>\n'
    r'(?:  File "[^"\n]*/multiprocessing/spawn\.py", line \d+, in \w+\n(?:    .*\n)*)+'
    r"(?:EOFError|_pickle\.UnpicklingError): .*\n"
)


class DeletionWitness(FileSystemEventHandler):
    """On every deletion under the root: is the file's summary committed at this moment?"""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.checked = 0
        self.violations: list[str] = []
        self._conn: Optional[sqlite3.Connection] = None

    def on_deleted(self, event) -> None:
        path = os.fsdecode(event.src_path)
        if (not path.endswith(".npy") and "/msprobe_ge_dump/" not in path) or "/.tcmp/" in path:
            return
        if self._conn is None:
            self._conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=30)
        row = self._conn.execute("SELECT state FROM files WHERE path = ?", (path,)).fetchone()
        self.checked += 1
        if row is None or row[0] != "summarized":
            self.violations.append(f"{path} deleted while its row was {row}")


def _start(root: Path, log: Path) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tcmp", "-v", "watch", str(root), "--drop-raw", "--workers", "2"],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=log.parent,  # not the repository: `python -m` puts the cwd first on sys.path
        )


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.slow
def test_kill_9_twenty_times_while_a_writer_dumps_10000_files(root, tmp_path):
    rng = random.Random(SEED)
    db = default_index_path(root)
    manifest = tmp_path / "manifest.jsonl"
    log = tmp_path / "daemon.log"
    witness = DeletionWitness(db)
    observer = Observer()
    # DirCreatedEvent too: watchdog < 7 watches new sub-directories only if IN_CREATE is in the mask
    observer.schedule(witness, str(root), recursive=True, event_filter=[FileDeletedEvent, DirCreatedEvent])
    observer.start()
    writer = subprocess.Popen([sys.executable, str(WRITER_SCRIPT), str(root), str(manifest), "--files", str(FILES),
                               "--rate", "400", "--seed", str(SEED)])  # fmt: skip
    daemon = _start(root, log)
    orphaned: list[int] = []
    try:
        for _ in range(KILLS):
            time.sleep(rng.uniform(0.3, 2.0))  # some kills land in the start-up scan, most mid-stream
            os.kill(daemon.pid, signal.SIGKILL)  # the main process only: its workers must follow by themselves
            daemon.wait()
            if not wait_until(lambda pid=daemon.pid: _group_gone(pid), timeout=10):
                orphaned.append(daemon.pid)
                os.killpg(daemon.pid, signal.SIGKILL)
            last_start = log.stat().st_size  # where the last instance's log lines begin
            daemon = _start(root, log)
        assert writer.wait(timeout=120) == 0
        entries = [json.loads(line) for line in manifest.read_text().splitlines()]
        assert len(entries) == FILES

        def all_summarized() -> bool:
            rows = index_rows(db)
            return sum(1 for e in entries if e["path"] in rows and rows[e["path"]].state == "summarized") == FILES

        assert wait_until(all_summarized, timeout=120, interval=0.5), log.read_text()[-3000:]
        assert wait_until(lambda: not any(os.path.exists(e["path"]) for e in entries), timeout=30)
        # the last instance may still be starting when the earlier ones already did all the work: a SIGTERM
        # before its handler is installed would end it like any process, so wait for its "watching" line
        assert wait_until(lambda: b"watching " in log.read_bytes()[last_start:], timeout=60)
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=60) == 0
    finally:
        if daemon.poll() is None:
            os.killpg(daemon.pid, signal.SIGKILL)
        if writer.poll() is None:
            writer.kill()
        observer.stop()
        observer.join()
    assert orphaned == [], "worker processes outlived a killed daemon"

    # every file summarized exactly once, with the statistics of the values written
    rows = index_rows(db)
    assert set(rows) == {e["path"] for e in entries}
    assert {(r.state, r.summaries, r.raw_deleted) for r in rows.values()} == {("summarized", 1, 1)}
    conn = sqlite3.connect(db)
    by_path: dict[str, list] = {}
    for path, *tensor in conn.execute(
        "SELECT f.path, t.io, t.io_index, t.crc32, t.min, t.max, t.numel FROM tensors t "
        "JOIN files f ON f.id = t.file_id WHERE t.element IS NULL ORDER BY f.path, t.position"  # not element rows
    ):
        by_path.setdefault(path, []).append(tensor)
    mismatched = [e["path"] for e in entries if by_path.get(e["path"]) != e["tensors"]]
    assert mismatched == [], mismatched[:5]

    # no deletion ahead of its commit: the witness, and the daemon's own account
    assert witness.violations == []
    assert witness.checked >= FILES // 2  # the witness really watched (its own queue may overflow a little)
    text = log.read_text()
    deletions = re.findall(r"deleting raw (\S+) \(\d+ bytes; summary in (commit (\d+)|an earlier run's commit)", text)
    assert {path for path, _, _ in deletions} == set(rows)
    seq = {path: r.commit_seq for path, r in rows.items()}
    assert [p for p, _, n in deletions if n and int(n) != seq[p]] == []
    assert "Traceback" not in KILLED_AT_BIRTH.sub("", text)


def test_only_a_worker_killed_at_birth_is_excused():
    born_dead = (  # as Python 3.9 prints it; 3.11 adds caret lines under the code lines
        "Traceback (most recent call last):\n"
        '  File "<string>", line 1, in <module>\n'
        '  File "/usr/lib/python3.9/multiprocessing/spawn.py", line 116, in spawn_main\n'
        "    exitcode = _main(fd, parent_sentinel)\n"
        "               ^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        '  File "/usr/lib/python3.9/multiprocessing/spawn.py", line 124, in _main\n'
        "    preparation_data = reduction.pickle.load(from_parent)\n"
        "EOFError: Ran out of input\n"
    )
    daemon_fault = (
        "Traceback (most recent call last):\n"
        '  File "/x/tcmp/daemon/service.py", line 10, in run\n'
        "    commit()\n"
        "EOFError: Ran out of input\n"
    )
    log = f"INFO a\n{born_dead}INFO b\n{daemon_fault}"
    assert KILLED_AT_BIRTH.sub("", log) == f"INFO a\nINFO b\n{daemon_fault}"
