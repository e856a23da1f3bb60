"""The GE dump reader against the synthetic writer: every dtype × device format, nano dumps, lazy reads, and a
corpus of bad inputs (each must give a typed error or a flag, never a crash or an allocation beyond the file)."""

from __future__ import annotations

import struct
import tracemalloc

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tcmp.schemas import proto
from tcmp.schemas.dtypes import DataType
from tcmp.schemas.dump_records import IO, Completeness
from tcmp.schemas.errors import DumpCorrupt, DumpError, DumpIncomplete
from tcmp.schemas.formats import Format
from tcmp.schemas.ge_dump import ge_dump_completeness, open_ge_dump, read_ge_dump
from tcmp.schemas.synth.dtype_encode import SUPPORTED_ENCODE_DTYPES
from tcmp.schemas.synth.ge_writer import TensorSpec, encode_ge_dump, encode_nano_dump, write_ge_dump

DT = DataType
TS = 1_764_400_000_000_123
INTEGER_RANGES = {
    DT.DT_INT8: (-128, 127), DT.DT_UINT8: (0, 255), DT.DT_INT16: (-(2**15), 2**15 - 1), DT.DT_UINT16: (0, 2**16 - 1),
    DT.DT_INT32: (-(2**31), 2**31 - 1), DT.DT_UINT32: (0, 2**32 - 1), DT.DT_INT64: (-(2**62), 2**62),
    DT.DT_UINT64: (0, 2**62), DT.DT_INT4: (-8, 7), DT.DT_INT2: (-2, 1), DT.DT_UINT2: (0, 3),
    DT.DT_QINT8: (-128, 127), DT.DT_QINT16: (-(2**15), 2**15 - 1), DT.DT_QINT32: (-(2**31), 2**31 - 1),
    DT.DT_QUINT8: (0, 255), DT.DT_QUINT16: (0, 2**16 - 1), DT.DT_RESOURCE: (-(2**62), 2**62),
}  # fmt: skip


