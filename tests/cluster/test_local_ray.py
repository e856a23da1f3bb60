"""`--cluster local` starts a Ray that listens on loopback only: run where the machine has another address too
(a network namespace with one, netns.OTHER_ADDRESS), every process of the Ray it starts listens on 127.0.0.1 (Ray
binds all interfaces, or that other address, unless its node address is 127.0.0.1), and a compare runs on it."""

from __future__ import annotations

import os
import selectors
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from listening import descendants, listeners
from netns import with_other_network
from ray_nodes import leftover_pids

pytestmark = pytest.mark.slow

START_TIMEOUT_S = 120.0
# the driver: a local Ray as `tcmp compare --cluster local` starts it, held until told, then a compare on it
DRIVER = """
import sys
from pathlib import Path
from tcmp.compare.cluster.ray_executor import connected
from tcmp.compare.cluster.run import run_cluster_compare
from tcmp.compare.report.outcome import CompareOptions
from tcmp.compare.report.writers import ReportChoice, chosen_formats
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

data = Path(sys.argv[1])
write_scenario(data, ScenarioConfig(ranks=1, tokens=1))
with connected("local"):
    print("up", flush=True)
    sys.stdin.readline()
    done = run_cluster_compare(CompareOptions(data / "target/msprobe_ge_dump", data / "golden_fx/msprobe_fx_dump"),
                               "local", data / "reports", formats=chosen_formats(ReportChoice(html=False)))
    print("compared", len(done.not_compared), flush=True)
    sys.stdin.readline()
"""


def _line(process: subprocess.Popen, timeout: float) -> str:
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        return process.stdout.readline() if selector.select(timeout) else ""


def _tell(driver: subprocess.Popen) -> None:
    driver.stdin.write("go\n")
    driver.stdin.flush()


def test_a_local_ray_listens_on_loopback_only_where_the_machine_has_another_address(tmp_path):
    temp = Path(f"/tmp/tcmp-rl-{os.getpid()}")  # short: Ray's socket paths must fit in 107 bytes
    env = {**os.environ, "RAY_TMPDIR": str(temp), "HOME": str(tmp_path), "RAY_USAGE_STATS_ENABLED": "0"}
    command = f"{shlex.quote(sys.executable)} -c {shlex.quote(DRIVER)} {shlex.quote(str(tmp_path / 'data'))}"
    log = open(tmp_path / "driver.log", "w")  # noqa: SIM115
    driver = subprocess.Popen(with_other_network(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=log, text=True, env=env, start_new_session=True)  # fmt: skip
    try:
        assert _line(driver, START_TIMEOUT_S) == "up\n", (tmp_path / "driver.log").read_text()
        found = listeners(descendants({driver.pid}))  # the driver's own servers with those of the Ray it started
        assert {"gcs_server", "raylet"} <= {f.command for f in found}, found
        assert [f for f in found if not f.on_loopback] == []
        _tell(driver)
        assert _line(driver, START_TIMEOUT_S) == "compared 0\n", (tmp_path / "driver.log").read_text()
        # and with the worker processes the compare's tasks ran in (Ray may have started them before)
        with_workers = listeners(descendants({driver.pid}))
        assert [f for f in with_workers if not f.on_loopback] == []
        _tell(driver)
        assert driver.wait(timeout=60) == 0
        assert list((tmp_path / "data" / "reports").glob("tcmp_compare_*_summary.json"))
        assert leftover_pids(temp) == []  # the Ray it started went with it
    finally:
        log.close()
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait(timeout=10)
        for pid in leftover_pids(temp):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(temp, ignore_errors=True)
