"""An aclgraph optimized stage captured more than once (torchair captures again for new input shapes): each
capture's files hold its last replay, placed in the token by their shapes (collect.acl_captures).

The writer below does what torch_npu does: the save path `{node}_device_0_{k}.pt` is fixed at capture k (the k-th
distinct input shape met), and each replay writes it again, so the writer knows which token each file holds."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
import pytest
import torch

from tcmp.compare.execute.run import run_compare
from tcmp.compare.judge.verdict import Result
from tcmp.compare.records import Role, UnmatchedKind
from tcmp.compare.report.outcome import CompareOptions
from tcmp.daemon.retention import RetentionPolicy
from tcmp.daemon.service import WatchConfig, run_watch
from tcmp.schemas.acl_dump import AclStage

RANK = "worldsize1_global_rank0"
NODES = ("arg0_1", "arg1_1", "mm", "relu")


def forward(token: int, rows: int, fault: bool = False) -> dict:
    g = torch.Generator().manual_seed(300 + token)
    values = {"arg0_1": torch.randn(rows, 8, generator=g), "arg1_1": torch.randn(8, 6, generator=g)}
    values["mm"] = values["arg0_1"] @ values["arg1_1"]
    if fault:
        values["mm"] = values["mm"] * 1.5 + 0.25
    values["relu"] = torch.relu(values["mm"])
    return values


def write_optimized(root: Path, shapes: list, fault_token: Optional[int] = None, recapture: bool = False) -> dict:
    """The optimized stage over tokens of `shapes` (rows of the input). Returns {capture: token its files hold}.
    `recapture`: every token is captured anew (same shapes or not), as a graph captured again would be."""
    directory = root / RANK
    directory.mkdir(parents=True)
    captures: dict = {}
    holds = {}
    for token, rows in enumerate(shapes):
        key = token if recapture else rows
        k = captures.setdefault(key, len(captures))
        holds[k] = token
        values = forward(token, rows, fault=token == fault_token)
        for node in NODES:
            torch.save(values[node].contiguous().clone(), directory / f"{node}_device_0_{k}.pt")
    return holds


def write_fx(root: Path, shapes: list) -> None:
    clock = 20261202090000000000
    for token, rows in enumerate(shapes):
        directory = root / RANK / "graph_1" / str(token)
        directory.mkdir(parents=True)
        v = forward(token, rows)
        for node, target, inputs, output in (
            ("mm", "aten.mm.default", [v["arg0_1"], v["arg1_1"]], v["mm"]),
            ("relu", "aten.relu.default", [v["mm"]], v["relu"]),
        ):
            clock += 11
            for i, arg in enumerate(inputs):
                np.save(directory / f"{node}-{target}.INPUT.{i}.{clock}.npy", arg.numpy())
            np.save(directory / f"{node}-{target}.OUTPUT.0.{clock}.npy", output.numpy())


def compare(target: Path, golden: Path):
    result, _ = run_compare(CompareOptions(target, golden, target_stage=AclStage.OPTIMIZED), keep_rows=True)
    assert len(result.ranks) == 1
    return result, result.ranks[0]


def verdicts(rank) -> dict:
    return {(r.pair.token, r.pair.op_name): r.result for r in rank.rows}


@pytest.mark.parametrize("shapes", [[4, 6], [4, 6, 4], [4, 4, 6, 5, 6]])
def test_each_capture_is_compared_as_the_token_it_holds(tmp_path, shapes):
    holds = write_optimized(tmp_path / "acl", shapes)
    write_fx(tmp_path / "fx", shapes)
    result, rank = compare(tmp_path / "acl", tmp_path / "fx")
    assert verdicts(rank) == {(t, n): Result.PASS for t in holds.values() for n in ("mm", "relu")}
    where = ", ".join(f"capture {c} as token {t}" for c, t in sorted(holds.items()))
    assert any(where in note for note in result.notes), result.notes
    assert rank.counts.unmatched_no_partner == 0


def test_a_fault_in_the_replay_a_capture_holds_is_its_first_divergence(tmp_path):
    shapes = [4, 6, 4]  # capture 0 is replayed last in token 2
    write_optimized(tmp_path / "acl", shapes, fault_token=2)
    write_fx(tmp_path / "fx", shapes)
    _, rank = compare(tmp_path / "acl", tmp_path / "fx")
    assert {k for k, v in verdicts(rank).items() if v is Result.FAIL} == {(2, "mm"), (2, "relu")}
    assert [(d.token, d.op_name) for d in rank.divergences] == [(2, "mm")]


def test_a_fault_in_a_replay_written_over_is_not_blamed_on_the_token_kept(tmp_path):
    shapes = [4, 6, 4]  # the fault in token 0's replay is written over by token 2's: no file holds it
    write_optimized(tmp_path / "acl", shapes, fault_token=0)
    write_fx(tmp_path / "fx", shapes)
    _, rank = compare(tmp_path / "acl", tmp_path / "fx")
    assert set(verdicts(rank).values()) == {Result.PASS}


def test_captures_of_the_same_shapes_are_listed_not_guessed(tmp_path):
    shapes = [4, 4]
    write_optimized(tmp_path / "acl", shapes, recapture=True)
    write_fx(tmp_path / "fx", shapes)
    result, rank = compare(tmp_path / "acl", tmp_path / "fx")
    assert rank.rows == ()
    listed = [u for u in rank.unmatched if u.role is Role.TARGET]
    assert len(listed) == 2 * len(NODES) and {u.kind for u in listed} == {UnmatchedKind.UNREADABLE}
    assert all("no saved shape tells which token captures 0, 1 held" in u.reason for u in listed)
    assert any("not compared" in note for note in result.notes)


def test_the_index_route_places_the_captures_as_the_raw_route(tmp_path):
    shapes = [4, 6, 4]
    write_optimized(tmp_path / "acl", shapes, fault_token=1)
    write_fx(tmp_path / "fx", shapes)
    _, raw = compare(tmp_path / "acl", tmp_path / "fx")
    for root in (tmp_path / "acl", tmp_path / "fx"):
        report = run_watch(WatchConfig(roots=(root,), retention=RetentionPolicy(True, 0, ()), workers=1, once=True))
        assert report.error is None and report.summarized > 0
    assert not list((tmp_path / "acl").rglob("*.pt"))  # only the index holds them now
    _, indexed = compare(tmp_path / "acl", tmp_path / "fx")
    assert verdicts(indexed) == verdicts(raw) and Result.FAIL in verdicts(raw).values()
    assert indexed.counts.rows_from_index == indexed.counts.rows > 0


def test_captures_with_a_graph_dump_compare_in_worker_processes(tmp_path):
    """Two captures are two units; with torchair's graph dump each unit carries it to its worker process."""
    from torch.fx.experimental.proxy_tensor import make_fx

    shapes = [4, 6]
    write_optimized(tmp_path / "acl", shapes, fault_token=1)
    write_fx(tmp_path / "fx", shapes)
    gm = make_fx(lambda a, b: torch.relu(a @ b))(torch.randn(4, 8), torch.randn(8, 6))
    (tmp_path / "acl" / "dynamo_optimized_graph_1_rank_0_pid_9_ts_20261202090000000000.py").write_text(
        gm.print_readable(False).replace("a_1", "arg0_1").replace("b_1", "arg1_1")
    )
    options = CompareOptions(tmp_path / "acl", tmp_path / "fx", target_stage=AclStage.OPTIMIZED, jobs=2)
    result, _ = run_compare(options, keep_rows=True)
    assert any("graph dump" in note and "not used" not in note for note in result.notes), result.notes
    assert {k for k, v in verdicts(result.ranks[0]).items() if v is Result.FAIL} == {(1, "mm"), (1, "relu")}
