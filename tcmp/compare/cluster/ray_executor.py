"""The Ray side of the execution seam (`tcmp compare --cluster`): connect to a running Ray cluster, take every
alive node's inventory (inventory.py) and run each unit as a Ray task pinned to a node that holds its files.

Only records travel: the options and unit numbers out, each unit's rendered rows, counts, worst rows and
divergence back. A node that dies takes its tasks with it: they are given to another node holding the same copy
(shared storage) or, where none does, their rank is lost (reported, never written as if complete). Ray is
imported only here, and only when a cluster is asked for.
"""

from __future__ import annotations

import bisect
import functools
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Optional

import tcmp
from tcmp.compare.cluster.inventory import (
    ClusterPlan,
    NodeInventory,
    bindings_of,
    compare_remote_unit,
    node_name,
    take_inventory,
)
from tcmp.compare.cluster.reach import not_found_line, unreachable
from tcmp.compare.collect.binding import Binding
from tcmp.compare.execute.executor import NotCompared, UnitDone, UnitJob
from tcmp.compare.execute.progress import REPORT_INTERVAL_S, ProgressTracker
from tcmp.compare.records import CompareError
from tcmp.compare.report.outcome import CompareOptions
from tcmp.schemas.source_hash import code_hash

INSTALL_HINT = "--cluster needs Ray: pip install 'tcmp[cluster]'"
INVENTORY_TIMEOUT_S = 300.0  # a node walks the trees at the paths given (a few s for a million files)
WORKER_CRASH_RETRIES = 2  # a unit whose worker process died while its node lives (OOM killer, say)
# what a task pinned to a node fails with once that node is gone (newer Rays); otherwise the node list decides
NODE_GONE_ERRORS = ("NodeDiedError", "TaskUnschedulableError")
LOOPBACK = "127.0.0.1"  # what `--cluster local` listens on
ONE_MACHINE_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0": Ray's one-machine mode (see _one_machine_ray)


def import_ray():
    try:
        import ray
    except ImportError:
        raise CompareError(INSTALL_HINT, usage=True) from None
    return ray


@dataclass(frozen=True)
class Node:
    node_id: str
    address: str
    cpus: int

    @property
    def name(self) -> str:
        return node_name(self.address, self.node_id)


@contextmanager
def connected(address: str) -> Iterator[None]:
    """Ray connected to the cluster at `address` (`auto`, `ray://host:port`, `host:port`), or with `local` to a Ray
    started here for trying it, listening on loopback only; already connected (a library caller's `ray.init`), that
    connection."""
    ray = import_ray()
    if ray.is_initialized():
        yield
        return
    kwargs = {"logging_level": logging.WARNING, "log_to_driver": False, "configure_logging": True}
    with ExitStack() as stack:
        try:
            if address == "local":
                stack.enter_context(_one_machine_ray(ray))
                # "local": a new Ray, never one a `ray start` on this machine left running (what no address finds)
                ray.init(address="local", include_dashboard=False, _node_ip_address=LOOPBACK, **kwargs)
            else:
                refused = unreachable(address)
                if refused is not None:
                    raise CompareError(refused)
                ray.init(address=address, **kwargs)
        except ConnectionError:  # Ray's line would name its own --address flag and RAY_ADDRESS
            raise CompareError(not_found_line(address)) from None
        except (RuntimeError, ValueError) as exc:
            raise CompareError(f"--cluster {address}: cannot connect to a Ray cluster there: {exc}") from None
        try:
            if address == "local":
                _check_on_loopback(ray)
            yield
        finally:
            ray.shutdown()


@contextmanager
def _one_machine_ray(ray) -> Iterator[None]:
    """Ray in its one-machine mode (the only one it has on macOS and Windows) while the local Ray runs: there it
    keeps the node address 127.0.0.1, and its servers then bind that address only. In its cluster mode it replaces
    127.0.0.1 by this machine's network address, for other nodes to reach, and binds all interfaces. Ray reads the
    switch when it is imported: set in the environment for the processes it starts, and in this one's constants."""
    constants = ray._private.ray_constants
    saved_env, saved = os.environ.get(ONE_MACHINE_ENV), constants.ENABLE_RAY_CLUSTER
    os.environ[ONE_MACHINE_ENV] = "0"
    constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        constants.ENABLE_RAY_CLUSTER = saved
        if saved_env is None:
            os.environ.pop(ONE_MACHINE_ENV, None)
        else:
            os.environ[ONE_MACHINE_ENV] = saved_env


def _check_on_loopback(ray) -> None:
    """Refuse a local Ray whose node took another address (a Ray that ignores the one-machine switch): its servers
    would listen on this machine's network."""
    addresses = sorted({n.get("NodeManagerAddress", "?") for n in ray.nodes()})
    if addresses != [LOOPBACK]:
        raise CompareError(f"--cluster local: Ray took the address {', '.join(addresses)}, not {LOOPBACK} only: "
                           "stopped, as it would listen on this machine's network")  # fmt: skip


