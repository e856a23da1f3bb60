"""`tcmp compare` of aclgraph dumps (issue #25, "aclgraph compare"): `.pt` files written by real `torch.save` as
torch_npu's `save_npugraph_tensor` names them, against an FX dump written as torchair's `_NpuFxDumper` names its
files, or against another aclgraph dump. The values are computed here with torch (the forward of a small graph),
independently of tcmp.

The graph (node names as dynamo/AOT spell them; var_mean has two outputs, so aclgraph saves its getitem users):

    arg0_1, arg1_1 (placeholders) -> mm = arg0_1 @ arg1_1 -> relu -> view (same shape: a no-op)
    -> var_mean = var_mean(view, 1) -> getitem, getitem_1 -> add = view + getitem_1
"""

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
TARGETS = {
    "mm": "aten.mm.default", "relu": "aten.relu.default", "view": "aten.view.default",
    "var_mean": "aten.var_mean.correction", "add": "aten.add.Tensor",
}  # fmt: skip
COMPUTED = ("mm", "relu", "view", "add")  # single-output call_function nodes: what pairs with an FX golden


def forward(token: int, fault: Optional[str] = None) -> dict:
    """Every node's value in one token; `fault` perturbs one node (and so everything after it)."""
    g = torch.Generator().manual_seed(100 + token)
    values = {"arg0_1": torch.randn(4, 8, generator=g), "arg1_1": torch.randn(8, 6, generator=g)}
    values["mm"] = values["arg0_1"] @ values["arg1_1"]
    if fault == "mm":
        values["mm"] = values["mm"] * 1.5
    values["relu"] = torch.relu(values["mm"])
    if fault == "relu":
        values["relu"] = values["relu"] + torch.linspace(0, 3, 24).reshape(4, 6)
    values["view"] = values["relu"].view(4, 6)
    var, mean = torch.var_mean(values["view"], 1, keepdim=True)
    values["getitem"], values["getitem_1"] = var, mean
    values["add"] = values["view"] + mean
    return values


def write_acl(root: Path, tokens: int, fault: Optional[tuple[str, int]] = None, device: Optional[int] = 0,
              stage: AclStage = AclStage.ORIGINAL) -> Path:  # fmt: skip
    """An aclgraph dump: torch_npu saves a contiguous CPU copy to `{node}_device_{d}_{k}.pt` (`{node}_{k}.pt` for
    a CPU tensor). Original stage: k counts the calls (tokens). Optimized stage (a captured graph, the no-op view
    removed by torchair's passes): the path is fixed at capture, k = 0, and each replay writes it again."""
    directory = root / RANK
    directory.mkdir(parents=True)
    nodes = ["arg0_1", "arg1_1", "mm", "relu", "view", "getitem", "getitem_1", "add"]
    if stage is AclStage.OPTIMIZED:
        nodes.remove("view")
    for token in range(tokens):
        values = forward(token, fault[0] if fault and fault[1] == token else None)
        k = token if stage is AclStage.ORIGINAL else 0
        for node in nodes:
            name = f"{node}_device_{device}_{k}.pt" if device is not None else f"{node}_{k}.pt"
            torch.save(values[node].contiguous().clone(), directory / name)
    return root


def write_fx(root: Path, tokens: int) -> Path:
    """torchair's FX dump (2.14): `worldsize1_global_rank0/graph_1/{step}/{node}-{target}.INPUT|OUTPUT.{i}.{ts}`,
    one np.save per positional argument and output of every call_function node with a converter."""
    clock = 20261202083000000000
    for token in range(tokens):
        directory = root / RANK / "graph_1" / str(token)
        directory.mkdir(parents=True)
        v = forward(token)
        calls = [
            ("mm", [v["arg0_1"], v["arg1_1"]], [v["mm"]]),
            ("relu", [v["mm"]], [v["relu"]]),
            ("view", [v["relu"], np.array([4, 6])], [v["view"]]),
            ("var_mean", [v["view"], np.array([1])], [v["getitem"], v["getitem_1"]]),
            ("add", [v["view"], v["getitem_1"]], [v["add"]]),
        ]
        for node, inputs, outputs in calls:
            clock += 17
            key = f"{node}-{TARGETS[node]}"
            for i, arg in enumerate(inputs):
                np.save(directory / f"{key}.INPUT.{i}.{clock}.npy", np.asarray(arg))
            for k, out in enumerate(outputs):
                np.save(directory / f"{key}.OUTPUT.{k}.{clock}.npy", out.numpy())
    return root


def compare(target: Path, golden: Path, **options):
    result, _ = run_compare(CompareOptions(target, golden, **options), keep_rows=True)
    assert len(result.ranks) == 1
    return result, result.ranks[0]


def rows_by(rank) -> dict[tuple[int, str], Result]:
    return {(r.pair.token, r.pair.op_name): r.result for r in rank.rows}


