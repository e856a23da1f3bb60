"""`tcmp compare --cluster` on a real Ray cluster of three nodes on this machine (conftest.RayCluster): its reports
equal a local compare's of the same data, row for row, with shared storage and with each node's own files; the
cluster summary names the rank that went wrong first; a node killed mid-compare is survived where another node
holds its data and reported where none does; a node running another tcmp is refused. All of it in a network
namespace with only loopback (conftest), where every Ray process listens on 127.0.0.1 only.

Data: 4 ranks x 4 tokens, ranks 1 and 3 only in `tcmp watch`'s index (their raw files deleted), faults injected
so that rank 2 diverges first: MatMul_0 on rank 2 from token 0, the same op on rank 3 from token 1 only, and
SoftmaxV2_0 (later in the token than MatMul_0) on rank 1 from token 0."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import netns
import pytest
from listening import listeners
from ray_nodes import RayCluster, compare_here, kill_node, leftover_pids, watch

import tcmp
from tcmp.compare.cluster.run import run_cluster_compare
from tcmp.compare.execute.run import run_compare
from tcmp.compare.records import CompareError
from tcmp.compare.report.outcome import CompareOptions
from tcmp.schemas.synth.faults import Fault, FaultKind
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

pytestmark = pytest.mark.slow

FAULTS = (
    Fault("MatMul_0", FaultKind.REL_ERROR, magnitude=0.2, ranks=(2,)),
    Fault("MatMul_0", FaultKind.REL_ERROR, magnitude=0.2, ranks=(3,), tokens=(1,)),
    Fault("SoftmaxV2_0", FaultKind.REL_ERROR, magnitude=0.2, ranks=(1,)),
)
INDEX_ONLY = (1, 3)
TOKENS = 4  # units enough that a node killed at the first result still has some to do
TARGET, GOLDEN = "target/msprobe_ge_dump", "golden_fx/msprobe_fx_dump"
RANK_DIR = "worldsize4_global_rank{}"


def copy_ranks(full: Path, into: Path, target_ranks, golden_ranks) -> None:
    """The scenario's trees with only some ranks (the graph files of all: torchair writes each node's)."""
    for side, ranks in ((TARGET, target_ranks), (GOLDEN, golden_ranks)):
        (into / side).mkdir(parents=True)
        for entry in (full / side).iterdir():
            if entry.is_file():
                shutil.copy2(entry, into / side / entry.name)
        for rank in ranks:
            shutil.copytree(full / side / RANK_DIR.format(rank), into / side / RANK_DIR.format(rank))


def watch_ranks(root: Path, ranks) -> tuple:
    """What `tcmp watch --once --drop-raw` of these ranks' directories takes, into `root`'s index."""
    return root / ".tcmp" / "index.sqlite", tuple(
        root / side / RANK_DIR.format(r) for side in (TARGET, GOLDEN) for r in ranks
    )


@pytest.fixture(scope="module")
def cluster(loopback_only_network, cluster_dirs):
    work, view, node_dirs = cluster_dirs
    ray_cluster = RayCluster(work, view, node_dirs)
    try:
        ray_cluster.start()
        yield ray_cluster
    finally:
        ray_cluster.stop()
    assert not _leftovers(ray_cluster)


@pytest.fixture(scope="module")
def data(cluster, cluster_dirs):
    """The full scenario; `shared` (seen alike by every node) and, under `view`, node 0's ranks 0-1 and node 1's
    ranks 2-3, with ranks 1 and 3 moved into each tree's index by `tcmp watch` running on the node."""
    work, view, node_dirs = cluster_dirs
    full = work / "full"
    config = ScenarioConfig(model=ModelConfig(layers=2), ranks=4, tokens=TOKENS, write_fusion_off=False, faults=FAULTS)
    write_scenario(full, config)
    shared = work / "shared"
    copy_ranks(full, shared, range(4), range(4))
    watch(*watch_ranks(shared, INDEX_ONLY))
    for k, ranks in enumerate(((0, 1), (2, 3))):
        copy_ranks(full, node_dirs[k] / "split", ranks, ranks)
        cluster.on_worker(k, watch, *watch_ranks(view / "split", [r for r in ranks if r in INDEX_ONLY]))
    # two copies of rank 0 that differ (a file missing in node 1's); rank 1's target on node 0 without its golden
    for k in range(2):
        copy_ranks(full, node_dirs[k] / "copies", (0,), (0,))
    step = node_dirs[1] / "copies" / TARGET / RANK_DIR.format(0)
    next(p for p in sorted(step.rglob("*")) if p.is_file()).unlink()
    copy_ranks(full, node_dirs[0] / "apart", (0, 1), (0,))
    return work, view, node_dirs, shared


def _leftovers(cluster: RayCluster) -> list[int]:
    return leftover_pids(cluster.temp_dir)


def options(root: Path) -> CompareOptions:
    return CompareOptions(root / TARGET, root / GOLDEN)


