"""The README's steps for running `tcmp watch` as a systemd service work as written on a fresh machine (issue 27:
`sudo tee /etc/tcmp/watch.env` failed, no step having made /etc/tcmp).

The block is taken from the README as it is and run by bash (`set -euo pipefail`) from the repository (its
`systemd/` files are copied from there), with three changes: `sudo` dropped; the absolute paths under /etc, /opt
and /data put under a scratch root, which holds only what a fresh machine has (/etc/sysctl.d,
/etc/systemd/system, /opt, the dump root the service is for); and the commands that would change the machine,
or need the network, found on PATH as stubs that record their arguments: systemctl, sysctl, python3 (its
`-m venv DIR` makes DIR/bin/pip, another recording stub) and tcmp. Everything else (mkdir, cp, tee, echo,
systemd-escape) is the real command."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
HEADING = "### Running `tcmp watch` as a service"
STUBBED = ("systemctl", "sysctl", "tcmp")
FRESH = ("etc/sysctl.d", "etc/systemd/system", "opt", "data/dumps")  # what the steps may expect to exist

RECORDER = """#!/bin/sh
printf '%s\\n' "$(basename "$0") $*" >> "{log}"
"""
PYTHON3 = """#!/bin/sh
printf '%s\\n' "python3 $*" >> "{log}"
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
    mkdir -p "$3/bin" && cp "{pip}" "$3/bin/pip"
fi
"""


def service_block(text: str) -> list[str]:
    """The first fenced block after the service heading."""
    lines = text.splitlines()
    start = lines.index(HEADING)
    opening = next(k for k in range(start, len(lines)) if lines[k].startswith("```"))
    closing = next(k for k in range(opening + 1, len(lines)) if lines[k].startswith("```"))
    return lines[opening + 1 : closing]


def in_scratch(line: str, root: Path) -> str:
    """`line` with sudo dropped and /etc, /opt and /data under `root`."""
    line = re.sub(r"(^|[\s|&;(])sudo\s+", r"\1", line)
    return re.sub(r"(?<![\w./-])/(etc|opt|data)(?=/|\b)", lambda m: f"{root}/{m.group(1)}", line)


def test_the_rewriting_keeps_the_steps_and_moves_only_system_paths(tmp_path):
    line = "sudo cp a /etc/x && echo 'A=/etc/y' | sudo tee /etc/tcmp/w  # /path/to/tcmp/etc stays"
    assert in_scratch(line, tmp_path) == (
        f"cp a {tmp_path}/etc/x && echo 'A={tmp_path}/etc/y' | tee {tmp_path}/etc/tcmp/w  # /path/to/tcmp/etc stays"
    )


def test_the_service_steps_run_as_written_on_a_fresh_machine(tmp_path):
    root, bin_dir, log = tmp_path / "root", tmp_path / "bin", tmp_path / "calls.log"
    for directory in FRESH:
        (root / directory).mkdir(parents=True)
    bin_dir.mkdir()
    for name in STUBBED:
        (bin_dir / name).write_text(RECORDER.format(log=log))
    pip = tmp_path / "pip"
    pip.write_text(RECORDER.format(log=log))
    (bin_dir / "python3").write_text(PYTHON3.format(log=log, pip=pip))
    for stub in (*bin_dir.iterdir(), pip):
        stub.chmod(0o755)
    steps = [in_scratch(line, root) for line in service_block(README.read_text(encoding="utf-8"))]
    script = "set -euo pipefail\n" + "\n".join(steps) + "\n"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, (script, done.stderr)

    unit = (REPO / "systemd" / "tcmp-watch@.service").read_text()
    assert (root / "etc/systemd/system/tcmp-watch@.service").read_text() == unit
    assert (root / "etc/sysctl.d/90-tcmp-inotify.conf").is_file()
    # the options file where the unit reads it, holding what the README says
    env_file = re.search(r"^EnvironmentFile=-?(/\S+)$", unit, re.MULTILINE)
    assert env_file is not None
    written = (root / env_file.group(1).lstrip("/")).read_text()
    assert written == "TCMP_WATCH_ARGS=--drop-raw --raw-budget 50G\n"
    instance = subprocess.run(["systemd-escape", "--path", str(root / "data/dumps")], capture_output=True,
                              text=True, check=True).stdout.strip()  # fmt: skip
    calls = log.read_text().splitlines()
    assert f"python3 -m venv {root}/opt/tcmp/venv" in calls
    assert any(c.startswith("pip install ") for c in calls)
    assert "systemctl daemon-reload" in calls and "sysctl --system" in calls
    assert f"systemctl enable --now tcmp-watch@{instance}.service" in calls
    assert calls[-1] == shlex.join(["tcmp", "status", str(root / "data/dumps")])
