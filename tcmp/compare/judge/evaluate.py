"""A pair becomes a row: its tensors are read (`loader`: raw, or as stored summaries), the mode's metrics computed,
and the row judged."""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from tcmp.compare.judge.loader import Loaded, TensorLoader, Unavailable, Unreadable, numpy_name
from tcmp.compare.judge.metrics import (
    EMPTY_BOTH,
    BasicStats,
    Mode,
    crc_hex,
    statistics_metrics,
)
from tcmp.compare.judge.rows import Row, TensorStats
from tcmp.compare.judge.verdict import (
    Judgement,
    Result,
    StatisticsNoise,
    Thresholds,
    judge_md5,
    judge_statistics,
    judge_tensor,
)
from tcmp.compare.records import Pair, TensorRef
from tcmp.compare.rules.cast_check import CastCheck, expected_output, expected_summary, numpy_dtype
from tcmp.compare.rules.shapes import squeeze_note, squeezed
from tcmp.compare.rules.ulp import RULE, StatValues, float_type_named
from tcmp.schemas.dump_records import Summary
from tcmp.schemas.dump_tree import FileKind
from tcmp.schemas.narrow_floats import dtype_of_name
from tcmp.summaries.merge import CRC_UNKNOWN
from tcmp.summaries.summarize import summarize

# The float dtypes an NPU keeps a scalar argument in, by the names both sides of the index use (numpy's names:
# the bf16 dtype is only made, importing ml_dtypes, when such a scalar is met).
_NPU_FLOAT = {
    name: float_name
    for names, float_name in (
        (("DT_FLOAT16", "float16"), "float16"),
        (("DT_BF16", "bfloat16"), "bfloat16"),
        (("DT_FLOAT", "float32"), "float32"),
    )
    for name in names
}


def at_npu_precision(npu: Loaded, bench: Loaded) -> Loaded:
    """An FX scalar argument is a Python number (saved as a 0-d float64); the GE Const that carries it holds it in
    the tensor's dtype. Round the scalar like the device did, or every fp16 constant would "fail". Works on the
    raw scalar and on its summary (compare from the index)."""
    target_name = _NPU_FLOAT.get(npu.dtype or "")
    if target_name is None or bench.dtype != "float64":
        return bench
    target = dtype_of_name(target_name)
    note = f"scalar argument compared at the NPU's precision ({target})"
    if bench.array is not None:
        if bench.array.ndim != 0:
            return bench
        rounded = bench.array.astype(target)
        return Loaded(rounded, None, numpy_name(rounded.dtype), bench.shape, (*bench.notes, note))
    s = bench.summary
    if s is None or s.numel != 1 or s.min is None or bench.shape not in ((), (1,)):
        return bench
    rounded_summary = summarize(np.asarray(s.min, dtype=np.float64).astype(target), with_crc=s.crc32 is not None)
    return Loaded(None, rounded_summary, str(target), bench.shape, (*bench.notes, note))


def _with_stats(loaded: Loaded, stats: BasicStats) -> Loaded:
    assert loaded.array is not None  # the stats were computed on the way from this array (tensor mode)
    summary = Summary(loaded.array.size, stats.min, stats.max, stats.mean, stats.l2norm, 0, 0)
    return Loaded(loaded.array, summary, loaded.dtype, loaded.shape, loaded.notes)


def in_npu_shape(npu: Loaded, bench: Loaded, ref: TensorRef) -> Loaded:
    """A golden tensor the matcher found in another shape of the same elements, laid out as the NPU's (the
    reported shape stays the file's). Another element count means it is not that tensor: no verdict."""
    if not ref.reshaped or npu.array is None or bench.array is None:
        return bench
    if npu.array.size != bench.array.size:
        raise Unavailable(
            f"tensor of shape {list(bench.array.shape)} is no reshape of the NPU's {list(npu.array.shape)}: "
            "not the tensor the pattern fusion's view was taken of"
        )
    return Loaded(bench.array.reshape(npu.array.shape), bench.summary, bench.dtype, bench.shape, bench.notes)


def _reshaped_alike(npu: Optional[tuple[int, ...]], bench: Optional[tuple[int, ...]], ref: TensorRef) -> bool:
    return ref.reshaped and npu is not None and bench is not None and math.prod(npu) == math.prod(bench)


def _shapes_differ(npu: Optional[tuple[int, ...]], bench: Optional[tuple[int, ...]]) -> bool:
    if npu is None or bench is None:
        return False
    return squeezed(npu) != squeezed(bench)


