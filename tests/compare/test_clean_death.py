"""A compare killed with -9 takes its worker processes with it (issue #23, item 11): the real `tcmp compare` in a
subprocess, its children found in /proc, the parent killed while they run, then none of them may be left."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario


def children(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state, past the (command) name
        if ppid == pid:
            found.add(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_compare_killed_with_sigkill_leaves_no_worker_alive(tmp_path):
    # --oversubscribe: two workers whatever the CPUs of the machine running the test (the CLI caps --jobs at them)
    # the workers start before the dumps are read: any dump keeps them there long enough to be seen
    scenario = write_scenario(tmp_path / "dump", ScenarioConfig(model=ModelConfig(layers=1), tokens=2))
    compare = subprocess.Popen(
        [sys.executable, "-m", "tcmp", "compare", "-m", "torchair", "-tp", str(scenario.target), "-gp",
         str(scenario.golden_fx), "-o", str(tmp_path / "out"), "--jobs", "3", "--oversubscribe"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while len(workers) < 2 and compare.poll() is None and time.monotonic() < deadline:
            workers = children(compare.pid)
            time.sleep(0.01)
        assert len(workers) >= 2, "the compare never had its two workers"
        os.kill(compare.pid, signal.SIGKILL)
        compare.wait(timeout=10)
        deadline = time.monotonic() + 10
        while any(alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = sorted(w for w in workers if alive(w))
        assert not left, f"workers still running after their compare was killed: {left}"
    finally:
        for pid in (compare.pid, *children(compare.pid), *workers):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
