"""Scalar FX arguments are compared at the precision the NPU held them in, raw or as summaries; what the loader's
caches hold."""

import ml_dtypes
import numpy as np
import pytest

from tcmp.compare.judge.evaluate import at_npu_precision, evaluate, in_npu_shape
from tcmp.compare.judge.loader import Loaded, TensorLoader, Unavailable
from tcmp.compare.judge.metrics import EMPTY_BOTH, Mode
from tcmp.compare.judge.verdict import Result, Thresholds
from tcmp.compare.records import Pair, TensorRef
from tcmp.schemas.dump_records import IO, Summary, TensorKind, TensorSummary
from tcmp.schemas.dump_tree import DumpFile, locate


def scalar_summary(value: float) -> Summary:
    return Summary(1, value, value, value, abs(value), 0, 0, None)


@pytest.mark.parametrize(
    ("npu_dtype", "as_numpy"),
    [("DT_FLOAT16", np.float16), ("float16", np.float16), ("DT_BF16", ml_dtypes.bfloat16), ("DT_FLOAT", np.float32)],
)
def test_scalar_summary_rounded_to_npu_dtype(npu_dtype, as_numpy):
    npu = Loaded(None, scalar_summary(1e-6), npu_dtype, (1,))
    bench = at_npu_precision(npu, Loaded(None, scalar_summary(1e-6), "float64", ()))
    expected = float(np.float64(1e-6).astype(as_numpy))
    assert expected != 1e-6
    assert (bench.summary.min, bench.summary.max, bench.summary.mean) == (expected, expected, expected)
    assert bench.summary.l2norm == pytest.approx(abs(expected))
    assert "precision" in bench.notes[-1]


def test_raw_scalar_rounded_and_tensors_left_alone():
    npu = Loaded(np.zeros(3, np.float16), None, "DT_FLOAT16", (3,))
    raw = at_npu_precision(npu, Loaded(np.asarray(0.1), None, "float64", ()))
    assert raw.array.dtype == np.float16 and float(raw.array) == float(np.float16(0.1))
    vector = Loaded(np.full(3, 0.1), None, "float64", (3,))
    assert at_npu_precision(npu, vector) is vector
    int_npu = Loaded(None, scalar_summary(2.0), "DT_INT32", (1,))
    bench = Loaded(None, scalar_summary(0.1), "float64", ())
    assert at_npu_precision(int_npu, bench) is bench


def test_memoized_metrics_hold_a_copy_of_the_payload_not_its_file_buffer():
    """A memo entry keeps the NPU payload to check CRC hits against; a view would keep the whole buffer it lies in
    (a GE file's data) alive, beyond what the loader's byte budget counts."""
    file_data = np.arange(4096, dtype=np.float16)  # stands in for a GE file's payload region
    npu = Loaded(file_data[1024:2048], None, "DT_FLOAT16", (1024,))
    bench = Loaded(file_data[1024:2048].astype(np.float32), None, "float32", (1024,))
    ref = TensorRef((), IO.OUTPUT, 0)
    pair = Pair(0, 0, "graph", "op", "Add", 0, 0, IO.OUTPUT, 0, ref, ref)
    loader = TensorLoader()
    first = loader.metrics(pair, npu, bench, bench_rounded=False)
    assert loader.metrics(pair, npu, bench, bench_rounded=False) is first  # memoized
    for cache in (loader._memo, loader._summaries):
        for (payload, _), _nbytes in cache.values():
            assert not np.shares_memory(payload, file_data)
    loader.summarized(npu, Mode.STATISTICS)
    assert loader._summaries and all(not np.shares_memory(p, file_data) for (p, _), _ in loader._summaries.values())


def test_a_reshaped_golden_tensor_takes_the_npu_shape_only_with_as_many_elements():
    """A golden tensor the matcher took as a reshape of the NPU's (a view torchair's pattern fusion folded in) is
    laid out in the NPU's shape, keeping its own reported shape; with another element count it is not that tensor:
    no verdict, never a FAIL."""
    npu = Loaded(np.arange(6, dtype=np.float32).reshape(2, 3), None, "DT_FLOAT", (2, 3))
    flat = Loaded(np.arange(6, dtype=np.float32).reshape(6, 1), None, "float32", (6, 1))
    reshaped = TensorRef((), IO.OUTPUT, 0, reshaped=True)
    laid_out = in_npu_shape(npu, flat, reshaped)
    assert laid_out.array.shape == (2, 3) and laid_out.shape == (6, 1)
    assert np.array_equal(laid_out.array, npu.array)
    assert in_npu_shape(npu, flat, TensorRef((), IO.OUTPUT, 0)) is flat
    with pytest.raises(Unavailable, match="no reshape"):
        in_npu_shape(npu, Loaded(np.zeros(7, np.float32), None, "float32", (7,)), reshaped)


