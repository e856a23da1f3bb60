"""The parts of `--cluster` that need no cluster: Ray missing, `--cluster` without an address, the earliest
divergence across ranks, and which node compares which rank (from hand-made inventories)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tcmp.cli import with_cluster_address
from tcmp.compare.cluster.inventory import Holdings, NodeInventory, RankHolding, check_versions, plan_cluster
from tcmp.compare.collect.binding import GoldenKind
from tcmp.compare.records import CompareError
from tcmp.compare.report.divergences import earliest_divergence
from tcmp.compare.report.outcome import Counts, Divergence, RankResult


def test_without_ray_the_cluster_option_says_what_to_install_in_one_line(tmp_path):
    """ray blocked from import (`sys.modules['ray'] = None` makes `import ray` raise ImportError)."""
    code = (
        "import sys; sys.modules['ray'] = None; sys.argv = ['tcmp'] + sys.argv[1:]; from tcmp.cli import main; main()"
    )
    for args in (["compare", "-tp", str(tmp_path), "-gp", str(tmp_path / "g"), "--cluster", "auto"],
                 ["status", "--cluster"]):  # fmt: skip
        done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)
        assert done.returncode != 0
        assert done.stderr.strip().splitlines() == ["error: --cluster needs Ray: pip install 'tcmp[cluster]'"]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (["compare", "--cluster"], ["compare", "--cluster", "auto"]),
        (["compare", "--cluster", "-o", "x"], ["compare", "--cluster", "auto", "-o", "x"]),
        (["compare", "--cluster", "ray://h:10001"], ["compare", "--cluster", "ray://h:10001"]),
        (["compare", "-o", "x"], ["compare", "-o", "x"]),
    ],
)
def test_cluster_without_an_address_is_auto(given, expected):
    assert with_cluster_address(given) == expected


def _divergence(rank, token, op, order, timestamp):
    from tcmp.compare.judge.rows import Row
    from tcmp.compare.records import Pair

    row = Row.__new__(Row)  # only `pair.order` is read of a divergence's rows
    pair = Pair.__new__(Pair)
    object.__setattr__(pair, "order", order)
    object.__setattr__(row, "pair", pair)
    return Divergence(rank, token, op, "MatMul", (row,), timestamp=timestamp)


def _rank(rank, *divergences):
    return RankResult(rank, Counts(), tuple(divergences), (), 0, 0)


def test_the_earliest_divergence_is_by_token_then_execution_order_then_dump_time():
    ranks = [
        _rank(0, _divergence(0, 1, "MatMul_0", 3, 100)),  # a later token
        _rank(1, _divergence(1, 0, "MatMul_2", 9, 50)),  # later in the token, dumped earlier
        _rank(2, _divergence(2, 0, "MatMul_1", 5, 300)),
        _rank(3, _divergence(3, 0, "MatMul_1", 5, 200)),  # same op and order, dumped first: the earliest
        _rank(4, _divergence(4, 1, "MatMul_1", 5, 10)),  # the same op, but in token 1: not counted with them
    ]
    earliest = earliest_divergence(ranks)
    assert (earliest.divergence.rank, earliest.divergence.op_name) == (3, "MatMul_1")
    assert sorted(earliest.same_op) == [2, 3]
    assert earliest_divergence([_rank(0)]) is None


def _inventory(node, ranks, version="0.1.0", code="c", error=""):
    held = tuple(RankHolding(r, fp, 2, 0, 2) for r, fp in ranks)
    holdings = Holdings(held, frozenset(r for r, _ in ranks), GoldenKind.FX if held else None, error=error)
    return NodeInventory(node * 8, "10.0.0.1", version, code, holdings)


def test_one_copy_on_several_nodes_runs_anywhere_two_copies_are_refused():
    plan = plan_cluster([_inventory("a", [(0, "x"), (1, "y")]), _inventory("b", [(1, "y"), (2, "z")])])
    assert {p.rank: p.nodes for p in plan.ranks} == {0: ("a" * 8,), 1: ("a" * 8, "b" * 8), 2: ("b" * 8,)}
    with pytest.raises(CompareError, match=r"rank 1: nodes hold different copies of it: 10\.0\.0\.1 \(node aaaaaaaa\)"
                                           r" \(files y\); 10\.0\.0\.1 \(node bbbbbbbb\) \(files w\)"):  # fmt: skip
        plan_cluster([_inventory("a", [(1, "y")]), _inventory("b", [(1, "w")])])


def test_no_node_that_can_compare_names_each_nodes_reason():
    with pytest.raises(CompareError, match=r"no node of the cluster can compare these dumps \(.*node aaaaaaaa\): "
                                           r"target path /x does not exist"):  # fmt: skip
        plan_cluster([_inventory("a", [], error="target path /x does not exist")])


def test_another_version_or_other_code_on_a_node_is_refused_with_both():
    with pytest.raises(CompareError, match=r"tcmp 0\.0\.9 on 10\.0\.0\.1 \(node aaaaaaaa\), tcmp 0\.1\.0 here"):
        check_versions([_inventory("a", [], version="0.0.9")], "0.1.0", "c")
    with pytest.raises(CompareError, match=r"other code \(sources d, here c\)"):
        check_versions([_inventory("a", [], code="d")], "0.1.0", "c")
    check_versions([_inventory("a", [])], "0.1.0", "c")


@pytest.mark.parametrize("address", [None, "127.0.0.1:6399", "ray://127.0.0.1:10001"])
def test_without_a_running_ray_the_hint_names_tcmps_own_options(tmp_path, address):
    """In network and pid namespaces of their own (no Ray server starts): no Ray process to find, nothing listens.
    The line names tcmp's --cluster forms and TCMP_CLUSTER, not Ray's `--address` flag and RAY_ADDRESS."""
    cluster = ["--cluster"] if address is None else ["--cluster", address]
    command = [sys.executable, "-m", "tcmp", "compare", "-tp", str(tmp_path), "-gp", str(tmp_path), *cluster]
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "TCMP_CLUSTER")}
    done = subprocess.run(["unshare", "-n", "-p", "-f", "--mount-proc", *command], capture_output=True, text=True,
                          env=env, timeout=120)  # fmt: skip
    assert done.returncode == 3
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: --cluster {address or 'auto'}: ")
    assert "RAY_ADDRESS" not in line and "`--address` flag" not in line
    for way in ("--cluster HEAD:6379", "--cluster ray://HEAD:10001", "TCMP_CLUSTER", "--cluster local"):
        assert way in line, line
