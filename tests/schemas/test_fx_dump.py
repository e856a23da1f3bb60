"""FX dump files: names, .npy headers, completeness under truncation, and values (object arrays never unpickled)."""

from __future__ import annotations

import io
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.lib import format as npy_format

from tcmp.schemas.dump_records import IO, Completeness, TensorKind
from tcmp.schemas.errors import DumpCorrupt, DumpIncomplete, NameParseError
from tcmp.schemas.fx_dump import (
    FxFileName,
    npy_completeness,
    parse_fx_file_name,
    read_fx_value,
    read_npy_header,
)

TS = "20250301123456789012"

# ----------------------------------------------------------------------------------------------------------------
# names


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            f"mm-aten.mm.default.INPUT.0.{TS}.npy",
            FxFileName("mm", "aten.mm.default", IO.INPUT, 0, None, TS, False),
        ),
        (
            f"add_1-aten.add.Tensor.INPUT.10.{TS}.npy",
            FxFileName("add_1", "aten.add.Tensor", IO.INPUT, 10, None, TS, False),
        ),
        (
            f"add_1-aten.add.Tensor.INPUT.2.{TS}.npy",
            FxFileName("add_1", "aten.add.Tensor", IO.INPUT, 2, None, TS, False),
        ),
        (
            f"cat_12-aten.cat.default.INPUT.0.3.{TS}.npy",
            FxFileName("cat_12", "aten.cat.default", IO.INPUT, 0, 3, TS, False),
        ),
        (
            f"cat_12-aten.cat.default.INPUT.1.11.{TS}.npy",
            FxFileName("cat_12", "aten.cat.default", IO.INPUT, 1, 11, TS, False),
        ),
        (
            f"split_with_sizes_2-aten.split_with_sizes.default.OUTPUT.1.{TS}.npy",
            FxFileName("split_with_sizes_2", "aten.split_with_sizes.default", IO.OUTPUT, 1, None, TS, False),
        ),
        (
            f"npu_fused_attention_score_3-npu.npu_fused_infer_attention_score.default.OUTPUT.0.{TS}_min_max.npy",
            FxFileName(
                "npu_fused_attention_score_3",
                "npu.npu_fused_infer_attention_score.default",
                IO.OUTPUT,
                0,
                None,
                TS,
                True,
            ),
        ),
        (
            f"mm-aten.mm.default.INPUT.1.0.{TS}_min_max.npy",
            FxFileName("mm", "aten.mm.default", IO.INPUT, 1, 0, TS, True),
        ),
        # a target that itself contains ".INPUT." still splits at the last group
        (
            f"x-ns.INPUT.op.default.OUTPUT.0.{TS}.npy",
            FxFileName("x", "ns.INPUT.op.default", IO.OUTPUT, 0, None, TS, False),
        ),
        # old local-time timestamps have the same shape; any digit run is accepted
        ("add-aten.add.Tensor.OUTPUT.0.1.npy", FxFileName("add", "aten.add.Tensor", IO.OUTPUT, 0, None, "1", False)),
    ],
)
def test_parse_fx_file_name(name: str, expected: FxFileName) -> None:
    parsed = parse_fx_file_name(name)
    assert parsed == expected
    assert parsed.key == f"{expected.node}-{expected.target}"


@pytest.mark.parametrize(
    "name",
    [
        f"mm-aten.mm.default.INPUT.0.{TS}.npz",  # not .npy
        f"mm-aten.mm.default.INPUT.0.{TS}",  # no suffix
        f"mm-aten.mm.default.INPUT.{TS}.npy",  # index missing (the ts alone)
        f"mm-aten.mm.default.OUTPUT.0.1.{TS}.npy",  # outputs have no sub-index
        f"mm-aten.mm.default.INPUTS.0.{TS}.npy",
        f"mm-aten.mm.default.input.0.{TS}.npy",
        f"mm_aten.mm.default.INPUT.0.{TS}.npy",  # no '-' between node and target
        f"-aten.mm.default.INPUT.0.{TS}.npy",
        f"mm-aten.mm.default.INPUT.0.{TS}_min_max.npy.tmp",
        f"mm-aten.mm.default.INPUT.0.{TS}_max.npy",
        "Add.Add_1.2.3.1700000000000000",  # a GE dump name
        "dynamo_original_graph_1_rank_0_pid_1_ts_2.txt",
        "",
    ],
)
def test_parse_fx_file_name_rejects_junk(name: str) -> None:
    with pytest.raises(NameParseError) as info:
        parse_fx_file_name(name)
    assert "FX dump file name" in info.value.message


