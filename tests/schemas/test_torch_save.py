"""The `.pt` reader against files written by real torch.save: every dtype, every layout a saved view can have,
containers, and the API's inputs (path, file object, descriptor). Expected values are torch's own tensor → numpy
conversion (bf16/float8 through their bytes, E8M0 and complex32 through torch's own widening)."""

from __future__ import annotations

import collections
import os
import zipfile

import ml_dtypes
import numpy as np
import pytest

from tcmp.schemas.dtypes import DataType
from tcmp.schemas.dump_records import Completeness
from tcmp.schemas.torch_save import (
    SavedTensor,
    UnsupportedObject,
    probe_torch_save,
    read_torch_save,
    torch_save_completeness,
)

torch = pytest.importorskip("torch")

# torch dtype name, GE code: the pairs the reader must give
DTYPES = [
    ("float32", DataType.DT_FLOAT),
    ("float64", DataType.DT_DOUBLE),
    ("float16", DataType.DT_FLOAT16),
    ("bfloat16", DataType.DT_BF16),
    ("int8", DataType.DT_INT8),
    ("int16", DataType.DT_INT16),
    ("int32", DataType.DT_INT32),
    ("int64", DataType.DT_INT64),
    ("uint8", DataType.DT_UINT8),
    ("uint16", DataType.DT_UINT16),
    ("uint32", DataType.DT_UINT32),
    ("uint64", DataType.DT_UINT64),
    ("bool", DataType.DT_BOOL),
    ("complex32", DataType.DT_COMPLEX32),
    ("complex64", DataType.DT_COMPLEX64),
    ("complex128", DataType.DT_COMPLEX128),
    ("float8_e4m3fn", DataType.DT_FLOAT8_E4M3FN),
    ("float8_e5m2", DataType.DT_FLOAT8_E5M2),
    ("float8_e8m0fnu", DataType.DT_FLOAT8_E8M0),
]


