"""Helpers for the daemon tests (imported by them; conftest.py puts this directory on sys.path): run `tcmp watch`
as a real process (in its own session, so kill -9 reaches it and nothing else), read its log and the index it
writes, and write dump files whose summary is known independently of tcmp's readers."""

from __future__ import annotations

import io
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import pytest

WRITER_SCRIPT = Path(__file__).with_name("dump_writer.py")
FX_STEP = "msprobe_fx_dump/worldsize1_global_rank0/gm_20261129083000000000_dump"


def unprivileged() -> list[str]:
    """Command prefix that makes file permissions apply to the daemon: as root, drop the capabilities that bypass
    them (uid 0 without CAP_DAC_OVERRIDE obeys mode bits on files it does not own... and on its own too)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: permission faults cannot be provoked")
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--"]


def npy_bytes(values: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, values)
    return buffer.getvalue()


def fx_path(root: Path, step: int, n: int, node: str = "op") -> Path:
    return root / FX_STEP / str(step) / f"{node}_{n}-aten.add.Tensor.OUTPUT.0.{20261129083000000000 + n}.npy"


def write_fx(root: Path, step: int, n: int, values: Optional[np.ndarray] = None, node: str = "op") -> Path:
    path = fx_path(root, step, n, node)
    path.parent.mkdir(parents=True, exist_ok=True)
    values = np.arange(n, n + 8, dtype=np.float32) if values is None else values
    path.write_bytes(npy_bytes(values))
    return path


def crc(values: np.ndarray) -> int:
    return zlib.crc32(np.ascontiguousarray(values).tobytes())


@dataclass(frozen=True)
class Row:
    path: str
    state: str
    error: Optional[str]
    summaries: int
    attempts: int
    raw_deleted: int
    commit_seq: Optional[int]


def index_rows(db: Path) -> dict[str, Row]:
    """Every files row, read-only (the daemon may be writing)."""
    if not db.exists():
        return {}
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        rows = conn.execute("SELECT path, state, error, summaries, attempts, raw_deleted, commit_seq FROM files")
        return {r[0]: Row(*r) for r in rows}
    except sqlite3.OperationalError:
        return {}
    finally:
        conn.close()


def tensor_rows(db: Path, path: Path) -> list[tuple]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return conn.execute(
            "SELECT t.io, t.io_index, t.crc32, t.min, t.max, t.numel FROM tensors t JOIN files f ON f.id = t.file_id "
            "WHERE f.path = ? AND t.element IS NULL ORDER BY t.position",  # a tensor's own rows, not its elements'
            (str(path),),
        ).fetchall()
    finally:
        conn.close()


def wait_until(condition: Callable[[], bool], timeout: float, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()


class DaemonProcess:
    """One `tcmp watch` process; its log goes to a file."""

    def __init__(self, args: list[str], log: Path, env: Optional[dict[str, str]] = None, prefix: tuple = ()) -> None:
        self.log_path = log
        self._log = open(log, "ab")  # noqa: SIM115 - open for the life of the process
        command = [*prefix, sys.executable, "-m", "tcmp", "-v", "watch", *args]
        self.process = subprocess.Popen(
            command,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env or os.environ.copy(),
            cwd=log.parent,  # not the repository: `python -m` puts the cwd first on sys.path
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_log(self, text: str, timeout: float = 20.0) -> bool:
        return wait_until(lambda: text in self.log(), timeout)

    def send(self, sig: int) -> None:
        self.process.send_signal(sig)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=timeout)
        finally:
            self._log.close()

    def kill9(self) -> None:
        """SIGKILL the daemon's main process only (a crash), then wait until its workers are gone too."""
        os.kill(self.pid, signal.SIGKILL)
        self.process.wait()
        self._log.close()

    def group_alive(self) -> bool:
        try:
            os.killpg(self.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def cleanup(self) -> None:
        if self.group_alive():
            os.killpg(self.pid, signal.SIGKILL)
        if self.process.poll() is None:
            self.process.wait()
        if not self._log.closed:
            self._log.close()


def children(pid: int) -> dict[int, str]:
    """The live child processes of `pid` (from /proc), with their command lines."""
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
            if int(fields[1]) != pid or fields[0] == b"Z":
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                found[int(entry)] = cmdline.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return found


def worker_pids(daemon_pid: int) -> list[int]:
    """The daemon's spawned worker processes (not multiprocessing's resource tracker)."""
    return [pid for pid, command in children(daemon_pid).items() if "spawn_main" in command]


def is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except OSError:
        return False