node_names = st.from_regex(r"[a-z_][a-z0-9_]{0,12}", fullmatch=True)
targets = st.lists(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True), min_size=1, max_size=4).map(".".join)


@settings(max_examples=200, deadline=None)
@given(
    node=node_names,
    target=targets,
    is_input=st.booleans(),
    index=st.integers(0, 300),
    sub_index=st.one_of(st.none(), st.integers(0, 300)),
    ts=st.from_regex(r"[0-9]{1,20}", fullmatch=True),
    min_max=st.booleans(),
)
def test_fx_file_name_round_trip(node, target, is_input, index, sub_index, ts, min_max) -> None:
    # forward: build the name as torchair's fx_dumper (and the appendix script) would
    if not is_input:
        sub_index = None
    position = f"INPUT.{index}" + (f".{sub_index}" if sub_index is not None else "") if is_input else f"OUTPUT.{index}"
    name = f"{node}-{target}.{position}.{ts}" + ("_min_max" if min_max else "") + ".npy"
    assert parse_fx_file_name(name) == FxFileName(
        node, target, IO.INPUT if is_input else IO.OUTPUT, index, sub_index, ts, min_max
    )


# ----------------------------------------------------------------------------------------------------------------
# headers and completeness


class _WritesMarker:
    """Unpickling this calls open(marker, "w"): a file appears iff something really unpickled the payload."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def _expected_header_fields(raw: bytes) -> tuple[int, int]:
    """(data_offset, header version major) worked out from the .npy layout by hand."""
    major = raw[6]
    if major == 1:
        (header_length,) = struct.unpack("<H", raw[8:10])
        return 10 + header_length, major
    (header_length,) = struct.unpack("<I", raw[8:12])
    return 12 + header_length, major


PLAIN_ARRAYS = {
    "float32_2d": np.arange(12, dtype=np.float32).reshape(3, 4),
    "float16_fortran": np.asfortranarray(np.arange(6, dtype=np.float16).reshape(2, 3)),
    "int64_scalar": np.array(7, dtype=np.int64),
    "bool_vector": np.array([True, False, True]),
    "unicode": np.array("hello"),
    "empty": np.zeros((0, 5), dtype=np.float32),
}


@pytest.mark.parametrize("label", sorted(PLAIN_ARRAYS))
def test_header_of_plain_arrays(tmp_path: Path, label: str) -> None:
    array = PLAIN_ARRAYS[label]
    path = tmp_path / "a.npy"
    np.save(path, array)
    raw = path.read_bytes()
    header = read_npy_header(path)
    data_offset, _ = _expected_header_fields(raw)
    assert header.dtype == array.dtype
    assert header.shape == array.shape
    assert header.fortran_order == (array.ndim > 1 and array.flags.f_contiguous and not array.flags.c_contiguous)
    assert header.data_offset == data_offset
    assert header.data_nbytes == array.size * array.itemsize
    assert npy_completeness(path) is Completeness.COMPLETE


def test_header_version_2(tmp_path: Path) -> None:
    array = np.arange(4, dtype=np.int32)
    path = tmp_path / "v2.npy"
    with open(path, "wb") as fp:
        npy_format.write_array(fp, array, version=(2, 0))
    raw = path.read_bytes()
    data_offset, major = _expected_header_fields(raw)
    assert major == 2
    header = read_npy_header(path)
    assert (header.dtype, header.shape, header.data_offset, header.data_nbytes) == (
        array.dtype,
        (4,),
        data_offset,
        16,
    )
    assert npy_completeness(path) is Completeness.COMPLETE


def _object_file_bytes(array: np.ndarray, protocol: int) -> bytes:
    """What np.save writes for an object array, with a chosen pickle protocol (numpy itself uses 3 or 4)."""
    header = npy_format.header_data_from_array_1_0(array)
    buffer = io.BytesIO()
    npy_format.write_array_header_1_0(buffer, header)
    return buffer.getvalue() + pickle.dumps(array, protocol=protocol)


TRUNCATION_CASES = {
    "float32_2d": lambda tmp: _saved(PLAIN_ARRAYS["float32_2d"], tmp),
    "unicode": lambda tmp: _saved(PLAIN_ARRAYS["unicode"], tmp),
    "int64_scalar": lambda tmp: _saved(PLAIN_ARRAYS["int64_scalar"], tmp),
    "object_none": lambda tmp: _saved(np.array(None), tmp),
    "object_list": lambda tmp: _saved(np.array([1, None, "a"], dtype=object), tmp),
    "object_none_protocol_0": lambda tmp: _object_file_bytes(np.array(None), 0),
    "object_list_protocol_2": lambda tmp: _object_file_bytes(np.array([None, 2.5], dtype=object), 2),
}


def _saved(array: np.ndarray, tmp: Path) -> bytes:
    path = tmp / "saved.npy"
    np.save(path, array, allow_pickle=True)
    return path.read_bytes()


@pytest.mark.parametrize("label", sorted(TRUNCATION_CASES))
def test_completeness_at_every_truncation_and_with_appended_bytes(tmp_path: Path, label: str) -> None:
    raw = TRUNCATION_CASES[label](tmp_path)
    data_offset, _ = _expected_header_fields(raw)
    path = tmp_path / "cut.npy"
    for cut in range(len(raw)):
        path.write_bytes(raw[:cut])
        assert npy_completeness(path) is Completeness.INCOMPLETE, (label, cut)
        with pytest.raises(DumpIncomplete):
            read_fx_value(path)
        if cut < data_offset:
            with pytest.raises(DumpIncomplete):
                read_npy_header(path)
        else:
            assert read_npy_header(path).data_offset == data_offset
    path.write_bytes(raw)
    assert npy_completeness(path) is Completeness.COMPLETE
    read_fx_value(path)
    for extra in (b"\x00", b".", b"garbage bytes" * 10):
        path.write_bytes(raw + extra)
        assert npy_completeness(path) is Completeness.CORRUPT, (label, extra)
        with pytest.raises(DumpCorrupt):
            read_fx_value(path)


def _valid_header_bytes() -> bytes:
    buffer = io.BytesIO()
    npy_format.write_array_header_1_0(buffer, {"descr": "<f4", "fortran_order": False, "shape": (2,)})
    return buffer.getvalue()


def _header_with_dict(text: str) -> bytes:
    body = text.encode("latin1")
    body += b" " * (-(10 + len(body) + 1) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(body)) + body


@pytest.mark.parametrize(
    ("label", "content"),
    [
        ("short non-npy", b"abc"),
        ("text file", b"hello world, this is not an npy file at all\n" * 3),
        ("bad magic", b"\x93NUMPX\x01\x00" + _valid_header_bytes()[8:] + b"\x00" * 8),
        ("short bad version", b"\x93NUMPY\x07"),
        ("unknown version", b"\x93NUMPY\x09\x00" + _valid_header_bytes()[8:] + b"\x00" * 8),
        ("not a dict", _header_with_dict("[1, 2, 3]") + b"\x00" * 8),
        ("bad descr", _header_with_dict("{'descr': 'zz9', 'fortran_order': False, 'shape': (2,), }") + b"\x00" * 8),
        ("missing key", _header_with_dict("{'descr': '<f4', 'shape': (2,), }") + b"\x00" * 8),
        ("negative dim", _header_with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }")),
        ("python code", _header_with_dict("__import__('os').system('true')")),
        # numpy's reader tokenizes the text: an unclosed literal raises tokenize's own error, not a ValueError
        ("unclosed dict", _header_with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (64, 512")),
    ],
)
def test_garbage_is_corrupt(tmp_path: Path, label: str, content: bytes) -> None:
    path = tmp_path / "g.npy"
    path.write_bytes(content)
    assert npy_completeness(path) is Completeness.CORRUPT, label
    with pytest.raises(DumpCorrupt):
        read_npy_header(path)
    with pytest.raises(DumpCorrupt):
        read_fx_value(path)


def test_an_unclosed_header_says_why_in_words(tmp_path: Path) -> None:
    path = tmp_path / "g.npy"
    path.write_bytes(_header_with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (64, 512"))
    with pytest.raises(DumpCorrupt) as info:
        read_fx_value(path)
    assert info.value.message.endswith("bad .npy header: EOF in multi-line statement")  # not tokenize's tuple


def test_empty_file_and_magic_prefix_are_incomplete(tmp_path: Path) -> None:
    path = tmp_path / "new.npy"
    for content in (b"", b"\x93", b"\x93NUM", b"\x93NUMPY", b"\x93NUMPY\x01"):
        path.write_bytes(content)
        assert npy_completeness(path) is Completeness.INCOMPLETE, content


def test_invalid_opcode_inside_object_payload_is_corrupt(tmp_path: Path) -> None:
    raw = _saved(np.array([None, 1], dtype=object), tmp_path)
    data_offset, _ = _expected_header_fields(raw)
    broken = bytearray(raw)
    broken[data_offset + 2] = 0xFF  # right after PROTO: 0xff is no pickle opcode
    path = tmp_path / "broken.npy"
    path.write_bytes(bytes(broken))
    assert npy_completeness(path) is Completeness.CORRUPT


# ----------------------------------------------------------------------------------------------------------------
# values


def test_small_tensor_is_read_in_one_go_and_exact(tmp_path: Path) -> None:
    array = np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 3, 4)
    path = tmp_path / f"mm-aten.mm.default.OUTPUT.0.{TS}.npy"
    np.save(path, array)
    value = read_fx_value(path)
    assert value.kind is TensorKind.TENSOR and value.text is None
    assert not isinstance(value.array, np.memmap)
    np.testing.assert_array_equal(value.array, array)


@pytest.mark.parametrize("label", sorted(PLAIN_ARRAYS))
def test_value_read_with_its_header_known_is_the_same(tmp_path: Path, label: str) -> None:
    array = PLAIN_ARRAYS[label]
    path = tmp_path / "a.npy"
    np.save(path, array)
    value = read_fx_value(path, read_npy_header(path))
    expected = np.load(path)
    assert value.kind is read_fx_value(path).kind
    assert value.array is not None and value.array.dtype == expected.dtype and value.array.shape == expected.shape
    np.testing.assert_array_equal(value.array, expected)
    assert value.array.flags.f_contiguous == expected.flags.f_contiguous


def test_header_known_then_file_cut_or_grown(tmp_path: Path) -> None:
    path = tmp_path / "a.npy"
    np.save(path, np.arange(10, dtype=np.float32))
    header = read_npy_header(path)
    raw = path.read_bytes()
    path.write_bytes(raw[:-1])  # cut after the header was read
    with pytest.raises(DumpIncomplete):
        read_fx_value(path, header)
    path.write_bytes(raw + b"\0")  # longer than the header says
    with pytest.raises(DumpCorrupt):
        read_fx_value(path, header)


def test_header_longer_than_the_first_read(tmp_path: Path) -> None:
    """A header np.save never writes (padded beyond the first read of a file) is still read, by numpy's reader."""
    array = np.arange(3, dtype=np.int16)
    body = b"{'descr': '<i2', 'fortran_order': False, 'shape': (3,), }"
    length = 8 + 2 + len(body) + 1
    padded = body + b" " * (-length % 64 + 5000 - 5000 % 64) + b"\n"
    path = tmp_path / "long.npy"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(padded).to_bytes(2, "little") + padded + array.tobytes())
    header = read_npy_header(path)
    assert (header.shape, header.dtype, header.data_offset) == ((3,), np.dtype("<i2"), 10 + len(padded))
    np.testing.assert_array_equal(read_fx_value(path).array, array)


