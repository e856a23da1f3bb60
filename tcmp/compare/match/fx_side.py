"""One token of an FX dump as the GE → FX matcher asks about it: node calls, file headers, which input copies
are taken, and whether two files hold the same tensor.

Headers are read once, on first use (most files are read only when compared). Two files are compared byte for
byte only where a choice depends on it — several same-shaped input copies, several candidates for a name torchair
wrote over — so that a by-value tie-break never costs a pass over the whole dump.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from tcmp.compare.match.executions import FxCall
from tcmp.compare.rules.shapes import squeezed
from tcmp.schemas.dump_records import IO, Summary, TensorKind, TensorSummary
from tcmp.schemas.dump_tree import DumpFile, FileKind
from tcmp.schemas.errors import DumpError
from tcmp.schemas.fx_dump import read_fx_value
from tcmp.schemas.ge_dump import GeDumpReader
from tcmp.schemas.npy_header import NpyHeader, read_npy_header

# Two files longer than this are not compared byte for byte (the choice is left open instead).
_COMPARE_LIMIT = 256 << 20
_CHUNK = 4 << 20
_UNREAD = object()  # a cache's "not read yet" (None: unreadable)


@dataclass(frozen=True)
class FileShape:
    """What a file's header says: the array's shape and dtype kind (`f`, `i`, `b`, …; `O`/`U`: not a tensor)."""

    shape: tuple[int, ...]
    kind: str

    @property
    def numeric(self) -> bool:
        return self.kind in "biufc"


def stored_shape(stored: TensorSummary) -> Optional[FileShape]:
    """What the index's record of an FX file says of it: the same facts as the raw file's header (a pickled
    argument: what the pickle holds), so that the pairing does not depend on whether the raw file is still there."""
    if stored.kind is TensorKind.MIN_MAX:
        return None  # an appendix min/max file: no shape, as its raw header gives none
    try:
        dtype = np.dtype(stored.dtype) if stored.dtype is not None else None
    except TypeError:
        dtype = None
    return value_shape(stored.kind, dtype, stored.shape or ())


def value_shape(kind: TensorKind, dtype: Optional[np.dtype], shape: tuple[int, ...]) -> FileShape:
    """An FX file's shape and dtype kind from what tcmp read of it: a number or a tensor keeps its dtype's kind
    (a bool or int scalar argument is no float); None, objects and strings are not tensors."""
    if kind in (TensorKind.TENSOR, TensorKind.SCALAR) and dtype is not None:
        return FileShape(tuple(shape) if kind is TensorKind.TENSOR else (), dtype.kind)
    return FileShape(tuple(shape), "U" if kind is TensorKind.STRING else "O")


class FxSide:
    """The FX calls of one token, with what the matcher learns about their files while it pairs."""

    def __init__(self, calls: Mapping[str, tuple[FxCall, ...]], stored: Mapping[Path, TensorSummary]) -> None:
        self.calls = calls
        self.stored = stored
        self._shapes: dict[Path, Optional[FileShape]] = {}
        self._headers: dict[Path, Optional[NpyHeader]] = {}
        self._claimed: dict[tuple[str, int], set[tuple[int, Optional[int]]]] = defaultdict(set)
        # input copies a GE input was compared through its producer instead: file -> the producer's file
        self.copies: dict[Path, Path] = {}
        self._ordered: Optional[list[FxCall]] = None

    def call(self, key: str, index: int) -> Optional[FxCall]:
        calls = self.calls.get(key, ())
        return calls[index] if 0 <= index < len(calls) else None

    def ordered(self) -> list[FxCall]:
        """Every call of the token, in call order (their timestamps)."""
        if self._ordered is None:
            found = [c for calls in self.calls.values() for c in calls]
            self._ordered = sorted(found, key=lambda c: (int(c.timestamp or 0), c.key))
        return self._ordered

    def by_target(self, targets) -> list[FxCall]:
        """Every call of these targets in the token, in call order."""
        return [c for c in self.ordered() if c.target in targets]

    # --- headers ------------------------------------------------------------------------------------------------

    def shape(self, file: DumpFile) -> Optional[FileShape]:
        """The header of an FX file (the index's record when `tcmp watch` deleted it); None if unreadable."""
        found = self._shapes.get(file.path, _UNREAD)
        if found is _UNREAD:
            found = self._shapes[file.path] = self._read_shape(file)
        return found  # type: ignore[return-value]

    def header(self, file: DumpFile) -> Optional[NpyHeader]:
        """A raw FX file's .npy header, read once (the loader reads its payload after it); None if unreadable."""
        found = self._headers.get(file.path, _UNREAD)
        if found is _UNREAD:
            try:
                found = read_npy_header(file.path)
            except (DumpError, OSError):  # OSError: it could be opened when listed (an I/O error, or gone since)
                found = None
            self._headers[file.path] = found
        return found  # type: ignore[return-value]

    def headers(self) -> dict[Path, NpyHeader]:
        """The headers read so far, by file."""
        return {path: header for path, header in self._headers.items() if header is not None}

    def _read_shape(self, file: DumpFile) -> Optional[FileShape]:
        stored = self.stored.get(file.path)
        if stored is not None:
            return stored_shape(stored)
        if file.kind is not FileKind.FX_NPY:
            return None
        header = self.header(file)
        if header is None:
            return None
        if header.dtype.hasobject:  # a pickled argument: what it holds, as the index records it
            try:
                value = read_fx_value(file.path, header)
            except (DumpError, OSError):
                return None
            return value_shape(value.kind, value.array.dtype if value.array is not None else None, header.shape)
        return FileShape(header.shape, header.dtype.kind)

    def fits(self, file: DumpFile, shape: Optional[tuple[int, ...]]) -> bool:
        """A numeric tensor whose shape equals `shape` up to size-1 dims (any shape when `shape` is None)."""
        found = self.shape(file)
        return found is not None and found.numeric and (shape is None or squeezed(found.shape) == squeezed(shape))

    # --- input copies -------------------------------------------------------------------------------------------

    def claimed(self, call: FxCall, position: tuple[int, Optional[int]]) -> bool:
        return position in self._claimed[(call.key, call.call)]

    def claim(self, call: FxCall, position: tuple[int, Optional[int]]) -> None:
        self._claimed[(call.key, call.call)].add(position)

    def unclaimed_inputs(self, call: FxCall):
        return [(i, j, f) for i, j, f in call.inputs if not self.claimed(call, (i, j))]

    def claim_copy(self, call: FxCall, source: DumpFile) -> None:
        """Mark the input of `call` that is a copy of the tensor in `source` (a producer's output a GE input was
        paired with) as taken: by shape when one input fits, by content when several do."""
        fitting = [(i, j, f) for i, j, f in self.unclaimed_inputs(call) if self.same_header(f, source)]
        if len(fitting) > 1:
            fitting = [item for item in fitting if self.same_content(item[2], source)]
        if fitting:
            i, j, f = fitting[0]
            self.claim(call, (i, j))
            self.copies[f.path] = source.path

    def same_header(self, a: DumpFile, b: DumpFile) -> bool:
        sa, sb = self.shape(a), self.shape(b)
        return (
            sa is not None and sb is not None and sa.numeric and sb.numeric and sa.shape == sb.shape
            and sa.kind == sb.kind
        )  # fmt: skip

    # --- content ------------------------------------------------------------------------------------------------

    def same_content(self, a: DumpFile, b: DumpFile) -> bool:
        """Whether two FX files hold the same tensor bytes (the index's CRC-32 where a raw file is gone); False
        when it cannot be told."""
        sa, sb = self.stored.get(a.path), self.stored.get(b.path)
        if sa is not None or sb is not None:
            crc = [s.summary.crc32 if s is not None and s.summary is not None else None for s in (sa, sb)]
            if None in crc:
                crc = [crc[k] if crc[k] is not None else _crc_of(f) for k, f in enumerate((a, b))]
            return crc[0] is not None and crc[0] == crc[1]
        return _same_payload(a.path, self.header(a), b.path, self.header(b))

    def holds(self, file: DumpFile, e, k: int) -> bool:
        """Whether an FX file holds the values of input `k` of GE execution `e` (a graph input both runs were fed:
        the same values, up to the FX dumper's float32 for bfloat16): by value where both are raw, else by their
        summaries (a raw side summarized as the index summarizes it)."""
        meta = e.tensor(IO.INPUT, k)
        ge_stored = meta.stored if meta is not None else None
        fx_stored = self.stored.get(file.path)
        ge_raw = ge_stored is None and len(e.files) == 1 and bool(e.headers)
        if ge_stored is None and not ge_raw:
            return False
        try:
            ge = _ge_input(e, k) if ge_raw else None
            fx = np.load(file.path, allow_pickle=False) if fx_stored is None else None
        except (DumpError, OSError, ValueError, IndexError):
            return False
        if ge is not None and fx is not None:
            if ge.size != fx.size or ge.dtype.kind not in "biuf" or fx.dtype.kind not in "biuf":
                return False
            return bool(np.array_equal(np.asarray(ge, dtype=np.float64).reshape(-1), fx.astype(np.float64).reshape(-1)))
        ge_summary = ge_stored.summary if ge_stored is not None else _summary_of(ge)
        fx_summary = fx_stored.summary if fx_stored is not None else _summary_of(fx)
        return _same_summary(ge_summary, fx_summary)


def _ge_input(e, k: int) -> Optional[np.ndarray]:
    with GeDumpReader(e.headers[0]) as reader:
        return reader.load(reader.dump.tensor(IO.INPUT, k)).array


def _summary_of(array: Optional[np.ndarray]) -> Optional[Summary]:
    """A raw tensor's summary, as the index stores it (None for what the index would not summarize)."""
    from tcmp.summaries.summarize import summarize  # the one definition of the index's summaries

    if array is None or array.dtype.kind not in "biuf":
        return None
    return summarize(array, with_crc=False)


def _same_summary(a: Optional[Summary], b: Optional[Summary]) -> bool:
    """Summary-level equality of a GE tensor and an FX file: their min, max and mean (a CRC-32 is of each side's
    own dtype)."""
    if a is None or b is None:
        return False
    if a.numel == 0 and b.numel == 0:
        return True  # two empty tensors hold the same (no) values, as comparing their raw data finds
    return None not in (a.min, a.max, a.mean) and (a.min, a.max, a.mean) == (b.min, b.max, b.mean)


def _payload(header: Optional[NpyHeader]) -> Optional[tuple[int, int]]:
    if header is None or header.data_nbytes is None:
        return None
    return header.data_offset, header.data_nbytes


def _same_payload(a: Path, header_a: Optional[NpyHeader], b: Path, header_b: Optional[NpyHeader]) -> bool:
    pa, pb = _payload(header_a), _payload(header_b)
    if pa is None or pb is None or pa[1] != pb[1] or pa[1] > _COMPARE_LIMIT:
        return False
    try:
        fa = os.open(a, os.O_RDONLY)
        try:
            fb = os.open(b, os.O_RDONLY)
            try:
                done = 0
                while done < pa[1]:
                    size = min(_CHUNK, pa[1] - done)
                    if os.pread(fa, size, pa[0] + done) != os.pread(fb, size, pb[0] + done):
                        return False
                    done += size
            finally:
                os.close(fb)
        finally:
            os.close(fa)
    except OSError:
        return False
    return True


def _crc_of(file: DumpFile) -> Optional[int]:
    """CRC-32 of a raw FX file's canonical bytes, as the index stores it."""
    from tcmp.summaries.summarize import summarize  # the one definition of the index's CRC

    try:
        header = read_npy_header(file.path)
        if header.data_nbytes is None:
            return None
        array = np.load(file.path, allow_pickle=False)
    except (DumpError, OSError, ValueError):
        return None
    summary = summarize(array, with_crc=True)
    return summary.crc32
