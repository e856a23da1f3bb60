"""GE dump files with tensors the writer did not dump (device address 0): CANN's AICPU `OpDumpTask` skips them
(ProcessInputDump/ProcessOutputDump: `if (dataAddr == 0U) continue`, the same for buffers and workspaces) but keeps
their sizes in the header. Complete, still-being-written and corrupt files must be told apart, and every other
tensor read exactly.

Expected sizes and values are worked out here from the dtypes' item sizes and from values exactly representable in
them; the real writer's rule is replayed with plain protobuf calls on a copy of CANN's field numbers, independent of
tcmp's proto and synthetic writer."""

from __future__ import annotations

import itertools
import struct

import numpy as np
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from tcmp.schemas.dtypes import DataType
from tcmp.schemas.dump_records import IO, Completeness
from tcmp.schemas.errors import DumpCorrupt, DumpIncomplete, TensorNotDumped
from tcmp.schemas.ge_dump import ge_dump_completeness, open_ge_dump, read_ge_dump
from tcmp.schemas.synth.ge_writer import NotDumped, TensorSpec, encode_ge_dump

DT = DataType
TS = 1_764_400_000_000_123
NOT_DUMPED_TEXT = "not dumped: device address 0"

# values exact in float16 and float32: multiples of 1/8 below 2^10
X = np.arange(16, dtype=np.float64).reshape(4, 4) / 8 - 1  # fp16, 32 bytes
BIAS = np.arange(8, dtype=np.float64) / 4  # fp32, 32 bytes
Y = np.array([3.5, -2.25, 7.0])  # fp32, 12 bytes
OUT0 = np.arange(16, dtype=np.float64).reshape(2, 8) / 2  # fp16, 32 bytes
OUT1 = np.array([1.0, -1.0, 0.5, 0.125, 9.0])  # fp32, 20 bytes


def _subset_totals(sizes) -> set[int]:
    """Every total of some of `sizes` (none, some or all of them written)."""
    return {sum(c) for n in range(len(sizes) + 1) for c in itertools.combinations(sizes, n)}


def _file(skip: str):
    """An op with 3 inputs, 2 outputs, 2 buffers and 2 workspaces; `skip` says which are not dumped. Returns the
    bytes, the bytes where the header and the input/output payloads end, the buffer/workspace sizes, and the sizes
    of those written."""
    inputs = [
        TensorSpec(X, DT.DT_FLOAT16),
        TensorSpec(BIAS, DT.DT_FLOAT, dumped=skip not in ("input", "all")),
        TensorSpec(Y, DT.DT_FLOAT),
    ]
    outputs = [TensorSpec(OUT0, DT.DT_FLOAT16, dumped=skip not in ("output", "all")), TensorSpec(OUT1, DT.DT_FLOAT)]
    buffer_1 = NotDumped(24) if skip in ("buffer", "all") else b"\x03" * 24
    workspace_0 = NotDumped(13) if skip in ("workspace", "all") else b"\x04" * 13
    buffers = [b"\x01" * 40, buffer_1]
    workspaces = [workspace_0, b"\x02" * 7]
    data, _, _ = encode_ge_dump("op", inputs, outputs, dump_time=TS, buffers=buffers, workspaces=workspaces)
    (length,) = struct.unpack_from("<Q", data)
    io_bytes = 32 + (0 if skip in ("input", "all") else 32) + 12 + (0 if skip in ("output", "all") else 32) + 20
    written = [len(b) for b in (*buffers, *workspaces) if isinstance(b, bytes)]
    return data, 8 + length, 8 + length + io_bytes, (40, 24, 13, 7), written


SKIPS = ("input", "output", "buffer", "workspace", "all")


@pytest.mark.parametrize("skip", SKIPS)
def test_a_complete_file_with_tensors_not_dumped_reads_exactly(tmp_path, skip):
    data, start, io_end, _, written = _file(skip)
    assert len(data) == io_end + sum(written)  # what the writer wrote: nothing for the skipped ones
    path = tmp_path / f"Op.op.1.2.{TS}"
    path.write_bytes(data)
    assert ge_dump_completeness(path) == (Completeness.COMPLETE, "")
    with open_ge_dump(path) as reader:
        dump = reader.dump
        x, bias, y = dump.inputs
        out0, out1 = dump.outputs
        skipped = {"input": [bias], "output": [out0], "all": [bias, out0]}.get(skip, [])
        assert [t for t in dump.tensors if not t.dumped] == skipped == list(dump.not_dumped)
        assert (bias.size, out0.size) == (32, 32)  # the header keeps their sizes
        for t in dump.tensors:
            assert (t.address == 0) is (t in skipped)
        # payload offsets: a skipped tensor takes no bytes, the next one starts where it would have
        assert x.offset == start and bias.offset == start + 32
        assert y.offset == start + 32 + (0 if bias in skipped else 32)
        assert out0.offset == y.offset + 12 and out1.offset == out0.offset + (0 if out0 in skipped else 32)
        expected = {(IO.INPUT, 0): X, (IO.INPUT, 1): BIAS, (IO.INPUT, 2): Y, (IO.OUTPUT, 0): OUT0, (IO.OUTPUT, 1): OUT1}
        for t in dump.tensors:
            if t in skipped:
                with pytest.raises(TensorNotDumped, match=NOT_DUMPED_TEXT):
                    reader.load(t)
                continue
            got = reader.load(t).array
            np.testing.assert_array_equal(got.astype(np.float64), expected[(t.io, t.index)])


