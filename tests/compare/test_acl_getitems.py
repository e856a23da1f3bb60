"""The getitems an aclgraph optimized stage saves, paired through torchair's graph dump (`dynamo_optimized_*.py`):
a getitem of a node the FX golden has (a multi-output op) with that node's output, and a getitem of a node
torchair's pattern fusion made with the output of the replaced node it stands for (the view form's in another
shape). The graph dumps are printed by real torch (`print_readable`) from graphs `make_fx` traced; the values come
from the forward below, written as torch_npu saves them and as torchair's FX dumper writes the golden."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from tcmp.compare.execute.run import run_compare
from tcmp.compare.judge.verdict import Result
from tcmp.compare.records import CompareError, Role, UnmatchedKind
from tcmp.compare.report.outcome import CompareOptions
from tcmp.schemas.acl_dump import AclStage

RANK = "worldsize1_global_rank0"
GRAPH_DUMP = "dynamo_optimized_graph_1_rank_0_pid_4242_ts_20261202080000000001.py"
FUSED = "npu.npu_add_rms_norm_dynamic_quant.default"


def _define_fused_op() -> torch.library.Library:
    """torch_npu's npu_add_rms_norm_dynamic_quant, only as far as make_fx needs it (shapes and dtypes)."""
    lib = torch.library.Library("npu", "FRAGMENT")
    lib.define("npu_add_rms_norm_dynamic_quant(Tensor x1, Tensor x2, Tensor gamma) -> "
               "(Tensor, Tensor, Tensor, Tensor, Tensor)")  # fmt: skip

    def fused(x1, x2, gamma):
        x = x1 + x2
        rows = x.shape[:-1]
        return (torch.zeros_like(x, dtype=torch.int8), x.new_zeros(rows), x, x.new_zeros(rows), x.new_zeros(rows))

    lib.impl("npu_add_rms_norm_dynamic_quant", fused, "CompositeExplicitAutograd")
    return lib


_LIB = _define_fused_op()


def forward(x1, x2, gamma, fault: bool = False) -> dict:
    """The unfused model's nodes (as the FX golden has them): y, rstd, x = npu_add_rms_norm(x1, x2, gamma);
    q, scale = npu_dynamic_quant(y.flatten(0, 1)); scale.view(-1, 1)."""
    x = x1 + x2
    if fault:
        x = x * 1.5 + 0.25
    rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    y = x * rstd * gamma
    flat = y.flatten(0, 1)
    scale = flat.abs().amax(-1) / 127.0
    q = torch.round(flat / scale[:, None]).clamp(-128, 127).to(torch.int8)
    return {"x": x, "rstd": rstd, "y": y, "flat": flat, "q": q, "scale": scale}


def _optimized(x1, x2, gamma):
    """The optimized graph as torchair's pattern replacement leaves it (patterns/add_rms_norm_dynamic_quant.py,
    the view form): the fused node, its getitems, the views of q and scale."""
    q, _, x, scale, _ = torch.ops.npu.npu_add_rms_norm_dynamic_quant(x1, x2, gamma)
    return q.reshape(-1, q.shape[-1]), scale.reshape(-1, 1), x


def _inputs(token: int):
    g = torch.Generator().manual_seed(500 + token)
    return torch.randn(2, 3, 16, generator=g), torch.randn(2, 3, 16, generator=g), torch.rand(16, generator=g) + 0.5


def write_target(root: Path, tokens: int, fault_token: Optional[int] = None, graph_dump: bool = True) -> Path:
    """The optimized stage: one capture, its files holding the last replay; the fused node is saved only through
    its getitems (it has no single tensor output)."""
    directory = root / RANK
    directory.mkdir(parents=True)
    gm = make_fx(_optimized)(*_inputs(0))
    gm.graph.eliminate_dead_code()  # as torchair's passes leave it: no getitem of an unused output
    gm.recompile()
    if graph_dump:
        (root / GRAPH_DUMP).write_text(gm.print_readable(False))
    getitems = {n.name: n.args[1] for n in gm.graph.nodes if n.name.startswith("getitem")}
    for token in range(tokens):
        v = forward(*_inputs(token), fault=token == fault_token)
        fused = {0: v["q"].reshape(2, 3, 16), 2: v["x"], 3: v["scale"].reshape(2, 3)}
        for name, index in getitems.items():
            torch.save(fused[index].contiguous().clone(), directory / f"{name}_device_0_0.pt")
    return root


def write_golden(root: Path, tokens: int) -> Path:
    clock = 20261202080100000000
    for token in range(tokens):
        directory = root / RANK / "graph_1" / str(token)
        directory.mkdir(parents=True)
        x1, x2, gamma = _inputs(token)
        v = forward(x1, x2, gamma)
        calls = (
            ("npu_add_rms_norm-npu.npu_add_rms_norm.default", [x1, x2, gamma], [v["y"], v["rstd"], v["x"]]),
            ("view-aten.view.default", [v["y"]], [v["flat"]]),
            ("npu_dynamic_quant-npu.npu_dynamic_quant.default", [v["flat"]], [v["q"], v["scale"]]),
            ("view_1-aten.view.default", [v["scale"]], [v["scale"].view(-1, 1)]),
        )
        for key, inputs, outputs in calls:
            clock += 13
            for i, arg in enumerate(inputs):
                np.save(directory / f"{key}.INPUT.{i}.{clock}.npy", arg.numpy())
            for k, out in enumerate(outputs):
                np.save(directory / f"{key}.OUTPUT.{k}.{clock}.npy", out.numpy())
    return root


