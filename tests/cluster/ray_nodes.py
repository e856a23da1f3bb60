"""A real multi-node Ray cluster on this machine for the `--cluster` tests: a head and two worker nodes, each a
`ray start --block` process of its own. The workers run in mount namespaces of their own (`unshare -m`, we run as
root) where a per-node directory is bind-mounted onto one common path, `view`: at that path each node sees its own
files, as nodes with local disks do. Everywhere else they see this machine's files, so `shared` is shared storage.

Started once per module (a node takes a few seconds on two cores), stopped at its end: every process started
here is in a process group of its own, killed by its id."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import ray  # in the dev extra
from listening import descendants

BIN = Path(sys.executable).parent
OBJECT_STORE = str(100 * 1024 * 1024)
START_TIMEOUT_S = 90.0
STOP_GRACE_S = 3.0
# A dead node is declared after 5 missed health checks 3 s apart by default: 15 s per killed node in a test. A
# task already running there fails at once (its worker's connection breaks); one queued there waits for this.
HEALTH_CHECK = json.dumps({"health_check_period_ms": 500, "health_check_failure_threshold": 3})

# the tasks of this module and the tests' run on the nodes, where tests/ is not importable: shipped by value
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def namespaced(mounts: str, command: str) -> list[str]:
    """`command` (a shell line) run in a mount namespace of its own, after the shell commands `mounts`."""
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", f"{mounts}exec {command}"]


def in_namespace(node_dir: Path, view: Path, command: str) -> list[str]:
    """`command` run where `view` shows `node_dir`."""
    return namespaced(f"mount --bind {node_dir} {view} && ", command)


@dataclass
class RayCluster:
    work: Path
    view: Path  # each worker node sees its own directory here
    node_dirs: list[Path]  # worker k's files at `view`
    head_cpus: int = 1  # 0: the head only schedules (as on many real clusters)
    address: str = ""
    temp_dir: Path = field(default_factory=Path)
    processes: list[subprocess.Popen] = field(default_factory=list)

    def start(self) -> None:
        port = _free_port()
        self.address = f"127.0.0.1:{port}"
        self.temp_dir = Path(f"/tmp/tcmp-ray-{os.getpid()}")  # short: Ray's socket paths must fit in 107 bytes
        head = f"--head --port={port} --include-dashboard=false --system-config='{HEALTH_CHECK}'"
        self._start(self._ray_start(f"{head} --num-cpus={self.head_cpus}"), nodes=1)
        for k, node_dir in enumerate(self.node_dirs, start=2):
            self._start(self._worker_command(), nodes=k, node_dir=node_dir)

    def _ray_start(self, node: str) -> str:
        # Ray's servers bind only the node's address when that is 127.0.0.1 (all interfaces otherwise); it replaces
        # a 127.0.0.1 given by the machine's network address, which in the tests' loopback-only network is 127.0.0.1
        return (f"{BIN}/ray start {node} --node-ip-address=127.0.0.1 --object-store-memory={OBJECT_STORE} "
                f"--disable-usage-stats --block --temp-dir={self.temp_dir}")  # fmt: skip

    def _worker_command(self) -> str:
        return self._ray_start(f"--address={self.address} --num-cpus=1")

    def _start(self, command: str, nodes: int, node_dir: Optional[Path] = None) -> None:
        """Start a node and wait until the cluster counts it (the driver connects once the head is up)."""
        argv = in_namespace(node_dir, self.view, command) if node_dir is not None else ["sh", "-c", f"exec {command}"]
        self._spawn(argv, nodes)

    def _spawn(self, argv: list[str], nodes: int, known: frozenset = frozenset()) -> None:
        log = open(self.work / f"node{len(self.processes)}.log", "w")  # noqa: SIM115
        # loopback tests need no token; Ray 2.60's local `ray.init()` (`--cluster local`) leaves ~/.ray/auth_token,
        # which a later `ray start` would require of this driver
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled",
               "PATH": f"{BIN}:{os.environ['PATH']}"}  # fmt: skip
        self.processes.append(subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True, env=env))
        deadline = time.monotonic() + START_TIMEOUT_S

        def started() -> bool:  # one at a time: two nodes starting at once time out on two cores
            return bool(self.alive_ids() - known) if known else self.alive_nodes() >= nodes

        while not started():
            if time.monotonic() > deadline or self.processes[-1].poll() is not None:
                raise RuntimeError(f"Ray node did not start: {Path(log.name).read_text()}")
            time.sleep(0.5)

    def start_worker(self, mounts: str) -> None:
        """One more worker node, in a mount namespace of its own after the shell commands `mounts`."""
        argv = namespaced(mounts, self._worker_command())
        # the new node's id, not a count: a node killed by a test before may still be counted alive for a moment
        known = self.alive_ids()
        self._spawn(argv, len(known) + 1, known)

    def alive_ids(self) -> frozenset:
        return frozenset(n["NodeID"] for n in ray.nodes() if n["Alive"]) if self.alive_nodes() else frozenset()

    def alive_nodes(self) -> int:
        if not ray.is_initialized():
            try:
                ray.init(address=self.address, logging_level="ERROR", log_to_driver=False)
            except (ConnectionError, RuntimeError):
                return 0
        return sum(1 for n in ray.nodes() if n["Alive"])

    def worker_raylet(self, k: int) -> int:
        """The pid of worker node k's raylet (k = 0, 1): the parent of a task's worker process there."""
        node = self.worker_node_id(k)
        return ray.get(_parent_pid.options(scheduling_strategy=_on(node)).remote())

    def worker_node_id(self, k: int) -> str:
        """Worker node k's id: the node whose `view` holds node_dirs[k]'s marker file."""
        for n in ray.nodes():
            if (
                n["Alive"]
                and ray.get(_marker.options(scheduling_strategy=_on(n["NodeID"])).remote(str(self.view))) == k
            ):
                return n["NodeID"]
        raise LookupError(f"worker node {k} is not alive")

    def ray_pids(self) -> set[int]:
        """Every process of this cluster: the nodes' process trees and whatever names its temp dir."""
        return descendants({*(p.pid for p in self.processes), *leftover_pids(self.temp_dir)})

    def stop(self) -> None:
        if ray.is_initialized():
            ray.shutdown()
        for process in reversed(self.processes):
            with _suppress():
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
        for process in self.processes:  # `ray start --block` may wait long for its children: the cluster is done
            with _suppress():
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        for pid in leftover_pids(self.temp_dir):  # what left its process group (Ray's own daemons)
            with _suppress():
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def on_worker(self, k: int, function, *args):
        """`function(*args)` run on worker node k (in its mount namespace), as a Ray task; its result."""
        task = ray.remote(num_cpus=0, max_retries=0)(function)
        return ray.get(task.options(scheduling_strategy=_on(self.worker_node_id(k))).remote(*args), timeout=300)


