"""Ctrl-C on a running `tcmp compare` (issue 27): exit code 130, one line saying it was interrupted and that no
report was written, and indeed no report file and no temporary left in the output directory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario


def test_ctrl_c_mid_compare_says_so_and_leaves_no_report(tmp_path):
    scenario = write_scenario(tmp_path / "dump", ScenarioConfig(model=ModelConfig(layers=2), tokens=20))
    reports = tmp_path / "reports"
    # a session of its own, so that SIGINT goes to its whole process group, as a terminal's Ctrl-C does
    command = [sys.executable, "-m", "tcmp", "compare", "-tp", str(scenario.target), "-gp", str(scenario.golden_fx),
               "-o", str(reports), "-j", "2", "--oversubscribe"]  # fmt: skip
    compare = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 120
        while not (reports.is_dir() and any(p.suffix == ".part" for p in reports.iterdir())):  # rows streaming in
            assert compare.poll() is None and time.monotonic() < deadline, compare.communicate()
            time.sleep(0.02)
        time.sleep(0.5)
        assert compare.poll() is None  # still comparing: the signal comes mid-run
        os.killpg(compare.pid, signal.SIGINT)
        stdout, stderr = compare.communicate(timeout=60)
    finally:
        if compare.poll() is None:
            os.killpg(compare.pid, signal.SIGKILL)
    assert compare.returncode == 130, stderr
    assert (
        stderr.strip()
        .splitlines()[-1]
        .startswith("interrupted: the compare stopped before its end; no report was written")
    ), stderr
    assert "Traceback" not in stderr and stdout == ""
    assert sorted(p.name for p in reports.iterdir()) == []