def _summary_pair(tmp_path, npu: TensorSummary, bench: TensorSummary, npu_name: str, from_index: bool) -> Pair:
    """A pair of tensors known by their summaries only: a GE file (`npu_name`: a dump or a stats CSV) and an FX
    file, both deleted by `tcmp watch` (`from_index`) or not."""
    step = tmp_path / "msprobe_ge_dump/worldsize1_global_rank0/20261129083000/0/graph_1_0/1/0"
    fx_step = tmp_path / "msprobe_fx_dump/worldsize1_global_rank0/gm_20261129083000000000_dump/0"
    fx_name = "cat_kv-aten.cat.default.INPUT.0.0.20261129083000000017.npy"
    files = [locate(step / npu_name, mapping={}), locate(fx_step / fx_name, mapping={})]
    assert all(isinstance(f, DumpFile) for f in files)
    refs = [TensorRef((f,), IO.INPUT, 0, stored=s, raw_deleted=from_index) for f, s in zip(files, (npu, bench))]
    return Pair(0, 0, "graph_1", "ConcatV2_kv", "ConcatV2", 0, 0, IO.INPUT, 0, *refs)


def _record(summary, shape, dtype="DT_FLOAT16", kind=TensorKind.TENSOR) -> TensorSummary:
    return TensorSummary(IO.INPUT, 0, None, kind, dtype, shape, summary)


EMPTY = Summary(0, None, None, None, None, 0, 0, None)  # what summarizing an empty tensor gives


@pytest.mark.parametrize("from_index", [False, True])
@pytest.mark.parametrize(
    ("name", "npu"),
    [
        ("ConcatV2.ConcatV2_kv.17.2.1764400000000592", _record(EMPTY, (0, 32))),
        # a stats CSV gives no element count: its shape says the tensor is empty
        ("ConcatV2.ConcatV2_kv.17.2.1764400000000592.csv",
         _record(Summary(None, None, None), (0, 32), kind=TensorKind.STATS)),
    ],
)  # fmt: skip
def test_empty_tensors_pass_in_statistics_mode_as_in_tensor_mode(tmp_path, from_index, name, npu):
    pair = _summary_pair(tmp_path, npu, _record(EMPTY, (0, 32), "float16"), name, from_index)
    row = evaluate(pair, Mode.STATISTICS, Thresholds(), TensorLoader())
    assert (row.result, row.accuracy_reached) == (Result.PASS, True)
    assert EMPTY_BOTH in row.messages


@pytest.mark.parametrize(
    ("name", "kind", "from_index", "says"),
    [
        ("ConcatV2.ConcatV2_kv.17.2.1764400000000592.csv", TensorKind.STATS, False, "a stats CSV's empty or NA cells"),
        ("ConcatV2.ConcatV2_kv.17.2.1764400000000592.csv", TensorKind.STATS, True,
         "a stats CSV's empty or NA cells; from tcmp's index, the raw file deleted"),
        ("ConcatV2.ConcatV2_kv.17.2.1764400000000592", TensorKind.RAW, True,
         "no numeric data; from tcmp's index, the raw file deleted"),
    ],
)  # fmt: skip
def test_missing_statistics_name_their_real_source(tmp_path, name, kind, from_index, says):
    npu = _record(Summary(None, None, None), (4, 32), kind=kind)
    bench = _record(Summary(128, -1.0, 1.0, 0.0, 3.0, 0, 0, None), (4, 32), "float16")
    row = evaluate(_summary_pair(tmp_path, npu, bench, name, from_index), Mode.STATISTICS, Thresholds(), TensorLoader())
    assert row.result is Result.NA
    assert f"NPU: no statistics recorded ({says})" in row.messages
    assert not any("bench: no statistics" in m for m in row.messages)
