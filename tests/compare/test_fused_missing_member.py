"""A fused GE op whose name holds a member that is no op of the graph (issue 22, item 8): `Add_2Cast_9ConcatV2`
with Add_2 and Cast_9 in the graph and ConcatV2 not (an op GE made after torchair dumped the graph). GE's UB
fusion names a fused op by concatenating its members' names, so the name still says which graph ops are in it:
those are compared as for any fused op, against an FX golden and a fusion-off GE golden; the missing member is
listed as `member ConcatV2 not in graph graph_1`; outputs the name says come from it are listed, not paired with
another member's. A graph without a name is named by its file in these messages."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from fx_dumps import Outcome, _spec, data, op, out, values

from tcmp.compare.collect.fusion import NameSplitter
from tcmp.compare.execute.run import run_compare
from tcmp.compare.judge.verdict import Result
from tcmp.compare.records import Role, UnmatchedKind
from tcmp.compare.report.outcome import CompareOptions
from tcmp.schemas.dump_records import IO
from tcmp.schemas.synth.ge_writer import write_ge_dump
from tcmp.schemas.synth.graph_writer import graph_file_name, write_graph

ADD, CAST, NEG = "add_2-aten.add.Tensor", "_to_copy_9-aten._to_copy.default", "neg_3-aten.neg.default"
FUSION = "AutomaticBufferFusionOp"
GOLDEN_GE_DIR = "msprobe_ge_dump/worldsize1_global_rank0/20261129084500/0/graph_1_0/1/0"


def _graph(dumps) -> None:
    """x + y → Cast_9 → Neg_3; GE fused Add_2 and Cast_9 with an op of its own (ConcatV2) after them."""
    dumps.graph(
        data("x", (2, 3)),
        data("y", (2, 3)),
        op("Add_2", "Add", ("x:0", "y:0"), (out(f"{ADD}.OUTPUT.0", (2, 3)),)),
        op("Cast_9", "Cast", ("Add_2:0",), (out(f"{CAST}.OUTPUT.0", (2, 3)),)),
        op("Neg_3", "Neg", ("Cast_9:0",), (out(f"{NEG}.OUTPUT.0", (2, 3)),)),
    )


def _ge(dumps, name: str, op_type: str, inputs, outputs, original_ops=None) -> Path:
    """A GE file as DumpPair.ge writes it, with `original_op` on the outputs when given."""
    path = dumps.ge(name, op_type, inputs, outputs)
    if original_ops is not None:
        specs = [replace(_spec(v), original_op=o) for v, o in zip(outputs, original_ops)]
        write_ge_dump(path, name, [_spec(v) for v in inputs], specs, dump_time=int(path.name.rsplit(".", 1)[1]))
    return path


def _golden_ge(dumps, executions) -> Path:
    """The fusion-off GE dump of the same run: one file per op, the same graph file."""
    root = dumps.root / "golden" / "msprobe_ge_dump"
    directory = dumps.root / "golden" / GOLDEN_GE_DIR
    directory.mkdir(parents=True)
    for task, (name, op_type, inputs, outputs) in enumerate(executions, start=1):
        ts = 1_764_405_100_000_000 + 10 * task
        specs = [_spec(v) for v in (*inputs, *outputs)]
        write_ge_dump(directory / f"{op_type}.{name}.{task}.0.{ts}", name, specs[: len(inputs)],
                      specs[len(inputs) :], dump_time=ts)  # fmt: skip
    write_graph(root, graph_file_name(1, 0, 4242, "20261129084500000000"), "graph_1", dumps.graph_ops)
    return root


def _compare(dumps, golden: str, golden_executions) -> Outcome:
    if golden == "fx":
        return dumps.compare()
    dumps.write_graph()
    root = _golden_ge(dumps, golden_executions)
    result, _ = run_compare(CompareOptions(dumps.target, root), keep_rows=True)
    return Outcome(result)


def _tensors():
    x, y = values(2, 3), values(2, 3, start=3)
    added = x + y
    cast = added.astype(np.float16).astype(np.float32)
    return x, y, added, cast


@pytest.mark.parametrize("golden", ["fx", "ge"])
def test_the_members_in_the_graph_are_compared_and_the_missing_one_listed(dumps, golden):
    x, y, added, cast = _tensors()
    _graph(dumps)
    concat = np.concatenate([cast, cast], axis=-1)
    _ge(dumps, "Add_2Cast_9ConcatV2", FUSION, [x, y], [concat])
    dumps.ge("Neg_3", "Neg", [concat[:, :3]], [-concat[:, :3]])
    calls = [dumps.fx(ADD, [x, y], [added]), dumps.fx(CAST, [added], [cast]), dumps.fx(NEG, [cast], [-cast])]
    o = _compare(dumps, golden, [("Add_2", "Add", [x, y], [added]), ("Cast_9", "Cast", [added], [cast]),
                                 ("Neg_3", "Neg", [cast], [-cast])])  # fmt: skip
    fused = "Add_2Cast_9ConcatV2"
    for k in (0, 1):  # the fused op's inputs are Add_2's (the group's external inputs)
        row = o.row(fused, IO.INPUT, k)
        assert row.result is Result.PASS
        if golden == "fx":
            assert row.pair.bench.label == calls[0][f"{ADD}.INPUT.{k}"].name
        else:
            assert row.pair.bench.label.startswith("Add.Add_2.") and row.pair.bench.label.endswith(f"input {k}")
    [member] = [u for u in o.target_unmatched() if u.op_name == fused and u.io is None]
    assert member.reason.startswith("member ConcatV2 not in graph graph_1")
    assert "no graph entry" not in member.reason
    # the output is ConcatV2's (the name ends in it, no original_op says otherwise): listed, not paired with Cast_9
    assert not o.rows_of(fused, IO.OUTPUT, 0)
    [output] = o.unmatched(fused, IO.OUTPUT, 0)
    assert output.kind is UnmatchedKind.NO_PARTNER and "ConcatV2" in output.reason
    assert not [u for u in o.target_unmatched() if "no graph entry" in u.reason or "golden data missing" in u.reason]
    if golden == "fx":  # the members' FX tensors inside the fused op are by design, not "no partner"
        inner = [u for u in o.golden_unmatched() if Path(u.path).name.startswith(CAST)]
        assert inner and all(u.kind is UnmatchedKind.BY_DESIGN and fused in u.reason for u in inner)


@pytest.mark.parametrize("golden", ["fx", "ge"])
def test_a_missing_member_inside_the_name_keeps_the_members_outputs(dumps, golden):
    """`Add_2TransData_7Cast_9`: the missing member is between two graph members; the fused op's output is the
    group's external output (Cast_9's), compared; TransData_7 is listed."""
    x, y, added, cast = _tensors()
    _graph(dumps)
    fused = "Add_2TransData_7Cast_9"
    _ge(dumps, fused, FUSION, [x, y], [cast])
    dumps.ge("Neg_3", "Neg", [cast], [-cast])
    calls = [dumps.fx(ADD, [x, y], [added]), dumps.fx(CAST, [added], [cast]), dumps.fx(NEG, [cast], [-cast])]
    o = _compare(dumps, golden, [("Add_2", "Add", [x, y], [added]), ("Cast_9", "Cast", [added], [cast]),
                                 ("Neg_3", "Neg", [cast], [-cast])])  # fmt: skip
    row = o.row(fused, IO.OUTPUT, 0)
    assert row.result is Result.PASS and any("TransData_7 not in the graph" in m for m in row.pair.notes)
    if golden == "fx":
        assert row.pair.bench.label == calls[1][f"{CAST}.OUTPUT.0"].name
    else:
        assert row.pair.bench.label.startswith("Cast.Cast_9.")
    assert [o.row(fused, IO.INPUT, k).result for k in (0, 1)] == [Result.PASS, Result.PASS]
    [member] = [u for u in o.target_unmatched() if u.op_name == fused and u.io is None]
    assert member.reason.startswith("member TransData_7 not in graph graph_1")
    assert len(o.target_unmatched()) == 1


def test_original_op_names_the_member_an_output_comes_from(dumps):
    """The same trailing missing member, with the header's original_op naming Cast_9 for the output: compared."""
    x, y, added, cast = _tensors()
    _graph(dumps)
    fused = "Add_2Cast_9ConcatV2"
    _ge(dumps, fused, FUSION, [x, y], [cast], original_ops=[("Cast_9", 0)])
    dumps.ge("Neg_3", "Neg", [cast], [-cast])
    calls = [dumps.fx(ADD, [x, y], [added]), dumps.fx(CAST, [added], [cast]), dumps.fx(NEG, [cast], [-cast])]
    o = dumps.compare()
    row = o.row(fused, IO.OUTPUT, 0)
    assert row.pair.bench.label == calls[1][f"{CAST}.OUTPUT.0"].name and row.result is Result.PASS
    assert any("via original_op Cast_9:0" in m for m in row.pair.notes)