def test_original_stage_against_fx_pairs_every_node_output(tmp_path):
    target, golden = write_acl(tmp_path / "acl", 2), write_fx(tmp_path / "fx", 2)
    result, rank = compare(target, golden)
    assert result.golden_kind.value == "fx" and result.target_items == "FX nodes"
    assert rows_by(rank) == {(t, n): Result.PASS for t in range(2) for n in COMPUTED}
    assert {r.pair.bench.label.split(".OUTPUT.")[0] for r in rank.rows} == {f"{n}-{TARGETS[n]}" for n in COMPUTED}
    assert rank.counts.failed == 0 and rank.counts.unmatched_no_partner == 0
    target_items = {(u.token, u.op_name): u for u in rank.unmatched if u.role is Role.TARGET}
    assert set(target_items) == {(t, n) for t in range(2) for n in ("arg0_1", "arg1_1", "getitem", "getitem_1")}
    assert all(u.kind is UnmatchedKind.BY_DESIGN for u in target_items.values())
    assert "placeholder" in target_items[(0, "arg0_1")].reason and "getitem" in target_items[(1, "getitem")].reason
    golden_items = [u for u in rank.unmatched if u.role is Role.GOLDEN]
    assert all(u.kind is UnmatchedKind.BY_DESIGN for u in golden_items)
    assert {(u.op_name, u.io.value) for u in golden_items if u.io is not None and u.io.value == "output"} == {
        ("var_mean", "output")
    }  # its getitem users were saved instead


def test_an_injected_fault_is_the_first_divergence(tmp_path):
    target, golden = write_acl(tmp_path / "acl", 2, fault=("relu", 1)), write_fx(tmp_path / "fx", 2)
    _, rank = compare(target, golden)
    failed = {key for key, verdict in rows_by(rank).items() if verdict is Result.FAIL}
    assert failed == {(1, "relu"), (1, "view"), (1, "add")}  # the fault and what it feeds, in token 1 only
    assert [(d.token, d.op_name) for d in rank.divergences] == [(1, "relu")]


def test_a_cpu_tensors_names_and_an_aclgraph_golden(tmp_path):
    target = write_acl(tmp_path / "acl", 2, fault=("mm", 0))
    golden = write_acl(tmp_path / "acl2", 2, device=None)  # `{node}_{k}.pt`: another run, on CPU
    result, rank = compare(target, golden)
    assert result.golden_kind.value == "acl"
    nodes = ("arg0_1", "arg1_1", "mm", "relu", "view", "getitem", "getitem_1", "add")
    verdicts = rows_by(rank)
    assert set(verdicts) == {(t, n) for t in range(2) for n in nodes}
    assert {k for k, v in verdicts.items() if v is Result.FAIL} == {(0, n) for n in nodes[2:]}
    assert rank.counts.unmatched_target == rank.counts.unmatched_golden == 0


def test_optimized_stage_holds_the_last_replay(tmp_path):
    target = write_acl(tmp_path / "acl", 3, stage=AclStage.OPTIMIZED)
    golden = write_fx(tmp_path / "fx", 3)
    result, rank = compare(target, golden, target_stage=AclStage.OPTIMIZED)
    assert rows_by(rank) == {(2, n): Result.PASS for n in ("mm", "relu", "add")}
    assert any("last replay" in note for note in result.notes)
    noop = [u for u in rank.unmatched if u.role is Role.GOLDEN and u.op_name == "view" and u.token == 2
            and u.io.value == "output"]  # fmt: skip
    assert [u.kind for u in noop] == [UnmatchedKind.BY_DESIGN] and "no-op" in noop[0].reason
    assert rank.counts.unmatched_no_partner == 0
    assert {u.kind for u in rank.unmatched if u.token in (0, 1)} == {UnmatchedKind.OUT_OF_SCOPE}  # no target token
    # read as the original stage, the same files would pair token 0 with the last replay: wrong, and said
    misread, _ = run_compare(CompareOptions(target, golden), keep_rows=True)
    assert misread.ranks[0].counts.failed > 0 and any("--target-stage optimized" in n for n in misread.notes)


def test_optimized_against_original_stage(tmp_path):
    target = write_acl(tmp_path / "opt", 2, stage=AclStage.OPTIMIZED)
    golden = write_acl(tmp_path / "orig", 2)
    _, rank = compare(target, golden, target_stage=AclStage.OPTIMIZED)
    assert {k for k, v in rows_by(rank).items() if v is Result.PASS} == {
        (1, n) for n in ("arg0_1", "arg1_1", "mm", "relu", "getitem", "getitem_1", "add")
    }
    view = [u for u in rank.unmatched if u.op_name == "view" and u.token == 1]
    assert [(u.role, u.kind) for u in view] == [(Role.GOLDEN, UnmatchedKind.BY_DESIGN)]