def alive_nodes() -> list[Node]:
    ray = import_ray()
    nodes = [
        Node(n["NodeID"], n.get("NodeManagerAddress", "?"), int(n.get("Resources", {}).get("CPU", 0)))
        for n in ray.nodes()
        if n.get("Alive")
    ]
    return sorted(nodes, key=lambda n: (n.address, n.node_id))


def on_node(node_id: str):
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id, soft=False)


def _node_inventory(options: CompareOptions, compare_id: str) -> NodeInventory:
    """Runs on a node: its inventory, with the node's identity and its tcmp."""
    import ray

    node_id = ray.get_runtime_context().get_node_id()
    address = ray.util.get_node_ip_address()
    return NodeInventory(node_id, address, tcmp.__version__, code_hash(), take_inventory(options, compare_id))


@functools.cache
def remote(function, **options):
    """`function` as a Ray task: no retries of Ray's own (a retry goes to another node holding the data)."""
    return import_ray().remote(max_retries=0, **options)(function)


def on_each_node(function, nodes: Sequence[Node], *args) -> list[tuple[Node, object]]:
    """`function(*args)` started on every node of `nodes` at once (no CPU taken): each node with its result's ref."""
    task = remote(function, num_cpus=0)
    return [(n, task.options(scheduling_strategy=on_node(n.node_id)).remote(*args)) for n in nodes]


def take_inventories(options: CompareOptions, nodes: Sequence[Node], compare_id: str) -> list[NodeInventory]:
    """Every node's inventory; a node that dies meanwhile is left out."""
    ray = import_ray()
    found = []
    for node, ref in on_each_node(_node_inventory, nodes, options, compare_id):
        try:
            found.append(ray.get(ref, timeout=INVENTORY_TIMEOUT_S))
        except ray.exceptions.RayTaskError as exc:
            raise _cause(exc) from None
        except ray.exceptions.RayError as exc:
            logging.getLogger(__name__).warning("node %s left out: %s", node.name, exc)
    return found


def rank_bindings(options: CompareOptions, plan: ClusterPlan) -> tuple[Binding, ...]:
    """Each rank's bindings, from a node holding it: the HTML pages draw their graphs (a node's graph files may be
    on no disk the driver sees)."""
    ray = import_ray()
    task = remote(bindings_of, num_cpus=0)
    refs = [task.options(scheduling_strategy=on_node(p.nodes[0])).remote(options, plan.compare_id, p.rank)
            for p in plan.ranks]  # fmt: skip
    try:
        return tuple(b for found in ray.get(refs, timeout=INVENTORY_TIMEOUT_S) for b in found)
    except ray.exceptions.RayTaskError as exc:
        raise _cause(exc) from None
    except ray.exceptions.RayError as exc:
        raise CompareError(f"a node left before the compare began: {exc}") from None


def _cause(exc: Exception) -> BaseException:
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else exc


@dataclass(frozen=True)
class RemoteUnit:
    """A unit of a cluster compare: its rank and number in the rank; planned on the node that compares it."""

    rank: Optional[int]
    number: int  # within the rank, in compare order


@dataclass(frozen=True)
class LostRank:
    """A rank no live node could finish: the nodes that held it died."""

    rank: Optional[int]
    nodes: tuple[str, ...]  # the dead nodes that held it (names)
    units_done: int  # of its units, before it was lost
    units: int


