"""What one node of a cluster can compare, and which node compares what (`tcmp compare --cluster`).

Each node walks the dump trees at the paths the driver was given, as a local compare does (`collect`), and tells
which ranks it can compare, how many units (tokens of a graph) each has, and a fingerprint of each rank's files:
names, sizes and what `tcmp watch`'s index stored of the files it deleted. The same fingerprint on several nodes
is one copy (shared storage, or identical copies): its units may run on any of them. Different fingerprints for
one rank are two different dumps under one name, and the compare is refused naming the nodes. Pure Python: the
Ray side (cluster.py) only carries these records.
"""

from __future__ import annotations

import functools
import hashlib
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional

from tcmp.compare.collect.binding import GoldenKind
from tcmp.compare.collect.inputs import CompareInputs
from tcmp.compare.execute.executor import UnitDone
from tcmp.compare.execute.run import collect_inputs, directory_items, orphans_batch, summary_only_dirs
from tcmp.compare.execute.units import Unit, plan_bindings
from tcmp.compare.records import CompareError, Role, Unmatched
from tcmp.compare.report.outcome import CompareOptions


@dataclass(frozen=True)
class RankHolding:
    """A rank as one node sees it."""

    rank: Optional[int]
    fingerprint: str
    units: int
    summary_only_dirs: int  # of `dirs`, the directories holding summaries only (data mode `auto`)
    dirs: int


@dataclass(frozen=True)
class Holdings:
    """What a node can compare of the dump trees at the given paths (`error`: why nothing)."""

    ranks: tuple[RankHolding, ...] = ()
    target_ranks: frozenset = frozenset()  # ranks its target tree holds, compared or not
    golden_kind: Optional[GoldenKind] = None
    golden_fused: bool = False
    notes: tuple[str, ...] = ()
    directory_items: tuple[Unmatched, ...] = ()  # what collect lists before any unit (local compare order)
    error: str = ""


def node_name(address: str, node_id: str) -> str:
    """How a Ray node is named to the user: its address and its id's first digits (one machine may run several)."""
    return f"{address} (node {node_id[:8]})"


@dataclass(frozen=True)
class NodeInventory:
    node_id: str
    address: str
    version: str
    code: str  # hash of tcmp's sources on the node
    holdings: Holdings

    @property
    def name(self) -> str:
        return node_name(self.address, self.node_id)


def rank_fingerprint(inputs: CompareInputs, rank: Optional[int]) -> str:
    """Names (relative to the roots), sizes and stored summaries of the rank's files, and how they are bound."""
    digest = hashlib.sha256()
    for b in (b for b in inputs.bindings if b.rank == rank):
        digest.update(f"{b.model}\0{b.golden_label}\0{b.graph.name if b.graph else ''}\n".encode())
        for source, dirs in ((inputs.target, b.target_dirs), (inputs.golden, b.golden_dirs)):
            listing = source.listing(dirs)
            for f in listing.files:
                stored = listing.stored.get(f.path)
                try:
                    size = repr(stored) if stored is not None else str(os.stat(f.path).st_size)
                except OSError as exc:
                    size = f"unreadable {exc.errno}"
                digest.update(f"{os.path.relpath(f.path, source.root)}\0{size}\n".encode())
    return digest.hexdigest()[:16]


def take_inventory(options: CompareOptions, compare_id: str = "") -> Holdings:
    """This node's view of the compare `options` ask for (kept for the units of compare `compare_id` this process
    runs)."""
    try:
        inputs = _node_plan(options, compare_id).inputs if compare_id else collect_inputs(options)
    except CompareError as exc:
        return Holdings(error=str(exc))
    summary = {}
    for rank in inputs.ranks:
        one = CompareInputs(inputs.target, inputs.golden, inputs.golden_kind,
                            tuple(b for b in inputs.bindings if b.rank == rank), (), ())  # fmt: skip
        summary[rank] = summary_only_dirs(one)
    holdings = tuple(
        RankHolding(rank, rank_fingerprint(inputs, rank), len(rank_units(inputs, rank)[0]), *summary[rank])
        for rank in inputs.ranks
    )
    target_ranks = {b.rank for b in inputs.bindings}
    target_ranks |= {d.rank for role, d in inputs.unbound if role is Role.TARGET}
    return Holdings(
        ranks=holdings,
        target_ranks=frozenset(target_ranks),
        golden_kind=inputs.golden_kind,
        golden_fused=inputs.golden_fused,
        notes=inputs.notes,
        directory_items=directory_items(inputs),
    )


def rank_units(inputs: CompareInputs, rank: Optional[int]) -> tuple[list[Unit], dict[int, tuple]]:
    """The rank's units in compare order, and where a local compare lists its golden tokens the target lacks."""
    return plan_bindings(tuple(b for b in inputs.bindings if b.rank == rank), inputs)


@dataclass
class _NodePlan:
    """A compare's trees as this node sees them, and each rank's units planned from them once."""

    inputs: CompareInputs
    ranks: dict = field(default_factory=dict)  # rank -> rank_units(inputs, rank)

    def rank(self, rank: Optional[int]) -> tuple[list[Unit], dict[int, tuple]]:
        if rank not in self.ranks:  # once per rank, not once per unit (a decode run's rank has hundreds of tokens)
            self.ranks[rank] = rank_units(self.inputs, rank)
        return self.ranks[rank]


@functools.lru_cache(maxsize=2)
def _node_plan(options: CompareOptions, compare_id: str) -> _NodePlan:
    # a worker process compares many units of one compare: the trees are walked once per process and compare
    # (Ray keeps a driver's worker processes for its next compare, when the dump may have grown)
    return _NodePlan(collect_inputs(options))