def _stats(loaded: Optional[Loaded]) -> TensorStats:
    if loaded is None:
        return TensorStats(None, None, None, None, None, None, None)
    s = loaded.summary
    return TensorStats(
        loaded.dtype,
        loaded.shape,
        s.max if s else None,
        s.min if s else None,
        s.mean if s else None,
        s.l2norm if s else None,
        crc_hex(s.crc32) if s else None,
        s.nan_count if s else None,
        s.inf_count if s else None,
    )


def _has_statistics(summary: Optional[Summary]) -> bool:
    return summary is not None and any(v is not None for v in (summary.max, summary.min, summary.mean, summary.l2norm))


def _no_elements(loaded: Loaded) -> bool:
    """A tensor with no elements, by its summary's count or, where a source gives none, by its shape."""
    numel = loaded.summary.numel if loaded.summary is not None else None
    if numel is None and loaded.shape is not None:
        numel = math.prod(loaded.shape)
    return numel == 0


def _where(ref: TensorRef, loaded: Loaded) -> str:
    """Why a tensor has no statistics, naming where they came from (a stats CSV, an appendix file, tcmp's index)."""
    kind = ref.files[0].kind if ref.files else None
    s = loaded.summary
    if s is not None and s.numel and s.nan_count == s.numel:
        what = "every element is NaN"
    else:
        by_kind: dict[Optional[FileKind], str] = {
            FileKind.GE_STATS_CSV: "a stats CSV's empty or NA cells",
            FileKind.GE_MIN_MAX_NPZ: "an appendix min/max file without them",
            FileKind.FX_MIN_MAX_NPY: "an appendix min/max file without them",
        }
        what = by_kind.get(kind, "no numeric data")
    return f"{what}; from tcmp's index, the raw file deleted" if ref.raw_deleted else what


def _nan_inf(summary: Optional[Summary]) -> Optional[bool]:
    if summary is None or summary.nan_count is None:
        return None
    return bool(summary.nan_count or summary.inf_count)


def _cast_of(inp: Loaded, out: Loaded, check: CastCheck, mode: Mode) -> tuple[Loaded, str]:
    """The bench of a value-changing GE-inserted cast, and the row's note: Cast(its input), exactly from raw
    tensors, else what the input's statistics determine (`cast_check`)."""
    if inp.array is not None and out.array is not None:
        expected = expected_output(inp.array, out.array, check)
        return Loaded(expected.array, None, check.target, inp.shape, inp.notes), expected.note
    if mode is Mode.MD5:
        raise Unavailable("raw input not available: the CRC-32 of Cast(input) needs the raw tensors")
    if inp.summary is None or out.summary is None:
        raise Unavailable("raw input not available, nor its statistics: Cast(input) cannot be computed")
    summary, note = expected_summary(inp.summary, out.summary, check)
    if summary is None:
        raise Unavailable(note)
    return Loaded(None, summary, check.target, inp.shape, inp.notes), note


def _widened(inp: Loaded, check: CastCheck) -> Loaded:
    """A value-preserving cast's input in the output's dtype (exact), whose CRC-32 the output's must equal."""
    assert inp.array is not None  # `evaluate` raises Unavailable first when there is no raw input
    array = inp.array.astype(numpy_dtype(check.target))
    note = f"CRC-32 of the input in the cast's output dtype ({check.label})"
    return Loaded(array, None, check.target, inp.shape, (*inp.notes, note))


def _values(s: Summary) -> StatValues:
    return StatValues(s.max, s.min, s.mean, s.l2norm)


def _statistics_noise(pair: Pair, npu: Loaded, bench: Loaded) -> Optional[StatisticsNoise]:
    """What the rounding-noise rule needs to judge a statistics row: None where its sides are no floats it knows."""
    n_dtype, b_dtype = float_type_named(npu.dtype), float_type_named(bench.dtype)
    if n_dtype is None or b_dtype is None or npu.summary is None or bench.summary is None:
        return None
    carried = float_type_named(pair.carried)
    unit = RULE.unit(n_dtype, b_dtype, carried)
    if unit is None:
        return None
    narrower = RULE.carried_unit(RULE.unit(n_dtype, b_dtype), carried) is not None
    numel = bench.summary.numel or npu.summary.numel or 0
    return StatisticsNoise(unit, narrower, _values(npu.summary), _values(bench.summary), numel)


