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

# Runs the command line with an audit hook that holds the compare mid-run, so the signal cannot come too late (a
# quick machine finished this dump's compare within half a second of its first rows): in the main process, the
# first dump file opened after rows have begun to stream into the output directory (a `.part` there) says so in
# a marker file and waits, as a read from a slow disk would, until Ctrl-C interrupts it.
HELD_COMPARE = """
import os, sys, time
dump, reports, marker = (os.path.realpath(p) for p in sys.argv[1:4])
main_pid = os.getpid()

def hold(event, args):
    if event != "open" or os.getpid() != main_pid or not isinstance(args[0], str):
        return
    if not os.path.realpath(args[0]).startswith(dump + os.sep) or os.path.exists(marker):
        return
    if os.path.isdir(reports) and any(name.endswith(".part") for name in os.listdir(reports)):
        open(marker, "w").close()
        time.sleep(600)

sys.addaudithook(hold)
sys.argv = ["tcmp", *sys.argv[4:]]
from tcmp.cli import main
main()
"""


def test_ctrl_c_mid_compare_says_so_and_leaves_no_report(tmp_path):
    scenario = write_scenario(tmp_path / "dump", ScenarioConfig(model=ModelConfig(layers=2), tokens=20))
    reports, marker = tmp_path / "reports", tmp_path / "held"
    # a session of its own, so that SIGINT goes to its whole process group, as a terminal's Ctrl-C does
    command = [sys.executable, "-c", HELD_COMPARE, str(tmp_path / "dump"), str(reports), str(marker), "compare",
               "-tp", str(scenario.target), "-gp", str(scenario.golden_fx), "-o", str(reports), "-j", "2",
               "--oversubscribe"]  # fmt: skip
    compare = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():  # rows streaming in, and the compare held in a read
            assert compare.poll() is None and time.monotonic() < deadline, compare.communicate()
            time.sleep(0.02)
        assert any(p.suffix == ".part" for p in reports.iterdir())
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
