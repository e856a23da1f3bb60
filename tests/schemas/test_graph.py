"""Graph text files: names, reading (incl. the strings that broke the peer), refusals and warnings, round trip."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format

from tcmp.schemas.errors import GraphParseError
from tcmp.schemas.graph import FxTensorName, InputEdge, parse_input_edge
from tcmp.schemas.graph_names import GraphFileName, GraphKind, GraphNameForm, is_other_graph_dump, parse_graph_file_name
from tcmp.schemas.graph_reader import parse_graph_text, read_graph
from tcmp.schemas.proto import GraphDef
from tcmp.schemas.synth.graph_writer import (
    GraphOpSpec,
    OutputSpec,
    build_graph_def,
    graph_file_name,
    write_graph,
)

# GE IR DataType numbers, as in GE's ge_ir.proto (docs/formats.md, "dtypes").
DT_FLOAT, DT_FLOAT16, DT_INT32, DT_INT64, DT_BF16 = 1, 2, 7, 8, 27

# Hand-written in the style of torchair's str(GraphDef), with everything that broke the peer's line parser:
# values containing ": " and " {", escaped quotes, a graph-level attr, unknown fields and an unknown enum name.
HAND_WRITTEN = r"""name: "graph_1"
input: "arg0_1"
op {
  name: "arg0_1"
  type: "Data"
  output_desc {
    name: "y"
    dtype: DT_FLOAT16
    shape {
      dim: 2
      dim: 3
    }
    layout: "ND"
  }
}
op {
  name: "Const_1: weird {"
  type: "Const"
  attr {
    key: "note"
    value {
      s: "key: value { not a block"
    }
  }
  output_desc {
    dtype: DT_INT64
    layout: "ND"
  }
}
op {
  name: "Split_1"
  type: "SplitV"
  input: "arg0_1:0"
  input: "Const_1: weird {:0"
  input: ""
  input: "Cast_0:-1"
  input: "NoOp_7:-1"
  future_scalar_field: 42
  future_block {
    nested: "x: y {"
    deeper { n: 1 }
  }
  attr {
    key: "_datadump_original_op_names"
    value {
      list {
        s: "split"
        s: "getitem_1"
      }
    }
  }
  attr {
    key: "_stack_info"
    value {
      s: "File \"model.py\", line 3, in forward: x = torch.split(y, {2}) \"quoted\""
    }
  }
  output_desc {
    name: "y0"
    dtype: DT_FLOAT16
    shape {
      dim: 1
      dim: 3
    }
    layout: "ND"
    attr {
      key: "_fx_tensor_name"
      value {
        s: "split-aten.split.Tensor.OUTPUT.0"
      }
    }
  }
  output_desc {
    name: "y1"
    dtype: DT_SOMETHING_NEW
    shape {
      dim: 1
    }
    layout: "NCHW"
  }
  output_desc {
    name: "y2"
    dtype: DT_BF16
    layout: "ND"
    attr {
      key: "_fx_tensor_name"
      value {
        s: "split-aten.split.Tensor.OUTPUT.2"
      }
    }
    attr {
      key: "_datadump_origin_name"
      value {
        s: "orig_split"
      }
    }
    attr {
      key: "_datadump_origin_output_index"
      value {
        i: 2
      }
    }
  }
}
attr {
  key: "graph_note"
  value {
    s: "graph-level: attr {"
  }
}
"""


def test_hand_written_graph_parses_every_peer_breaking_construct() -> None:
    graph = parse_graph_text(HAND_WRITTEN, "g.txt")

    assert graph.name == "graph_1"
    assert len(graph) == 3
    assert [op.name for op in graph.ops] == ["arg0_1", "Const_1: weird {", "Split_1"]
    assert [op.order for op in graph.ops] == [0, 1, 2]

    split = graph.op("Split_1")
    assert split is not None
    assert split.type == "SplitV"
    # data inputs in order; the empty slot (absent optional input) is no edge; control edges go aside
    assert split.inputs == (InputEdge("arg0_1", 0), InputEdge("Const_1: weird {", 0))
    assert split.control_inputs == ("Cast_0", "NoOp_7")
    assert split.original_op_names == ("split", "getitem_1")
    assert split.stack_info == 'File "model.py", line 3, in forward: x = torch.split(y, {2}) "quoted"'

    out0, out1, out2 = split.outputs
    assert (out0.index, out0.fx_tensor_name, out0.dtype, out0.shape, out0.layout) == (
        0,
        "split-aten.split.Tensor.OUTPUT.0",
        DT_FLOAT16,
        (1, 3),
        "ND",
    )
    # output 1: no _fx_tensor_name (inner op output), and a dtype name this proto does not know
    assert (out1.index, out1.fx_tensor_name, out1.dtype, out1.shape, out1.layout) == (1, None, None, (1,), "NCHW")
    assert (out2.index, out2.fx_tensor_name, out2.dtype, out2.shape) == (
        2,
        "split-aten.split.Tensor.OUTPUT.2",
        DT_BF16,
        (),
    )
    assert (out2.origin_name, out2.origin_output_index) == ("orig_split", 2)
    assert (out0.origin_name, out0.origin_output_index) == (None, None)
    assert out2.fx_tensor == FxTensorName("split-aten.split.Tensor", ("2",))

    data = graph.op("arg0_1")
    assert data is not None and data.inputs == () and data.control_inputs == () and data.stack_info is None
    assert data.outputs[0].dtype == DT_FLOAT16 and data.outputs[0].shape == (2, 3)
    assert graph.op("Const_1: weird {").outputs[0].dtype == DT_INT64
    assert graph.op("missing") is None
    assert any("DT_SOMETHING_NEW" in warning for warning in graph.warnings)


def test_unknown_enum_name_is_replaced_only_as_a_value_never_inside_strings() -> None:
    # The same unknown name sits inline (not on its own line), on its own line in many descs, and inside string
    # values that must come back unchanged.
    ops = "\n".join(
        f'op {{ name: "op{i}" type: "T" attr {{ key: "_stack_info" value {{ s: "dtype: DT_NEW_A" }} }}\n'
        f"  output_desc {{\n    dtype: DT_NEW_A\n  }}\n"
        f'  output_desc {{ dtype: DT_NEW_B layout: "dtype: DT_NEW_B" }}\n'
        f"  output_desc {{ dtype: DT_FLOAT }}\n}}"
        for i in range(5)
    )
    graph = parse_graph_text(ops, "g.txt")
    assert len(graph) == 5
    for op in graph.ops:
        assert [out.dtype for out in op.outputs] == [None, None, DT_FLOAT]
        assert op.outputs[1].layout == "dtype: DT_NEW_B"
        assert op.stack_info == "dtype: DT_NEW_A"
    (warning,) = graph.warnings
    assert "DT_NEW_A" in warning and "DT_NEW_B" in warning


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ('name: "g"\nop {\n  name: "a"\n  input "no colon"\n}\n', 4, 9),  # missing ':' after a scalar field
        ('op {\n  name: "a"\n  type: "T"\n', 1, 4),  # block never closed: where it was opened
        ('op {\n  name: "unterminated\n}\n', 2, 9),  # string never closed
        ("op {\n  name: 5\n}\n", 2, 3),  # an op name that is not a string
        # an attribute tcmp reads, with a value that is not a string
        (
            'op {\n  output_desc {\n    attr {\n      key: "_fx_tensor_name"\n      value { s: x }\n    }\n  }\n}\n',
            5,
            15,
        ),
        ("op {\n  output_desc: 3\n}\n", 2, 3),
    ],
)
def test_unreadable_op_structure_is_refused_with_line_and_column(tmp_path: Path, text, line, column) -> None:
    path = tmp_path / "dynamo_original_graph_1_rank_0_pid_1_ts_1.txt"
    path.write_text(text)
    with pytest.raises(GraphParseError) as info:
        read_graph(path)
    assert info.value.path == path
    assert info.value.message.startswith(f"line {line}, column {column}: "), info.value.message


@pytest.mark.parametrize(
    ("desc", "warning"),
    [
        ("dtype: 1.5", "dtype '1.5' is neither a DataType name nor a number"),
        ("dtype: 99999999999999999999999", "does not fit an enum"),
        ("dtype: DT_FROM_THE_FUTURE", "DT_FROM_THE_FUTURE"),
    ],
)
def test_a_dtype_tcmp_cannot_read_is_a_warning_and_unknown(tmp_path: Path, desc: str, warning: str) -> None:
    # protobuf refuses all three files; the dtype is only reported, so the op structure stands
    path = tmp_path / "g.txt"
    path.write_text(f'op {{\n  name: "a"\n  output_desc {{\n    {desc}\n    layout: "ND"\n  }}\n}}\n')
    graph = read_graph(path)
    (out,) = graph.op("a").outputs
    assert (out.dtype, out.layout) == (None, "ND")
    assert any(warning in note for note in graph.warnings), graph.warnings


def test_absurd_nesting_is_a_parse_error_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "deep.txt"
    path.write_text("op {\n" + "future { " * 5000 + "} " * 5000 + "\n}\n")
    with pytest.raises(GraphParseError, match="nested too deeply"):
        read_graph(path)


def _chain_specs(count: int) -> list[GraphOpSpec]:
    specs = [GraphOpSpec("arg0_1", "Data", outputs=(OutputSpec(None, DT_FLOAT16, (2, 3)),))]
    for i in range(count):
        specs.append(
            GraphOpSpec(
                name=f"Add_{i}",
                type="Add",
                inputs=(f"{specs[-1].name}:0", "arg0_1:0") + (("arg0_1:-1",) if i % 3 == 0 else ()),
                outputs=(
                    OutputSpec(f"add_{i}-aten.add.Tensor.OUTPUT.0", DT_FLOAT16, (2, 3)),
                    OutputSpec(None, DT_INT32, (i,), layout="NCHW"),
                ),
                original_op_names=(f"add_{i}",) if i % 2 else (),
                attrs=(("axes", [-1, i]), ("keep_dims", True)),
            )
        )
    return specs


def _assert_graph_matches_specs(graph, specs: list[GraphOpSpec]):
    assert len(graph) == len(specs)
    for order, (op, spec) in enumerate(zip(graph.ops, specs)):
        assert (op.order, op.name, op.type) == (order, spec.name, spec.type)
        data = [s for s in spec.inputs if not s.endswith(":-1") and s]
        control = [s[: -len(":-1")] for s in spec.inputs if s.endswith(":-1")]
        assert [f"{e.producer}:{e.index}" for e in op.inputs] == data
        assert list(op.control_inputs) == control
        assert op.original_op_names == spec.original_op_names
        assert len(op.outputs) == len(spec.outputs)
        for index, (out, out_spec) in enumerate(zip(op.outputs, spec.outputs)):
            assert (out.index, out.fx_tensor_name, out.dtype, out.shape, out.layout) == (
                index,
                out_spec.fx_tensor_name,
                out_spec.dtype,
                out_spec.shape,
                out_spec.layout,
            )


def test_round_trip_writer_to_reader(tmp_path: Path) -> None:
    specs = _chain_specs(6)
    specs.append(
        GraphOpSpec(
            "Fused_0",
            "AutomaticBufferFusionOp",
            inputs=("Add_5:0", ""),
            outputs=(
                OutputSpec("x-aten.x.default.OUTPUT.0", DT_FLOAT, (4,), origin_name="Add_5", origin_output_index=1),
            ),
            original_op_names=("Add_4", "Add_5"),
        )
    )
    name = graph_file_name(3, rank=1, pid=4242, ts="20250101120000123456", kind="optimized")
    path = write_graph(tmp_path, name, "graph_3", specs)

    assert path.name == "dynamo_optimized_graph_3_rank_1_pid_4242_ts_20250101120000123456.txt"
    text = path.read_text()
    # the file is plain protobuf text format of the GraphDef the specs describe, enums printed by name
    assert text_format.Parse(text, GraphDef()) == build_graph_def("graph_3", specs)
    assert "val_type: VT_LIST_INT" in text and "val_type: VT_LIST_STRING" in text and "dtype: DT_FLOAT16" in text

    graph = read_graph(path)
    assert graph.name == "graph_3" and graph.path == path
    _assert_graph_matches_specs(graph, specs)
    fused = graph.op("Fused_0")
    assert fused is not None
    assert (fused.outputs[0].origin_name, fused.outputs[0].origin_output_index) == ("Add_5", 1)
    assert graph.warnings == ()

    # every data input got torchair's input_desc, copied from the producer's output desc
    graph_def = build_graph_def("graph_3", specs)
    add_1 = next(op for op in graph_def.op if op.name == "Add_1")
    assert [(d.dtype, tuple(d.shape.dim)) for d in add_1.input_desc] == [(DT_FLOAT16, (2, 3))] * 2


def test_invalid_utf8_is_replaced_not_fatal(tmp_path) -> None:
    path = tmp_path / "g.txt"
    path.write_bytes(b'op {\n  name: "a"\n  type: "T\xff"\n}\n')
    graph = read_graph(path)
    assert graph.op("a").type == "T\ufffd"
    assert any("UTF-8" in warning for warning in graph.warnings)


def test_graph_def_is_the_ge_ir_message() -> None:
    # field numbers from ge_ir.proto (docs/formats.md, "Graph text structure"):
    # GraphDef.op = 6, OpDef.input = 5, OpDef.output_desc = 34
    fields = GraphDef.DESCRIPTOR.fields_by_name
    assert fields["op"].number == 6 and fields["attr"].number == 11
    op_fields = fields["op"].message_type.fields_by_name
    assert op_fields["input"].number == 5 and op_fields["output_desc"].number == 34


_NUMBERED = GraphNameForm.NUMBERED


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # since 2025-05-15 (torchair !1663): number, rank, pid, UTC timestamp
        (
            "dynamo_original_graph_1_rank_15_pid_421214_ts_20251010083825327878.txt",
            GraphFileName(GraphKind.ORIGINAL, 1, 15, 421214, "20251010083825327878", _NUMBERED),
        ),
        (
            "dynamo_optimized_graph_12_rank_0_pid_7_ts_20251010083827311204.txt",
            GraphFileName(GraphKind.OPTIMIZED, 12, 0, 7, "20251010083827311204", _NUMBERED),
        ),
        # the writer's with_timestap=False form
        ("dynamo_original_graph_4_rank_1_pid_99.txt", GraphFileName(GraphKind.ORIGINAL, 4, 1, 99, None, _NUMBERED)),
        # 2024-01-04 → 2025-05: no number, no rank (torchair 03adb9ba … 7c83726b)
        (
            "dynamo_original_graph_20240301101010123456.txt",
            GraphFileName(GraphKind.ORIGINAL, None, None, None, "20240301101010123456", GraphNameForm.KIND),
        ),
        (
            "dynamo_optimized_graph_20240301101010123456.txt",
            GraphFileName(GraphKind.OPTIMIZED, None, None, None, "20240301101010123456", GraphNameForm.KIND),
        ),
        # 2023-08 → 2024-01-04: the converted graph only
        (
            "dynamo_20231101120000123456.txt",
            GraphFileName(GraphKind.ORIGINAL, None, None, None, "20231101120000123456", GraphNameForm.DYNAMO),
        ),
        # a form torchair never wrote (an earlier spec listed it)
        ("dynamo_original_graph_3_20240301101010123456.txt", None),
        ("dynamo_original_graph_1_rank_15_pid_421214_ts_20251010083825327878.py", None),
        ("dynamo_original_graph_1_rank_15_pid_421214_ts_20251010083825327878.pbtxt", None),
        ("dynamo_original_graph_x_rank_1_pid_2_ts_3.txt", None),
        ("dynamo_original_graph_.txt", None),
        ("dynamo_fused_graph_1_rank_0_pid_1_ts_2.txt", None),
        ("xdynamo_original_graph_1_rank_0_pid_1_ts_2.txt", None),
        ("dynamo_original_graph_1_rank_0_pid_1_ts_2.txt.swp", None),
        ("dynamo_.txt", None),
        ("ge_proto_00000001_Build.txt", None),
        ("", None),
    ],
)
def test_parse_graph_file_name(name: str, expected) -> None:
    assert parse_graph_file_name(name) == expected


@pytest.mark.parametrize(
    ("name", "other"),
    [
        ("dynamo_original_graph_1_rank_15_pid_421214_ts_20251010083825327878.py", True),
        ("dynamo_optimized_graph_2_rank_0_pid_1.pbtxt", True),
        ("dynamo_original_graph_20240301101010123456.pbtxt", True),
        ("dynamo_optimized_graph_20240104101010123456.pbtxt", True),
        ("dynamo_20231101120000123456.py", True),
        ("dynamo_original_graph_1_rank_0_pid_1_ts_2.txt", False),
        ("model.py", False),
    ],
)
def test_other_graph_dump_types_are_recognised(name: str, other: bool) -> None:
    assert is_other_graph_dump(name) is other


@pytest.mark.parametrize(
    ("kind", "form", "expected"),
    [
        ("original", _NUMBERED, "dynamo_original_graph_5_rank_2_pid_31_ts_20250102030405060708.txt"),
        (GraphKind.OPTIMIZED, _NUMBERED, "dynamo_optimized_graph_5_rank_2_pid_31_ts_20250102030405060708.txt"),
        ("original", GraphNameForm.KIND, "dynamo_original_graph_20250102030405060708.txt"),
        ("optimized", GraphNameForm.KIND, "dynamo_optimized_graph_20250102030405060708.txt"),
        ("original", GraphNameForm.DYNAMO, "dynamo_20250102030405060708.txt"),
    ],
)
def test_graph_file_name_forms(kind, form, expected: str) -> None:
    name = graph_file_name(5, 2, 31, "20250102030405060708", kind, form=form)
    assert name == expected
    parsed = parse_graph_file_name(name)
    assert parsed is not None and parsed.form is form and parsed.kind is GraphKind(kind)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("add_1:0", InputEdge("add_1", 0)),
        ("add_1:12", InputEdge("add_1", 12)),
        ("x:-1", InputEdge("x", -1)),
        ("ns::op:1", InputEdge("ns::op", 1)),
        ("ns::op", InputEdge("ns::op", 0)),
        ("no_index", InputEdge("no_index", 0)),
        ("a:b", InputEdge("a:b", 0)),
        ("a:", InputEdge("a:", 0)),
    ],
)
def test_parse_input_edge(text: str, expected: InputEdge) -> None:
    assert parse_input_edge(text) == expected
    assert parse_input_edge(text).is_control == (expected.index == -1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("add_1-aten.add.Tensor.OUTPUT.0", FxTensorName("add_1-aten.add.Tensor", ("0",))),
        ("split-aten.split.Tensor.OUTPUT.12", FxTensorName("split-aten.split.Tensor", ("12",))),
        ("a-b.OUTPUT.1.OUTPUT.3", FxTensorName("a-b.OUTPUT.1", ("3",))),
        # torchair 2.14 names nested results by their path (_set_fx_tensor_names)
        ("f-my.op.default.OUTPUT.1.0", FxTensorName("f-my.op.default", ("1", "0"))),
        ("f-my.op.default.OUTPUT.out", FxTensorName("f-my.op.default", ("out",))),
        ("f-my.op.default.OUTPUT.aux.1", FxTensorName("f-my.op.default", ("aux", "1"))),
        ("add_1-aten.add.Tensor.INPUT.0", None),
        ("add_1-aten.add.Tensor.OUTPUT.", None),
        ("", None),
    ],
)
def test_fx_tensor_name(text: str, expected) -> None:
    parsed = FxTensorName.parse(text)
    assert parsed == expected
    if parsed is not None:
        assert str(parsed) == text
        head = expected.path[0]
        assert parsed.output_index == (int(head) if head.isdigit() else None)
        assert parsed.nested is (len(expected.path) > 1 or not head.isdigit())


# --- tolerance: what protobuf refuses but changes nothing tcmp reads

_CLEAN_OP = """op {
  name: "Softmax_1"
  type: "SoftmaxV2"
  input: "x:0"
  attr {
    key: "axes"
    value {
      list {
        i: -1
        val_type: VT_LIST_INT
      }
    }
  }
%s
  output_desc {
    dtype: DT_FLOAT16
    shape {
      dim: 2
    }
    attr {
      key: "_fx_tensor_name"
      value {
        s: "softmax-aten._softmax.default.OUTPUT.0"
      }
    }
  }
}
"""


_UNREAD_LIST = '  attr {\n    key: "k"\n    value {\n      list { val_type: VT_LIST_FUTURE }\n    }\n  }'


@pytest.mark.parametrize(
    "odd",
    [
        # an identifier where a number stands, in an attribute tcmp never reads
        '  attr {\n    key: "k"\n    value {\n      i: VT_LIST_INT\n    }\n  }',
        # an enum name no schema knows, in a list tcmp never reads
        _UNREAD_LIST,
        # unknown fields and blocks, a number too big for its field
        "  future_field: 7\n  future_block {\n    deeper { x: 1 }\n  }\n  id: 99999999999999999999999",
        # garbage that does not even parse as text format, inside an attribute tcmp never reads (one field per
        # line, and not)
        '  attr {\n    key: "k"\n    value {\n      s: foo bar baz\n    }\n  }',
        '  attr {\n    key: "k"\n    value { t { data: "x" data } }\n  }',
    ],
)
def test_what_protobuf_refuses_outside_the_op_structure_changes_nothing(odd: str) -> None:
    clean = parse_graph_text(_CLEAN_OP % "", "g.txt")
    with pytest.raises(text_format.ParseError):
        text_format.Parse(_CLEAN_OP % odd, GraphDef(), allow_unknown_field=True)
    tolerant = parse_graph_text(_CLEAN_OP % odd, "g.txt")
    assert tolerant.ops == clean.ops
    assert clean.warnings == ()
    (softmax,) = tolerant.ops
    assert softmax.outputs[0].fx_tensor_name == "softmax-aten._softmax.default.OUTPUT.0"


def test_unparsable_text_in_an_unread_attribute_is_at_most_a_warning_naming_it() -> None:
    """Off the one-field-per-line layout the tokenizer parses everything, and says where it skipped."""
    graph = parse_graph_text(_CLEAN_OP % '  attr { key: "k" value { t { data: "x" data } } }', "g.txt")
    (warning,) = graph.warnings
    assert "line 14, column 46" in warning and "inside fields tcmp does not read" in warning


def test_an_unterminated_string_that_swallows_braces_is_refused() -> None:
    # protobuf's tokenizer runs an unclosed string to the line's end: the braces after it are gone, and with
    # them the structure
    with pytest.raises(GraphParseError, match="never closed"):
        parse_graph_text(_CLEAN_OP % '  attr {\n    key: "k"\n    value { s: "open } }\n  }', "g.txt")


def test_every_list_value_type_is_read_by_name_and_by_number() -> None:
    names = [v.name for v in GraphDef.DESCRIPTOR.file.pool.FindEnumTypeByName(
        "tcmp.ge_ir.AttrDef.ListValue.ListValueType").values]  # fmt: skip
    assert names[0] == "VT_LIST_NONE" and names[-1] == "VT_LIST_DATA_TYPE" and len(names) == 11
    for spelled in (*names, *map(str, range(11))):
        text = _CLEAN_OP.replace("val_type: VT_LIST_INT", f"val_type: {spelled}") % ""
        text_format.Parse(text, GraphDef())  # the reference accepts every one
        (op,) = parse_graph_text(text, "g.txt").ops
        assert op.outputs[0].fx_tensor_name == "softmax-aten._softmax.default.OUTPUT.0"
