"""Reading the tensors of a pair for its row: raw (GE files, FFTS+ slices merged, FX files), or as the summaries a
stats file or tcmp's index holds; `TensorLoader` caches, per worker, the GE files of the op being compared and the
metrics of recent payloads.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from tcmp.compare.judge.metrics import (
    Mode,
    Prepared,
    TensorMetrics,
    compare_prepared,
    fused_metrics,
    tensor_metrics,
)
from tcmp.compare.records import FileHeader, Pair, TensorRef
from tcmp.compare.rules.ulp import float_type_named
from tcmp.schemas.dtypes import dtype_name
from tcmp.schemas.dump_records import IO, Summary, TensorKind, TensorSummary
from tcmp.schemas.dump_tree import FileKind
from tcmp.schemas.errors import DumpError, TensorNotDumped, describe
from tcmp.schemas.ffts import SliceFile, merge_ffts_slices
from tcmp.schemas.fx_dump import read_fx_value
from tcmp.schemas.ge_dump import NOT_DUMPED, GeDumpReader, open_ge_dump
from tcmp.schemas.ge_header import GeDump
from tcmp.schemas.ge_names import GeFileName
from tcmp.schemas.npy_header import NpyHeader
from tcmp.schemas.stats_files import read_fx_min_max_npy
from tcmp.schemas.torch_save import read_torch_save
from tcmp.summaries.merge import CRC_UNKNOWN
from tcmp.summaries.summarize import crc32, summarize


@functools.lru_cache(maxsize=64)
def numpy_name(dtype: np.dtype) -> str:
    return str(dtype)  # numpy builds the name anew on each call: a few µs per tensor


class Unavailable(Exception):
    """The data a mode needs is not there (a summary-only file, a non-tensor argument, an unreadable file)."""


class Unreadable(Unavailable):
    """The file holding the data could not be read (cut short, corrupt, or not to be opened)."""


@dataclass(frozen=True)
class Loaded:
    array: Optional[np.ndarray]  # None when only a summary exists
    summary: Optional[Summary]
    dtype: Optional[str]
    shape: Optional[tuple[int, ...]]
    notes: tuple[str, ...] = ()


class TensorLoader:
    """Reads tensors for the rows of one token; keeps recently used GE files open, FX tensors prepared, and the
    metrics of recent NPU payloads (an op's input is, byte for byte, its producer's output: compared with the
    same golden tensor it gives the same metrics)."""

    def __init__(
        self, headers: Optional[Mapping[Path, FileHeader]] = None, cache_size: int = 4, byte_budget: int = 4 << 20
    ) -> None:
        self.headers = dict(headers or {})
        self.cache_size = cache_size
        # what the caches may hold, so memory stays flat whatever the dump size: 4 MiB is ~60 activations of 32K
        # fp16 elements, more than lie between a producer's output and its consumers; 16 MiB cost ~12 MB of PSS
        # over a compare's two processes (bench_compare) and bought no measurable time
        self.byte_budget = byte_budget
        self._bytes = 0
        self._readers: OrderedDict = OrderedDict()
        self._merged: OrderedDict = OrderedDict()
        self._fx: OrderedDict = OrderedDict()
        self._prepared: OrderedDict = OrderedDict()
        self._memo: OrderedDict = OrderedDict()
        self._summaries: OrderedDict = OrderedDict()

    def _remember(self, cache: OrderedDict, key, value, size: int, nbytes: int = 0):
        """Keep `value` in an LRU `cache` of at most `size` entries, and within the loader's byte budget."""
        previous = cache.pop(key, None)
        if previous is not None:
            self._bytes -= previous[1]
        cache[key] = (value, nbytes)
        self._bytes += nbytes
        while len(cache) > size or (self._bytes > self.byte_budget and len(cache) > 1):
            _, (_, dropped) = cache.popitem(last=False)
            self._bytes -= dropped
        return value

    def _remember_for_payload(self, cache: OrderedDict, key, payload: np.ndarray, value) -> None:
        """Keep `value` with a copy of the payload it was computed from, to check a CRC hit against: a view would
        keep the whole buffer it lies in (a GE file's data) alive, beyond what the byte budget counts."""
        self._remember(cache, key, (payload.copy(), value), 64, payload.nbytes)

    @staticmethod
    def _recall(cache: OrderedDict, key):
        item = cache.get(key)
        if item is None:
            return None
        cache.move_to_end(key)  # recently used
        return item[0]

    def _fx_value(self, path):
        value = self._recall(self._fx, path)
        if value is None:
            header = self.headers.get(path)
            value = read_fx_value(path, header if isinstance(header, NpyHeader) else None)
            self._remember(self._fx, path, value, 32, value.array.nbytes if value.array is not None else 0)
        return value

    def _acl_tensor(self, path, index: int) -> Loaded:
        saved = self._recall(self._fx, path)
        if saved is None:
            saved = read_torch_save(path)
            self._remember(self._fx, path, saved, 32, sum(t.values.nbytes for t in saved.tensors))
        if index >= len(saved.tensors):
            raise Unavailable(f"the file holds {len(saved.tensors)} tensor(s), not tensor {index}")
        tensor = saved.tensors[index]
        return Loaded(tensor.values, None, dtype_name(tensor.data_type), tuple(tensor.shape))

    def _reader(self, path) -> GeDumpReader:
        reader = self._readers.pop(path, None)
        if reader is None:
            header = self.headers.get(path)
            reader = GeDumpReader(header) if isinstance(header, GeDump) else open_ge_dump(path)
        self._readers[path] = reader
        while len(self._readers) > self.cache_size:
            self._readers.popitem(last=False)[1].close()
        return reader

    def _ffts(self, ref: TensorRef):
        key = tuple(f.path for f in ref.files)
        if key not in self._merged:
            parts = []
            for f in ref.files:
                reader = self._reader(f.path)
                assert isinstance(f.name, GeFileName)
                parts.append(
                    SliceFile(
                        f.name,
                        reader.dump,
                        tuple(reader.load(t).array if t.dumped else None for t in reader.dump.inputs),
                        tuple(reader.load(t).array if t.dumped else None for t in reader.dump.outputs),
                    )
                )
            merged = merge_ffts_slices(parts)
            size = sum(a.nbytes for a in (*merged.inputs, *merged.outputs) if a is not None)
            self._remember(self._merged, key, merged, self.cache_size, size)
        return self._recall(self._merged, key)

    def summarized(self, loaded: Loaded, mode: Mode) -> Loaded:
        """`loaded` with its summary (computed once per distinct payload: inputs repeat their producers' outputs)."""
        if loaded.summary is not None or loaded.array is None:
            return loaded
        with_crc = mode is Mode.MD5
        contiguous = np.ascontiguousarray(loaded.array)
        payload = contiguous.reshape(-1).view(np.uint8)
        key = (contiguous.dtype.str, contiguous.shape, with_crc, crc32(payload))
        hit = self._recall(self._summaries, key)
        if hit is not None and np.array_equal(hit[0], payload):
            summary = hit[1]
        else:
            summary = summarize(loaded.array, with_crc=with_crc)
            self._remember_for_payload(self._summaries, key, payload, summary)
        return Loaded(loaded.array, summary, loaded.dtype, loaded.shape, loaded.notes)

    def metrics(self, pair: Pair, npu: Loaded, bench: Loaded, bench_rounded: bool) -> TensorMetrics:
        """Tensor metrics of a pair, reusing what earlier pairs of this token prepared or computed."""
        assert npu.array is not None and bench.array is not None  # tensor mode: `raw` loads arrays or raises
        ref = pair.bench
        bench_key = (tuple(f.path for f in ref.files), ref.io, ref.index, ref.sub_index, ref.element,
                     npu.array.shape if ref.reshaped else None)  # fmt: skip
        contiguous = np.ascontiguousarray(npu.array)
        payload = contiguous.reshape(-1).view(np.uint8)
        memo_key = (bench_key, bench_rounded, pair.carried, contiguous.dtype.str, contiguous.shape, crc32(payload))
        hit = self._recall(self._memo, memo_key)
        if hit is not None and np.array_equal(hit[0], payload):  # the CRC only finds candidates
            return hit[1]
        carried = float_type_named(pair.carried)
        result = fused_metrics(npu.array, bench.array, carried)
        if result is not None:
            self._remember_for_payload(self._memo, memo_key, payload, result)
            return result
        try:  # numpy: the bench side is prepared once for all the pairs it is in
            prepared_bench = None if bench_rounded else self._recall(self._prepared, bench_key)
            if prepared_bench is None:
                prepared_bench = Prepared(bench.array)
                if not bench_rounded:
                    self._remember(self._prepared, bench_key, prepared_bench, 32, prepared_bench.nbytes)
            result = compare_prepared(Prepared(npu.array), prepared_bench, carried)
        except TypeError:
            result = tensor_metrics(npu.array, bench.array, carried)  # complex: its own message
        self._remember_for_payload(self._memo, memo_key, payload, result)
        return result

    def raw(self, ref: TensorRef) -> Loaded:
        if not ref.has_raw:
            raise Unavailable("raw tensor not available (summary only)")
        first = ref.files[0]
        try:
            if first.kind is FileKind.ACL_PT:
                return self._acl_tensor(first.path, ref.index)
            if first.kind is FileKind.FX_NPY:
                value = self._fx_value(first.path)
                if value.kind not in (TensorKind.TENSOR, TensorKind.SCALAR) or value.array is None:
                    raise Unavailable(f"non-tensor argument ({value.kind.value}: {value.text})")
                array = value.array
                if ref.element is not None:  # one tensor of a list the FX dumper stacked into one file
                    if array.ndim == 0 or ref.element >= array.shape[0]:
                        raise Unavailable(f"element {ref.element} of a file of shape {list(array.shape)}")
                    array = array[ref.element]
                return Loaded(array, None, numpy_name(array.dtype), array.shape)
            if len(ref.files) > 1:
                merged = self._ffts(ref)
                items = merged.inputs if ref.io is IO.INPUT else merged.outputs
                array = items[ref.index]
                if array is None:  # never paired; kept for callers that pair by hand
                    raise Unavailable(NOT_DUMPED)
                dtype = self._reader(first.path).dump.tensor(ref.io, ref.index).dtype_name
                return Loaded(array, None, dtype, tuple(array.shape), merged.notes)
            reader = self._reader(first.path)
            tensor = reader.dump.tensor(ref.io, ref.index)
            loaded = reader.load(tensor)
            if loaded.raw:
                raise Unavailable(f"{tensor.dtype_name} has no numeric decoding")
            return Loaded(loaded.array, None, tensor.dtype_name, tuple(loaded.array.shape), loaded.notes)
        except DumpError as exc:
            kind = Unavailable if isinstance(exc, TensorNotDumped) else Unreadable  # skipped by design, not damage
            raise kind(f"unreadable: {describe(exc)}") from exc
        except IndexError as exc:
            raise Unavailable(f"unreadable: {exc}") from exc
        except OSError as exc:
            raise Unreadable(f"unreadable: {exc}") from exc

    def data(self, ref: TensorRef) -> Loaded:
        """The raw tensor when there is one, else the summary the tensor exists as."""
        if ref.stored is not None:
            s: TensorSummary = ref.stored
            if ref.element is not None:  # one tensor of a stacked list output: its element's own summary
                if ref.element >= len(s.elements) or not s.shape:
                    raise Unavailable(f"element {ref.element} of a file of shape {list(s.shape or ())}: not stored")
                return Loaded(None, s.elements[ref.element], s.dtype, s.shape[1:])
            # FFTS+ slices merged from their summaries say what the raw merge says (why a CRC is unknown: md5 mode)
            notes = tuple(n for n in s.notes if not n.startswith(CRC_UNKNOWN)) if len(ref.files) > 1 else ()
            return Loaded(None, s.summary, s.dtype, s.shape, notes)
        if ref.files[0].kind is FileKind.FX_MIN_MAX_NPY:
            try:
                return Loaded(None, read_fx_min_max_npy(ref.files[0].path), None, None, ("appendix min/max file",))
            except DumpError as exc:
                raise Unreadable(f"unreadable: {describe(exc)}") from exc
        return self.raw(ref)
