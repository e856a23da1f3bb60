"""`tcmp parse`: a CANN-free replacement for `msprobe parse`.

Each GE dump tensor becomes `{dump file name}.{input|output}.{i}.npy` in ND layout; each tensor of an aclgraph
`.pt` (torch.save, read without torch) `{file name}.output.{i}.npy`. Dtypes numpy has no native
type for (bf16, float8, HiFloat8, E8M0, int4/int2/uint2/uint1) are written as float32, exactly widened;
undecodable payloads as their raw bytes (uint8), with a note. A tensor the writer did not dump (device address 0)
has no `.npy`: its description says `"dumped": false` and why. `--info` describes every tensor as one JSON object
without reading payloads.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Union

import numpy as np

from tcmp.schemas.acl_dump import parse_acl_file_name
from tcmp.schemas.dtypes import DataType, dtype_name, to_float32
from tcmp.schemas.dump_tree import FileKind, classify_name
from tcmp.schemas.errors import DumpError, describe
from tcmp.schemas.files import Directory, OutputExistsError, pause_for_tests
from tcmp.schemas.ge_dump import NOT_DUMPED, open_ge_dump, read_ge_dump
from tcmp.schemas.ge_header import GeDump, GeTensor
from tcmp.schemas.ge_names import parse_ge_file_name
from tcmp.schemas.torch_save import SavedObject, read_torch_save

# written as float32: numpy has no native type for them (sub-byte integers decode to int8/uint8/bool, but
# msprobe parse users expect float32 files for every packed or low-precision type)
_AS_FLOAT32 = frozenset(
    int(d)
    for d in (
        DataType.DT_BF16, DataType.DT_FLOAT8_E5M2, DataType.DT_FLOAT8_E4M3FN, DataType.DT_FLOAT8_E8M0,
        DataType.DT_HIFLOAT8, DataType.DT_INT4, DataType.DT_INT2, DataType.DT_UINT2, DataType.DT_UINT1,
    )
)  # fmt: skip


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a parsed file, as `--info` prints it."""

    file: str
    op: str
    op_type: Optional[str]
    io: str
    index: int
    dtype: str
    format: str
    device_shape: tuple[int, ...]
    shape: tuple[int, ...]
    size: int
    original_op: Optional[tuple[str, int]]
    output: Optional[str] = None  # the .npy written, when converting
    notes: tuple[str, ...] = ()
    dumped: bool = True  # False: the writer skipped it (device address 0); the file holds no data for it

    def to_json(self) -> str:
        return json.dumps(
            {
                "file": self.file,
                "op": self.op,
                "op_type": self.op_type,
                "io": self.io,
                "index": self.index,
                "dtype": self.dtype,
                "format": self.format,
                "device_shape": list(self.device_shape),
                "shape": list(self.shape),
                "size": self.size,
                "original_op": None
                if self.original_op is None
                else {"name": self.original_op[0], "output_index": self.original_op[1]},
                "output": self.output,
                "dumped": self.dumped,
                "notes": list(self.notes),
            },
            ensure_ascii=False,
        )


@dataclass(frozen=True)
class ParsedFile:
    path: Path
    tensors: tuple[TensorInfo, ...]
    error: Optional[str] = None

    @property
    def not_dumped(self) -> tuple[TensorInfo, ...]:
        return tuple(t for t in self.tensors if not t.dumped)


def _op_type(path: Path) -> Optional[str]:
    try:
        return parse_ge_file_name(path.name).op_type
    except DumpError:
        return None  # hashed or odd names: the header still has the op name


def _info(path: Path, dump: GeDump, tensor: GeTensor, output: Optional[str] = None, notes=()) -> TensorInfo:
    original = tensor.original_op
    if not tensor.dumped:
        notes = (NOT_DUMPED, *notes)
    return TensorInfo(
        file=str(path),
        op=dump.op_name,
        op_type=_op_type(path),
        io=tensor.io.value,
        index=tensor.index,
        dtype=tensor.dtype_name,
        format=tensor.format_name,
        device_shape=tensor.shape,
        shape=tensor.nd_shape,
        size=tensor.size,
        original_op=None if original is None else (original.name, original.output_index),
        output=output,
        notes=tuple(notes),
        dumped=tensor.dumped,
    )


def _storable(array: np.ndarray, data_type: int) -> np.ndarray:
    if data_type in _AS_FLOAT32:
        return to_float32(array).astype(np.float32, copy=False)
    return array


def parse_file(path: Path, output_dir: Union[Path, Directory, None] = None, force: bool = False) -> ParsedFile:
    """Describe one GE dump file (or aclgraph `.pt`) and, with `output_dir`, write its tensors as ND `.npy` files
    (through `schemas.files`: nothing followed, each file complete or absent). An existing `.npy` is replaced only
    with `force`; else OutputExistsError, before anything of this file is written."""
    path = Path(path)
    if classify_name(path.name) is FileKind.ACL_PT:
        return _parse_pt(path, output_dir, force)
    if output_dir is None:
        try:
            dump = read_ge_dump(path)
            return ParsedFile(path, tuple(_info(path, dump, t) for t in dump.tensors))
        except DumpError as exc:
            return ParsedFile(path, (), describe(exc))
        except OSError as exc:
            return ParsedFile(path, (), f"cannot read: {exc.strerror or exc}")
    if isinstance(output_dir, Directory):
        return _convert(path, output_dir, force)
    try:
        directory = Directory(Path(output_dir))
    except OSError as exc:
        return ParsedFile(path, (), f"cannot write {output_dir}: {exc.strerror or exc}")
    with directory:
        return _convert(path, directory, force)