def test_big_tensor_is_memory_mapped_and_exact(tmp_path: Path) -> None:
    array = np.random.default_rng(0).standard_normal((600, 500)).astype(np.float32)  # 1.2 MB
    path = tmp_path / f"mm-aten.mm.default.OUTPUT.0.{TS}.npy"
    np.save(path, array)
    value = read_fx_value(path)
    assert isinstance(value.array, np.memmap)
    np.testing.assert_array_equal(np.asarray(value.array), array)


def test_fortran_order_is_kept(tmp_path: Path) -> None:
    array = np.asfortranarray(np.arange(12, dtype=np.int16).reshape(3, 4))
    path = tmp_path / f"mm-aten.mm.default.OUTPUT.0.{TS}.npy"
    np.save(path, array)
    np.testing.assert_array_equal(read_fx_value(path).array, array)


def test_empty_tensor(tmp_path: Path) -> None:
    path = tmp_path / "e.npy"
    np.save(path, np.zeros((0, 3), dtype=np.float16))
    value = read_fx_value(path)
    assert value.kind is TensorKind.TENSOR
    assert value.array.shape == (0, 3) and value.array.dtype == np.float16


@pytest.mark.parametrize(
    ("python_value", "dtype"),
    [(3, np.int64), (-2.5, np.float64), (True, np.bool_), (1 + 2j, np.complex128)],
)
def test_zero_d_numeric_is_scalar(tmp_path: Path, python_value, dtype) -> None:
    path = tmp_path / "s.npy"
    np.save(path, np.array(python_value))  # torchair's _as_numpy for a non-tensor arg
    value = read_fx_value(path)
    assert value.kind is TensorKind.SCALAR
    assert value.array.shape == () and value.array.dtype == dtype
    assert value.array.item() == python_value
    assert value.text == repr(python_value)


