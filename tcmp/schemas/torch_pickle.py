"""The `data.pkl` of a torch.save archive, read without unpickling: which tensors it describes, nothing else.

torch.save pickles the saved object (a tensor, a list of them, a dict …) with every tensor as a call of
`torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, metadata])` (or
`_rebuild_tensor_v3(…, dtype[, metadata])` for the dtypes torch added after its typed storages: float8, uint16 …)
and every storage as a persistent id `("storage", torch.<X>Storage | torch.storage.UntypedStorage, key, location,
numel)`, the key naming the archive entry `data/{key}` that holds its bytes.

Why a walk of `pickletools.genops` rather than a `pickle.Unpickler` subclass: an Unpickler still runs the pickle
machine of CPython (REDUCE calls whatever the stack holds, BUILD calls `__setstate__`, LONG_BINPUT 0xFFFFFFFF
makes the C unpickler grow its memo to billions of slots), so its safety rests on every path through it.
genops only decodes opcodes; the stack machine here is tcmp's own and small: a GLOBAL outside the allowlist
below stops the walk at once (UnsupportedObject naming `module.name`), the allowed ones are inert stand-ins, REDUCE
"calls" only those, and a tensor comes out as a `TensorRecord` of plain numbers. Nothing is imported or called.
"""

from __future__ import annotations

import dataclasses
import enum
import pickletools
from dataclasses import dataclass
from typing import Optional

from tcmp.schemas.dtypes import DataType
from tcmp.schemas.errors import DumpCorrupt, DumpError, DumpIncomplete
from tcmp.schemas.limits import MAX_NPY_NDIM, MAX_TENSORS_PER_FILE


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

# the typed storages `_rebuild_tensor_v2` gets: their dtype is the tensor's
_TYPED_STORAGES = {
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16", "BFloat16Storage": "bfloat16",
    "CharStorage": "int8", "ShortStorage": "int16", "IntStorage": "int32", "LongStorage": "int64",
    "ByteStorage": "uint8", "BoolStorage": "bool", "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128",
}  # fmt: skip