def test_an_op_name_that_only_contains_a_graph_name_is_no_fusion(dumps):
    """`trans_Cast_56` (a GE-inserted Cast) holds `Cast_5`, a graph op: it is still a Cast GE put in, self
    checked; `Cast_5Foo_` (a piece that reads as no op name) is no fusion either."""
    x = values(2, 3)
    dumps.graph(data("x", (2, 3)), op("Cast_5", "Cast", ("x:0",), (out("_to_copy_5-aten._to_copy.default.OUTPUT.0",
                                                                         (2, 3)),)))  # fmt: skip
    dumps.ge("trans_Cast_56", "Cast", [x], [x])
    dumps.fx("_to_copy_5-aten._to_copy.default", [x], [x])
    o = dumps.compare()
    assert any("self check" in m for m in o.row("trans_Cast_56", IO.OUTPUT, 0).pair.notes)
    splitter = NameSplitter(["Cast_5", "Add_2"])
    assert splitter.partial_split("trans_Cast_56") is None and splitter.partial_split("Cast_5Foo_") is None
    assert splitter.partial_split("Add_2Cast_5") is None  # complete: not a partial split
    assert splitter.partial_split("Add_2Cast_9ConcatV2") == [("Add_2", True), ("Cast_9ConcatV2", False)]
    assert splitter.partial_split("X_1Add_2Y_3Cast_5") == [("X_1", False), ("Add_2", True), ("Y_3", False),
                                                          ("Cast_5", True)]  # fmt: skip