def _convert(path: Path, output: Directory, force: bool) -> ParsedFile:
    try:
        infos = []
        with open_ge_dump(path) as reader:
            names = [f"{path.name}.{t.io.value}.{t.index}.npy" for t in reader.dump.tensors]
            existing = next((n for n, t in zip(names, reader.dump.tensors) if t.dumped and output.exists(n)), None)
            if existing is not None and not force:
                raise OutputExistsError(output.path / existing)
            for tensor, name in zip(reader.dump.tensors, names):
                if not tensor.dumped:  # nothing to write; the description says so
                    infos.append(_info(path, reader.dump, tensor))
                    continue
                loaded = reader.load(tensor)
                target = output.path / name
                array = loaded.array if loaded.raw else _storable(loaded.array, tensor.data_type)
                try:
                    _save(output, name, array, force)
                except OutputExistsError:
                    raise
                except OSError as exc:
                    return ParsedFile(path, tuple(infos), f"cannot write {target}: {exc.strerror or exc}")
                infos.append(_info(path, reader.dump, tensor, str(target), loaded.notes))
        return ParsedFile(path, tuple(infos))
    except OutputExistsError:
        raise
    except DumpError as exc:
        return ParsedFile(path, (), describe(exc))
    except OSError as exc:
        return ParsedFile(path, (), f"cannot read: {exc.strerror or exc}")


def _parse_pt(path: Path, output_dir: Union[Path, Directory, None], force: bool) -> ParsedFile:
    """`parse_file` for an aclgraph `.pt`: its tensors (one, or a saved list's) as outputs 0, 1, …"""
    try:
        saved = read_torch_save(path)
    except DumpError as exc:
        return ParsedFile(path, (), describe(exc))
    except OSError as exc:
        return ParsedFile(path, (), f"cannot read: {exc.strerror or exc}")
    try:
        node = parse_acl_file_name(path.name).node
    except DumpError:
        node = path.stem
    names = [f"{path.name}.output.{k}.npy" for k in range(len(saved.tensors))]

    def info(k: int, output: Optional[str] = None) -> TensorInfo:
        t = saved.tensors[k]
        return TensorInfo(str(path), node, None, "output", k, dtype_name(t.data_type), "ND", t.shape, t.shape,
                          t.values.nbytes, None, output)  # fmt: skip

    if output_dir is None:
        return ParsedFile(path, tuple(info(k) for k in range(len(names))))
    if isinstance(output_dir, Directory):
        return _write_pt(path, saved, names, info, output_dir, force)
    try:
        directory = Directory(Path(output_dir))
    except OSError as exc:
        return ParsedFile(path, (), f"cannot write {output_dir}: {exc.strerror or exc}")
    with directory:
        return _write_pt(path, saved, names, info, directory, force)


def _write_pt(
    path: Path, saved: SavedObject, names: list[str], info: Callable[..., TensorInfo], output: Directory, force: bool
) -> ParsedFile:
    existing = next((n for n in names if output.exists(n)), None)
    if existing is not None and not force:
        raise OutputExistsError(output.path / existing)
    infos: list[TensorInfo] = []
    for k, name in enumerate(names):
        tensor = saved.tensors[k]
        try:
            _save(output, name, _storable(np.ascontiguousarray(tensor.values), int(tensor.data_type)), force)
        except OSError as exc:
            return ParsedFile(path, tuple(infos), f"cannot write {output.path / name}: {exc.strerror or exc}")
        infos.append(info(k, str(output.path / name)))
    return ParsedFile(path, tuple(infos))


def _save(output: Directory, name: str, array: np.ndarray, force: bool) -> None:
    temporary = output.temporary()
    try:
        with temporary.binary() as out:
            np.save(out, array)
        pause_for_tests()
        temporary.publish(name, replace=force)
    except BaseException:
        temporary.discard()
        raise


def parse_dumps(paths: Iterable[Path], output_dir: Optional[Path] = None) -> Iterator[ParsedFile]:
    """`parse_file` over every GE dump file under `paths` (see `find_dump_files`)."""
    if output_dir is not None:
        Path(output_dir).mkdir(parents=True, exist_ok=True)
    for path in find_dump_files(paths):
        yield parse_file(path, output_dir)


def find_dump_files(paths: Iterable[Path]) -> Iterator[Path]:
    """The GE binary dump files and aclgraph `.pt` files among `paths` (files as given; directories walked, in name
    order)."""
    for path in paths:
        path = Path(path)
        if path.is_dir():
            for child in sorted(p for p in path.rglob("*") if p.is_file() and not p.is_symlink()):
                if classify_name(child.name) in (FileKind.GE_BINARY, FileKind.ACL_PT):
                    yield child
        else:
            yield path