@pytest.mark.parametrize("skip", SKIPS)
def test_cut_and_padded_files_with_tensors_not_dumped_are_told_apart(tmp_path, skip):
    data, _, io_end, extras, _ = _file(skip)
    full = io_end + sum(extras)  # every buffer and workspace written
    totals = _subset_totals(extras)
    path = tmp_path / "f"
    seen = {Completeness.COMPLETE: 0, Completeness.INCOMPLETE: 0}
    for cut in range(len(data)):  # still being written, cut at every byte
        path.write_bytes(data[:cut])
        state, message = ge_dump_completeness(path)
        # only where the bytes after the inputs/outputs are what some buffers and workspaces add up to (the others
        # skipped) can a cut file pass for complete: the rule ge_dump's docstring explains
        want = Completeness.COMPLETE if cut >= io_end and cut - io_end in totals else Completeness.INCOMPLETE
        assert state is want, (cut, message)
        seen[state] += 1
        if state is Completeness.INCOMPLETE:
            assert "still being written" in message or "not fully written" in message or "not written yet" in message
    assert seen[Completeness.INCOMPLETE] > io_end  # every cut inside the header and the inputs/outputs
    for extra in range(1, full - len(data) + 3):  # longer than written: more buffers, or corrupt
        path.write_bytes(data + b"\0" * extra)
        state, message = ge_dump_completeness(path)
        length = len(data) + extra
        if length > full:
            assert state is Completeness.CORRUPT and f"{length - full} more than its header accounts for" in message
        elif length - io_end in totals:
            assert state is Completeness.COMPLETE
        else:
            assert state is Completeness.INCOMPLETE, extra


@pytest.mark.parametrize("skip", ["input", "output"])
def test_without_buffers_the_rule_is_exact(tmp_path, skip):
    """No buffers or workspaces (the common case): complete at exactly 8 + L + Σ dumped sizes, one byte more is
    corrupt — also the size the old rule wanted, with the skipped tensor's bytes there."""
    spec = TensorSpec(BIAS, DT.DT_FLOAT, dumped=False)
    inputs = [TensorSpec(X, DT.DT_FLOAT16), spec if skip == "input" else TensorSpec(BIAS, DT.DT_FLOAT)]
    outputs = [spec if skip == "output" else TensorSpec(BIAS, DT.DT_FLOAT), TensorSpec(Y, DT.DT_FLOAT)]
    data, _, _ = encode_ge_dump("op", inputs, outputs, dump_time=TS)
    (length,) = struct.unpack_from("<Q", data)
    assert len(data) == 8 + length + 32 + 32 + 12
    path = tmp_path / "f"
    path.write_bytes(data)
    assert ge_dump_completeness(path)[0] is Completeness.COMPLETE
    for cut in range(len(data)):
        path.write_bytes(data[:cut])
        assert ge_dump_completeness(path)[0] is Completeness.INCOMPLETE, cut
    for extra in (1, 32):  # 32: the skipped tensor's bytes, as a writer without the skip would add them
        path.write_bytes(data + b"\0" * extra)
        with pytest.raises(DumpCorrupt, match=f"{extra} more than its header accounts for"):
            read_ge_dump(path)


def test_a_header_without_any_address_keeps_the_old_rule(tmp_path):
    """Older writers fill no address: every payload is in the file. proto3 cannot tell such a header from one whose
    every input and output has address 0, so a file of that kind needs all payloads too (documented limitation)."""
    specs = [TensorSpec(X, DT.DT_FLOAT16), TensorSpec(Y, DT.DT_FLOAT)]
    data, _, _ = encode_ge_dump("op", specs[:1], specs[1:], dump_time=TS, addresses=False)
    path = tmp_path / "old"
    path.write_bytes(data)
    dump = read_ge_dump(path)
    assert all(t.dumped and t.address == 0 for t in dump.tensors)
    path.write_bytes(data[:-1])
    with pytest.raises(DumpIncomplete):
        read_ge_dump(path)
    nothing = [TensorSpec(X, DT.DT_FLOAT16, dumped=False), TensorSpec(Y, DT.DT_FLOAT, dumped=False)]
    data, _, _ = encode_ge_dump("op", nothing[:1], nothing[1:], dump_time=TS)
    path.write_bytes(data)
    assert ge_dump_completeness(path)[0] is Completeness.INCOMPLETE


