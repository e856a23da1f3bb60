"""The GE → FX matcher's rules for what a GE output is named after (rules 9–12, 15 of test_fx_rules.py's list):
symbolic sizes, nested and dict outputs, keyword arguments, torchair's pattern fusion, and nested outputs whose
raw file `tcmp watch --drop-raw` deleted. One hand-built dump pair each (fx_dumps.DumpPair)."""

from __future__ import annotations

from typing import Optional

import numpy as np
import pytest
from fx_dumps import F16, I64, DumpPair, by_design, data, op, out, values

from tcmp.compare.judge.verdict import Result
from tcmp.compare.records import UnmatchedKind
from tcmp.compare.rules.torchair import PATTERN_BY_FUSED
from tcmp.daemon.retention import RetentionPolicy
from tcmp.daemon.service import WatchConfig, run_watch
from tcmp.schemas.dump_records import IO

NEG = "neg-aten.neg.default"


def _name(d: DumpPair, stem: str) -> str:
    return d.fx_files[stem].name


# --- rule 9: symbolic sizes -------------------------------------------------------------------------------------


def test_sym_size_has_no_fx_file(dumps):
    """`_optimize_sym_input` computes `x.size(0)` in the graph: Shape(x) + Gather named after the sym_size node,
    which the FX dumper never writes."""
    x = values(2, 3)
    sym = "sym_size-aten.sym_size"
    dumps.graph(
        data("x", (2, 3)),
        op("index", "Const", (), (out(None, (), I64),)),
        op("Shape", "Shape", ("x:0",), (out(None, (2,), I64),)),
        op("Gather", "Gather", ("Shape:0", "index:0"), (out(f"{sym}.OUTPUT.0", (), I64),)),
        op("Neg", "Neg", ("x:0",), (out(f"{NEG}.OUTPUT.0", (2, 3)),)),
    )
    dumps.ge("Shape", "Shape", [x], [np.array([2, 3])])
    dumps.ge("Gather", "Gather", [np.array([2, 3]), np.array(0)], [np.array(2)])
    dumps.ge("Neg", "Neg", [x], [-x])
    dumps.fx(NEG, [x], [-x])
    o = dumps.compare()
    by_design(o.one_unmatched("Gather", IO.OUTPUT, 0), "sym")
    by_design(o.one_unmatched("Shape", IO.INPUT, 0), "graph input x", "sym")
    by_design(o.one_unmatched("Gather", IO.INPUT, 1), "sym")
    assert {(r.pair.op_name, r.pair.io, r.pair.index) for r in o.rows} == {("Neg", IO.INPUT, 0), ("Neg", IO.OUTPUT, 0)}
    assert all(u.kind is UnmatchedKind.BY_DESIGN for u in o.target_unmatched()) and not o.golden_unmatched()


# --- rule 10: nested outputs ------------------------------------------------------------------------------------

OP, DICT_OP, H_OP = "f-my.op.default", "g-my.dict_op.default", "h-my.op.default"


def _nested(d: DumpPair) -> dict:
    """`y, [a, b] = my.op(x)` (GE SplitV names its outputs OUTPUT.0, OUTPUT.1.0, OUTPUT.1.1; the FX dumper stacks
    the list into one OUTPUT.1 file of shape (2, 2, 3)); `my.dict_op(y)` returning {"out": …} (OUTPUT.out: the
    dumper pickles the dict); and h, whose `OUTPUT.1.2` and `OUTPUT.2.0` its FX files cannot hold (a stack of two,
    a list holding None)."""
    x = values(4, 3)
    a, b = x[:2] * 2, x[2:] * 3
    h_list = np.stack([a, b])
    d.graph(
        data("x", (4, 3)),
        op("SplitV", "SplitV", ("x:0",), (
            out(f"{OP}.OUTPUT.0", (4, 3)), out(f"{OP}.OUTPUT.1.0", (2, 3)), out(f"{OP}.OUTPUT.1.1", (2, 3)),
        )),
        op("Dict", "Abs", ("SplitV:0",), (out(f"{DICT_OP}.OUTPUT.out", (4, 3)),)),
        op("H", "SplitV", ("x:0",), (out(f"{H_OP}.OUTPUT.1.2", (2, 3)), out(f"{H_OP}.OUTPUT.2.0", (2, 3)))),
    )  # fmt: skip
    d.ge("SplitV", "SplitV", [x], [x, a, b])
    d.ge("Dict", "Abs", [x], [x])
    d.ge("H", "SplitV", [x], [a, a])
    d.fx(OP, [x], [x, np.stack([a, b])])
    d.fx(DICT_OP, [x], [np.array({"out": x}, dtype=object)])
    d.fx(H_OP, [x], [x, h_list, np.array([None, a], dtype=object)])
    return {"x": x, "a": a, "b": b}