# what torch writes for the objects tcmp does not read, for the refusal to say what it is
_KNOWN_UNSUPPORTED = {
    "torch._utils._rebuild_qtensor": "a quantized tensor",
    "torch._utils._rebuild_sparse_tensor": "a sparse tensor",
    "torch._utils._rebuild_nested_tensor": "a nested tensor",
    "torch._utils._rebuild_wrapper_subclass": "a tensor subclass",
    "torch._tensor._rebuild_from_type_v2": "a tensor subclass or a tensor with Python attributes",
    "torch._utils._rebuild_parameter_with_state": "a Parameter with Python attributes",
    "torch._utils._rebuild_meta_tensor_no_storage": "a meta tensor (no data)",
    "torch._utils._rebuild_device_tensor_from_cpu_tensor": "a tensor of a device without storage",
    **{f"torch.{name}": "a quantized tensor's storage" for name in ("QInt8Storage", "QUInt8Storage", "QInt32Storage")},
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


class _Kind(enum.Enum):
    """The allowed globals: tcmp's inert stand-ins for them."""

    REBUILD_V2 = "torch._utils._rebuild_tensor_v2"
    REBUILD_V3 = "torch._utils._rebuild_tensor_v3"
    PARAMETER = "torch._utils._rebuild_parameter"  # nn.Parameter: its tensor (requires_grad only added)
    ORDERED_DICT = "collections.OrderedDict"
    UNTYPED_STORAGE = "torch.storage.UntypedStorage"


@dataclass(frozen=True)
class _Global:
    kind: Optional[_Kind]
    dtype: Optional[TorchDtype] = None  # a typed storage's, or a dtype global's
    is_storage: bool = False


class _Mapping:
    """A dict or OrderedDict: its items in order (keys are not hashed: they are stand-ins too)."""

    def __init__(self) -> None:
        self.items: list[tuple[object, object]] = []


def _resolve(path: Optional[str], module: str, name: str) -> _Global:
    full = f"{module}.{name}"
    for kind in _Kind:
        if kind.value == full:
            return _Global(kind)
    if module == "torch" and name == "UntypedStorage":
        return _Global(_Kind.UNTYPED_STORAGE)
    if module == "torch" and name in _TYPED_STORAGES:
        return _Global(None, TORCH_DTYPES[_TYPED_STORAGES[name]], is_storage=True)
    if module == "torch" and name in TORCH_DTYPES:
        return _Global(None, TORCH_DTYPES[name])
    what = _KNOWN_UNSUPPORTED.get(full)
    if what is None and module == "torch" and name.startswith(("q", "bits", "int", "uint", "bcomplex")):
        what = "a dtype tcmp cannot read"
    raise UnsupportedObject(path, f"unsupported object: {full}" + (f" ({what})" if what else ""))


class _Walk:
    """The pickle machine on stand-ins. Refuses, naming the opcode, everything torch does not write for tensors."""

    def __init__(self, path: Optional[str]) -> None:
        self.path = path
        self.stack: list[object] = []
        self.marks: list[list[object]] = []
        self.memo: dict[int, object] = {}
        self.storages: dict[str, StorageRef] = {}
        self.tensor_count = 0

    def corrupt(self, message: str) -> TorchSaveCorrupt:
        return TorchSaveCorrupt(self.path, f"data.pkl: {message}")

    def pop_mark(self) -> list[object]:
        if not self.marks:
            raise self.corrupt("no MARK on the stack")
        items, self.stack = self.stack, self.marks.pop()
        return items

    def pop(self) -> object:
        if not self.stack:
            raise self.corrupt("stack underflow")
        return self.stack.pop()

    def run(self, data: bytes) -> object:
        try:
            for opcode, arg, _position in pickletools.genops(data):
                if opcode.name == "STOP":
                    return self.pop()
                self.step(opcode.name, arg)
        except TorchSaveError:
            raise
        except (ValueError, KeyError, IndexError, TypeError) as exc:  # genops' own errors on bad bytes, bad memo
            raise self.corrupt(f"not a pickle torch.save writes: {exc}") from exc
        raise self.corrupt("no STOP opcode")

    def step(self, name: str, arg: object) -> None:
        stack = self.stack
        if name in _LITERALS:
            stack.append(arg)
        elif name in ("PROTO", "FRAME"):
            pass
        elif name == "NONE":
            stack.append(None)
        elif name in ("NEWTRUE", "NEWFALSE"):
            stack.append(name == "NEWTRUE")
        elif name == "MARK":
            self.marks.append(stack)
            self.stack = []
        elif name == "EMPTY_TUPLE":
            stack.append(())
        elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
            count = int(name[-1])
            if len(stack) < count:
                raise self.corrupt("stack underflow")
            last = tuple(stack[-count:])
            del stack[-count:]
            stack.append(last)
        elif name == "TUPLE":
            items = self.pop_mark()
            self.stack.append(tuple(items))
        elif name == "EMPTY_LIST":
            stack.append([])
        elif name == "LIST":
            items = self.pop_mark()
            self.stack.append(items)
        elif name == "EMPTY_DICT":
            stack.append(_Mapping())
        elif name == "DICT":
            items = self.pop_mark()
            mapping = _Mapping()
            mapping.items.extend(zip(items[::2], items[1::2]))
            self.stack.append(mapping)
        elif name in ("APPEND", "APPENDS"):
            items = [self.pop()] if name == "APPEND" else self.pop_mark()
            target = self.stack[-1] if self.stack else None
            if not isinstance(target, list):
                raise self.corrupt(f"{name} to a {type(target).__name__}, not a list")
            target.extend(items)
        elif name in ("SETITEM", "SETITEMS"):
            items = [self.pop(), self.pop()][::-1] if name == "SETITEM" else self.pop_mark()
            target = self.stack[-1] if self.stack else None
            if not isinstance(target, _Mapping) or len(items) % 2:
                raise self.corrupt(f"{name} to a {type(target).__name__}, not a dict")
            target.items.extend(zip(items[::2], items[1::2]))
        elif name in ("PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE"):
            if not stack:
                raise self.corrupt("stack underflow")
            self.memo[len(self.memo) if name == "MEMOIZE" else int(arg)] = stack[-1]  # type: ignore[call-overload]
        elif name in ("GET", "BINGET", "LONG_BINGET"):
            stack.append(self.memo[int(arg)])  # type: ignore[call-overload]
        elif name == "GLOBAL":
            module, _, attr = str(arg).partition(" ")
            stack.append(_resolve(self.path, module, attr))
        elif name == "STACK_GLOBAL":
            attribute, of_module = self.pop(), self.pop()
            if not (isinstance(of_module, str) and isinstance(attribute, str)):
                raise self.corrupt("STACK_GLOBAL of a non-string")
            self.stack.append(_resolve(self.path, of_module, attribute))
        elif name == "BINPERSID":
            stack.append(self.storage(self.pop()))
        elif name == "REDUCE":
            args, func = self.pop(), self.pop()
            self.stack.append(self.call(func, args))
        elif name == "BUILD":
            self.pop()  # an OrderedDict's attributes (a state_dict's `_metadata`): of no use here
            if not (self.stack and isinstance(self.stack[-1], _Mapping)):
                raise UnsupportedObject(self.path, "unsupported object: BUILD of something other than an OrderedDict")
        elif name == "POP":
            self.pop()
        elif name == "POP_MARK":
            self.pop_mark()
        elif name == "DUP":
            if not stack:
                raise self.corrupt("stack underflow")
            stack.append(stack[-1])
        else:  # INST, OBJ, NEWOBJ, EXT*, PERSID, buffers …: torch writes none of them for tensors
            raise UnsupportedObject(self.path, f"unsupported object: pickle opcode {name}")

    def storage(self, pid: object) -> StorageRef:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise self.corrupt(f"persistent id {_short(pid)} is not a storage")
        _tag, storage_type, key, location, numel = pid
        storage_class = isinstance(storage_type, _Global) and (
            storage_type.is_storage or storage_type.kind is _Kind.UNTYPED_STORAGE
        )
        if not storage_class:
            raise self.corrupt(f"persistent id of a {_short(storage_type)}, not a storage type")
        if not (isinstance(key, str) and isinstance(location, str) and _is_count(numel)):
            raise self.corrupt(f"storage id {_short(pid)} has no string key and element count")
        ref = StorageRef(key, storage_type.dtype if storage_type.is_storage else None, numel)
        seen = self.storages.setdefault(key, ref)
        if seen != ref:
            raise self.corrupt(f"storage {key!r} named twice with different types or sizes")
        return ref

    def call(self, func: object, args: object) -> object:
        if not (isinstance(func, _Global) and func.kind is not None and isinstance(args, tuple)):
            raise UnsupportedObject(self.path, f"unsupported object: a call of {_short(func)}")
        if func.kind is _Kind.ORDERED_DICT:
            if args:
                raise UnsupportedObject(self.path, "unsupported object: OrderedDict built from arguments")
            return _Mapping()
        if func.kind is _Kind.PARAMETER:
            if not (args and isinstance(args[0], TensorRecord)):
                raise self.corrupt("_rebuild_parameter of something other than a tensor")
            return args[0]
        if func.kind is _Kind.UNTYPED_STORAGE:
            raise UnsupportedObject(self.path, "unsupported object: a call of torch.storage.UntypedStorage")
        return self.tensor(func.kind, args)

    def tensor(self, kind: _Kind, args: tuple) -> TensorRecord:
        v3 = kind is _Kind.REBUILD_V3
        fixed = 7 if v3 else 6
        if len(args) not in (fixed, fixed + 1):
            raise self.corrupt(f"{kind.value} with {len(args)} arguments")
        storage, offset, shape, stride = args[:4]
        metadata = args[fixed] if len(args) > fixed else None
        if not isinstance(storage, StorageRef):
            raise self.corrupt(f"{kind.value} of a {_short(storage)}, not a storage")
        if v3:
            dtype_global = args[6]
            if storage.dtype is not None or not (isinstance(dtype_global, _Global) and dtype_global.dtype):
                raise self.corrupt("_rebuild_tensor_v3 without an untyped storage and a dtype")
            dtype = dtype_global.dtype
        elif storage.dtype is None:
            raise self.corrupt("_rebuild_tensor_v2 of an untyped storage")
        else:
            dtype = storage.dtype
        if not (_is_count(offset) and _is_dims(shape) and _is_dims(stride) and len(shape) == len(stride)):
            raise self.corrupt(f"tensor offset {_short(offset)}, size {_short(shape)}, stride {_short(stride)}")
        if len(shape) > MAX_NPY_NDIM:
            raise TorchSaveCorrupt(self.path, f"refused: a tensor of {len(shape)} dims (limit {MAX_NPY_NDIM})")
        flags = _metadata_flags(metadata)
        if flags is None:
            raise UnsupportedObject(self.path, f"unsupported object: tensor metadata {_short(metadata)}")
        if dtype.data_type is None:
            raise UnsupportedObject(self.path, f"unsupported object: torch.{dtype.name} (GE has no data type for it)")
        self.tensor_count += 1
        if self.tensor_count > MAX_TENSORS_PER_FILE:
            raise TorchSaveCorrupt(self.path, f"refused: more than {MAX_TENSORS_PER_FILE:,} tensors in one file")
        return TensorRecord("", storage, dtype, offset, shape, stride, *flags)


_LITERALS = frozenset(
    (
        "INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4", "FLOAT", "BINFLOAT",
        "STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8",
        "BINBYTES", "SHORT_BINBYTES", "BINBYTES8",
    )
)  # fmt: skip


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_dims(value: object) -> bool:
    return isinstance(value, tuple) and all(_is_count(item) for item in value)


def _metadata_flags(metadata: object) -> Optional[tuple[bool, bool]]:
    """(conj, neg) from `get_tensor_metadata`'s dict; None for anything else in it."""
    if metadata is None:
        return False, False
    if not isinstance(metadata, _Mapping):
        return None
    flags = {"conj": False, "neg": False}
    for key, value in metadata.items:
        if key not in flags or not isinstance(value, bool):
            return None
        flags[key] = value
    return flags["conj"], flags["neg"]


def _short(value: object) -> str:
    if isinstance(value, _Global):
        return value.kind.value if value.kind else f"torch.{value.dtype.name if value.dtype else '?'}"
    text = repr(value) if isinstance(value, (int, str, tuple, type(None))) else type(value).__name__
    return text if len(text) <= 80 else text[:79] + "…"


def tensors_of(path: Optional[str], data: bytes) -> tuple[TensorRecord, ...]:
    """The tensors `data.pkl` describes, in the order the saved object holds them (a list's order, a dict's
    insertion order, depth first), each with its key. Other values (numbers, strings) are passed over."""
    root = _Walk(path).run(data)
    found: list[TensorRecord] = []
    pending: list[tuple[str, object]] = [("", root)]
    visited: set[int] = set()
    while pending:
        key, value = pending.pop()
        if isinstance(value, TensorRecord):
            found.append(dataclasses.replace(value, key=key))
            continue
        if isinstance(value, (list, tuple, _Mapping)):
            if id(value) in visited:  # a list holding itself (memo): walked once
                continue
            visited.add(id(value))
            items = value.items if isinstance(value, _Mapping) else list(enumerate(value))
            children = [(_join(key, item_key), item) for item_key, item in items]
            pending.extend(reversed(children))
    return tuple(found)


def _join(key: str, item_key: object) -> str:
    part = item_key if isinstance(item_key, str) else _short(item_key)
    return f"{key}.{part}" if key else part


__all__ = [
    "TORCH_DTYPES",
    "StorageRef",
    "TensorRecord",
    "TorchDtype",
    "TorchSaveCorrupt",
    "TorchSaveError",
    "TorchSaveIncomplete",
    "UnsupportedObject",
    "tensors_of",
]
