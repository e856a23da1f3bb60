"""The GE dump binary file ("big dump" layout, docs/formats.md, "GE dump files"), read without CANN.

    uint64 L | L bytes DumpData protobuf | input payloads | output payloads | buffer payloads | workspace payloads

The header is decoded by protobuf from tcmp's own `dump_data.proto`. Nano dumps (magic 0x5A5A5A5A after the
length) are delegated to `ge_nano`. Payloads are read lazily: only the header is read up front, and each tensor is
taken from a memory map (or one ranged read for small tensors), never beyond the file's end.

Completeness. CANN's AICPU writer (`OpDumpTask`: ProcessInputDump, ProcessOutputDump, ProcessOpBufferDump,
ProcessOpWorkspaceDump) skips a tensor whose device address is 0 (`if (dataAddr == 0U) continue`: an unconnected
optional input, say): no payload bytes, but its `size` stays in the header. So the payloads a file holds are:

- inputs and outputs: every one with a nonzero `address` (OpInput 8, OpOutput 9) when the header carries
  addresses, i.e. at least one input or output has a nonzero one; a header without any address (older writers,
  and proto3 cannot tell them from a header whose every address is 0) holds every tensor's payload, as before.
  An input/output with address 0 is `GeTensor.dumped = False`: a known state, loading it raises TensorNotDumped;
- buffers and workspaces: their header entries carry no address, so which were skipped can only be seen from the
  file size: after the inputs and outputs come the payloads of the buffers and workspaces that were written, in
  header order (tcmp never reads them).

A file is complete when it is exactly `8 + L + Σ size of the dumped inputs/outputs + R` bytes long, with R the total
of all buffers and workspaces or of some of them (the others skipped); shorter than that, or with an R no set of
them adds up to, it is still being written (DumpIncomplete, retry later); longer than with every buffer and
workspace, or with a header that does not parse, it is corrupt (DumpCorrupt). With no buffers or workspaces (the
common case) R must be 0, and with all of them written R is their total: both exact.

A file still being written can stop right where some buffers' sizes add up (at the end of the outputs, say), and
is then taken for complete with those buffers skipped. That is decided on purpose, the other way round would be
worse: (1) such a file already holds every input and output payload whole — they precede the buffers — and those
are all tcmp reads, so no summary and no compare can be wrong; (2) the writer sends a file in chunks of its whole
size up to 128 MiB (DUMP_SLICE_SIZE), cut without regard to tensor boundaries: a smaller file arrives in one write,
and a larger one, cut short, ends on such a boundary by chance only; (3) if it grows after all, its (inode, size,
mtime) change: `tcmp watch` reads it again, and `--drop-raw` deletes only files unchanged since they were
summarized. Calling such lengths "still being written" instead would make every complete file with a skipped
buffer or workspace wait forever and be recorded as truncated.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

import numpy as np
from google.protobuf.message import DecodeError

from tcmp.schemas import MMAP_THRESHOLD, proto
from tcmp.schemas.dtypes import PayloadTooShort, bits_per_element, decode_payload
from tcmp.schemas.dump_records import IO, Completeness, LoadedTensor
from tcmp.schemas.errors import DumpCorrupt, DumpIncomplete, TensorNotDumped
from tcmp.schemas.formats import to_nd
from tcmp.schemas.ge_header import LENGTH_PREFIX, GeDump, GeTensor, OriginalOp, check_size

NANO_MAGIC = 0x5A5A5A5A
# GE headers are a few KB; a length beyond this is garbage, not a header still being written.
MAX_HEADER_BYTES = 64 << 20
NOT_DUMPED = "not dumped: device address 0"  # why an undumped tensor has no data, wherever tcmp says so

PathLike = Union[str, "os.PathLike[str]"]


# GE headers are a few KB: one read of this much usually takes the length, the nano probe and the whole header.
_FIRST_READ = 16 << 10


def _read_prefix(fd: int, path: Path, file_size: int) -> tuple[int, bytes]:
    """The header length and the bytes after it that one read gives (at least the 4 of the nano magic probe,
    when the file has them)."""
    if file_size < LENGTH_PREFIX.size:
        raise DumpIncomplete(path, f"only {file_size} bytes: the 8-byte header length is not written yet")
    head = os.pread(fd, _FIRST_READ, 0)
    (header_length,) = LENGTH_PREFIX.unpack_from(head)
    if header_length > MAX_HEADER_BYTES:
        raise DumpCorrupt(
            path, f"header length {header_length} is implausible (> {MAX_HEADER_BYTES} bytes): not a GE dump"
        )
    if LENGTH_PREFIX.size + header_length > file_size:
        raise DumpIncomplete(
            path,
            f"header length {header_length} exceeds the {file_size - LENGTH_PREFIX.size} bytes after the "
            "length field: header not fully written (or the file is cut)",
        )
    return header_length, head[LENGTH_PREFIX.size :]


def _tensors_from_header(message, header_length: int) -> tuple[tuple[GeTensor, ...], tuple[GeTensor, ...], int]:
    """The inputs and outputs, and the bytes of their payloads in the file."""
    start = offset = LENGTH_PREFIX.size + header_length
    # proto3 leaves address 0 off the wire: without a single nonzero one the header may come from a writer that
    # never filled addresses, and every payload is there
    addressed = any(item.address for item in message.input) or any(item.address for item in message.output)
    inputs = []
    for i, item in enumerate(message.input):  # payload order is inputs first (writer: DoDumpTensor)
        size, dumped = item.size, not addressed or item.address != 0
        inputs.append(
            GeTensor(
                IO.INPUT, i, item.data_type, item.format, item.sub_format, tuple(item.shape.dim),
                tuple(item.original_shape.dim), size, offset, None, item.address, dumped,
            )
        )  # fmt: skip
        offset += size if dumped else 0
    outputs = []
    for i, item in enumerate(message.output):
        original = None
        if item.HasField("original_op") and item.original_op.name:
            op = item.original_op
            original = OriginalOp(op.name, op.output_index, op.data_type, op.format)
        size, dumped = item.size, not addressed or item.address != 0
        outputs.append(
            GeTensor(
                IO.OUTPUT, i, item.data_type, item.format, item.sub_format, tuple(item.shape.dim),
                tuple(item.original_shape.dim), size, offset, original, item.address, dumped,
            )
        )  # fmt: skip
        offset += size if dumped else 0
    return tuple(inputs), tuple(outputs), offset - start


def read_ge_dump(path: PathLike) -> GeDump:
    """Read and check the header of a GE dump file (big dump or nano).

    Raises DumpIncomplete when the file is shorter than its header promises and DumpCorrupt when it can never
    be read. Only the header bytes are read.
    """
    path = path if isinstance(path, Path) else Path(path)  # Path(a_path) parses the whole path again
    fd = os.open(path, os.O_RDONLY)  # not open(): its buffered file object costs more than the reads here
    try:
        file_size = os.fstat(fd).st_size
        header_length, after = _read_prefix(fd, path, file_size)
        if len(after) < header_length:
            after += os.pread(fd, header_length - len(after), LENGTH_PREFIX.size + len(after))
    finally:
        os.close(fd)
    if len(after) >= 4 and struct.unpack_from("<I", after)[0] == NANO_MAGIC:
        from tcmp.schemas.ge_nano import read_nano_header  # rare: lite SoCs only

        return read_nano_header(path, after[:header_length], header_length, file_size)
    header = after[:header_length]
    try:
        message = proto.DumpData.FromString(header)
    except (DecodeError, RuntimeError, ValueError) as exc:  # upb raises DecodeError; older backends vary
        raise DumpCorrupt(path, f"header ({header_length} bytes) is not a DumpData protobuf: {exc}") from exc
    inputs, outputs, io_bytes = _tensors_from_header(message, header_length)
    buffer_sizes = tuple(b.size for b in message.buffer)
    workspace_sizes = tuple(s.size for s in message.space)
    check_size(path, header_length, io_bytes, buffer_sizes + workspace_sizes, file_size)
    return GeDump(
        path=path,
        op_name=message.op_name,
        version=message.version,
        dump_time=message.dump_time,
        inputs=inputs,
        outputs=outputs,
        buffer_sizes=buffer_sizes,
        workspace_sizes=workspace_sizes,
        attrs=tuple((a.name, a.value) for a in message.attr),
        header_length=header_length,
        file_size=file_size,
        dfx_message=message.dfx_message,
    )


def ge_dump_completeness(path: PathLike) -> tuple[Completeness, str]:
    """The size equation only: is the file complete, still being written, or corrupt (and why)."""
    try:
        read_ge_dump(path)
    except DumpIncomplete as exc:
        return Completeness.INCOMPLETE, exc.message
    except DumpCorrupt as exc:
        return Completeness.CORRUPT, exc.message
    return Completeness.COMPLETE, ""


@dataclass
class GeDumpReader:
    """Loads the tensors of one checked GE dump; the file is opened (and mapped) once, on first use.

    Arrays it returns may be read-only views of the memory map; they stay valid after `close()`.
    """

    dump: GeDump
    _map: Optional[mmap.mmap] = field(default=None, repr=False)
    _bytes: Optional[memoryview] = field(default=None, repr=False)

    def __enter__(self) -> GeDumpReader:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        # Not mmap.close(): arrays handed out may still reference the map; it goes away with them.
        self._map = None
        self._bytes = None

    def _payload(self, tensor: GeTensor) -> Union[memoryview, bytes]:
        if not tensor.dumped:
            raise TensorNotDumped(self.dump.path, f"{tensor.io.value} {tensor.index}: {NOT_DUMPED} (no payload)")
        if tensor.size == 0:
            return b""
        if self.dump.file_size < MMAP_THRESHOLD:  # a small file: its payloads are read in one go, once
            if self._bytes is None:
                start = LENGTH_PREFIX.size + self.dump.header_length
                fd = os.open(self.dump.path, os.O_RDONLY)
                try:
                    data = os.pread(fd, self.dump.file_size - start, start)
                finally:
                    os.close(fd)
                if len(data) != self.dump.file_size - start:
                    raise DumpIncomplete(self.dump.path, "file shrank after its header was checked")
                self._bytes = memoryview(data)
            start = tensor.offset - LENGTH_PREFIX.size - self.dump.header_length
            return self._bytes[start : start + tensor.size]
        if self._map is None:
            with open(self.dump.path, "rb") as handle:
                if os.fstat(handle.fileno()).st_size != self.dump.file_size:
                    # mapping a file that changed size risks SIGBUS on access; refuse instead
                    raise DumpCorrupt(self.dump.path, "file changed size after its header was checked")
                flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
                self._map = mmap.mmap(handle.fileno(), 0, flags=flags, prot=mmap.PROT_READ)
        return memoryview(self._map)[tensor.offset : tensor.offset + tensor.size]

    def load(self, tensor: GeTensor, *, nd: bool = True) -> LoadedTensor:
        """Decode one tensor and (with `nd`) convert its device format to ND.

        Never raises for an odd dtype or format: those come back flat or as raw bytes, with notes. Raises
        TensorNotDumped for a tensor the writer skipped (`dumped` False): there is nothing to decode.
        """
        notes: list[str] = []
        numel = tensor.numel
        bits = bits_per_element(tensor.data_type)
        if not tensor.shape and bits is not None and tensor.size * 8 > bits:
            numel = tensor.size * 8 // bits  # no shape but more than one element: read it flat
            notes.append(f"no shape in the header; read {numel} elements flat")
        if bits is not None and (numel * bits + 7) // 8 > tensor.size:
            notes.append(
                f"shape {list(tensor.shape)} of {tensor.dtype_name} needs {(numel * bits + 7) // 8} bytes "
                f"but the payload has {tensor.size}; kept as raw bytes"
            )
            data = np.frombuffer(self._payload(tensor), dtype=np.uint8)
            return LoadedTensor(data, tensor.dtype_name, raw=True, layout_converted=False, notes=tuple(notes))
        try:
            decoded = decode_payload(self._payload(tensor), tensor.data_type, numel)
        except PayloadTooShort as exc:  # guarded above; kept for dtypes without a fixed width
            raise DumpCorrupt(self.dump.path, f"{tensor.io.value} {tensor.index}: {exc}") from exc
        if decoded.note:
            notes.append(decoded.note)
        if decoded.raw:
            return LoadedTensor(decoded.array, tensor.dtype_name, raw=True, layout_converted=False, notes=tuple(notes))
        if not nd:
            shaped = decoded.array
            if numel == tensor.numel:
                try:
                    shaped = decoded.array.reshape(tensor.shape)
                except ValueError:  # a zero dim beside dims no array can have (a garbled header): kept flat
                    notes.append(f"device shape {list(tensor.shape)} describes no array; read flat")
            return LoadedTensor(shaped, tensor.dtype_name, raw=False, layout_converted=False, notes=tuple(notes))
        shape = tensor.shape if numel == tensor.numel else (numel,)
        result = to_nd(decoded.array, tensor.format, tensor.sub_format, shape, tensor.original_shape)
        if result.flag:
            notes.append(result.flag)
        return LoadedTensor(
            result.array,
            tensor.dtype_name,
            raw=False,
            layout_converted=result.converted,
            notes=tuple(notes),
            layout_flagged=result.flag is not None,
        )

    def load_all(self, io: Optional[IO] = None) -> list[tuple[GeTensor, LoadedTensor]]:
        tensors = self.dump.tensors if io is None else (self.dump.inputs if io is IO.INPUT else self.dump.outputs)
        return [(t, self.load(t)) for t in tensors]


def open_ge_dump(path: PathLike) -> GeDumpReader:
    """Check a GE dump file and return a reader for its tensors (use as a context manager)."""
    return GeDumpReader(read_ge_dump(path))