@pytest.mark.parametrize(
    ("array", "text"),
    [
        (np.array("torch.float16"), "torch.float16"),
        (np.array(b"raw bytes"), "raw bytes"),
        (np.array(["a", "bc"]), "['a', 'bc']"),
    ],
)
def test_string_arrays(tmp_path: Path, array: np.ndarray, text: str) -> None:
    path = tmp_path / "str.npy"
    np.save(path, array)
    value = read_fx_value(path)
    assert value.kind is TensorKind.STRING
    assert value.text == text
    np.testing.assert_array_equal(np.asarray(value.array), array)


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
@pytest.mark.parametrize(
    ("array", "kind", "text"),
    [
        (np.array(None), TensorKind.NONE, "None"),
        (np.array(4, dtype=object), TensorKind.SCALAR, "4"),
        (np.array(0.25, dtype=object), TensorKind.SCALAR, "0.25"),
        (np.array(False, dtype=object), TensorKind.SCALAR, "False"),
        (np.array("axis", dtype=object), TensorKind.STRING, "axis"),
        (np.array([1, None], dtype=object), TensorKind.OBJECT, "[1, None]"),
        (np.array([None, None, None], dtype=object), TensorKind.OBJECT, "[None, None, None]"),
        (np.array({"k": (1, "v")}, dtype=object), TensorKind.OBJECT, "{'k': (1, 'v')}"),
        (np.array([[1, None], [2, "x"]], dtype=object), TensorKind.OBJECT, "shape (2, 2): [1, None, 2, 'x']"),
    ],
)
def test_object_arrays_are_described_without_unpickling(tmp_path: Path, protocol, array, kind, text) -> None:
    path = tmp_path / "o.npy"
    path.write_bytes(_object_file_bytes(array, protocol))
    assert npy_completeness(path) is Completeness.COMPLETE
    value = read_fx_value(path)
    assert (value.kind, value.text) == (kind, text)
    if kind is TensorKind.SCALAR:
        assert value.array.shape == () and value.array.item() == array.item()
    else:
        assert value.array is None