def report_files(directory: Path) -> dict[str, Path]:
    """Report files by name without their time stamp (`tcmp_compare_rank0.csv`)."""
    return {re.sub(r"_\d{14}", "", p.name): p for p in directory.iterdir() if not p.name.startswith(".")}


def same_reports(local: Path, cluster: Path, ranks, scope_differs: bool = False) -> None:
    """Each rank's CSV and unmatched CSV byte for byte, its summary equal but for where the files are (and, with
    `scope_differs`, for the count of directories that decided data mode `auto`: a node's local compare sees its
    own only)."""
    mine, theirs = report_files(cluster), report_files(local)
    for rank in ranks:
        for suffix in (".csv", "_unmatched.csv"):
            name = f"tcmp_compare_rank{rank}{suffix}"
            assert mine[name].read_bytes() == theirs[name].read_bytes(), name
        name = f"tcmp_compare_rank{rank}_summary.json"
        a, b = (json.loads(files[name].read_text()) for files in (mine, theirs))
        for summary in (a, b):
            summary.pop("files")
            if scope_differs:
                summary["data_mode_reason"] = summary["data_mode_reason"].split(":")[0]
        assert a == b


def test_every_process_of_the_cluster_listens_on_loopback_only(cluster, data):
    # after `data`: every node has run tasks, so its workers are up as well
    assert netns.interfaces() == ["lo"]  # the tests' traffic stays here
    found = listeners({*cluster.ray_pids(), os.getpid()})  # with this driver's own servers
    port = int(cluster.address.rpartition(":")[2])
    assert [f for f in found if not f.on_loopback] == []
    assert any(f.command == "gcs_server" and f.port == port for f in found)
    assert "raylet" in {f.command for f in found}, found


def test_shared_storage_reports_equal_a_local_compare(cluster, data, tmp_path):
    *_, shared = data
    run_compare(options(shared), tmp_path / "local")
    done = run_cluster_compare(options(shared), cluster.address, tmp_path / "cluster")
    assert done.complete and len(done.nodes) == 3
    same_reports(tmp_path / "local", tmp_path / "cluster", range(4))
    # every node holds every rank: one copy (one fingerprint), any node may run its units
    assert all(len(r["nodes"]) == 3 for r in done.summary["ranks"])
    assert len(done.units_by_node) >= 2 and sum(n for _, n in done.units_by_node) == 4 * TOKENS  # spread, once each
    assert {r.counts.rows_from_index > 0 for r in done.result.ranks} == {True, False}


def test_node_local_reports_equal_each_nodes_local_compare(cluster, data, tmp_path):
    _work, view, _node_dirs, _ = data
    for k in range(2):
        cluster.on_worker(k, compare_here, view / "split" / TARGET, view / "split" / GOLDEN, tmp_path / "local")
    done = run_cluster_compare(options(view / "split"), cluster.address, tmp_path / "cluster")
    assert done.complete
    same_reports(tmp_path / "local", tmp_path / "cluster", range(4), scope_differs=True)
    holders = {r["rank"]: r["nodes"] for r in done.summary["ranks"]}
    assert len({holders[0][0], holders[2][0]}) == 2 and all(len(n) == 1 for n in holders.values())
    assert holders[0] == holders[1] and holders[2] == holders[3]


def test_the_cluster_summary_names_the_rank_that_diverged_first(cluster, data, tmp_path):
    *_, shared = data
    done = run_cluster_compare(options(shared), cluster.address, tmp_path)
    earliest = done.summary["earliest_divergence"]
    assert (earliest["rank"], earliest["token"], earliest["op"]) == (2, 0, "MatMul_0")
    assert earliest["same_op_ranks"] == [2]  # rank 3 diverges at the same op only from token 1
    firsts = {r["rank"]: [(d["token"], d["op"]) for d in r["first_divergence"]] for r in done.summary["ranks"]}
    every = range(TOKENS)
    assert firsts == {0: [], 1: [(t, "SoftmaxV2_0") for t in every], 2: [(t, "MatMul_0") for t in every],
                      3: [(1, "MatMul_0")]}  # fmt: skip
    written = json.loads(done.overview_path.read_text())
    assert written["earliest_divergence"] == earliest and done.overview_path.name.endswith("_cluster_summary.json")
    # the cluster's page: the same story, readable offline (no script), linking each rank's own page
    page = done.page_path.read_text()
    assert done.page_path.name.endswith("_cluster_report.html") and "<script" not in page
    assert re.search(r'id="earliest">.*rank 2, token 0, op <code>MatMul_0</code>.*on ranks 2\.</p>', page)
    cells = {int(rank): re.findall(r'<td class="(\w+)"', row)
             for rank, row in re.findall(r"<tr><th>rank (\d)</th>(.*?)</tr>", page)}  # fmt: skip
    assert cells == {0: ["none"] * TOKENS, 1: ["other"] * TOKENS, 2: ["first"] * TOKENS,
                     3: ["none", "first"] + ["none"] * (TOKENS - 2)}  # fmt: skip
    links = re.findall(r'<a href="([^"]+)">page</a>', page)
    assert len(links) == 4 and all((tmp_path / link).is_file() and link.endswith("_report.html") for link in links)