@pytest.mark.parametrize("op_type", ["AddN", FUSION])
def test_one_graph_name_in_an_op_name_is_a_fusion_only_for_the_ub_fusion_type(dumps, op_type):
    """`Add_2ConcatV2` holds one graph op: a fusion when its type is GE's UB fusion type, else an op of its own
    that is not in the graph (an `AddN` beside a graph `Add` is no Add + "N")."""
    x, y, added, _ = _tensors()
    dumps.graph(data("x", (2, 3)), data("y", (2, 3)), op("Add_2", "Add", ("x:0", "y:0"), (out(f"{ADD}.OUTPUT.0",
                                                                                              (2, 3)),)))  # fmt: skip
    dumps.ge("Add_2ConcatV2", op_type, [x, y], [np.concatenate([added, added], axis=-1)])
    dumps.fx(ADD, [x, y], [added])
    o = dumps.compare()
    if op_type == FUSION:
        assert [o.row("Add_2ConcatV2", IO.INPUT, k).result for k in (0, 1)] == [Result.PASS, Result.PASS]
        assert o.one_unmatched("Add_2ConcatV2", IO.OUTPUT, 0).kind is UnmatchedKind.NO_PARTNER
    else:
        assert not o.rows
        [whole] = o.target_unmatched()
        assert whole.io is None and "no graph entry" in whole.reason and "graph graph_1 nor" in whole.reason


def test_a_graph_without_a_name_is_named_by_its_file(dumps):
    x = values(2, 3)
    dumps.graph(data("x", (2, 3)), op("Neg_3", "Neg", ("x:0",), (out(f"{NEG}.OUTPUT.0", (2, 3)),)))
    dumps.target.mkdir(parents=True, exist_ok=True)
    path = write_graph(dumps.target, graph_file_name(1, 0, 4242, "20261129083000000000"), "", dumps.graph_ops)
    dumps.ge("Neg_3", "Neg", [x], [-x])
    dumps.ge("Foo_1", "Foo", [x], [x])
    dumps.fx(NEG, [x], [-x])
    result, _ = run_compare(CompareOptions(dumps.target, dumps.golden), keep_rows=True)
    [foo] = [u for u in result.ranks[0].unmatched if u.role is Role.TARGET and u.op_name == "Foo_1"]
    assert f"graph {path.name} nor" in foo.reason and "graph  " not in foo.reason
