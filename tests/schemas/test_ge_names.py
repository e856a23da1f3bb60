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


# CANN's documented long names: the "Data Format Requirements" page of the CANN commercial 8.5.0 accuracy-compare
# guide (msaccucmp) and MindStudio 6.0's "Dump File Naming Conventions" list
#   {op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}
#   {op_type}.{op_name_lxsliceN}.({stream_id}.){task_id}.{timestamp}.{task_type}.{context_id}.{thread_id}.{device_id}
#   {op_type}.{op_name}.({stream_id}.){task_id}.{timestamp}.{task_type}.{context_id}.{thread_id}.{device_id}
# The writer (hicann/runtime src/aicpu_sched/aicpu_schedule/core/dfx/dump_task.cpp, DumpPath) formats
#   opType << "." << opName << "." << taskId << "." << streamId << "." << nowTime
#   << "." << Task::FFTSPLUS << "." << contextId << "." << threadId << "." << deviceId
# so with the stream id the task id comes first (the writer's order wins over the page's), without it the page's
# 8-field form is the only one.
@pytest.mark.parametrize(
    ("name", "op_type", "op_name", "task", "stream", "form", "tail"),
    [
        # the writer's format string filled in by hand: taskId 12, streamId 3, FFTSPLUS 4, context 5, thread 1, dev 0
        (f"Conv2D.conv_lxslice1.12.3.{TS}.4.5.1.0", "Conv2D", "conv_lxslice1", 12, 3, GeNameForm.STANDARD,
         (4, 5, 1, 0)),
        # the documented form without the stream id, FFTS+ and another task type (1 = AICPU), device 7
        (f"Conv2D.conv_lxslice0.12.{TS}.4.5.0.7", "Conv2D", "conv_lxslice0", 12, None, GeNameForm.OLD,
         (4, 5, 0, 7)),
        (f"MatMulV2.mm.40.{TS}.1.2.3.4", "MatMulV2", "mm", 40, None, GeNameForm.OLD, (1, 2, 3, 4)),
        (f"MatMulV2.mm.40.2.{TS}.0.2.3.1", "MatMulV2", "mm", 40, 2, GeNameForm.STANDARD, (0, 2, 3, 1)),
        (f"MatMulV2.mm.40.2.{TS}.0.2.3.1.csv", "MatMulV2", "mm", 40, 2, GeNameForm.STANDARD, (0, 2, 3, 1)),
    ],
)  # fmt: skip
def test_cann_long_names(name, op_type, op_name, task, stream, form, tail):
    parsed = parse_ge_file_name(name)
    assert (parsed.op_type, parsed.op_name, parsed.task_id, parsed.stream_id) == (op_type, op_name, task, stream)
    assert parsed.timestamp == TS and parsed.form is form
    ffts = parsed.ffts
    assert (ffts.task_type, ffts.context_id, ffts.thread_id, ffts.device_id) == tail


def test_long_tail_versus_capture_rule():
    # 8 and 9 fields ending in a 16-digit timestamp, with a task type where the tail's would be: capture names
    # (op names "a.1.2" / "x.1.2.3" with dots, dumpNumber 3 / 4), not long ones with a timestamp as device id
    parsed = parse_ge_file_name(f"Add.a.1.2.3.4.5.{TS}")
    assert parsed.form is GeNameForm.CAPTURE and parsed.op_name == "a.1.2" and parsed.ffts is None
    assert (parsed.dump_number, parsed.task_id, parsed.stream_id, parsed.timestamp) == (3, 4, 5, TS)
    parsed = parse_ge_file_name(f"Add.x.1.2.3.4.5.6.{TS}")
    assert parsed.form is GeNameForm.CAPTURE and parsed.op_name == "x.1.2.3" and parsed.ffts is None
    assert (parsed.dump_number, parsed.task_id, parsed.stream_id, parsed.timestamp) == (4, 5, 6, TS)
    # task type outside runtime's Task.TaskType (5): not a long tail, so the capture reading stays
    parsed = parse_ge_file_name(f"Add.x.12.{TS}.5.5.1.0")
    assert parsed.form is GeNameForm.CAPTURE and parsed.ffts is None
    # the capture form with the FFTSPLUS literal reports task type 4 like the numeric tail
    assert parse_ge_file_name(f"Conv2D.model.conv.2.12.3.{TS}.FFTSPLUS.5.1.0").ffts.task_type == 4