def bindings_of(options: CompareOptions, compare_id: str, rank: Optional[int]) -> tuple:
    """The rank's bindings as this node binds them (their graphs for the HTML page)."""
    return tuple(b for b in _node_plan(options, compare_id).inputs.bindings if b.rank == rank)


def compare_remote_unit(options: CompareOptions, compare_id: str, rank: Optional[int], number: int, job) -> UnitDone:
    """Unit `number` of `rank` (in compare order) of compare `compare_id`, compared on this node, with the
    unmatched items a local compare lists after it."""
    from tcmp.compare.execute.pairs import compare_unit

    plan = _node_plan(options, compare_id)
    units, orphans_after = plan.rank(rank)
    if number >= len(units):
        raise CompareError(f"rank {rank}: this node sees {len(units)} units, not unit {number + 1}: dump changed?")
    result = compare_unit(units[number], job.mode, job.thresholds, job.keep_rows)
    return UnitDone(result, orphans_batch(orphans_after.get(number, ()), plan.inputs, job.keep_rows))


@dataclass(frozen=True)
class RankPlace:
    """A rank of the cluster compare and the nodes that can compare it (ids, in inventory order)."""

    rank: Optional[int]
    units: int
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class ClusterPlan:
    ranks: tuple[RankPlace, ...]
    golden_kind: GoldenKind
    golden_fused: bool
    summary_only_dirs: int
    dirs: int
    notes: tuple[str, ...]
    directory_items: tuple[Unmatched, ...]
    uncompared: tuple[str, ...] = ()  # ranks some node holds that no node can compare, said
    names: dict = field(default_factory=dict)  # node id -> name
    compare_id: str = field(default_factory=lambda: uuid.uuid4().hex)  # the nodes' plans are cached per compare


def check_versions(inventories: Sequence[NodeInventory], version: str, code: str) -> None:
    for inv in inventories:
        if inv.version != version:
            raise CompareError(f"tcmp {inv.version} on {inv.name}, tcmp {version} here: install one version on "
                               "every node")  # fmt: skip
        if inv.code != code:
            raise CompareError(f"tcmp {version} on {inv.name} is other code (sources {inv.code}, here {code}): "
                               "install one tcmp on every node")  # fmt: skip


def _rank_key(rank: Optional[int]) -> int:
    return -1 if rank is None else rank


def plan_cluster(inventories: Sequence[NodeInventory], compare_id: str = "") -> ClusterPlan:
    """Which node compares which rank: refuses two different copies of a rank, and a cluster where no node can
    compare anything (with each node's reason)."""
    names = {inv.node_id: inv.name for inv in inventories}
    holders: dict[Optional[int], list[tuple[NodeInventory, RankHolding]]] = {}
    for inv in inventories:
        for held in inv.holdings.ranks:
            holders.setdefault(held.rank, []).append((inv, held))
    if not holders:
        why = "; ".join(f"{inv.name}: {inv.holdings.error or 'no rank to compare'}" for inv in inventories)
        raise CompareError(f"no node of the cluster can compare these dumps ({why})")
    places, summary_only, dirs = [], 0, 0
    for rank in sorted(holders, key=_rank_key):
        copies: dict[str, list[str]] = {}
        for inv, held in holders[rank]:
            copies.setdefault(held.fingerprint, []).append(inv.name)
        if len(copies) > 1:
            which = "; ".join(f"{', '.join(nodes)} (files {fp})" for fp, nodes in copies.items())
            raise CompareError(f"rank {rank}: nodes hold different copies of it: {which}; give each rank one copy "
                               "(shared storage, or each node its own ranks)")  # fmt: skip
        first = holders[rank][0][1]
        places.append(RankPlace(rank, first.units, tuple(inv.node_id for inv, _ in holders[rank])))
        summary_only += first.summary_only_dirs
        dirs += first.dirs
    kinds = {inv.holdings.golden_kind for inv in inventories if inv.holdings.ranks}
    if len(kinds) > 1:
        raise CompareError("the nodes' golden dumps are of different kinds (FX on some, GE on others)")
    compared = set(holders)
    uncompared = []
    for inv in inventories:
        for rank in sorted(inv.holdings.target_ranks - compared - {None}):
            uncompared.append(f"rank {rank}: its target is on {inv.name}, but no node can compare it (no node "
                              "sees both its target and its golden)")  # fmt: skip
    golden_kind = kinds.pop()
    assert golden_kind is not None  # a node with ranks took its inventory: only an error's Holdings has no kind
    return ClusterPlan(
        ranks=tuple(places),
        golden_kind=golden_kind,
        golden_fused=any(inv.holdings.golden_fused for inv in inventories),
        summary_only_dirs=summary_only,
        dirs=dirs,
        notes=_union(n for inv in inventories for n in inv.holdings.notes if not _about_uncompared(n)),
        directory_items=_union(u for inv in inventories for u in _items_for(inv, holders)),
        uncompared=tuple(uncompared),
        names=names,
        compare_id=compare_id or uuid.uuid4().hex,
    )


def _about_uncompared(note: str) -> bool:
    """A node's note that its target holds ranks its golden lacks: on a cluster, another node may compare them."""
    return note.startswith("target rank") and note.endswith("not compared: not in the golden dump")


def _items_for(inv: NodeInventory, holders: dict) -> list[Unmatched]:
    """A node's directory items: of a compared rank only from the node that lists it first (one copy), of others
    all (deduplicated by the caller)."""
    return [
        u for u in inv.holdings.directory_items if u.rank not in holders or holders[u.rank][0][0].node_id == inv.node_id
    ]


def _union(items) -> tuple:
    return tuple(dict.fromkeys(items))