def values_for(dtype: int, shape, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype in INTEGER_RANGES:
        low, high = INTEGER_RANGES[dtype]
        return rng.integers(low, high, size=shape, endpoint=True, dtype=np.int64)
    if dtype in (DT.DT_BOOL, DT.DT_UINT1):
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype in (DT.DT_COMPLEX64, DT.DT_COMPLEX128, DT.DT_COMPLEX32):
        return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    if dtype == DT.DT_FLOAT8_E8M0:
        return 2.0 ** rng.integers(-20, 20, size=shape)
    return rng.standard_normal(shape) * 3


def as_comparable(array: np.ndarray) -> np.ndarray:
    if array.dtype.kind == "c":
        return array.astype(np.complex128)
    if array.dtype.kind in "iub":
        return array.astype(np.int64)
    return array.astype(np.float64)  # ml_dtypes and numpy floats widen exactly


def assert_exact(loaded: np.ndarray, expected: np.ndarray) -> None:
    assert loaded.shape == expected.shape
    np.testing.assert_array_equal(as_comparable(loaded), as_comparable(expected))


def load_all(path):
    with open_ge_dump(path) as reader:
        return reader.dump, [reader.load(t) for t in reader.dump.tensors]


@pytest.mark.parametrize("dtype", sorted(SUPPORTED_ENCODE_DTYPES), ids=lambda d: DT(d).name)
def test_every_dtype_round_trips_nd(tmp_path, dtype):
    specs = [TensorSpec(values_for(dtype, (3, 5), seed=1), dtype), TensorSpec(values_for(dtype, (7,), seed=2), dtype)]
    written = write_ge_dump(tmp_path / f"Op.op.1.2.{TS}", "op", specs[:1], specs[1:], dump_time=TS)
    dump, loaded = load_all(written.path)
    assert [t.data_type for t in dump.tensors] == [dtype, dtype]
    for got, want in zip(loaded, written.tensors):
        assert not got.raw and not got.layout_flagged
        assert_exact(got.array, want.expected)


DEVICE_CASES = [
    (Format.FRACTAL_NZ, (40, 37), {}),
    (Format.FRACTAL_NZ, (2, 3, 17, 33), {}),
    (Format.FRACTAL_NZ, (2, 2, 2, 5, 9), {}),
    (Format.FRACTAL_NZ_C0_8, (20, 19), {"c0": 8}),
    (Format.FRACTAL_NZ_C0_32, (20, 70), {"c0": 32}),
    (Format.NC1HWC0, (2, 21, 3, 4), {}),
    (Format.NC1HWC0_C04, (2, 3, 3, 4), {"c0": 4}),
    (Format.FRACTAL_Z, (33, 21, 3, 3), {}),
    (Format.FRACTAL_Z, (40, 24), {}),
    (Format.FRACTAL_Z, (12, 5, 3, 3), {"groups": 3}),
    (Format.NDC1HWC0, (2, 19, 3, 4, 5), {}),
    (Format.FRACTAL_Z_3D, (3, 2, 2, 19, 17), {}),
]
DEVICE_DTYPES = [DT.DT_FLOAT16, DT.DT_FLOAT, DT.DT_BF16, DT.DT_INT8, DT.DT_FLOAT8_E4M3FN, DT.DT_HIFLOAT8, DT.DT_INT4]


@pytest.mark.parametrize("dtype", DEVICE_DTYPES, ids=lambda d: DT(d).name)
@pytest.mark.parametrize(("fmt", "shape", "kwargs"), DEVICE_CASES, ids=lambda c: getattr(c, "name", str(c)))
def test_device_formats_round_trip(tmp_path, fmt, shape, kwargs, dtype):
    values = values_for(dtype, shape, seed=3)
    written = write_ge_dump(
        tmp_path / f"Op.op.1.2.{TS}", "op", [TensorSpec(values, dtype, int(fmt), **kwargs)], [], dump_time=TS
    )
    dump, (loaded,) = load_all(written.path)
    tensor = dump.inputs[0]
    assert tensor.format == fmt and tensor.shape == written.inputs[0].device_shape and tensor.original_shape == shape
    assert loaded.layout_converted and not loaded.layout_flagged, loaded.notes
    assert_exact(loaded.array, written.inputs[0].expected)


def test_header_fields_and_lazy_offsets(tmp_path):
    a, b = np.arange(6.0).reshape(2, 3), np.arange(4.0)
    data, _, _ = encode_ge_dump(
        "model/layer.0/Add",
        [TensorSpec(a, DT.DT_FLOAT16), TensorSpec(b, DT.DT_FLOAT)],
        [TensorSpec(a + 1, DT.DT_FLOAT16, original_op=("Add_pre", 2))],
        dump_time=TS,
        attrs=[("k", '{"json": 1}')],
        buffers=[b"\x01" * 10],
        workspaces=[b"\x02" * 6],
    )
    path = tmp_path / f"Add.model_layer_0_Add.1.2.{TS}"
    path.write_bytes(data)
    dump = read_ge_dump(path)
    (header_length,) = struct.unpack_from("<Q", data)
    assert dump.op_name == "model/layer.0/Add" and dump.version == "2.0" and dump.dump_time == TS
    assert dump.header_length == header_length and dump.file_size == len(data)
    assert dump.buffer_sizes == (10,) and dump.workspace_sizes == (6,) and dump.attrs == (("k", '{"json": 1}'),)
    # payloads follow the header, inputs first although `output` is field 3 and `input` field 4
    first = 8 + header_length
    assert [t.offset for t in dump.tensors] == [first, first + 12, first + 12 + 16]
    assert dump.outputs[0].original_op.name == "Add_pre" and dump.outputs[0].original_op.output_index == 2
    assert data[first : first + 12] == a.astype("<f2").tobytes()


def test_big_tensor_is_a_view_of_the_map(tmp_path):
    values = np.random.default_rng(0).standard_normal((512, 1024)).astype(np.float32)  # 2 MiB: above the threshold
    written = write_ge_dump(tmp_path / f"Op.op.1.2.{TS}", "op", [], [TensorSpec(values, DT.DT_FLOAT)], dump_time=TS)
    with open_ge_dump(written.path) as reader:
        loaded = reader.load(reader.dump.outputs[0])
    assert not loaded.array.flags.owndata and not loaded.array.flags.writeable  # zero-copy, read-only map
    np.testing.assert_array_equal(loaded.array, values)  # still valid after close()


def test_nano_dump_round_trip(tmp_path):
    a = np.random.default_rng(1).standard_normal((4, 6))
    data, ins, outs = encode_nano_dump(
        [TensorSpec(a, DT.DT_FLOAT16)], [TensorSpec(a, DT.DT_BF16, original_op=("x", 1))]
    )
    path = tmp_path / f"Add.add.1.2.{TS}"
    path.write_bytes(data)
    dump, loaded = load_all(path)
    assert dump.nano and [t.data_type for t in dump.tensors] == [DT.DT_FLOAT16, DT.DT_BF16]
    assert dump.outputs[0].original_op.name == "x" and dump.outputs[0].original_op.output_index == 1
    for got, want in zip(loaded, ins + outs):
        assert_exact(got.array, want.expected)


@pytest.mark.parametrize("nano", [False, True], ids=["big dump", "nano"])
def test_header_longer_than_the_first_read(tmp_path, nano):
    """A header of tens of KB (long attrs, hundreds of tensors) is read whole, however much the first read took."""
    values = [np.full((3,), i, dtype=np.float32) for i in range(400)]
    specs = [TensorSpec(v, DT.DT_FLOAT) for v in values]
    if nano:
        data, _, _ = encode_nano_dump(specs, [])
    else:
        data, _, _ = encode_ge_dump("op", specs, [], dump_time=TS, attrs=[("graph", "x" * 40_000)])
    (header_length,) = struct.unpack_from("<Q", data)
    assert header_length > 16 << 10  # beyond what the reader takes in its first read
    path = tmp_path / f"Op.op.1.2.{TS}"
    path.write_bytes(data)
    dump, loaded = load_all(path)
    assert dump.nano is nano and dump.header_length == header_length and len(dump.inputs) == 400
    if not nano:
        assert dump.attrs == (("graph", "x" * 40_000),)
    for got, want in zip(loaded, values):
        assert_exact(got.array, want)


def test_odd_tensor_does_not_spoil_the_file(tmp_path):
    header = proto.DumpData(version="2.0", op_name="op")
    odd = header.output.add(data_type=77, format=2, size=5)
    odd.shape.dim.append(5)
    good = header.output.add(data_type=DT.DT_INT8, format=200, size=4)  # unknown format: flat + flag
    good.shape.dim.extend([2, 2])
    good.original_shape.dim.extend([2, 2])
    blob = header.SerializeToString()
    path = tmp_path / f"Op.op.1.2.{TS}"
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + b"abcde" + bytes([1, 2, 3, 4]))
    _, (first, second) = load_all(path)
    assert first.raw and first.array.tobytes() == b"abcde" and "unknown dtype 77" in first.notes[0]
    assert second.layout_flagged and second.array.tolist() == [1, 2, 3, 4]
    assert any("layout_unconverted" in n for n in second.notes)