def test_the_synthetic_writer_records_realistic_addresses(tmp_path):
    specs = [TensorSpec(X, DT.DT_FLOAT16), TensorSpec(BIAS, DT.DT_FLOAT, dumped=False), TensorSpec(Y, DT.DT_FLOAT)]
    data, written_in, written_out = encode_ge_dump("op", specs[:2], specs[2:], dump_time=TS)
    path = tmp_path / "f"
    path.write_bytes(data)
    dump = read_ge_dump(path)
    addresses = [t.address for t in dump.tensors]
    assert addresses == [w.address for w in (*written_in, *written_out)]
    assert addresses[1] == 0 and all(a > 1 << 40 and a % 512 == 0 for a in (addresses[0], addresses[2]))
    assert addresses[2] >= addresses[0] + 32  # distinct blocks


# --- the real writer's rule, replayed -------------------------------------------------------------------------


def _cann_messages():
    """The message classes of CANN's aicpu `dump_data.proto` (hicann/runtime src/aicpu_sched/aicpu_schedule/proto),
    built here field by field with their enums, as the writer compiles them."""
    f = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="tcmp_test_cann_dump_data.proto", package="cann_test.dumpdata")
    file.syntax = "proto3"
    for name, values in (
        ("OutputDataType", [("DT_UNDEFINED", 0), ("DT_FLOAT", 1), ("DT_FLOAT16", 2)]),
        ("OutputFormat", [("FORMAT_NCHW", 0), ("FORMAT_NHWC", 1), ("FORMAT_ND", 2)]),
        ("BufferType", [("L1", 0)]),
    ):
        enum = file.enum_type.add(name=name)
        for value_name, number in values:
            enum.value.add(name=value_name, number=number)

    def message(name, fields):
        described = file.message_type.add(name=name)
        for field_name, number, kind, type_name, repeated in fields:
            field = described.field.add(name=field_name, number=number, type=kind)
            field.label = f.LABEL_REPEATED if repeated else f.LABEL_OPTIONAL
            if type_name:
                field.type_name = f".cann_test.dumpdata.{type_name}"
        return described

    enum_, msg, u64 = f.TYPE_ENUM, f.TYPE_MESSAGE, f.TYPE_UINT64
    message("Shape", [("dim", 1, u64, None, True)])
    message("OpInput", [
        ("data_type", 1, enum_, "OutputDataType", False), ("format", 2, enum_, "OutputFormat", False),
        ("shape", 3, msg, "Shape", False), ("data", 4, f.TYPE_BYTES, None, False), ("size", 5, u64, None, False),
        ("original_shape", 6, msg, "Shape", False), ("sub_format", 7, f.TYPE_INT32, None, False),
        ("address", 8, u64, None, False), ("offset", 9, u64, None, False),
        ("arg_index", 10, f.TYPE_UINT32, None, False), ("input_type", 11, f.TYPE_UINT32, None, False),
    ])  # fmt: skip
    message("OpOutput", [
        ("data_type", 1, enum_, "OutputDataType", False), ("format", 2, enum_, "OutputFormat", False),
        ("shape", 3, msg, "Shape", False), ("data", 5, f.TYPE_BYTES, None, False), ("size", 6, u64, None, False),
        ("original_shape", 7, msg, "Shape", False), ("sub_format", 8, f.TYPE_INT32, None, False),
        ("address", 9, u64, None, False), ("offset", 11, u64, None, False),
    ])  # fmt: skip
    message("OpBuffer", [("buffer_type", 1, enum_, "BufferType", False), ("data", 2, f.TYPE_BYTES, None, False),
                         ("size", 3, u64, None, False)])  # fmt: skip
    workspace = message("Workspace", [
        ("type", 1, enum_, "Workspace.SpaceType", False), ("data", 2, f.TYPE_BYTES, None, False),
        ("size", 3, u64, None, False),
    ])  # fmt: skip
    workspace.enum_type.add(name="SpaceType").value.add(name="LOG", number=0)
    message("DumpData", [
        ("version", 1, f.TYPE_STRING, None, False), ("dump_time", 2, u64, None, False),
        ("output", 3, msg, "OpOutput", True), ("input", 4, msg, "OpInput", True), ("buffer", 5, msg, "OpBuffer", True),
        ("op_name", 6, f.TYPE_STRING, None, False), ("space", 8, msg, "Workspace", True),
        ("dfx_message", 9, f.TYPE_STRING, None, False),
    ])  # fmt: skip
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    classes = message_factory.GetMessageClassesForFiles([file.name], pool)
    return {name.rsplit(".", 1)[1]: cls for name, cls in classes.items()}


