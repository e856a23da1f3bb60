"""`tcmp demo`: the main job on a built-in example.

A simulated inference writes a synthetic GE dump (with injected faults) and its golden FX dump file by file, in
chunks, into a directory that a real `tcmp watch --drop-raw` process watches; the daemon condenses each finished
file into the index and deletes the raw file once its summary is committed. The compare then runs from the index.

The demo starts the daemon the way systemd does (a $NOTIFY_SOCKET it waits on for READY=1) and stops it with
SIGTERM, so what it shows is the service's own life cycle.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from tcmp.compare.execute.run import run_compare
from tcmp.compare.report.outcome import CompareOptions, CompareResult
from tcmp.compare.report.writers import ReportChoice, chosen_formats
from tcmp.daemon.status import read_status
from tcmp.schemas.errors import TcmpError
from tcmp.schemas.index import IndexStatus, IndexUnusable, default_index_path
from tcmp.schemas.synth.faults import Fault, FaultKind
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

DEMO_FAULTS = (
    Fault("layers.1/MatMul_1", FaultKind.REL_ERROR, magnitude=0.03),
    Fault("SoftmaxV2_2", FaultKind.NAN, tokens=(1,)),
    Fault("Gelu_0", FaultKind.TRUNCATE, tokens=(0,)),  # the run "died" mid-file: the daemon keeps the raw file
)
WRITE_CHUNK = 4096
INCOMPLETE_TIMEOUT_S = 2.0  # how long the daemon waits for the truncated file before recording it
START_TIMEOUT_S = 60.0
INDEX_TIMEOUT_S = 120.0


class DemoError(TcmpError):
    """The demo could not run (the directory is in use, the daemon did not start or finish). `usage`: the directory
    given is not one the demo can have."""


@dataclass(frozen=True)
class Replay:
    """What the simulated inference wrote."""

    files: int
    bytes: int
    chunks: int
    seconds: float


@dataclass(frozen=True)
class DemoResult:
    root: Path
    dump: Path  # the watched directory
    watch_log: Path
    faults: tuple[str, ...]
    replay: Replay
    index: IndexStatus  # as the daemon left it
    indexed_after_s: float  # from the last byte written until the index held every file (polled every 0.1 s)
    result: CompareResult


def run_demo(root: Path, jobs: int = 1, progress: Optional[Callable[[str], None]] = None) -> DemoResult:
    """Write, watch and compare the example under `root` (which must be empty or absent); reports go to
    `root/report`, the daemon's log to `root/watch.log`."""
    say = progress or (lambda _message: None)
    root = Path(os.path.abspath(root))
    if root.exists() and not root.is_dir():
        raise DemoError(f"{root} is not a directory: the demo needs a directory of its own", usage=True)
    if root.exists() and any(root.iterdir()):
        raise DemoError(f"{root} is not empty: the demo needs a directory of its own", usage=True)
    dump, staging = root / "dump", root / "synth"
    dump.mkdir(parents=True)
    config = ScenarioConfig(
        model=ModelConfig(layers=3), tokens=2, faults=DEMO_FAULTS, propagate_faults=True, write_fusion_off=False
    )
    scenario = write_scenario(staging, config)  # staged outside the watched tree, replayed into it below
    files = _in_write_order(staging)
    expected = len(files)

    watch_log = root / "watch.log"
    say(f"starting `tcmp watch {dump} --drop-raw` (log: {watch_log})")
    with _Daemon(dump, jobs, watch_log) as daemon:
        say(f"simulated inference: writing {expected} dump files into {dump} in {WRITE_CHUNK // 1024} KiB chunks")
        replay = _replay(files, staging, dump)
        written = time.monotonic()
        say("waiting for the daemon to index the last files")
        index = _wait_until_indexed(default_index_path(dump), expected, daemon)
        indexed_after = time.monotonic() - written
        daemon_exit = daemon.stop()
    shutil.rmtree(staging)
    if daemon_exit != 0:
        raise DemoError(f"`tcmp watch` exited with {daemon_exit}; see {watch_log}")

    say("comparing from the index")
    target, golden = (dump / p.relative_to(staging) for p in (scenario.target, scenario.golden))
    result, _ = run_compare(
        CompareOptions(target, golden, jobs=jobs), root / "report", formats=chosen_formats(ReportChoice(highlight=True))
    )
    faults = tuple(
        f"{f.op} ({f.kind.value}{'' if f.tokens is None else f', token {list(f.tokens)}'})" for f in DEMO_FAULTS
    )
    return DemoResult(root, dump, watch_log, faults, replay, index, indexed_after, result)