def test_nested_outputs_paired_with_their_element_of_the_stacked_file(dumps):
    _nested(dumps)
    o = dumps.compare()
    stacked = _name(dumps, f"{OP}.OUTPUT.1")
    for j in (0, 1):
        row = o.row("SplitV", IO.OUTPUT, 1 + j)
        assert row.pair.bench.label == f"{stacked}[{j}]" and row.result is Result.PASS
        assert row.pair.bench.element == j
        assert any(f"element {j} of the stacked list output 1" in n for n in row.pair.notes)
    assert o.label("SplitV", IO.OUTPUT, 0) == _name(dumps, f"{OP}.OUTPUT.0")
    by_design(o.one_unmatched("Dict", IO.OUTPUT, 0), "dict", "pickle")
    too_short = o.one_unmatched("H", IO.OUTPUT, 0)
    by_design(too_short, "nested output h-my.op.default.OUTPUT.1.2", "of shape [2, 2, 3]", "does not hold it")
    not_stacked = o.one_unmatched("H", IO.OUTPUT, 1)
    by_design(not_stacked, "nested output h-my.op.default.OUTPUT.2.0", "not a tensor", "does not hold it")


def test_nested_outputs_from_the_index_after_drop_raw(dumps):
    """With the raw FX files deleted, the index holds a summary of each element of the stacked file: the elements
    are paired and judged as from the raw file; the top-level output is still compared, from its summary; what
    the raw file cannot hold is listed by design as before."""
    _nested(dumps)
    dumps.write_graph()
    config = WatchConfig(roots=(dumps.root,), retention=RetentionPolicy(True, 0, ()), workers=1, once=True)
    report = run_watch(config)
    assert report.error is None and report.summarized > 0
    assert not dumps.fx_files[f"{OP}.OUTPUT.1"].exists()
    o = dumps.compare()
    assert o.result.mode.value == "statistics"
    stacked = _name(dumps, f"{OP}.OUTPUT.1")
    for j in (0, 1):
        row = o.row("SplitV", IO.OUTPUT, 1 + j)
        assert row.from_index and row.pair.bench.label == f"{stacked}[{j}]" and row.result is Result.PASS
        assert any(f"element {j} of the stacked list output 1" in n for n in row.pair.notes)
        assert row.bench.shape == (2, 3)
    row = o.row("SplitV", IO.OUTPUT, 0)
    assert row.from_index and row.pair.bench.label == _name(dumps, f"{OP}.OUTPUT.0") and row.result is Result.PASS
    by_design(o.one_unmatched("H", IO.OUTPUT, 0), "nested output h-my.op.default.OUTPUT.1.2", "of shape [2, 2, 3]")


# --- rule 11: keyword arguments ---------------------------------------------------------------------------------


def test_graph_input_passed_as_a_keyword_argument(dumps):
    """`layer_norm(x, [4], weight=w, bias=b)`: the FX dumper saves positional arguments only; w and b have no file."""
    x, w, b = values(2, 4), values(4, start=1), values(4, start=-1)
    ln = "layer_norm-aten.layer_norm.default"
    dumps.graph(
        data("x", (2, 4)),
        data("w", (4,)),
        data("b", (4,)),
        op("LayerNorm", "LayerNorm", ("x:0", "w:0", "b:0"), (out(f"{ln}.OUTPUT.0", (2, 4)),)),
    )
    dumps.ge("LayerNorm", "LayerNorm", [x, w, b], [x * w + b])
    dumps.fx(ln, [x, np.array([4])], [x * w + b])
    o = dumps.compare()
    assert o.label("LayerNorm", IO.INPUT, 0) == _name(dumps, f"{ln}.INPUT.0")
    for k, name in ((1, "w"), (2, "b")):
        by_design(o.one_unmatched("LayerNorm", IO.INPUT, k), f"graph input {name}", "keyword", "[4]")
    by_design(o.golden(f"{ln}.INPUT.1"), "integer argument")


# --- rule 12: torchair's pattern fusion --------------------------------------------------------------------------

FUSED = "npu_add_rms_norm_cast_default"
FUSED_TARGET = "npu.npu_add_rms_norm_cast.default"
ANCHOR_TARGET, CAST_TARGET = "npu.npu_add_rms_norm.default", "aten._to_copy.default"