def _as_the_aicpu_writer_does(header, buffer_addresses, workspace_addresses, payloads) -> bytes:
    """ProcessDumpTensor + DoDumpTensor: the length, the header, then each input, output, buffer and workspace with
    a nonzero size and address, in that order (the buffers' and workspaces' addresses are kept beside the header)."""
    blob = header.SerializeToString()
    out = [struct.pack("<Q", len(blob)), blob]
    for kind, items, addresses in (
        ("input", header.input, [t.address for t in header.input]),
        ("output", header.output, [t.address for t in header.output]),
        ("buffer", header.buffer, buffer_addresses),
        ("space", header.space, workspace_addresses),
    ):
        for i, (item, address) in enumerate(zip(items, addresses)):
            if item.size == 0 or address == 0:  # `if (len == 0U) continue;` ... `if (dataAddr == 0U) continue;`
                continue
            out.append(payloads[(kind, i)])
    return b"".join(out)


def test_a_file_written_by_the_aicpu_writers_rule(tmp_path):
    """A MatMul whose optional bias is not connected, and an L1 buffer and a workspace with address 0."""
    m = _cann_messages()
    x1 = (np.arange(32).reshape(4, 8) / 8).astype(np.float16)
    x2 = (np.arange(32).reshape(8, 4) / 16 - 1).astype(np.float16)
    y = (x1.astype(np.float64) @ x2.astype(np.float64)).astype(np.float16)
    header = m["DumpData"](version="2.0", dump_time=TS, op_name="layer.0/MatMul")
    for array, address in ((x1, 0x12C0_4000_0000), (x2, 0x12C0_4000_0200), (np.zeros(4, np.float16), 0)):
        item = header.input.add(data_type=2, format=2, size=array.nbytes)
        item.shape.dim.extend(array.shape)
        item.original_shape.dim.extend(array.shape)
        item.address = address  # UpdateDumpData: set_address(dataAddr), 0 for the unconnected bias
    out = header.output.add(data_type=2, format=2, size=y.nbytes, address=0x12C0_4000_0400)
    out.shape.dim.extend(y.shape)
    out.original_shape.dim.extend(y.shape)
    header.buffer.add(buffer_type=0, size=64)
    header.buffer.add(buffer_type=0, size=32)
    header.space.add(type=0, size=16)
    unset = m["OpInput"](data_type=2, format=2, size=8)
    unset.shape.dim.append(4)
    unset.original_shape.dim.append(4)
    assert header.input[2].SerializeToString() == unset.SerializeToString()  # proto3: address 0 is not on the wire
    payloads = {("input", 0): x1.tobytes(), ("input", 1): x2.tobytes(), ("output", 0): y.tobytes(),
                ("buffer", 0): b"\x5a" * 64}  # fmt: skip
    data = _as_the_aicpu_writer_does(header, [0x12C1_0000_0000, 0], [0], payloads)
    assert len(data) == 8 + header.ByteSize() + 64 + 64 + 32 + 64  # bias, buffer 1 and the workspace: no bytes
    path = tmp_path / f"MatMulV2.layer_0_MatMul.2.2.{TS}"
    path.write_bytes(data)
    assert ge_dump_completeness(path) == (Completeness.COMPLETE, "")
    with open_ge_dump(path) as reader:
        dump = reader.dump
        assert [t.dumped for t in dump.inputs] == [True, True, False] and dump.outputs[0].dumped
        assert dump.inputs[2].size == 8 and dump.buffer_sizes == (64, 32) and dump.workspace_sizes == (16,)
        for tensor, want in ((dump.inputs[0], x1), (dump.inputs[1], x2), (dump.outputs[0], y)):
            got = reader.load(tensor).array
            assert got.dtype == np.float16 and got.shape == want.shape
            np.testing.assert_array_equal(got, want)
        with pytest.raises(TensorNotDumped, match=NOT_DUMPED_TEXT):
            reader.load(dump.inputs[2])
    io_end = 8 + header.ByteSize() + 64 + 64 + 32
    for cut in (io_end - 1, io_end + 1, io_end + 63):  # in the output; in the buffer
        path.write_bytes(data[:cut])
        assert ge_dump_completeness(path)[0] is Completeness.INCOMPLETE, cut
    path.write_bytes(data + b"\0" * (32 + 16 + 1))  # more than every buffer and workspace
    assert ge_dump_completeness(path)[0] is Completeness.CORRUPT
