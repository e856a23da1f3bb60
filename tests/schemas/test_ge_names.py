"""GE dump file names: every form of docs/formats.md, "GE file names", hashed names through mapping.csv, and junk."""

from __future__ import annotations

import pytest

from tcmp.schemas.errors import DumpCorrupt, NameParseError
from tcmp.schemas.ge_names import (
    FftsSlice,
    GeFileKind,
    GeNameForm,
    is_hashed_name,
    parse_ge_file_name,
    read_mapping,
    resolve_ge_file_name,
)

TS = 1706596912161941


@pytest.mark.parametrize(
    ("name", "op_type", "op_name", "task", "stream", "form", "kind"),
    [
        (f"Add.Add_2.44.6.{TS}", "Add", "Add_2", 44, 6, GeNameForm.STANDARD, GeFileKind.BINARY),
        (f"MatMulV2.layers_1_MatMul.3.0.{TS}", "MatMulV2", "layers_1_MatMul", 3, 0, GeNameForm.STANDARD,
         GeFileKind.BINARY),
        (f"Add.Add_2.44.6.{TS}.csv", "Add", "Add_2", 44, 6, GeNameForm.STANDARD, GeFileKind.STATS_CSV),
        (f"Add.Add_2.44.6.{TS}_min_max.npz", "Add", "Add_2", 44, 6, GeNameForm.STANDARD, GeFileKind.MIN_MAX_NPZ),
        (f"Add.Add_2.44.{TS}", "Add", "Add_2", 44, None, GeNameForm.OLD, GeFileKind.BINARY),
        # capture mode keeps dots in op names (the adump writer does not sanitize)
        (f"Add.model.layers.0.add.7.44.6.{TS}", "Add", "model.layers.0.add", 44, 6, GeNameForm.CAPTURE,
         GeFileKind.BINARY),
        (f"Add.add_1.0.44.6.{TS}", "Add", "add_1", 44, 6, GeNameForm.CAPTURE, GeFileKind.BINARY),
    ],
)  # fmt: skip
def test_forms(name, op_type, op_name, task, stream, form, kind):
    parsed = parse_ge_file_name(name)
    assert (parsed.op_type, parsed.op_name, parsed.task_id, parsed.stream_id) == (op_type, op_name, task, stream)
    assert parsed.timestamp == TS and parsed.form is form and parsed.kind is kind and parsed.ffts is None


def test_capture_mode_dump_number():
    parsed = parse_ge_file_name(f"Add.x.y.7.44.6.{TS}")
    assert parsed.dump_number == 7 and parsed.op_name == "x.y"


def test_ffts_plus_tail():
    parsed = parse_ge_file_name(f"Conv2D.conv_lxslice1.12.3.{TS}.4.5.1.0")
    assert parsed.op_name == "conv_lxslice1" and parsed.form is GeNameForm.STANDARD
    assert parsed.ffts == FftsSlice(context_id=5, thread_id=1, device_id=0)


def test_ffts_plus_capture_literal():
    parsed = parse_ge_file_name(f"Conv2D.model.conv.2.12.3.{TS}.FFTSPLUS.5.1.0")
    assert parsed.form is GeNameForm.CAPTURE and parsed.op_name == "model.conv" and parsed.ffts.thread_id == 1


def test_timestamp_length_flag():
    assert not parse_ge_file_name(f"Add.a.1.2.{TS}").timestamp_suspicious
    assert parse_ge_file_name("Add.a.1.2.123").timestamp_suspicious


@pytest.mark.parametrize(
    "name",
    ["Add", "Add.Add_2", "Add.Add_2.x.y.z", ".Add_2.1.2.3", "Add..1.2.3", "Add.Add_2.44.6.notdigits", "mapping.csv"],
)
def test_junk_names_fail_clearly(name):
    with pytest.raises(NameParseError) as info:
        parse_ge_file_name(name)
    assert name in str(info.value)


def test_hashed_names_resolve_through_mapping(tmp_path):
    long_name = "AutomaticBufferFusionOp." + "x" * 300 + f".1.2.{TS}"
    (tmp_path / "mapping.csv").write_text(f"1234567890,{long_name}\n98765,/abs/dir/Add.Add_1.1.2.{TS}\n")
    mapping = read_mapping(tmp_path)
    assert is_hashed_name("1234567890") and is_hashed_name("1234567890.csv") and not is_hashed_name("Add.a.1.2.3")
    parsed = resolve_ge_file_name("1234567890", mapping)
    assert parsed.op_type == "AutomaticBufferFusionOp" and parsed.op_name == "x" * 300
    assert parsed.hashed_as == "1234567890"
    # the appendix script / stats mode append to the hashed on-disk name
    assert resolve_ge_file_name("1234567890_min_max.npz", mapping).kind is GeFileKind.MIN_MAX_NPZ
    assert resolve_ge_file_name("98765", mapping).op_name == "Add_1"  # a path in the mapping: its file name
    with pytest.raises(NameParseError, match="no row"):
        resolve_ge_file_name("555", mapping)


def test_mapping_absent_and_malformed(tmp_path):
    assert read_mapping(tmp_path) == {}
    (tmp_path / "mapping.csv").write_text("not-a-hash,foo\n")
    with pytest.raises(DumpCorrupt, match="line 1"):
        read_mapping(tmp_path)