def test_cli_compare_and_status_on_the_cluster(cluster, data, tmp_path):
    *_, shared = data
    env = {**os.environ, "TCMP_CLUSTER": cluster.address}
    tcmp_cli = [sys.executable, "-m", "tcmp"]
    done = subprocess.run([*tcmp_cli, "compare", "-tp", shared / TARGET, "-gp", shared / GOLDEN, "-o", tmp_path,
                           "--cluster"], capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "earliest divergence: rank 2, token 0, op MatMul_0" in done.stdout
    # a rank's tokens with one first divergence on one line, not a part per token (hundreds on a decode run)
    rank_lines = {line.split()[1]: line for line in done.stdout.splitlines() if line.startswith("  rank ")}
    assert rank_lines["2"].endswith(f"tokens 0-{TOKENS - 1}: MatMul_0")
    assert rank_lines["3"].endswith("tokens 1: MatMul_0")
    assert rank_lines["0"].endswith("none")
    assert len(list(tmp_path.glob("*_cluster_summary.json"))) == 1
    status = subprocess.run([*tcmp_cli, "status", str(shared), "--cluster", cluster.address], capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    assert lines[0].split()[:2] == ["node", "indexed"] and len(lines) == 4
    # every node sees the shared tree's index: the same counts on each
    assert len({tuple(line.split(")")[1].split()[:4]) for line in lines[1:]}) == 1


def test_two_different_copies_of_a_rank_are_refused_naming_both_nodes(cluster, data):
    _, view, *_ = data
    with pytest.raises(CompareError, match=r"rank 0: nodes hold different copies of it: .*node .*; .*node "):
        run_cluster_compare(options(view / "copies"), cluster.address)


def test_a_rank_no_node_can_compare_is_said_and_the_compare_is_incomplete(cluster, data, tmp_path):
    _, view, *_ = data
    done = run_cluster_compare(options(view / "apart"), cluster.address, tmp_path)
    assert not done.complete and [r.rank for r in done.result.ranks] == [0]
    assert next(n["why"] for n in done.summary["not_compared"]).startswith("rank 1: its target is on ")


def test_a_node_killed_mid_compare_loses_only_its_own_ranks_on_node_local_storage(cluster, data, tmp_path):
    _work, view, _node_dirs, _ = data
    for k in range(2):
        cluster.on_worker(k, compare_here, view / "split" / TARGET, view / "split" / GOLDEN, tmp_path / "local")
    raylet = cluster.worker_raylet(1)  # node 1 holds ranks 2 and 3

    killed = []

    def kill_at_first_result(done: float, total: int) -> None:
        if done >= 1 and not killed:
            killed.append(total - done)  # units not finished yet
            kill_node(raylet)

    done = run_cluster_compare(options(view / "split"), cluster.address, tmp_path / "cluster",
                               progress=kill_at_first_result)  # fmt: skip
    lost = {n.rank for n in done.not_compared}
    assert not done.complete and lost and lost <= {2, 3} and len(done.nodes_lost) == 1
    assert all(done.nodes_lost[0] in n.why for n in done.not_compared)
    compared = [r.rank for r in done.result.ranks]
    assert set(compared) == {0, 1, 2, 3} - lost
    same_reports(tmp_path / "local", tmp_path / "cluster", compared, scope_differs=True)
    names = report_files(tmp_path / "cluster")
    assert not any(f"rank{r}" in name for r in lost for name in names)  # no report that looks complete
    assert not list((tmp_path / "cluster").glob(".tcmp-*"))  # nor half-written files


def test_a_node_killed_mid_compare_is_survived_on_shared_storage(cluster, data, tmp_path):
    *_, shared = data
    run_compare(options(shared), tmp_path / "local")
    raylet = cluster.worker_raylet(0)

    killed = []

    def kill_at_first_result(done: float, total: int) -> None:
        if done >= 1 and not killed:
            killed.append(total - done)  # units not finished yet
            kill_node(raylet)

    done = run_cluster_compare(options(shared), cluster.address, tmp_path / "cluster", progress=kill_at_first_result)
    assert done.complete and len(done.nodes_lost) == 1 and done.retried > 0
    same_reports(tmp_path / "local", tmp_path / "cluster", range(4))


def test_a_node_with_another_tcmp_is_refused_with_both_versions(cluster, data, tmp_path):
    """A node whose tcmp says 0.0.1 (its tcmp/__init__.py replaced in its mount namespace)."""
    *_, shared = data
    init = Path(tcmp.__file__)
    other = tmp_path / "__init__.py"
    other.write_text(init.read_text().replace(f'"{tcmp.__version__}"', '"0.0.1"'))
    cluster.start_worker(f"mount --bind {other} {init} && ")
    with pytest.raises(CompareError, match=rf"tcmp 0\.0\.1 on .*, tcmp {re.escape(tcmp.__version__)} here"):
        run_cluster_compare(options(shared), cluster.address)