def compare(target: Path, golden: Path):
    result, _ = run_compare(CompareOptions(target, golden, target_stage=AclStage.OPTIMIZED), keep_rows=True)
    return result, result.ranks[0]


def test_the_fused_nodes_getitems_pair_with_the_outputs_they_stand_for(tmp_path):
    target, golden = write_target(tmp_path / "acl", 2), write_golden(tmp_path / "fx", 2)
    result, rank = compare(target, golden)
    benches = {r.pair.op_name: (r.pair.bench.label, r.result) for r in rank.rows}
    assert {name: (label.split(".OUTPUT.")[0].split("-")[0] + ".OUTPUT." + label.split(".OUTPUT.")[1].split(".")[0],
                   verdict) for name, (label, verdict) in benches.items()} == {
        "getitem": ("npu_dynamic_quant.OUTPUT.0", Result.PASS),  # q: [2, 3, 16] against [6, 16]
        "getitem_2": ("npu_add_rms_norm.OUTPUT.2", Result.PASS),  # x
        "getitem_3": ("npu_dynamic_quant.OUTPUT.1", Result.PASS),  # scale: [2, 3] against [6]
    }  # fmt: skip
    assert {r.pair.token for r in rank.rows} == {1}  # the last replay
    assert any(GRAPH_DUMP in note for note in result.notes)
    assert rank.counts.unmatched_no_partner == 0


def test_a_fault_in_the_fused_node_is_the_first_divergence(tmp_path):
    target, golden = write_target(tmp_path / "acl", 2, fault_token=1), write_golden(tmp_path / "fx", 2)
    _, rank = compare(target, golden)
    failed = {r.pair.op_name for r in rank.rows if r.result is Result.FAIL}
    assert failed == {"getitem", "getitem_2", "getitem_3"}  # x faulted, and q and scale computed from it
    # the three are outputs of one fused node: the token's first divergence is one of them
    assert [d.token for d in rank.divergences] == [1] and rank.divergences[0].op_name in failed


def test_without_the_graph_dump_the_getitems_are_listed(tmp_path):
    target = write_target(tmp_path / "acl", 2, graph_dump=False)
    golden = write_golden(tmp_path / "fx", 2)
    _, rank = compare(target, golden)
    assert rank.rows == ()
    listed = [u for u in rank.unmatched if u.role is Role.TARGET]
    assert {u.op_name for u in listed} == {"getitem", "getitem_2", "getitem_3"}
    assert {u.kind for u in listed} == {UnmatchedKind.BY_DESIGN} and all("getitem" in u.reason for u in listed)


@pytest.mark.parametrize("tokens", [1, 3])
def test_a_multi_output_node_both_graphs_have(tmp_path, tokens):
    """var_mean stays in the optimized graph: its getitems pair with the golden's var_mean outputs."""

    def model(x):
        var, mean = torch.var_mean(x, 1, keepdim=True)
        return var + mean

    directory = tmp_path / "acl" / RANK
    directory.mkdir(parents=True)
    gm = make_fx(model)(torch.randn(4, 6))
    (tmp_path / "acl" / GRAPH_DUMP).write_text(gm.print_readable(False))
    getitems = {n.name: n.args[1] for n in gm.graph.nodes if n.name.startswith("getitem")}
    for token in range(tokens):
        x = torch.randn(4, 6, generator=torch.Generator().manual_seed(token))
        outputs = torch.var_mean(x, 1, keepdim=True)
        for name, index in getitems.items():
            torch.save(outputs[index].clone(), directory / f"{name}_device_0_0.pt")
        step = tmp_path / "fx" / RANK / "graph_1" / str(token)
        step.mkdir(parents=True)
        for k, out in enumerate(outputs):
            np.save(step / f"var_mean-aten.var_mean.correction.OUTPUT.{k}.2026120208{token:02d}.npy", out.numpy())
    _, rank = compare(tmp_path / "acl", tmp_path / "fx")
    assert {(r.pair.op_name, r.pair.bench.label.split(".")[-3], r.result) for r in rank.rows} == {
        (name, str(index), Result.PASS) for name, index in getitems.items()
    }
    assert {r.pair.token for r in rank.rows} == {tokens - 1}


def test_another_runs_graph_dump_is_not_used(tmp_path, monkeypatch):
    """A graph dump left in the working directory by another model: its getitem names would point at other nodes."""
    target, golden = write_target(tmp_path / "acl", 2, graph_dump=False), write_golden(tmp_path / "fx", 2)
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    (elsewhere / GRAPH_DUMP).write_text(make_fx(lambda x: torch.relu(x))(torch.randn(3)).print_readable(False))
    monkeypatch.chdir(elsewhere)
    result, rank = compare(target, golden)
    assert rank.rows == ()
    assert any("not used: it has no node getitem" in note for note in result.notes), result.notes
    with pytest.raises(CompareError, match="not the graph of this aclgraph dump: it has no node getitem"):
        run_compare(CompareOptions(target, golden, target_stage=AclStage.OPTIMIZED, graph=elsewhere / GRAPH_DUMP))