@pytest.mark.parametrize("wrap", ["scalar", "list"])
def test_malicious_pickle_is_classified_without_running_it(tmp_path: Path, wrap: str) -> None:
    marker = tmp_path / "MARKER"
    payload = _WritesMarker(marker)
    array = np.array(payload, dtype=object) if wrap == "scalar" else np.array([payload, None], dtype=object)
    path = tmp_path / f"x-aten.x.default.INPUT.1.{TS}.npy"
    np.save(path, array, allow_pickle=True)
    assert not marker.exists()

    assert npy_completeness(path) is Completeness.COMPLETE
    value = read_fx_value(path)
    assert value.kind is TensorKind.OBJECT and value.array is None
    assert "io.open(" in value.text  # the description names the call the pickle would have made
    assert not marker.exists()

    # control: the same file really is armed; a real unpickle runs the payload
    np.load(path, allow_pickle=True)
    assert marker.exists()


def test_global_reference_is_named(tmp_path: Path) -> None:
    # np.array(torch.float16) pickles as a bare global reference; numpy's own dtype class stands in for it here
    path = tmp_path / "g.npy"
    np.save(path, np.array(np.float16, dtype=object), allow_pickle=True)
    value = read_fx_value(path)
    assert value.kind is TensorKind.OBJECT
    assert value.text == "numpy.float16"


@settings(max_examples=100, deadline=None)
@given(
    dtype=st.sampled_from(["<f2", "<f4", "<f8", "<i8", "<i4", "|b1", "|u1", "<c8", "<U3", "|O"]),
    shape=st.lists(st.integers(min_value=0, max_value=5), max_size=4),
    fortran=st.booleans(),
)
def test_property_header_fast_path_agrees_with_numpy(tmp_path_factory, dtype, shape, fortran):
    import io

    from numpy.lib import format as npy_format

    array = np.zeros(shape, dtype=dtype, order="F" if fortran else "C")
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    path = tmp_path_factory.mktemp("h") / "x.npy"
    path.write_bytes(buffer.getvalue())
    buffer.seek(0)
    version = npy_format.read_magic(buffer)
    reader = npy_format.read_array_header_1_0 if version == (1, 0) else npy_format.read_array_header_2_0
    want_shape, want_fortran, want_dtype = reader(buffer)
    header = read_npy_header(path)
    assert (header.shape, header.fortran_order, header.dtype) == (tuple(want_shape), want_fortran, want_dtype)
    assert header.data_offset == buffer.tell()
