"""Ctrl-C on a busy `tcmp watch` (issue 18, item 1), against real processes: the terminal sends SIGINT to its whole
foreground process group, the spawned workers included, also while they are still starting. The workers must
leave it to the daemon, which drains them and stops as on SIGTERM: one "stopping" line, the summary, exit 0, and
no ERROR line, traceback or dying worker."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from daemon_testlib import WRITER_SCRIPT, children, index_rows, wait_until, worker_pids

from tcmp.schemas.index import default_index_path

BROKEN = re.compile(r" ERROR |Traceback|KeyboardInterrupt|Fatal Python error|worker process died|failed to start")


def _interrupt_while_starting(daemon_pid: int, log) -> int:
    """SIGINT to each of the daemon's children, over and over, from the moment they exist until the workers say
    they are ready: every moment of their start-up (interpreter, imports, unpickling) gets one."""
    sent = 0
    deadline = time.monotonic() + 60
    while "workers ready" not in log() and time.monotonic() < deadline:
        for pid in children(daemon_pid):
            try:
                os.kill(pid, signal.SIGINT)
                sent += 1
            except ProcessLookupError:
                pass
        time.sleep(0.002)
    return sent


@pytest.mark.slow
def test_workers_starting_up_ignore_sigint(root, daemon):
    d = daemon(str(root), "--workers", "2")
    assert d.wait_for_log("watching ", timeout=30), d.log()
    sent = _interrupt_while_starting(d.pid, d.log)
    assert sent > 20 and "workers ready (2)" in d.log(), (sent, d.log())
    assert not BROKEN.search(d.log()), d.log()
    assert len(worker_pids(d.pid)) == 2  # none died
    assert d.stop(signal.SIGTERM) == 0


@pytest.mark.slow
def test_ctrl_c_on_a_busy_daemon_stops_it_as_sigterm_does(root, tmp_path, daemon):
    d = daemon(str(root), "--workers", "2", "--drop-raw")
    assert d.wait_for_log("workers ready (2)", timeout=30), d.log()
    manifest = tmp_path / "manifest.jsonl"
    writer = subprocess.Popen([sys.executable, str(WRITER_SCRIPT), str(root), str(manifest), "--files", "4000",
                               "--rate", "500", "--seed", "18"])  # fmt: skip
    try:
        db = default_index_path(root)
        assert wait_until(lambda: len(index_rows(db)) >= 300, timeout=60), d.log()[-3000:]
        os.killpg(d.pid, signal.SIGINT)  # Ctrl-C: the daemon, its workers, the resource tracker
        time.sleep(0.01)
        os.killpg(d.pid, signal.SIGINT)  # pressed twice
        assert d.process.wait(timeout=60) == 0
    finally:
        writer.kill()
        writer.wait()
    log = d.log()
    assert not BROKEN.search(log), log[-5000:]
    assert len(re.findall(r"stopping on SIGINT: finishing the \d+ files? under way", log)) == 1, log[-3000:]
    assert re.search(r"stopped: \d+ files? summarized, 0 failed", log), log[-3000:]
    assert wait_until(lambda: not d.group_alive(), timeout=10)  # the workers ended with it

    # every summary handed over was committed, and what was only queued is found by the next start
    written = [json.loads(line)["path"] for line in manifest.read_text().splitlines()]
    again = daemon(str(root), "--workers", "1", "--drop-raw", log="again.log")

    def all_summarized() -> bool:
        rows = index_rows(db)
        return all(p in rows and rows[p].state == "summarized" for p in written)

    assert wait_until(all_summarized, timeout=60), again.log()[-3000:]
    assert {index_rows(db)[p].summaries for p in written} == {1}
    assert again.stop(signal.SIGTERM) == 0
