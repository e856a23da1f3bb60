"""Files and directories the system will not let the compare read (issue 18, item 5): each is an unmatched item of
kind `unreadable` with the reason `unreadable: permission denied`, counted on the console; the compare goes on
with the rest and exits 1.

The compare runs as a real process whose file modes really deny access: as root (these tests' usual case) the child
drops CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from its bounding set before it execs, so the process it becomes
obeys the mode bits like any user; the test proves the denial on one of the files before it relies on it.
"""

from __future__ import annotations

import csv
import ctypes
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable, Optional

import pytest

from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

PR_CAPBSET_DROP = 24  # <linux/prctl.h>
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2  # <linux/capability.h>


def _obeying_file_modes() -> Optional[Callable[[], None]]:
    """A preexec_fn after which the child's program obeys file modes (None when this process already does)."""
    if os.geteuid() != 0:
        return None
    libc = ctypes.CDLL(None, use_errno=True)

    def drop() -> None:
        for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
            if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")

    return drop


def _run(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *map(str, args)], capture_output=True, text=True, timeout=300,
        preexec_fn=_obeying_file_modes(),
    )  # fmt: skip


def _prove_denied(path: Path) -> None:
    probe = _run("-c", f"import os; os.listdir({str(path)!r}) if os.path.isdir({str(path)!r}) else open({str(path)!r})")
    assert probe.returncode != 0 and "PermissionError" in probe.stderr, probe.stderr  # the denial is real


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    config = ScenarioConfig(model=ModelConfig(layers=1), ranks=2, tokens=2)
    return write_scenario(tmp_path_factory.mktemp("denied"), config)


def _unmatched(out: Path) -> list[dict]:
    return list(csv.DictReader(next(out.glob("*_rank0_*_unmatched.csv")).open()))


def _rows(out: Path) -> list[dict]:
    report = next(p for p in out.glob("*_rank0_*.csv") if not p.name.endswith("_unmatched.csv"))
    return list(csv.DictReader(report.open()))


@pytest.mark.parametrize("golden", ["fx", "ge"])
def test_unreadable_files_and_directories_are_unmatched_items_and_the_compare_goes_on(scenario, tmp_path, golden):
    golden_root = scenario.golden_fx if golden == "fx" else scenario.golden_ge
    rank0 = next(golden_root.glob("worldsize2_global_rank0"))
    target_step = next(scenario.target.glob("worldsize2_global_rank0/*/0/graph_1_0/*"))  # {model_id}: tokens below
    denied = [
        next((target_step / "0").glob("MatMulV2.MatMul_0.*")),  # one GE file of the target
        next(
            rank0.glob("*/0/gelu_0-aten.gelu.default.OUTPUT.0.*.npy" if golden == "fx" else "*/0/*/*/0/Gelu.Gelu_0.*")
        ),
        target_step / "1",  # a token directory of the target: chmod 000
        next(golden_root.glob("worldsize2_global_rank1")),  # a whole rank directory of the golden: chmod 000
    ]
    modes = {p: p.stat().st_mode for p in denied}
    for p in denied:
        p.chmod(0)
    try:
        _prove_denied(denied[0])
        _prove_denied(denied[-1])
        out = tmp_path / "reports"
        done = _run("-m", "tcmp", "compare", "-tp", scenario.target, "-gp", golden_root, "-o", out, "--jobs", "1")
    finally:
        for p, mode in modes.items():
            p.chmod(mode)
    assert done.returncode == 1, done.stderr  # the compare ran; files it could not read are failures found
    assert "error" not in done.stderr.lower() and "Traceback" not in done.stderr
    items = [u for u in _unmatched(out) if u["Kind"] == "unreadable"]
    assert sorted(u["Path"] for u in items) == sorted(str(p) for p in denied)
    assert {u["Reason"] for u in items} == {"unreadable: permission denied"}
    console = " ".join(done.stdout.split())
    assert "4 unreadable" in console  # counted on the console
    assert "note: target rank 1 not compared: not in the golden dump" in console  # what the denied rank costs
    # the compare went on: token 0 of rank 0 has its rows (but not the unreadable MatMul_0's), and the ranks both
    # dumps hold were compared
    rows = _rows(out)
    token0 = {r["API Name"].split(".")[0] for r in rows if r["Token"] == "0"}
    assert "MatMul_0" not in token0 and len(token0) > 10
    matmul = next(u for u in items if "MatMul_0" in u["Path"])
    assert (matmul["Side"], matmul["Token"], matmul["Op Name"]) == ("target", "0", "MatMul_0")
