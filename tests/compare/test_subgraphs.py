"""GE graphs with subgraphs (issue 25, item 2), compared end to end on hand-written dumps.

The graph is a GE ModelDef (`tcmp.schemas.synth.subgraph_model`) whose root graph holds 5 ops and no compute: the
dumped ops are all subgraph ops (a PartitionedCall's Mul, an If's then / else branch, a While's body). The model
must bind to its graph through them; an op of the If branch one dump ran and the other did not is out of scope
("branch not taken"), not "no partner"; the While body's iterations pair in order.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fx_dumps import GE_RANK_DIR, DumpPair, Outcome, _spec, values

from tcmp.compare.execute.run import run_compare
from tcmp.compare.judge.verdict import Result
from tcmp.compare.match.branches import BRANCH_NOT_TAKEN
from tcmp.compare.records import UnmatchedKind
from tcmp.compare.report.outcome import CompareOptions
from tcmp.schemas.dump_records import IO
from tcmp.schemas.ge_names import sanitize
from tcmp.schemas.synth.ge_writer import write_ge_dump
from tcmp.schemas.synth.subgraph_model import subgraph_model_text

GRAPH_FILE = "ge_proto_00000001_graph_1_PreRunAfterBuild.txt"  # GE's DUMP_GE_GRAPH name, found by its content
X = values(2, 3)


class GeDump(DumpPair):
    """GE dump files named as the runtime names them: the op name sanitized (`then_g/Add` -> `then_g_Add`)."""

    def ge(self, op_name, op_type, inputs, outputs, step: int = 0) -> Path:
        self.clock = getattr(self, "clock", 1_764_405_000_000_000) + 10
        self.task = getattr(self, "task", 0) + 1
        path = self.root / GE_RANK_DIR / str(step) / f"{op_type}.{sanitize(op_name)}.{self.task}.0.{self.clock}"
        specs = [_spec(np.asarray(v, dtype=np.float32)) for v in (*inputs, *outputs)]
        write_ge_dump(path, op_name, specs[: len(inputs)], specs[len(inputs) :], dump_time=self.clock)
        return path


def _write_target(pair: DumpPair, branch: str, iterations: int = 1, fault_at: int = -1) -> None:
    """The GE ops a token of this model runs: Mul, the If's `branch`, the While body `iterations` times."""
    product = X * 2
    pair.ge("pc_sub/Mul", "Mul", [X, X * 0 + 2], [product])
    if branch == "then":
        total = product + 1
        pair.ge("then_g/Add", "Add", [product, product * 0 + 1], [total])
        pair.ge("then_pc/Relu", "Relu", [total], [np.maximum(total, 0)])
    else:
        pair.ge("else_g/Sub", "Sub", [product, product * 0 + 1], [product - 1])
    for k in range(iterations):
        result = X + k + (0.5 if k == fault_at else 0.0)
        pair.ge("body_g/AddN", "Add", [X + k - 1, X * 0 + 1], [result.astype(np.float32)])


def _compare_ge(tmp_path: Path, target_branch: str, golden_branch: str, **target) -> Outcome:
    target_pair, golden_pair = GeDump(tmp_path / "target"), GeDump(tmp_path / "golden")
    _write_target(target_pair, target_branch, **target)
    _write_target(golden_pair, golden_branch, iterations=target.get("iterations", 1))
    graph = tmp_path / GRAPH_FILE
    graph.write_text(subgraph_model_text())
    options = CompareOptions(target_pair.target, golden_pair.target, graph=graph)
    result, _ = run_compare(options, keep_rows=True)
    assert len(result.ranks) == 1
    return Outcome(result)


def test_a_model_whose_compute_is_in_subgraphs_binds_and_compares(tmp_path):
    outcome = _compare_ge(tmp_path, "then", "then")
    compared = {r.pair.op_name for r in outcome.rows}
    assert compared == {"pc_sub/Mul", "then_g/Add", "then_pc/Relu", "body_g/AddN"}
    assert all(r.result is Result.PASS for r in outcome.rows)
    assert not outcome.rank.unmatched


@pytest.mark.parametrize(("target_branch", "golden_branch"), [("then", "else"), ("else", "then")])
def test_the_branch_one_side_did_not_run_is_out_of_scope(tmp_path, target_branch, golden_branch):
    outcome = _compare_ge(tmp_path, target_branch, golden_branch)
    target_only = {"then": {"then_g/Add", "then_pc/Relu"}, "else": {"else_g/Sub"}}
    listed = outcome.target_unmatched()
    assert {u.op_name for u in listed} == target_only[target_branch]
    for u in listed:
        assert u.kind is UnmatchedKind.OUT_OF_SCOPE, (u.kind, u.reason)
        assert u.reason.startswith(BRANCH_NOT_TAKEN) and "of if," in u.reason and "golden dump" in u.reason
    golden = outcome.golden_unmatched()
    # (a golden item is named as its file names the op: sanitized, then_g_Add)
    assert {u.op_name for u in golden} == {sanitize(name) for name in target_only[golden_branch]}
    for u in golden:
        assert u.kind is UnmatchedKind.OUT_OF_SCOPE and u.reason.startswith(BRANCH_NOT_TAKEN), u.reason
        assert "target dump" in u.reason
    # the ops outside the branch still pair and pass
    assert {r.pair.op_name for r in outcome.rows} == {"pc_sub/Mul", "body_g/AddN"}
    assert all(r.result is Result.PASS for r in outcome.rows)


