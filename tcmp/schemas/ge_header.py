"""What a GE dump header decodes to (`GeDump`, its `GeTensor`s) and the completeness rule its payload sizes are
checked by, shared by the big-dump reader (`ge_dump`, whose docstring gives the rule) and the nano one (`ge_nano`)."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tcmp.schemas.dtypes import dtype_name
from tcmp.schemas.dump_records import IO
from tcmp.schemas.errors import DumpCorrupt, DumpIncomplete
from tcmp.schemas.formats import format_name

LENGTH_PREFIX = struct.Struct("<Q")
# Payload sizes adding up to more than this are garbage (an overflowed uint64), not a file still being written.
MAX_PLAUSIBLE_FILE = 1 << 46

# More buffers and workspaces than this with nonzero sizes (none seen in real headers): only "all of them written"
# completes the file, the sets of skipped ones are not tried (2^n of them).
MAX_EXTRAS_TRIED = 16


@dataclass(frozen=True)
class OriginalOp:
    """`OpOutput.original_op`: the pre-fusion op (and output) a fused op's output stands for."""

    name: str
    output_index: int
    data_type: int
    format: int


@dataclass(frozen=True)
class GeTensor:
    """One input or output described by the header; `offset` is the payload's absolute position in the file.

    `address` is the device address the writer recorded (0 where the header has none). `dumped` is False for a
    tensor the writer skipped (address 0 in a header that carries addresses): `size` is what it would have held,
    the file holds none of it, and `offset` is where the next payload starts.
    """

    io: IO
    index: int
    data_type: int
    format: int
    sub_format: int
    shape: tuple[int, ...]  # device (storage) shape
    original_shape: tuple[int, ...]  # logical shape; empty when the writer did not fill it
    size: int  # payload bytes
    offset: int
    original_op: Optional[OriginalOp] = None
    address: int = 0
    dumped: bool = True

    @property
    def numel(self) -> int:
        """Elements of the device shape (a scalar's empty shape holds one)."""
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def dtype_name(self) -> str:
        return dtype_name(self.data_type)

    @property
    def format_name(self) -> str:
        return format_name(self.format)

    @property
    def nd_shape(self) -> tuple[int, ...]:
        """The shape the ND tensor will have when the layout converts (original shape if known)."""
        return self.original_shape or self.shape


@dataclass(frozen=True)
class GeDump:
    """The decoded header of one GE dump file (no payload bytes)."""

    path: Path
    op_name: str  # unsanitized, from the header (the file name carries a sanitized one)
    version: str
    dump_time: int
    inputs: tuple[GeTensor, ...]
    outputs: tuple[GeTensor, ...]
    buffer_sizes: tuple[int, ...]
    workspace_sizes: tuple[int, ...]
    attrs: tuple[tuple[str, str], ...]
    header_length: int
    file_size: int
    nano: bool = False
    dfx_message: str = ""

    @property
    def tensors(self) -> tuple[GeTensor, ...]:
        return self.inputs + self.outputs

    def tensor(self, io: IO, index: int) -> GeTensor:
        items = self.inputs if io is IO.INPUT else self.outputs
        return items[index]

    @property
    def not_dumped(self) -> tuple[GeTensor, ...]:
        """The inputs and outputs the writer skipped (device address 0)."""
        return tuple(t for t in self.tensors if not t.dumped)


def check_total(path: Path, header_length: int, sizes: list[int], file_size: int) -> None:
    """Every payload of `sizes` is in the file (nano dumps, which have no buffers, workspaces or addresses)."""
    check_size(path, header_length, sum(sizes), (), file_size)


def _is_some_total(sizes: list[int], wanted: int) -> bool:
    """Do some of `sizes` add up to `wanted` (the buffers and workspaces written, the others skipped)?"""
    sums = {0}
    for size in sizes:
        sums |= {s + size for s in sums if s + size <= wanted}
        if wanted in sums:
            return True
    return wanted in sums


def check_size(path: Path, header_length: int, io_bytes: int, extras: tuple[int, ...], file_size: int) -> None:
    """The completeness rule of tcmp.schemas.ge_dump's docstring: `io_bytes` = the payloads of the dumped inputs
    and outputs, `extras` = the sizes of the buffers and workspaces (any of which may have been skipped)."""
    io_end = LENGTH_PREFIX.size + header_length + io_bytes
    extra_total = sum(extras)
    expected = io_end + extra_total
    if expected > MAX_PLAUSIBLE_FILE:
        raise DumpCorrupt(path, f"payload sizes add up to {expected} bytes: the header is garbage")
    described = f"8 + {header_length} header + {io_bytes + extra_total} payload"
    if expected < file_size:
        raise DumpCorrupt(
            path, f"file has {file_size} bytes, {file_size - expected} more than its header accounts for ({described})"
        )
    if expected == file_size:
        return
    if not extras:
        raise DumpIncomplete(
            path,
            f"file has {file_size} bytes but its header promises {expected} ({described}): still being written, "
            "or cut short",
        )
    if io_end > file_size:
        raise DumpIncomplete(
            path,
            f"file has {file_size} bytes but its inputs and outputs end at byte {io_end} (8 + {header_length} header "
            f"+ {io_bytes} payload): still being written, or cut short",
        )
    written = [size for size in extras if size]
    rest = file_size - io_end
    if len(written) <= MAX_EXTRAS_TRIED and _is_some_total(written, rest):
        return  # the buffers/workspaces not written had address 0
    raise DumpIncomplete(
        path,
        f"file has {file_size} bytes: the {rest} bytes after its inputs and outputs are the payloads of no set of "
        f"its {len(extras)} buffers and workspaces ({extra_total} bytes with all written): still being written, or "
        "cut short",
    )