def sample(dtype_name: str, shape: tuple[int, ...] = (4, 6), seed: int = 0):
    """A tensor of `dtype_name` whose values cover the type: every byte for the 8-bit floats (NaN, inf, 0xFF),
    random bits for the integer types, normal floats otherwise."""
    generator = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, dtype_name)
    numel = int(np.prod(shape))
    if dtype_name.startswith("float8"):
        codes = torch.arange(numel, dtype=torch.int64) * 37 % 256
        return codes.to(torch.uint8).view(dtype).reshape(shape)
    if dtype is torch.bool:
        return torch.rand(shape, generator=generator) > 0.5
    if dtype.is_complex:
        parts = torch.randn((*shape, 2), generator=generator, dtype=torch.float64)
        if dtype is torch.complex32:  # view_as_complex has no float16 pairs: reinterpret them
            return parts.to(torch.float16).view(torch.complex32).reshape(shape)
        return torch.view_as_complex(parts).to(dtype)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=generator, dtype=torch.float64) * 100).to(dtype)
    info = torch.iinfo(dtype)
    bits = torch.randint(0, 256, (numel * info.bits // 8,), generator=generator, dtype=torch.int64)
    return bits.to(torch.uint8).view(dtype).reshape(shape)


def torch_values(tensor) -> np.ndarray:
    """torch's own view of the values as numpy, independent of tcmp's decoding."""
    name = str(tensor.dtype).removeprefix("torch.")
    if name == "bfloat16":
        return tensor.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    if name in ("float8_e4m3fn", "float8_e5m2"):
        return tensor.view(torch.uint8).numpy().view(getattr(ml_dtypes, name))
    if name == "float8_e8m0fnu":
        return tensor.float().numpy()
    if name == "complex32":
        return tensor.to(torch.complex64).numpy()
    return tensor.numpy()


def assert_same(saved: SavedTensor, tensor) -> None:
    expected = torch_values(tensor.resolve_conj().resolve_neg())
    assert saved.shape == tuple(tensor.shape)
    assert saved.values.shape == expected.shape
    assert saved.values.dtype == expected.dtype
    assert saved.torch_dtype == str(tensor.dtype).removeprefix("torch.")
    # bit-exact (NaN payloads included): compare the bytes of contiguous copies
    actual_bytes = np.ascontiguousarray(saved.values).view(np.uint8)
    expected_bytes = np.ascontiguousarray(expected).view(np.uint8)
    assert actual_bytes.tobytes() == expected_bytes.tobytes()


def save(obj, path):
    torch.save(obj, path)
    return path


@pytest.mark.parametrize(("dtype_name", "code"), DTYPES, ids=[name for name, _ in DTYPES])
def test_every_dtype_round_trips(tmp_path, dtype_name, code):
    tensor = sample(dtype_name)
    saved = read_torch_save(save(tensor, tmp_path / "t.pt"))
    assert len(saved.tensors) == 1
    (one,) = saved.tensors
    assert one.data_type == code
    assert_same(one, tensor)


@pytest.mark.parametrize("dtype_name", ["bfloat16", "float8_e4m3fn", "float8_e8m0fnu", "complex32", "bool", "uint16"])
def test_every_dtype_as_a_non_contiguous_view(tmp_path, dtype_name):
    base = sample(dtype_name, (6, 8), seed=1)
    view = base.t()[1:, ::3]
    assert not view.is_contiguous()
    (one,) = read_torch_save(save(view, tmp_path / "v.pt")).tensors
    assert_same(one, view)


LAYOUTS = {
    "transpose": lambda x: x.t(),
    "step slices": lambda x: x[::2, 1::3],
    "offset rows": lambda x: x[3:],
    "offset columns": lambda x: x[:, 1:],
    "one element": lambda x: x[2, 5],
    "expanded (stride 0)": lambda x: x[:1].expand(4, 8),
    "permuted 3-d": lambda x: x.reshape(2, 4, 8).permute(2, 0, 1)[1:, :, 2:],
    "empty rows": lambda x: x[:0],
    "empty at an offset": lambda x: x[5:5, 2:],
}


@pytest.mark.parametrize("layout", list(LAYOUTS), ids=list(LAYOUTS))
def test_views_of_a_storage(tmp_path, layout):
    base = torch.arange(64, dtype=torch.float32).reshape(8, 8) * 1.5
    view = LAYOUTS[layout](base)
    (one,) = read_torch_save(save(view, tmp_path / "v.pt")).tensors
    assert_same(one, view)


def test_zero_dim_and_empty_tensors(tmp_path):
    scalars = [torch.tensor(3.25), torch.tensor(-7, dtype=torch.int64), torch.zeros((0,)), torch.ones((2, 0, 3))]
    saved = read_torch_save(save(scalars, tmp_path / "s.pt"))
    assert [t.shape for t in saved.tensors] == [(), (), (0,), (2, 0, 3)]
    for one, tensor in zip(saved.tensors, scalars):
        assert_same(one, tensor)


def test_a_saved_list_shares_one_storage(tmp_path):
    """The tensor_list overload saves a list; views of one tensor share its storage (one data/ entry)."""
    base = torch.randn(5, 6, dtype=torch.float16)
    tensors = [base, base[1:], base.t(), base[:, 2]]
    path = save(tensors, tmp_path / "list.pt")
    with zipfile.ZipFile(path) as archive:
        assert sum("/data/" in name for name in archive.namelist()) == 1
    saved = read_torch_save(path)
    assert [t.key for t in saved.tensors] == ["0", "1", "2", "3"]
    for one, tensor in zip(saved.tensors, tensors):
        assert_same(one, tensor)


def test_dicts_and_nested_containers(tmp_path):
    """A state dict (OrderedDict with `_metadata`), and a nested dict/tuple: tensors in order, keyed by path."""
    layer = torch.nn.Linear(3, 2)
    state = layer.state_dict()
    saved = read_torch_save(save(state, tmp_path / "state.pt"))
    assert [t.key for t in saved.tensors] == ["weight", "bias"]
    for one, tensor in zip(saved.tensors, state.values()):
        assert_same(one, tensor)
    nested = {"a": (torch.ones(2), 5, "text"), "b": collections.OrderedDict(c=[torch.zeros(1, dtype=torch.int8)])}
    saved = read_torch_save(save(nested, tmp_path / "nested.pt"))
    assert [t.key for t in saved.tensors] == ["a.0", "b.c.0"]
    assert_same(saved.tensors[0], nested["a"][0])
    assert_same(saved.tensors[1], nested["b"]["c"][0])


def test_a_parameter_is_its_tensor(tmp_path):
    parameter = torch.nn.Parameter(torch.randn(3, 4))
    (one,) = read_torch_save(save(parameter, tmp_path / "p.pt")).tensors
    assert_same(one, parameter.detach())


def test_conjugate_and_negative_views(tmp_path):
    """torch saves `x.conj()` as x's data with a conj bit, `x.conj().imag` with a neg bit: applied on reading."""
    x = sample("complex64", (3, 4))
    (conjugated,) = read_torch_save(save(x.conj(), tmp_path / "c.pt")).tensors
    assert_same(conjugated, x.conj())
    negated_view = x.conj().imag
    assert negated_view.is_neg()
    (negated,) = read_torch_save(save(negated_view, tmp_path / "n.pt")).tensors
    assert_same(negated, negated_view)


def test_a_big_file_is_mapped_and_read_only(tmp_path):
    tensor = torch.randn(600, 1000)  # 2.4 MB: past the one-read threshold
    (one,) = read_torch_save(save(tensor[:, 7:], tmp_path / "big.pt")).tensors
    assert_same(one, tensor[:, 7:])
    assert not one.values.flags.writeable


def test_file_objects_and_descriptors(tmp_path):
    """The daemon hands an open descriptor (O_NOFOLLOW) or file object: read at offsets, position kept, not closed."""
    tensor = sample("bfloat16", (3, 3))
    path = save([tensor, tensor * 2], tmp_path / "f.pt")
    with open(path, "rb") as handle:
        handle.seek(5)
        saved = read_torch_save(handle)
        assert handle.tell() == 5
        assert saved.path == path
        assert [t.key for t in probe_torch_save(handle)] == ["0", "1"]
        assert torch_save_completeness(handle) == (Completeness.COMPLETE, "")
    assert_same(saved.tensors[1], tensor * 2)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        saved = read_torch_save(fd)
        os.fstat(fd)  # still open
    finally:
        os.close(fd)
    assert saved.path is None
    assert_same(saved.tensors[0], tensor)


def test_probe_gives_the_headers(tmp_path):
    tensors = [sample("float8_e5m2", (2, 3)), torch.zeros((4, 0)), torch.tensor(1, dtype=torch.uint32)]
    headers = probe_torch_save(save(tensors, tmp_path / "h.pt"))
    assert [(h.key, h.shape, h.data_type, h.torch_dtype, h.numel) for h in headers] == [
        ("0", (2, 3), DataType.DT_FLOAT8_E5M2, "float8_e5m2", 6),
        ("1", (4, 0), DataType.DT_FLOAT, "float32", 0),
        ("2", (), DataType.DT_UINT32, "uint32", 1),
    ]


def test_same_values_as_the_ge_decoding(tmp_path):
    """A `.pt` tensor and a GE payload of the same bytes decode alike (both through decode_payload)."""
    from tcmp.schemas.dtypes import decode_payload

    for name, code in DTYPES:
        tensor = sample(name, (5,), seed=3)
        (one,) = read_torch_save(save(tensor, tmp_path / f"{name}.pt")).tensors
        payload = tensor.view(torch.uint8).numpy().tobytes()
        ge = decode_payload(payload, code, 5).array
        assert np.ascontiguousarray(one.values).tobytes() == ge.tobytes(), name


@pytest.mark.parametrize("dtype_name", ["float8_e4m3fnuz", "float8_e5m2fnuz"])
def test_dtypes_ge_has_no_code_for_are_refused(tmp_path, dtype_name):
    tensor = torch.zeros(3).to(getattr(torch, dtype_name))
    with pytest.raises(UnsupportedObject, match=f"torch.{dtype_name}"):
        read_torch_save(save(tensor, tmp_path / "fnuz.pt"))