def test_zero_and_huge_dims(tmp_path):
    header = proto.DumpData(version="2.0", op_name="op")
    empty = header.input.add(data_type=DT.DT_FLOAT16, format=2, size=0)
    empty.shape.dim.extend([3, 0])
    huge = header.input.add(data_type=DT.DT_FLOAT, format=2, size=8)
    huge.shape.dim.extend([2**40, 2**40])
    blob = header.SerializeToString()
    path = tmp_path / f"Op.op.1.2.{TS}"
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + b"\0" * 8)
    tracemalloc.start()
    _, (zero, big) = load_all(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert zero.array.shape == (3, 0) and not zero.raw
    assert big.raw and big.array.size == 8 and "needs" in big.notes[0]
    assert peak < 1 << 20


def _sample_file(tmp_path):
    data, _, _ = encode_ge_dump(
        "op",
        [TensorSpec(np.ones((4, 4)), DT.DT_FLOAT16), TensorSpec(np.ones(3), DT.DT_FLOAT)],
        [TensorSpec(np.ones((2, 8)), DT.DT_FLOAT16)],
        dump_time=TS,
        buffers=[b"\x07" * 5],
        workspaces=[b"\x08" * 3],
    )
    return data


def test_truncation_at_every_region_boundary(tmp_path):
    data = _sample_file(tmp_path)
    (length,) = struct.unpack_from("<Q", data)
    boundaries = {0, 1, 7, 8, 9, 8 + length - 1, 8 + length}
    offset = 8 + length
    for size in (32, 12, 32, 5, 3):  # inputs, outputs, buffer, workspace
        boundaries |= {offset + 1, offset + size - 1, offset + size}
        offset += size
    assert offset == len(data)
    io_end = len(data) - 5 - 3
    # cut where the buffer and workspace, or the workspace alone, would end had the writer skipped them (device
    # address 0, which their headers cannot show): taken for complete, by the rule ge_dump's docstring explains
    skipped = {io_end, io_end + 5}
    for cut in sorted(b for b in boundaries if b < len(data)):
        path = tmp_path / f"cut_{cut}"
        path.write_bytes(data[:cut])
        if cut in skipped:
            assert ge_dump_completeness(path) == (Completeness.COMPLETE, ""), cut
            continue
        with pytest.raises(DumpIncomplete) as info:
            read_ge_dump(path)
        assert info.value.message and ge_dump_completeness(path)[0] is Completeness.INCOMPLETE, cut
    path = tmp_path / "whole"
    path.write_bytes(data)
    assert ge_dump_completeness(path) == (Completeness.COMPLETE, "")


def test_trailing_bytes_are_corrupt(tmp_path):
    path = tmp_path / "longer"
    path.write_bytes(_sample_file(tmp_path) + b"\0")
    with pytest.raises(DumpCorrupt, match="1 more than its header accounts for"):
        read_ge_dump(path)


def test_header_length_larger_than_the_file(tmp_path):
    blob = struct.pack("<Q", 5000) + b"\0" * 100
    (tmp_path / "a").write_bytes(blob)
    with pytest.raises(DumpIncomplete, match="header length 5000 exceeds"):
        read_ge_dump(tmp_path / "a")
    (tmp_path / "b").write_bytes(struct.pack("<Q", 2**63) + b"\0" * 100)
    with pytest.raises(DumpCorrupt, match="implausible"):
        read_ge_dump(tmp_path / "b")


def test_payload_sizes_that_overflow(tmp_path):
    header = proto.DumpData(version="2.0", op_name="op")
    header.input.add(data_type=1, size=2**64 - 1)
    header.input.add(data_type=1, size=2**64 - 1)
    blob = header.SerializeToString()
    (tmp_path / "x").write_bytes(struct.pack("<Q", len(blob)) + blob)
    with pytest.raises(DumpCorrupt, match="garbage"):
        read_ge_dump(tmp_path / "x")


def test_garbled_header(tmp_path):
    data = bytearray(_sample_file(tmp_path))
    data[8:30] = b"\xff" * 22
    (tmp_path / "x").write_bytes(bytes(data))
    with pytest.raises(DumpCorrupt):
        read_ge_dump(tmp_path / "x")


# What garbled (or unforeseen) headers put in a tensor's description: every dtype and format, unknown codes, and dims
# that are zero, small, C0-like, or beyond any real tensor, also side by side.
_DIMS = st.lists(st.sampled_from([0, 1, 2, 3, 5, 15, 16, 17, 32, 512, 2**31, 2**63 - 1, 2**64 - 1]), max_size=6)
_TENSORS = st.lists(
    st.tuples(
        st.one_of(st.sampled_from([int(d) for d in DataType]), st.integers(0, 2**31 - 1)),
        st.one_of(st.sampled_from([int(f) for f in Format]), st.integers(0, 2**31 - 1)),
        _DIMS,
        _DIMS,
        st.integers(0, 70000),
        st.integers(0, 4096),
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tensors=_TENSORS)
def test_any_tensor_description_loads_or_gives_a_typed_error(tmp_path, tensors):
    """Sizes that add up (so the payloads are read), descriptions that need not: every tensor comes back as an
    array, with nd and without, or the file is refused with a DumpError."""
    header = proto.DumpData(version="2.0", op_name="op")
    for data_type, fmt, shape, original, sub_format, size in tensors:
        described = header.input.add(data_type=data_type, format=fmt, sub_format=sub_format, size=size)
        described.shape.dim.extend(shape)
        described.original_shape.dim.extend(original)
    blob = header.SerializeToString()
    total = sum(t[-1] for t in tensors)
    path = tmp_path / "described"
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + (bytes(range(256)) * (total // 256 + 1))[:total])
    try:
        with open_ge_dump(path) as reader:
            for tensor in reader.dump.tensors:
                for nd in (True, False):
                    assert isinstance(reader.load(tensor, nd=nd).array, np.ndarray)
    except DumpError as exc:
        assert exc.message


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blob=st.binary(min_size=0, max_size=300), as_length_prefixed=st.booleans())
def test_random_bytes_give_typed_errors_and_small_allocations(tmp_path, blob, as_length_prefixed):
    if as_length_prefixed:
        blob = struct.pack("<Q", len(blob)) + blob
    path = tmp_path / "random"
    path.write_bytes(blob)
    tracemalloc.start()
    try:
        with open_ge_dump(path) as reader:
            for tensor in reader.dump.tensors:
                reader.load(tensor)
    except DumpError as exc:
        assert exc.message
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < len(blob) + 256 * 1024


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    dtype=st.integers(min_value=-2, max_value=80),
    fmt=st.integers(min_value=-1, max_value=300),
    dims=st.lists(st.integers(min_value=0, max_value=2**33), max_size=6),
    original=st.lists(st.integers(min_value=0, max_value=64), max_size=6),
    size=st.integers(min_value=0, max_value=64),
    sub_format=st.integers(min_value=-(2**31), max_value=2**31 - 1),
)
def test_arbitrary_header_values_never_crash(tmp_path, dtype, fmt, dims, original, size, sub_format):
    header = proto.DumpData(version="2.0", op_name="op")
    item = header.output.add(data_type=dtype, format=fmt, size=size, sub_format=sub_format)
    item.shape.dim.extend(dims)
    item.original_shape.dim.extend(original)
    blob = header.SerializeToString()
    path = tmp_path / "h"
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + bytes(range(size)))
    with open_ge_dump(path) as reader:
        loaded = reader.load(reader.dump.outputs[0])
    if loaded.raw:
        assert loaded.array.dtype == np.uint8 and loaded.array.size == size
    else:
        assert loaded.array.size <= max(1, size * 8)


def test_io_enum_and_tensor_lookup(tmp_path):
    written = write_ge_dump(
        tmp_path / f"Op.op.1.2.{TS}", "op", [TensorSpec(np.ones(2), DT.DT_FLOAT)],
        [TensorSpec(np.zeros(3), DT.DT_BF16)], dump_time=TS,
    )  # fmt: skip
    dump = read_ge_dump(written.path)
    assert dump.tensor(IO.OUTPUT, 0).dtype_name == "DT_BF16" and dump.tensor(IO.INPUT, 0).numel == 2
    with open_ge_dump(written.path) as reader:
        assert reader.load(dump.outputs[0]).array.dtype == ml_dtypes.bfloat16