def kill_node(raylet: int) -> None:
    """A node dying: SIGKILL to its raylet and to the worker processes it started. The raylet alone is not enough
    to lose the units in flight there: its workers run on and hand a small result straight back to the driver,
    so whether the driver saw the node die at all came down to timing (a unit submitted there after the kill)."""
    workers = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == raylet:  # the field after the command: the parent's pid
                workers.append(int(entry))
    for pid in (raylet, *workers):
        with _suppress():
            os.kill(pid, signal.SIGKILL)


def leftover_pids(temp_dir: Path) -> list[int]:
    """Processes whose command line names this cluster's temp dir (each Ray process of it does)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if str(temp_dir).encode() in cmdline:
                found.append(int(entry))
    return found


class _suppress:
    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        return kind is not None and issubclass(kind, (ProcessLookupError, PermissionError))


def _on(node_id: str):
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id, soft=False)


@ray.remote(num_cpus=0, max_retries=0)
def _parent_pid() -> int:
    return os.getppid()


@ray.remote(num_cpus=0, max_retries=0)
def _marker(view: str):
    try:
        return json.loads(Path(view, "node.json").read_text())["node"]
    except OSError:
        return None


def watch(db: Path, dirs: tuple[Path, ...]) -> None:
    """`tcmp watch --once --drop-raw` of `dirs` into `db` (run on a node, where they are seen)."""
    from tcmp.daemon.retention import RetentionPolicy
    from tcmp.daemon.service import WatchConfig, run_watch

    db.parent.mkdir(exist_ok=True)
    report = run_watch(WatchConfig(dirs, db=db, retention=RetentionPolicy(True, 0, ()), workers=1, once=True))
    assert report.error is None and report.summarized > 0


def compare_here(target: Path, golden: Path, out: Path) -> None:
    """A local compare in one process (run on a node: what a user logged into it would run)."""
    from tcmp.compare.execute.run import run_compare
    from tcmp.compare.report.outcome import CompareOptions

    run_compare(CompareOptions(target, golden), out)