@pytest.mark.parametrize("stage", list(AclStage))
def test_the_index_route_gives_the_raw_routes_verdicts(tmp_path, stage):
    target = write_acl(tmp_path / "acl", 2, fault=("relu", 1), stage=stage)
    golden = write_fx(tmp_path / "fx", 2)
    _, raw = compare(target, golden, target_stage=stage)
    for root in (target, golden):
        report = run_watch(WatchConfig(roots=(root,), retention=RetentionPolicy(True, 0, ()), workers=1, once=True))
        assert report.error is None and report.summarized > 0
    assert not list(target.rglob("*.pt")) and not list(golden.rglob("*.npy"))  # summarized, then dropped
    result, indexed = compare(target, golden, target_stage=stage)
    assert result.mode.value == "statistics"
    assert indexed.counts.rows_from_index == indexed.counts.rows == raw.counts.rows > 0
    assert rows_by(indexed) == rows_by(raw)
    assert Result.FAIL in rows_by(raw).values()
    assert [(d.token, d.op_name) for d in indexed.divergences] == [(d.token, d.op_name) for d in raw.divergences]

    def listed(rank) -> set:
        return {(u.role, u.token, u.op_name, u.io, u.index, u.kind, u.reason) for u in rank.unmatched}

    assert listed(indexed) == listed(raw)


def _bmm_transpose_dumps(root: Path, with_consumer: bool) -> tuple[Path, Path]:
    """torchair's batch_matmul_transpose pattern: the FX golden has `bmm` then `transpose` of it; the optimized
    stage saves the fused `npu_transpose_batchmatmul` instead (when `with_consumer` is False the golden has no
    transpose, so no pattern was there to fuse: bmm's missing save is a real gap)."""
    g = torch.Generator().manual_seed(7)
    x1, x2 = torch.randn(2, 3, 4, generator=g), torch.randn(2, 4, 5, generator=g)
    bmm = torch.bmm(x1, x2)
    transposed = bmm.transpose(0, 1)
    acl = root / "acl" / RANK
    acl.mkdir(parents=True)
    torch.save(x1.clone(), acl / "arg0_1_device_0_0.pt")
    torch.save(x2.clone(), acl / "arg1_1_device_0_0.pt")
    torch.save(transposed.contiguous().clone(), acl / "npu_transpose_batchmatmul_device_0_0.pt")
    fx = root / "fx" / RANK / "graph_1" / "0"
    fx.mkdir(parents=True)
    np.save(fx / "bmm-aten.bmm.default.INPUT.0.20261202083000000010.npy", x1.numpy())
    np.save(fx / "bmm-aten.bmm.default.INPUT.1.20261202083000000010.npy", x2.numpy())
    np.save(fx / "bmm-aten.bmm.default.OUTPUT.0.20261202083000000010.npy", bmm.numpy())
    if with_consumer:
        np.save(fx / "transpose-aten.transpose.int.INPUT.0.20261202083000000020.npy", bmm.numpy())
        np.save(fx / "transpose-aten.transpose.int.OUTPUT.0.20261202083000000020.npy", transposed.contiguous().numpy())
    return root / "acl", root / "fx"


@pytest.mark.parametrize("with_consumer", [True, False])
def test_golden_nodes_a_pattern_fusion_replaced_are_by_design(tmp_path, with_consumer):
    target, golden = _bmm_transpose_dumps(tmp_path, with_consumer)
    _, rank = compare(target, golden, target_stage=AclStage.OPTIMIZED)
    outputs = {u.op_name: u for u in rank.unmatched if u.role is Role.GOLDEN and u.io.value == "output"}
    if with_consumer:
        assert {n: u.kind for n, u in outputs.items()} == {"bmm": UnmatchedKind.BY_DESIGN,
                                                          "transpose": UnmatchedKind.BY_DESIGN}  # fmt: skip
        assert all("npu_transpose_batchmatmul" in u.reason and "pattern fusion" in u.reason for u in outputs.values())
    else:  # no consumer: nothing torchair fuses, so bmm's missing save is looked at
        assert outputs["bmm"].kind is UnmatchedKind.NO_PARTNER


def test_a_container_output_the_fx_dumper_pickled_whole_is_by_design(tmp_path):
    """A node returning a dict: the FX dumper saves OUTPUT.0 as one object array, aclgraph saves the getitems."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4, generator=g)
    acl = tmp_path / "acl" / RANK
    acl.mkdir(parents=True)
    torch.save(x.clone(), acl / "arg0_1_device_0_0.pt")
    torch.save((x * 2).clone(), acl / "getitem_device_0_0.pt")
    fx = tmp_path / "fx" / RANK / "graph_1" / "0"
    fx.mkdir(parents=True)
    np.save(fx / "pack-my.pack.default.INPUT.0.20261202083000000010.npy", x.numpy())
    np.save(fx / "pack-my.pack.default.OUTPUT.0.20261202083000000010.npy",
            np.array({"double": (x * 2).numpy()}, dtype=object), allow_pickle=True)  # fmt: skip
    _, rank = compare(tmp_path / "acl", tmp_path / "fx")
    (item,) = [u for u in rank.unmatched if u.role is Role.GOLDEN and u.op_name == "pack" and u.io.value == "output"]
    assert item.kind is UnmatchedKind.BY_DESIGN and "getitem" in item.reason
