"""The service unit passes `systemd-analyze verify` without a single line of output (verify exits 0 on warnings,
so output is what counts), and the sysctl drop-in only names existing inotify settings."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SYSTEMD = Path(__file__).parents[2] / "systemd"
UNIT = SYSTEMD / "tcmp-watch@.service"


def _verify(unit_dir: Path, instance_path: Path) -> subprocess.CompletedProcess:
    escaped = subprocess.run(
        ["systemd-escape", "--path", str(instance_path)], capture_output=True, text=True, check=True
    ).stdout.strip()
    # an absolute path: with a relative one, systemd 252 verifies nothing and prints nothing
    unit = unit_dir / f"tcmp-watch@{escaped}.service"
    return subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=120)


def _unit_copy(tmp_path: Path, text: str) -> Path:
    unit_dir = tmp_path / "units"
    unit_dir.mkdir(exist_ok=True)
    (unit_dir / UNIT.name).write_text(text)
    return unit_dir


@pytest.fixture
def unit_text() -> str:
    if shutil.which("systemd-analyze") is None or shutil.which("systemd-escape") is None:
        pytest.skip("systemd-analyze is not installed (apt-get install systemd)")
    text = UNIT.read_text()
    assert "ExecStart=/opt/tcmp/venv/bin/python -m tcmp watch" in text
    return text.replace("/opt/tcmp/venv/bin/python", sys.executable)  # verify checks the binary exists


def test_unit_verifies_without_any_output(tmp_path, unit_text):
    watched = tmp_path / "dumps dir"  # a space: escaped as \x20 in the instance name
    watched.mkdir()
    result = _verify(_unit_copy(tmp_path, unit_text), watched)
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_verify_would_catch_a_broken_unit(tmp_path, unit_text):
    """Negative control: the check above really looks at the file."""
    broken = unit_text.replace("ProtectSystem=strict", "ProtectSytem=strict").replace(
        "Restart=on-failure", "Restart=sometimes"
    )
    result = _verify(_unit_copy(tmp_path, broken), tmp_path)
    output = result.stdout + result.stderr
    assert "Unknown key 'ProtectSytem'" in output and "sometimes" in output


def test_unit_is_a_notify_service_with_watchdog_and_hardening():
    settings = dict(
        line.split("=", 1) for line in UNIT.read_text().splitlines() if "=" in line and not line.startswith("#")
    )
    assert settings["Type"] == "notify" and settings["Restart"] == "on-failure"
    assert int(settings["WatchdogSec"]) > 0 and settings["ReadWritePaths"] == "%f"
    assert settings["ProtectSystem"] == "strict" and settings["NoNewPrivileges"] == "yes"
    assert "%f" in settings["ExecStart"]
    # the daemon refuses a group-writable index (it could be edited or replaced by the group): 0022, not 0007
    assert settings["UMask"] == "0022"
    # the watcher registry (trees.py) lives there: ProtectSystem=strict leaves /run read-only otherwise
    assert settings["RuntimeDirectory"] == "tcmp" and settings["RuntimeDirectoryPreserve"] == "yes"


KERNEL_DEFAULTS = {  # inotify(7)
    "fs.inotify.max_queued_events": 16384,
    "fs.inotify.max_user_watches": 8192,
    "fs.inotify.max_user_instances": 128,
}


def test_sysctl_drop_in_names_existing_settings_above_the_kernel_defaults():
    pairs = re.findall(r"^([\w.]+)\s*=\s*(\d+)\s*$", (SYSTEMD / "90-tcmp-inotify.conf").read_text(), re.MULTILINE)
    assert {key for key, _ in pairs} == set(KERNEL_DEFAULTS)
    for key, value in pairs:
        assert Path("/proc/sys", *key.split(".")).exists(), key
        assert int(value) > KERNEL_DEFAULTS[key], key
    assert dict(pairs)["fs.inotify.max_queued_events"] == str(1 << 20)  # no overflow in the notes' experiments