def _in_write_order(staging: Path) -> list[Path]:
    """Every file, in the order the synthesizer wrote them (by modification time)."""
    files = [p for p in staging.rglob("*") if p.is_file()]
    return sorted(files, key=lambda p: (p.stat().st_mtime_ns, str(p)))


def _replay(files: list[Path], staging: Path, dump: Path) -> Replay:
    started = time.monotonic()
    total = chunks = 0
    for source in files:
        destination = dump / source.relative_to(staging)
        destination.parent.mkdir(parents=True, exist_ok=True)
        data = source.read_bytes()
        fd = os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:  # unbuffered: the daemon may see every intermediate length, as with a real dump
            for offset in range(0, max(len(data), 1), WRITE_CHUNK):
                os.write(fd, data[offset : offset + WRITE_CHUNK])
                chunks += 1
        finally:
            os.close(fd)
        total += len(data)
    return Replay(len(files), total, chunks, time.monotonic() - started)


def _wait_until_indexed(index: Path, expected: int, daemon: _Daemon) -> IndexStatus:
    """Every file written is in the index as a summary, a graph, or a recorded failure."""
    deadline = time.monotonic() + INDEX_TIMEOUT_S
    status: Optional[IndexStatus] = None
    while time.monotonic() < deadline:
        daemon.check_alive()
        try:
            status = read_status(index)
        except IndexUnusable:
            pass  # not created yet, or created but its schema not yet committed
        else:
            if status.summarized + status.graphs + status.failed == expected and not status.incomplete:
                return status
        time.sleep(0.1)
    seen = "nothing" if status is None else f"{status.summarized + status.graphs + status.failed} of {expected}"
    raise DemoError(f"the daemon indexed {seen} files in {INDEX_TIMEOUT_S:.0f} s; see {daemon.log}")


class _Daemon:
    """`tcmp watch DIR --drop-raw` as a child process, started and stopped the way systemd would."""

    def __init__(self, dump: Path, workers: int, log: Path) -> None:
        self.dump, self.workers, self.log = dump, workers, log
        self.process: Optional[subprocess.Popen] = None

    def __enter__(self) -> _Daemon:
        name = f"tcmp-demo-{os.getpid()}-{secrets.token_hex(4)}"
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as notify:
            notify.bind("\0" + name)  # abstract: nothing to clean up, no path length limit
            env = {**os.environ, "NOTIFY_SOCKET": "@" + name}
            command = [sys.executable, "-m", "tcmp", "watch", str(self.dump), "--drop-raw"]
            command += ["--workers", str(self.workers), "--incomplete-timeout", str(INCOMPLETE_TIMEOUT_S)]
            with open(self.log, "ab") as log:
                self.process = subprocess.Popen(
                    command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.dump.parent
                )
            self._wait_ready(notify)
        return self

    def _wait_ready(self, notify: socket.socket) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        notify.settimeout(0.2)
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                message = notify.recv(4096).decode(errors="replace")
            except socket.timeout:
                continue
            if "READY=1" in message.splitlines():
                return
        self.stop()
        raise DemoError(f"`tcmp watch` did not report ready in {START_TIMEOUT_S:.0f} s; see {self.log}")

    def check_alive(self) -> None:
        assert self.process is not None
        code = self.process.poll()
        if code is not None:
            tail = self.log.read_text(errors="replace").strip().splitlines()[-5:]
            raise DemoError(f"`tcmp watch` exited with {code}:\n" + "\n".join(tail))

    def stop(self) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # commit what is under way, then exit 0
        try:
            return self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()

    def __exit__(self, *exc_info: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.stop()