def test_while_iterations_pair_in_order(tmp_path):
    """Three iterations of the body in one token: the k-th target execution with the k-th golden one; a fault in
    iteration 1 fails that execution only."""
    outcome = _compare_ge(tmp_path, "then", "then", iterations=3, fault_at=1)
    body = sorted((r.pair.execution, r.result) for r in outcome.rows if r.pair.op_name == "body_g/AddN"
                  and r.pair.io is IO.OUTPUT)  # fmt: skip
    assert body == [(0, Result.PASS), (1, Result.FAIL), (2, Result.PASS)]
    inputs = {r.pair.execution: r.pair.bench.label for r in outcome.rows
              if r.pair.op_name == "body_g/AddN" and r.pair.io is IO.INPUT and r.pair.index == 0}  # fmt: skip
    assert len(set(inputs.values())) == 3  # each execution's own golden file


def test_an_fx_golden_binds_through_the_subgraph_ops(tmp_path):
    """GE → FX needs the graph (GE ops reach their FX tensors only through it): a root graph of 5 ops, none of them
    dumped, binds by its subgraph ops, and their outputs pair with the FX nodes their `_fx_tensor_name` names."""
    pair = GeDump(tmp_path)
    _write_target(pair, "then")
    product = X * 2
    total = product + 1
    pair.fx("mul-aten.mul.Tensor", [X, 2.0], [product])
    pair.fx("add-aten.add.Tensor", [product, 1.0], [total])
    pair.fx("relu-aten.relu.default", [total], [np.maximum(total, 0)])
    pair.fx("add_1-aten.add.Tensor", [X - 1, 1.0], [X])
    graph = tmp_path / GRAPH_FILE
    graph.write_text(subgraph_model_text())
    result, _ = run_compare(CompareOptions(pair.target, pair.golden, graph=graph), keep_rows=True)
    outcome = Outcome(result)
    assert outcome.label("pc_sub/Mul", IO.OUTPUT, 0).startswith("mul-aten.mul.Tensor.OUTPUT.0.")
    assert outcome.label("then_g/Add", IO.OUTPUT, 0).startswith("add-aten.add.Tensor.OUTPUT.0.")
    assert outcome.label("then_pc/Relu", IO.OUTPUT, 0).startswith("relu-aten.relu.default.OUTPUT.0.")
    assert outcome.label("body_g/AddN", IO.OUTPUT, 0).startswith("add_1-aten.add.Tensor.OUTPUT.0.")
    outputs = [r for r in outcome.rows if r.pair.io is IO.OUTPUT]
    assert len(outputs) == 4 and all(r.result is Result.PASS for r in outputs)


def test_against_an_fx_golden_the_branch_it_did_not_run_is_out_of_scope(tmp_path):
    """The target ran the then branch, the FX golden the else branch (its FX nodes are the ones the graph names)."""
    pair = GeDump(tmp_path)
    _write_target(pair, "then")
    product = X * 2
    pair.fx("mul-aten.mul.Tensor", [X, 2.0], [product])
    sub = pair.fx("sub-aten.sub.Tensor", [product, 1.0], [product - 1])
    pair.fx("add_1-aten.add.Tensor", [X - 1, 1.0], [X])
    graph = tmp_path / GRAPH_FILE
    graph.write_text(subgraph_model_text())
    result, _ = run_compare(CompareOptions(pair.target, pair.golden, graph=graph), keep_rows=True)
    outcome = Outcome(result)
    branch_items = [u for u in outcome.target_unmatched() if u.op_name in ("then_g/Add", "then_pc/Relu")]
    assert branch_items and all(
        u.kind is UnmatchedKind.OUT_OF_SCOPE and u.reason.startswith(BRANCH_NOT_TAKEN) for u in branch_items
    ), [(u.op_name, u.kind, u.reason) for u in branch_items]
    golden = {Path(u.path): u for u in outcome.golden_unmatched()}
    output = golden[sub["sub-aten.sub.Tensor.OUTPUT.0"]]  # (its inputs are FX input copies: by design anyway)
    assert output.kind is UnmatchedKind.OUT_OF_SCOPE and output.reason.startswith(BRANCH_NOT_TAKEN), output.reason
    assert "target dump" in output.reason
    branch_ops = {"then_g/Add", "then_pc/Relu", "sub"}
    assert not [u for u in outcome.rank.unmatched if u.kind is UnmatchedKind.NO_PARTNER and u.op_name in branch_ops]
