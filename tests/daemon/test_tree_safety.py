"""`tcmp watch` runs as root over trees other users write: it reads, summarizes and deletes nothing outside the
watched root, trusts its `.tcmp` only when it is its own, shares a tree with no other watcher, and records the
files it cannot read by path. Real `tcmp watch` processes, real inotify and SQLite; the other users are unused
uids (setpriv), the race of a directory swapped for a symlink is run deterministically through the deleter's
test pause (retention.PAUSE_ENV)."""

from __future__ import annotations

import os
import pwd
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

import numpy as np
import pytest
from daemon_testlib import crc, fx_path, index_rows, npy_bytes, tensor_rows, wait_until

from tcmp.schemas import display

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv (other users' files)"
)


def _unused_uids(count: int) -> list[int]:
    uids = []
    for uid in range(61000, 62000):
        try:
            pwd.getpwuid(uid)
        except KeyError:
            uids.append(uid)
            if len(uids) == count:
                return uids
    pytest.skip("no unused uid")


@pytest.fixture
def users():
    """(attacker, victim): the uid owning the dump tree, and another user whose files are elsewhere."""
    return tuple(_unused_uids(2))


@pytest.fixture
def shared():
    """A directory other users can reach (pytest's tmp_path is root's own, 0700)."""
    directory = Path(tempfile.mkdtemp(prefix="tcmp-shared-"))
    directory.chmod(0o755)
    yield Path(os.path.realpath(directory))
    shutil.rmtree(directory, ignore_errors=True)


def as_user(uid: int, *command: str) -> None:
    subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *command], check=True)


def chown_tree(path: Path, uid: int) -> None:
    for directory, names, files in os.walk(path):
        os.chown(directory, uid, uid)
        for name in names + files:
            os.chown(os.path.join(directory, name), uid, uid, follow_symlinks=False)


def run_watch(*args: str, umask: Optional[int] = None) -> subprocess.CompletedProcess:
    def set_umask() -> None:
        if umask is not None:
            os.umask(umask)

    return subprocess.run(
        [sys.executable, "-m", "tcmp", "watch", *args], capture_output=True, text=True, timeout=120,
        preexec_fn=set_umask, cwd="/",
    )  # fmt: skip


def victim_file(shared: Path, uid: int, name: str, values: np.ndarray) -> Path:
    """Another user's directory holding a complete file of the dump's file name."""
    directory = shared / "victim"
    directory.mkdir()
    path = directory / name
    path.write_bytes(npy_bytes(values))
    chown_tree(directory, uid)
    return path


def crcs_in(db: Path) -> set[int]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {row[0] for row in conn.execute("SELECT crc32 FROM tensors")}
    finally:
        conn.close()


# -- item 1: nothing outside the root is deleted, read or summarized


def test_drop_raw_never_deletes_through_a_directory_swapped_for_a_symlink_during_the_delete(daemon, shared, users):
    attacker, victim_uid = users
    root = shared / "dumps"
    raw = fx_path(root, 0, 1)
    raw.parent.mkdir(parents=True)
    raw.write_bytes(npy_bytes(np.arange(8, dtype=np.float32)))
    chown_tree(root, attacker)
    victim_values = np.full(8, 7.5, np.float32)
    victim = victim_file(shared, victim_uid, raw.name, victim_values)
    pause = shared / "pause"
    pause.mkdir()
    env = {**os.environ, "TCMP_TEST_DELETE_PAUSE_DIR": str(pause)}
    watcher = daemon(str(root), "--drop-raw", "--workers", "1", env=env)
    assert wait_until(lambda: (pause / "paused").exists(), 60), watcher.log()  # deletion decided, not done
    assert (pause / "paused").read_text() == str(raw)
    step = raw.parent
    as_user(attacker, "sh", "-c", f"mv '{step}' '{step}.moved' && ln -s '{victim.parent}' '{step}'")
    (pause / "resume").touch()
    assert watcher.wait_for_log("kept raw file", 30), watcher.log()
    assert victim.read_bytes() == npy_bytes(victim_values)  # the other user's file survives
    assert "its directory was replaced" in watcher.log()
    assert f"deleting raw {raw} " not in watcher.log()
    assert watcher.stop() == 0
    db = root / ".tcmp" / "index.sqlite"
    assert crc(victim_values) not in crcs_in(db)  # nothing of it was read into the index
    assert index_rows(db)[str(raw)].raw_deleted == 0  # the index says the raw file was kept