class RayExecutor:
    """Units as Ray tasks, each pinned to a node holding its rank (the least busy of them), at most two per CPU of
    a node in flight, results handed out in unit order within each rank (ranks interleave), a rank's units at
    most the cluster's capacity ahead of the one it waits for. A rank whose last
    holder dies is lost: its units are no longer handed out, and `lost` says which nodes it went with. Its units
    report no progress before they are done (`progress_queue` None)."""

    progress_queue = None

    def __init__(self, plan: ClusterPlan, nodes: Sequence[Node], options: CompareOptions) -> None:
        self.options, self.compare_id = options, plan.compare_id
        working = {n.node_id for n in nodes if n.cpus > 0}  # a head started with --num-cpus=0 runs no unit
        self.holders: dict[Optional[int], list[str]] = {
            p.rank: [n for n in p.nodes if n in working] for p in plan.ranks
        }
        self.held_by = {p.rank: tuple(p.nodes) for p in plan.ranks}
        self.capacity: dict[str, int] = {n.node_id: n.cpus * 2 for n in nodes if n.cpus > 0}
        self.names: Mapping[str, str] = {**plan.names, **{n.node_id: n.name for n in nodes}}
        self.lost: dict[Optional[int], LostRank] = {}
        self.dead: list[str] = []  # node ids
        self.retried = 0  # units given to another node (or worker) after a failure
        self.ran: dict[str, int] = {}  # units compared, by node id
        self.idle = tuple(p.rank for p in plan.ranks if not self.holders[p.rank])  # held by no node with CPUs

    @property
    def unfinished(self) -> tuple[NotCompared, ...]:
        """The ranks held by no node with CPUs, then those lost with their nodes."""
        idle = [NotCompared(rank, "only nodes without CPUs for Ray tasks hold it") for rank in self.idle]
        lost = [NotCompared(gone.rank, f"node {', '.join(gone.nodes)} died with {gone.units_done} of its "
                                       f"{gone.units} units done and no other node holds it")
                for gone in self.lost.values()]  # fmt: skip
        return (*idle, *lost)

    def run(
        self, units: Sequence[RemoteUnit], job: UnitJob, tracker: ProgressTracker
    ) -> Iterator[tuple[int, UnitDone]]:
        ray = import_ray()
        task = remote(compare_remote_unit, num_cpus=1)
        self.pending: dict[Optional[int], list[int]] = {}
        for number, unit in enumerate(units):
            self.pending.setdefault(unit.rank, []).append(number)
        self.first = {rank: numbers[0] for rank, numbers in self.pending.items()}
        self.end = {rank: numbers[-1] + 1 for rank, numbers in self.pending.items()}
        self.next_out = dict(self.first)  # the next unit each rank hands out
        ready: dict[int, UnitDone] = {}
        in_flight: dict[object, tuple[int, str]] = {}  # ref -> (unit number, node id)
        busy: dict[str, int] = dict.fromkeys(self.capacity, 0)
        crashes: dict[int, int] = {}
        # how far a rank's units may run ahead of the one it waits for: the driver holds no more results than this
        window = max(2, sum(self.capacity.values()))

        def submit() -> None:
            while True:
                choice = None
                for rank, numbers in self.pending.items():
                    if not numbers or rank in self.lost or rank in self.idle:
                        continue
                    if numbers[0] - self.next_out[rank] >= window:  # results held for a slow unit before them
                        continue
                    free = [n for n in self.holders[rank] if busy.get(n, 0) < self.capacity.get(n, 0)]
                    if free and (choice is None or numbers[0] < choice[0]):
                        choice = (numbers[0], rank, min(free, key=lambda n: busy[n] / self.capacity[n]))
                if choice is None:
                    return
                number, rank, node = choice
                self.pending[rank].pop(0)
                unit = units[number]
                args = (self.options, self.compare_id, unit.rank, unit.number, job)
                ref = task.options(scheduling_strategy=on_node(node)).remote(*args)
                in_flight[ref] = (number, node)
                busy[node] += 1

        submit()
        while in_flight:
            done, _ = ray.wait(list(in_flight), num_returns=1, timeout=REPORT_INTERVAL_S * 5)
            for ref in done:
                number, node = in_flight.pop(ref)
                busy[node] -= 1
                rank = units[number].rank
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:
                    raise _cause(exc) from None
                except ray.exceptions.RayError as exc:
                    self._failed(number, rank, node, exc, crashes)
                    continue
                self.ran[node] = self.ran.get(node, 0) + 1
                if rank in self.lost:
                    continue
                ready[number] = result
                tracker.finished(number)
                while self.next_out[rank] in ready:
                    out = self.next_out[rank]
                    self.next_out[rank] = out + 1
                    yield out, ready.pop(out)
            submit()

    def _failed(self, number: int, rank, node: str, exc: Exception, crashes: dict[int, int]) -> None:
        """A unit's task failed for the system's reasons: its node died (the ranks it held go on on their other
        holders, or are lost), or only its worker process (retried a few times)."""
        ray = import_ray()
        said_gone = tuple(getattr(ray.exceptions, n) for n in NODE_GONE_ERRORS if hasattr(ray.exceptions, n))
        gone = isinstance(exc, said_gone)
        if not gone and node in {n.node_id for n in alive_nodes()}:
            crashes[number] = crashes.get(number, 0) + 1
            if crashes[number] > WORKER_CRASH_RETRIES:
                raise CompareError(f"rank {rank}: a unit's worker on {self.names.get(node, node)} died "
                                   f"{crashes[number]} times: {exc}")  # fmt: skip
        elif node not in self.dead:
            self.dead.append(node)
            self.capacity.pop(node, None)
            for held, holders in self.holders.items():
                if node in holders:
                    holders.remove(node)
                    if not holders and self.next_out[held] < self.end[held] and held not in self.lost:
                        nodes = tuple(self.names.get(n, n) for n in self.held_by[held])
                        done = self.next_out[held] - self.first[held]
                        self.lost[held] = LostRank(held, nodes, done, self.end[held] - self.first[held])
        if rank not in self.lost:
            bisect.insort(self.pending[rank], number)
            self.retried += 1
