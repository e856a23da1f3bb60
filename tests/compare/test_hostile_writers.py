"""Report writers in a directory other users can write, a compare killed with -9, and a full disk (issue 23,
items 2, 11 and 14): real `tcmp compare` processes, a second user made with useradd, a tmpfs in a mount
namespace. The race of item 2 is made deterministic by the writers' test hook: with TCMP_TEST_PAUSE_BEFORE_RENAME
set, a writer about to rename a temporary into place creates `paused.{pid}` and waits for `resume`."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

OTHER_USER = "tcmp-test-other"
PART = re.compile(r"\.tcmp-(\d+)-([0-9a-f]{8})-([0-9a-f]{16})\.part")

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root")


@pytest.fixture(scope="module")
def other_user() -> tuple[int, int]:
    if subprocess.run(["id", "-u", OTHER_USER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/false", OTHER_USER], check=True)
    uid = int(subprocess.run(["id", "-u", OTHER_USER], capture_output=True, text=True, check=True).stdout)
    gid = int(subprocess.run(["id", "-g", OTHER_USER], capture_output=True, text=True, check=True).stdout)
    return uid, gid


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    config = ScenarioConfig(model=ModelConfig(layers=1), tokens=1, write_fusion_off=False)
    return write_scenario(tmp_path_factory.mktemp("hostile"), config)


@pytest.fixture()
def shared(tmp_path):
    """A directory tree the other user can reach (pytest's own is 0700): `out` writable by everyone, not sticky,
    as a careless shared output directory is."""
    base = Path(tempfile.mkdtemp(prefix="tcmp-hostile-", dir="/tmp"))
    base.chmod(0o755)
    (base / "out").mkdir()
    (base / "out").chmod(0o777)
    (base / "pause").mkdir()
    yield base
    shutil.rmtree(base, ignore_errors=True)


def _compare_args(scenario, out: Path) -> list[str]:
    return [sys.executable, "-m", "tcmp", "compare", "-tp", str(scenario.target), "-gp", str(scenario.golden_fx),
            "-o", str(out), "--highlight"]  # fmt: skip


def _env(tmp_path, pause: Path | None = None) -> dict[str, str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "COLUMNS": "200"}
    env.pop("TCMP_TEST_PAUSE_BEFORE_RENAME", None)
    if pause is not None:
        env["TCMP_TEST_PAUSE_BEFORE_RENAME"] = str(pause)
    return env


def _start_paused(scenario, out: Path, pause: Path, tmp_path) -> subprocess.Popen:
    """A compare, waited for until it pauses before its first rename (its temporaries all exist then)."""
    process = subprocess.Popen(_compare_args(scenario, out), env=_env(tmp_path, pause), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 240
    while not (pause / f"paused.{process.pid}").exists():
        if process.poll() is not None:
            _, stderr = process.communicate()
            pytest.fail(f"the compare ended (exit {process.returncode}) without pausing before a rename: {stderr}")
        assert time.monotonic() < deadline, "the compare did not pause"
        time.sleep(0.05)
    return process


def _as(user: tuple[int, int], code: str) -> None:
    uid, gid = user
    subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", sys.executable, "-c", code],
                   check=True, timeout=60)  # fmt: skip


def _snapshot(path: Path) -> tuple:
    info = path.lstat()
    return path.read_bytes(), info.st_mode, info.st_mtime_ns, info.st_ino


def test_swapped_temporaries_are_refused_and_nothing_outside_is_written(scenario, shared, other_user, tmp_path):
    """Item 2: another user swaps each `.part` temporary for a symlink to a root-owned file outside the output
    directory while the compare is paused before its renames."""
    out, pause = shared / "out", shared / "pause"
    victim = shared / "victim.txt"
    victim.write_text("root's own file\n")
    before = _snapshot(victim)
    process = _start_paused(scenario, out, pause, tmp_path)
    parts = sorted(p.name for p in out.iterdir() if PART.fullmatch(p.name))
    assert len(parts) == 5  # csv, unmatched, summary, xlsx, page
    _as(other_user, f"import os\nfor n in {parts!r}:\n    os.unlink({str(out)!r} + '/' + n)\n"
                    f"    os.symlink({str(victim)!r}, {str(out)!r} + '/' + n)\n")  # fmt: skip
    (pause / "resume").touch()
    _, stderr = process.communicate(timeout=240)
    assert process.returncode == 3, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "replaced while being written, not published" in lines[0], stderr
    assert _snapshot(victim) == before  # nothing written through a link
    reports = [p for p in out.iterdir() if p.name.startswith("tcmp_compare")]
    assert all(p.is_file() and not p.is_symlink() for p in reports), reports
    assert not any(p.is_symlink() and not PART.fullmatch(p.name) for p in out.iterdir())


def test_a_compare_killed_with_9_has_its_temporaries_removed_by_the_next(scenario, shared, other_user, tmp_path):
    """Item 11: the next compare into the directory removes the temporaries of a compare that died, and only
    those: not a live process's, not another user's, not a file of another name."""
    out, pause = shared / "out", shared / "pause"
    process = _start_paused(scenario, out, pause, tmp_path)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    dead = sorted(p.name for p in out.iterdir() if PART.fullmatch(p.name))
    assert len(dead) == 5
    host = PART.fullmatch(dead[0]).group(2)
    alive = subprocess.Popen(["sleep", "600"])
    try:
        live_part = out / f".tcmp-{alive.pid}-{host}-{'a' * 16}.part"
        live_part.write_text("a live writer's")
        others = out / f".tcmp-{process.pid}-{host}-{'b' * 16}.part"  # a dead pid, but not this user's file
        others.write_text("another user's")
        os.chown(others, *other_user)
        unrelated = out / ".tcmp-notes.part"
        unrelated.write_text("not a temporary of tcmp's pattern")
        done = subprocess.run(_compare_args(scenario, out), env=_env(tmp_path), capture_output=True, text=True,
                              timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr
        left = {p.name for p in out.iterdir()}
        assert not left & set(dead)
        assert {live_part.name, others.name, unrelated.name} <= left
    finally:
        alive.kill()
        alive.wait()


@pytest.mark.parametrize("size", ["4k", "64k"])  # full at the first CSV rows; at the page (after the xlsx)
def test_a_full_disk_is_one_line_naming_the_file_and_nothing_is_left(scenario, tmp_path, size):
    """Item 14: the output directory a small tmpfs (in a mount namespace of the test's own)."""
    out = tmp_path / "small"
    out.mkdir()
    script = (f"mount -t tmpfs -o size={size},mode=0755 tmpfs {out} || exit 99\n"
              f"{' '.join(_compare_args(scenario, out))}\nrc=$?\necho LEFT:; ls -A {out}\nexit $rc\n")  # fmt: skip
    done = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script], env=_env(tmp_path),
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    if done.returncode == 99:
        pytest.skip(f"no tmpfs mount here: {done.stderr}")
    assert done.returncode == 3, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr  # no library warning beside it
    line = " ".join(lines[0].split())
    report = r"tcmp_compare(_rank\d+)?_\d+(\.csv|_unmatched\.csv|_summary\.json|_report\.html|\.xlsx)"
    written = re.search(rf"cannot write {re.escape(str(out))}/{report}: No space left on device", line)
    assert written, done.stderr
    assert "no report of this compare kept" in line
    assert done.stdout.split("LEFT:")[1].split() == []  # no temporary left behind


def _entries(root: Path) -> dict[str, tuple]:
    """Every entry under `root`, hidden ones too: its type and mode, and a file's bytes."""
    found = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        found[str(path.relative_to(root))] = (info.st_mode, path.read_bytes() if path.is_file() else None)
    return found


def _cache_entries(cache_home: Path) -> dict[str, int]:
    return {p.name: p.stat().st_ino for p in (cache_home / "tcmp" / "graphs").iterdir()}


def test_a_compare_writes_nothing_into_the_dumps_and_caches_a_read_only_one(scenario, tmp_path):
    """Item 4 (the compare's half): the dump trees are entry for entry and byte for byte as they were; a dump on a
    read-only mount gets its graphs cached as well, and the second compare uses the entries (not rewritten)."""
    before = _entries(scenario.root)
    first = subprocess.run(_compare_args(scenario, tmp_path / "rw"), env=_env(tmp_path), capture_output=True,
                           text=True, timeout=300)  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert _entries(scenario.root) == before
    read_only = (f"mount --bind {scenario.root} {scenario.root} && mount -o remount,bind,ro {scenario.root}"
                 f" || exit 99\nexec {' '.join(_compare_args(scenario, tmp_path / 'ro'))}\n")  # fmt: skip
    env = {**_env(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "ro-cache")}
    inodes = []
    for _ in range(2):
        done = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", read_only], env=env,
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        if done.returncode == 99:
            pytest.skip(f"no read-only bind mount here: {done.stderr}")
        assert done.returncode == 0, done.stderr
        inodes.append(_cache_entries(tmp_path / "ro-cache"))
    assert inodes[0] and inodes[1] == inodes[0]  # cached by the first, read (not parsed and rewritten) by the second
    assert _entries(scenario.root) == before