def evaluate(pair: Pair, mode: Mode, thresholds: Thresholds, loader: TensorLoader) -> Row:
    """Compare one pair in `mode` (never raises for missing or odd data: the row says what is missing)."""
    messages: list[str] = list(pair.notes)
    npu = bench = None
    tensor = statistics = None
    judgement = Judgement(Result.FAIL, False)
    one_side = unreadable = False
    try:
        if mode is Mode.TENSOR:
            npu = loader.raw(pair.npu)
            raw_bench = in_npu_shape(npu, loader.raw(pair.bench), pair.bench)
            bench = at_npu_precision(npu, raw_bench)
        else:
            npu = loader.data(pair.npu)
            bench = at_npu_precision(npu, loader.data(pair.bench))
        if pair.cast is not None and not pair.cast.preserving:
            bench, note = _cast_of(bench, npu, pair.cast, mode)
            messages = [m for m in messages if not m.startswith("self check")] + [note]  # it says more
        elif pair.cast is not None and mode is Mode.MD5:
            if bench.array is None:
                raise Unavailable("raw input not available: its CRC-32 in the cast's output dtype needs the raw tensor")
            bench = _widened(bench, pair.cast)
        if mode is Mode.TENSOR:
            tensor = loader.metrics(pair, npu, bench, bench is not raw_bench)
            if tensor.stats is not None:  # computed on the way: no second pass over the data
                npu, bench = (_with_stats(x, s) for x, s in zip((npu, bench), tensor.stats))
        npu, bench = loader.summarized(npu, mode), loader.summarized(bench, mode)
        if mode is Mode.TENSOR:
            assert tensor is not None  # computed above in tensor mode
            messages += tensor.messages
            judgement = judge_tensor(tensor, thresholds)
            if judgement.note is not None:
                messages.append(judgement.note)
            one_side = tensor.nan_inf_mismatch and _nan_inf(npu.summary) != _nan_inf(bench.summary)
        elif mode is Mode.STATISTICS:
            empty = [side for side, x in (("NPU", npu), ("bench", bench)) if not _has_statistics(x.summary)]
            if _no_elements(npu) and _no_elements(bench):  # as in tensor mode: nothing to compare, nothing wrong
                messages.append(EMPTY_BOTH)
                judgement = Judgement(Result.PASS, True)
            elif empty:  # nothing measured: neither PASS nor FAIL
                sides = zip(("NPU", "bench"), (npu, bench), (pair.npu, pair.bench))
                messages += [f"{side}: no statistics recorded ({_where(ref, x)})" for side, x, ref in sides
                             if side in empty]  # fmt: skip
                judgement = Judgement(Result.NA, False)
            else:
                assert npu.summary is not None and bench.summary is not None  # `_has_statistics` on both (`empty`)
                statistics = statistics_metrics(npu.summary, bench.summary)
                messages += statistics.messages
                b = bench.summary
                noise = _statistics_noise(pair, npu, bench)
                judgement = judge_statistics(statistics, b.max, b.min, b.l2norm, thresholds, noise)
                if judgement.note is not None:
                    messages.append(judgement.note)
                one_side = statistics.nan_inf_one_side
            if _shapes_differ(npu.shape, bench.shape) and not _reshaped_alike(npu.shape, bench.shape, pair.bench):
                assert npu.shape is not None and bench.shape is not None  # `_shapes_differ` is False without both
                messages.append(f"Shape of NPU {list(npu.shape)} and bench {list(bench.shape)} tensor do not match.")
                judgement = Judgement(Result.FAIL, False)
        else:
            if npu.summary is None or bench.summary is None:  # a stored summary that knows nothing numeric
                raise AttributeError("'NoneType' object has no attribute 'crc32'")  # as before: not handled here
            n_crc, b_crc = crc_hex(npu.summary.crc32), crc_hex(bench.summary.crc32)
            why: list[str] = []
            if n_crc is None or b_crc is None:
                why = [n for r in (pair.npu, pair.bench) if r.stored is not None for n in r.stored.notes
                       if n.startswith(CRC_UNKNOWN)]  # fmt: skip
                messages += why or ["no CRC-32 on one side (summary-only source)"]
            # a CRC the slices' CRCs cannot give is unknown, not different
            judgement = Judgement(Result.NA, False) if why else judge_md5(n_crc, b_crc)
        squeeze = squeeze_note(npu.shape, bench.shape) if mode is not Mode.MD5 else None  # a CRC ignores shapes
        if squeeze is not None:
            messages.append(squeeze)
        for side, loaded in (("NPU", npu), ("bench", bench)):
            messages += [f"{side}: {note}" for note in loaded.notes]
    except Unavailable as exc:
        which = "NPU" if npu is None else "bench"
        messages.append(f"{which} {exc}")
        judgement = Judgement(Result.NA, False)
        unreadable = isinstance(exc, Unreadable)
    return Row(
        pair=pair,
        npu=_stats(npu),
        bench=_stats(bench),
        tensor=tensor,
        statistics=statistics,
        result=judgement.result,
        accuracy_reached=judgement.accuracy_reached,
        messages=tuple(messages),
        nan_inf_one_side=one_side,
        from_index=pair.npu.raw_deleted or pair.bench.raw_deleted,
        unreadable=unreadable,
    )
