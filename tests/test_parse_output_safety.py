"""`tcmp parse -o` where others can plant files (issue 23, item 3): a planted symlink is never followed, an
existing output is kept unless --force, and a temporary swapped while paused (the writers' test hook) is refused.
Real `tcmp parse` processes; the swap is made by a second user."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from tcmp.schemas.dtypes import DataType as DT
from tcmp.schemas.synth.ge_writer import TensorSpec, write_ge_dump

TS = 1764400000000592
OTHER_USER = "tcmp-test-other"
VALUES = np.arange(6, dtype=np.float32) / 4


@pytest.fixture()
def shared():
    base = Path(tempfile.mkdtemp(prefix="tcmp-parse-", dir="/tmp"))
    base.chmod(0o755)
    (base / "out").mkdir()
    (base / "out").chmod(0o777)
    (base / "pause").mkdir()
    dump = base / f"Add.add.1.2.{TS}"
    write_ge_dump(dump, "add", [TensorSpec(VALUES, int(DT.DT_FLOAT))], [], dump_time=TS)
    victim = base / "victim.npy"
    victim.write_text("root's own file\n")
    yield base, dump, victim
    shutil.rmtree(base, ignore_errors=True)


def _parse(dump: Path, out: Path, *extra: str, env=None, wait=True):
    args = [sys.executable, "-m", "tcmp", "parse", str(dump), "-o", str(out), *extra]
    environment = {**os.environ, "COLUMNS": "300", **(env or {})}
    if not wait:
        return subprocess.Popen(args, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(args, env=environment, capture_output=True, text=True, timeout=120)


def _output_name(dump: Path, tmp_path: Path) -> str:
    """The .npy name parse gives the dump's one tensor, from a conversion into a directory of its own."""
    scratch = tmp_path / "scratch"
    done = _parse(dump, scratch)
    assert done.returncode == 0, done.stderr
    (only,) = scratch.iterdir()
    return only.name


def test_a_planted_symlink_is_not_followed_and_existing_outputs_are_kept(shared, tmp_path):
    base, dump, victim = shared
    out = base / "out"
    name = _output_name(dump, tmp_path)
    (out / name).symlink_to(victim)
    refused = _parse(dump, out)
    assert refused.returncode == 2, refused.stderr
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and str(out / name) in lines[0] and "--force" in lines[0], refused.stderr
    assert victim.read_text() == "root's own file\n" and (out / name).is_symlink()
    forced = _parse(dump, out, "--force")
    assert forced.returncode == 0, forced.stderr
    assert victim.read_text() == "root's own file\n"  # the link replaced, never written through
    assert not (out / name).is_symlink() and np.array_equal(np.load(out / name), VALUES)
    (out / name).write_bytes(b"an earlier conversion")
    again = _parse(dump, out)
    assert again.returncode == 2 and (out / name).read_bytes() == b"an earlier conversion"


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root")
def test_a_temporary_swapped_for_a_symlink_is_refused(shared, tmp_path):
    base, dump, victim = shared
    out, pause = base / "out", base / "pause"
    name = _output_name(dump, tmp_path)
    if subprocess.run(["id", "-u", OTHER_USER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/false", OTHER_USER], check=True)
    process = _parse(dump, out, env={"TCMP_TEST_PAUSE_BEFORE_RENAME": str(pause)}, wait=False)
    deadline = time.monotonic() + 120
    while not (pause / f"paused.{process.pid}").exists():
        if process.poll() is not None:
            pytest.fail(f"parse ended (exit {process.returncode}) without pausing: {process.communicate()[1]}")
        assert time.monotonic() < deadline
        time.sleep(0.05)
    (part,) = [p.name for p in out.iterdir() if re.fullmatch(r"\.tcmp-.*\.part", p.name)]
    swap = f"import os\nos.unlink({str(out / part)!r})\nos.symlink({str(victim)!r}, {str(out / part)!r})\n"
    subprocess.run(["setpriv", "--reuid", OTHER_USER, "--regid", OTHER_USER, "--clear-groups", sys.executable,
                    "-c", swap], check=True, timeout=60)  # fmt: skip
    (pause / "resume").touch()
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 1, stderr
    assert "replaced while being written, not published" in stderr
    assert victim.read_text() == "root's own file\n"
    assert not (out / name).exists() and not (out / name).is_symlink()