def test_a_file_behind_a_directory_swapped_for_a_symlink_is_neither_read_summarized_nor_deleted(daemon, shared, users):
    """The issue's sequence: a raw file of a step directory is deleted (the old deleter then trusted that
    directory), a cut-short file of it waits, and the directory becomes a symlink to another user's directory
    holding a complete file of that name."""
    attacker, victim_uid = users
    root = shared / "dumps"
    first = fx_path(root, 0, 1)
    first.parent.mkdir(parents=True)
    first.write_bytes(npy_bytes(np.arange(8, dtype=np.float32)))
    waiting = fx_path(root, 0, 2)
    waiting.write_bytes(npy_bytes(np.arange(64, dtype=np.float32))[:100])  # header promises more: incomplete
    chown_tree(root, attacker)
    victim_values = np.full(64, 3.25, np.float32)
    victim = victim_file(shared, victim_uid, waiting.name, victim_values)
    watcher = daemon(str(root), "--drop-raw", "--workers", "1")
    db = root / ".tcmp" / "index.sqlite"
    assert wait_until(lambda: not first.exists() and str(waiting) in index_rows(db), 60), watcher.log()
    assert index_rows(db)[str(waiting)].state == "incomplete"
    step = waiting.parent
    as_user(attacker, "sh", "-c", f"mv '{step}' '{step}.moved' && ln -s '{victim.parent}' '{step}'")
    # the waiting file is looked at again with back-off (0.5 s doubling): its row goes (the file left the tree)
    # or, read through the link, becomes a summary
    assert wait_until(lambda: _state(db, waiting) != "incomplete", 30), watcher.log()
    assert victim.read_bytes() == npy_bytes(victim_values)
    assert str(waiting) not in index_rows(db)
    assert crc(victim_values) not in crcs_in(db)
    assert "not followed" in watcher.log()
    assert watcher.stop() == 0


def _state(db: Path, path: Path) -> Optional[str]:
    row = index_rows(db).get(str(path))
    return None if row is None else row.state


# -- item 4: .tcmp is trusted only when it is ours


def _dump(root: Path) -> Path:
    path = fx_path(root, 0, 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(npy_bytes(np.arange(8, dtype=np.float32)))
    return path


def test_a_tcmp_directory_planted_as_a_symlink_is_refused(shared, users):
    attacker, _ = users
    root = shared / "dumps"
    _dump(root)
    elsewhere = shared / "elsewhere"
    elsewhere.mkdir()
    chown_tree(root, attacker)
    chown_tree(elsewhere, attacker)
    as_user(attacker, "ln", "-s", str(elsewhere), str(root / ".tcmp"))
    result = run_watch("--once", str(root))
    assert result.returncode == 3, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("tcmp:") or "error" in line.lower()]
    assert any("symlink" in line and "refused" in line for line in lines), result.stderr
    assert os.listdir(elsewhere) == []  # no index, no lock went through the link


def test_an_index_planted_as_a_symlink_is_refused(shared):
    root = shared / "dumps"
    _dump(root)
    (root / ".tcmp").mkdir(mode=0o755)
    target = shared / "any_name"
    (root / ".tcmp" / "index.sqlite").symlink_to(target)
    result = run_watch("--once", str(root))
    assert result.returncode == 3, result.stderr
    assert "index.sqlite is a symlink: refused" in result.stderr
    assert not target.exists()


@pytest.mark.parametrize("case", ["owned by another user", "writable by others", "index writable by others"])
def test_a_tcmp_directory_or_index_not_ours_is_refused(shared, users, case):
    attacker, _ = users
    root = shared / "dumps"
    _dump(root)
    tcmp_dir = root / ".tcmp"
    tcmp_dir.mkdir()
    tcmp_dir.chmod(0o755)
    if case == "owned by another user":
        os.chown(tcmp_dir, attacker, attacker)
    elif case == "writable by others":
        tcmp_dir.chmod(0o777)
    else:
        (tcmp_dir / "index.sqlite").touch()
        (tcmp_dir / "index.sqlite").chmod(0o666)
    result = run_watch("--once", str(root))
    assert result.returncode == 3, result.stderr
    expected = f"owned by uid {attacker}" if case == "owned by another user" else "writable by group or others"
    assert expected in result.stderr and "refused" in result.stderr
    assert not (tcmp_dir / "index.sqlite").exists() or case == "index writable by others"
    if case == "index writable by others":
        assert (tcmp_dir / "index.sqlite").stat().st_size == 0  # not written


