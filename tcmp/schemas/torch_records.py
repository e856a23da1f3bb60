"""What tcmp reads of a torch.save archive: its errors, torch's dtypes with their GE codes, and the storages and
tensors `data.pkl` describes (tcmp.schemas.torch_pickle makes them, tcmp.schemas.torch_save reads their data)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from tcmp.schemas.dtypes import DataType
from tcmp.schemas.errors import DumpCorrupt, DumpError, DumpIncomplete


class TorchSaveError(DumpError):
    """A torch.save file that tcmp cannot read."""


class UnsupportedObject(TorchSaveError):
    """The file holds something that is not a plain dense tensor (or a container of them): an arbitrary global,
    a quantized, sparse or nested tensor, a tensor subclass, a dtype GE has no code for. Never executed."""


class TorchSaveIncomplete(TorchSaveError, DumpIncomplete):
    """The archive is not finished (no end record yet, or cut short): the writer may still be writing it."""


class TorchSaveCorrupt(TorchSaveError, DumpCorrupt):
    """The archive can never be read: damaged, inconsistent, or pointing outside itself."""


@dataclass(frozen=True)
class TorchDtype:
    """A torch dtype as the pickle names it (`bfloat16`), its GE code (None: GE has none), its element bytes."""

    name: str
    data_type: Optional[DataType]
    itemsize: int


_DT = DataType
TORCH_DTYPES: dict[str, TorchDtype] = {
    dtype.name: dtype
    for dtype in (
        TorchDtype("float32", _DT.DT_FLOAT, 4),
        TorchDtype("float64", _DT.DT_DOUBLE, 8),
        TorchDtype("float16", _DT.DT_FLOAT16, 2),
        TorchDtype("bfloat16", _DT.DT_BF16, 2),
        TorchDtype("int8", _DT.DT_INT8, 1),
        TorchDtype("int16", _DT.DT_INT16, 2),
        TorchDtype("int32", _DT.DT_INT32, 4),
        TorchDtype("int64", _DT.DT_INT64, 8),
        TorchDtype("uint8", _DT.DT_UINT8, 1),
        TorchDtype("uint16", _DT.DT_UINT16, 2),
        TorchDtype("uint32", _DT.DT_UINT32, 4),
        TorchDtype("uint64", _DT.DT_UINT64, 8),
        TorchDtype("bool", _DT.DT_BOOL, 1),
        TorchDtype("complex32", _DT.DT_COMPLEX32, 4),
        TorchDtype("complex64", _DT.DT_COMPLEX64, 8),
        TorchDtype("complex128", _DT.DT_COMPLEX128, 16),
        TorchDtype("float8_e4m3fn", _DT.DT_FLOAT8_E4M3FN, 1),
        TorchDtype("float8_e5m2", _DT.DT_FLOAT8_E5M2, 1),
        TorchDtype("float8_e8m0fnu", _DT.DT_FLOAT8_E8M0, 1),  # 2**(b - 127), 0xFF NaN: GE's E8M0
        # torch saves these too, GE has no data type for them
        TorchDtype("float8_e4m3fnuz", None, 1),
        TorchDtype("float8_e5m2fnuz", None, 1),
        TorchDtype("float4_e2m1fn_x2", None, 1),
    )
}


@dataclass(frozen=True)
class StorageRef:
    """One storage: the archive entry `data/{key}` holds `numel` elements of `dtype` (of bytes when untyped)."""

    key: str
    dtype: Optional[TorchDtype]  # None: an UntypedStorage, bytes; the tensor names its dtype
    numel: int


@dataclass(frozen=True)
class TensorRecord:
    """One dense tensor as `data.pkl` describes it: a strided view of a storage, in elements of `dtype`."""

    key: str  # where it sits in the saved object: "" for a tensor, "0", "1" … in a list, "name" in a dict
    storage: StorageRef
    dtype: TorchDtype
    storage_offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    conj: bool  # torch's lazy conjugate / negative bits (`x.conj()` saved as such): the data is stored without them
    neg: bool