def _fused_pair(d: DumpPair, suffix: str, start: float, fused_suffix: Optional[str] = None) -> dict:
    """`y, rstd, x_out = npu_add_rms_norm(x1, x2, gamma); y.to(float32)`, fused by patterns/add_rms_norm_cast.py
    into one npu_add_rms_norm_cast node (outputs y_cast, y, rstd, x_out): its graph op and GE execution, and the
    two FX calls to write ("calls"). `fused_suffix`: the fused node's name counter, where it is not the anchor's."""
    x1, x2, gamma = values(2, 4, start=start), values(2, 4, start=start + 3), values(4, start=start + 6)
    x_out = x1 + x2
    y = (x_out * gamma).astype(np.float16)
    rstd = values(2, 1, start=start + 9)
    fused = f"{FUSED}{suffix if fused_suffix is None else fused_suffix}-{FUSED_TARGET}"
    inputs = tuple(f"{n}{suffix}:0" for n in ("x1", "x2", "gamma"))
    d.graph(
        data(f"x1{suffix}", (2, 4)),
        data(f"x2{suffix}", (2, 4)),
        data(f"gamma{suffix}", (4,)),
        op(f"AddRmsNormCast{suffix}", "AddRmsNormCast", inputs, (
            out(f"{fused}.OUTPUT.0", (2, 4)), out(f"{fused}.OUTPUT.1", (2, 4), F16),
            out(f"{fused}.OUTPUT.2", (2, 1)), out(f"{fused}.OUTPUT.3", (2, 4)),
        )),
    )  # fmt: skip
    d.ge(f"AddRmsNormCast{suffix}", "AddRmsNormCast", [x1, x2, gamma], [y.astype(np.float32), y, rstd, x_out])
    anchor = f"npu_add_rms_norm{suffix}-{ANCHOR_TARGET}"
    cast = f"_to_copy{suffix}-{CAST_TARGET}"
    calls = ((anchor, [x1, x2, gamma], [y, rstd, x_out]), (cast, [y], [y.astype(np.float32)]))
    return {"op": f"AddRmsNormCast{suffix}", "anchor": anchor, "cast": cast, "fused": fused, "calls": calls}


@pytest.mark.parametrize("interleaved", [False, True], ids=["one-after-the-other", "anchors-first"])
@pytest.mark.parametrize("torch_names", [False, True], ids=["names-in-graph-order", "names-from-the-end"])
def test_pattern_fused_outputs_come_from_the_nodes_it_replaced(dumps, interleaved, torch_names):
    """Two fused nodes, each with its own anchor and cast (other values): the n-th fused node (graph order) is the
    n-th anchor call; its cast is the one fed by that anchor's output 0 — by content when both casts come after
    both anchors (two independent branches). torch's replacement walks the graph from its end, so the fused node
    named `…_default` is the last one (`names-from-the-end`): the names do not give the order."""
    first = _fused_pair(dumps, "", 0.0, "_1" if torch_names else None)
    second = _fused_pair(dumps, "_1", 20.0, "" if torch_names else None)
    order = [0, 2, 1, 3] if interleaved else [0, 1, 2, 3]
    calls = [*first["calls"], *second["calls"]]
    for k in order:
        dumps.fx(*calls[k])
    o = dumps.compare()
    pattern = PATTERN_BY_FUSED[FUSED_TARGET]
    # the pattern's table, as add_rms_norm_cast.py returns them: (y_cast, y, rstd, x_out)
    assert [(r.target[0], r.index) for r in pattern.outputs] == [
        (CAST_TARGET, 0), (ANCHOR_TARGET, 0), (ANCHOR_TARGET, 1), (ANCHOR_TARGET, 2),
    ]  # fmt: skip
    for fused in (first, second):
        expected = [f"{fused['cast']}.OUTPUT.0"] + [f"{fused['anchor']}.OUTPUT.{i}" for i in range(3)]
        for j, stem in enumerate(expected):
            row = o.row(fused["op"], IO.OUTPUT, j)
            assert row.pair.bench.label == _name(dumps, stem) and row.result is Result.PASS, (fused["op"], j)
            assert any("pattern-fused" in n for n in row.pair.notes)
        for k in range(3):
            row = o.row(fused["op"], IO.INPUT, k)
            assert row.pair.bench.label == _name(dumps, f"{fused['anchor']}.INPUT.{k}") and row.result is Result.PASS
        by_design(o.golden(f"{fused['cast']}.INPUT.0"), "pattern fusion", f"replaced by {fused['fused']};")
    assert o.golden_names() == {f"{fused['cast']}.INPUT.0" for fused in (first, second)}
    assert not o.target_unmatched()