def test_under_umask_000_nothing_of_the_daemon_is_writable_by_others(shared):
    root = shared / "dumps"
    _dump(root)
    result = run_watch("--once", str(root), umask=0)
    assert result.returncode == 0, result.stderr
    tcmp_dir = root / ".tcmp"
    modes = {p.name: stat.S_IMODE(p.lstat().st_mode) for p in (tcmp_dir, *tcmp_dir.iterdir())}
    assert {"index.sqlite", "index.sqlite.lock", ".tcmp"} <= set(modes)
    assert {name: mode for name, mode in modes.items() if mode & 0o022} == {}, modes


# -- item 8: one watcher per tree


@pytest.mark.parametrize("first", ["outer", "inner"])
def test_a_watcher_refuses_a_root_inside_or_around_a_running_watchers_root(daemon, tmp_path, first):
    outer = Path(os.path.realpath(tmp_path)) / "two"
    inner = outer / "ge"
    _dump(inner)
    roots = {"outer": outer, "inner": inner}
    second = "inner" if first == "outer" else "outer"
    running = daemon(str(roots[first]), "--drop-raw", "--workers", "1")
    assert running.wait_for_log("watching", 60), running.log()
    result = run_watch("--once", "--drop-raw", str(roots[second]))
    assert result.returncode == 3, result.stderr
    assert f"tcmp watch pid {running.pid} watches" in result.stderr
    assert str(roots[first]) in result.stderr and "one watcher per tree" in result.stderr
    assert not (roots[second] / ".tcmp" / "index.sqlite").exists()
    assert running.stop() == 0
    assert run_watch("--once", str(roots[second])).returncode == 0  # once it is gone, the tree is free


# -- item 12: a path past PATH_MAX


def test_a_file_past_path_max_is_recorded_as_skipped_and_counted_by_status(tmp_path):
    root = Path(os.path.realpath(tmp_path)) / "dumps"
    root.mkdir()
    _dump(root)
    name = "d" * 200
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    depth = 0
    try:
        while len(str(root)) + depth * (len(name) + 1) < 4200:
            os.mkdir(name, dir_fd=fd)
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
            depth += 1
        file_name = fx_path(Path("/"), 0, 2).name
        out = os.open(file_name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(out, npy_bytes(np.arange(4, dtype=np.float32)))
        os.close(out)
    finally:
        os.close(fd)
    long_path = str(root) + ("/" + name) * depth + "/" + file_name
    assert len(long_path) >= 4096
    result = run_watch("--once", str(root))
    assert result.returncode == 1, result.stderr  # a file could not be summarized
    assert "skipped: path too long" in result.stderr
    rows = index_rows(root / ".tcmp" / "index.sqlite")
    assert rows[long_path].state == "error" and rows[long_path].error.startswith("skipped: path too long")
    assert rows[str(fx_path(root, 0, 1))].state == "summarized"
    status = subprocess.run([sys.executable, "-m", "tcmp", "status", str(root)], capture_output=True, text=True)
    assert "1 skipped: path too long" in status.stdout, status.stdout
    assert tensor_rows(root / ".tcmp" / "index.sqlite", Path(long_path)) == []
    shutil.rmtree(root)  # shutil walks by descriptor


def test_a_name_that_is_not_utf8_is_recorded_as_skipped_and_costs_no_other_file(tmp_path):
    """SQLite keys are UTF-8: such a name used to make the writer drop its whole batch (the good file's too)."""
    root = Path(os.path.realpath(tmp_path)) / "dumps"
    good = _dump(root)
    bad = os.fsencode(good.parent) + b"/op\xff_2-aten.add.Tensor.OUTPUT.0.20261129083000000002.npy"
    with open(bad, "wb") as out:
        out.write(npy_bytes(np.arange(4, dtype=np.float32)))
    result = run_watch("--once", "--workers", "1", str(root))
    assert result.returncode == 1, result.stderr
    shown = bad.decode("utf-8", "backslashreplace")
    logged = display.shown(shown)  # a log line shows a name's backslash escaped (names are data)
    assert f"{logged}: skipped: the name is not valid UTF-8" in result.stderr
    rows = index_rows(root / ".tcmp" / "index.sqlite")
    assert rows[str(good)].state == "summarized"
    assert rows[shown].state == "error" and rows[shown].error == "skipped: the name is not valid UTF-8"
