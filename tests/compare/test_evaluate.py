"""Scalar FX arguments are compared at the precision the NPU held them in, raw or as summaries; what the loader's
caches hold."""

import ml_dtypes
import numpy as np
import pytest

from tcmp.compare.evaluate import Loaded, TensorLoader, Unavailable, _at_npu_precision, _in_npu_shape
from tcmp.compare.metrics import Mode
from tcmp.compare.records import Pair, TensorRef
from tcmp.schemas.records import IO, Summary


def scalar_summary(value: float) -> Summary:
    return Summary(1, value, value, value, abs(value), 0, 0, None)


@pytest.mark.parametrize(
    ("npu_dtype", "as_numpy"),
    [("DT_FLOAT16", np.float16), ("float16", np.float16), ("DT_BF16", ml_dtypes.bfloat16), ("DT_FLOAT", np.float32)],
)
def test_scalar_summary_rounded_to_npu_dtype(npu_dtype, as_numpy):
    npu = Loaded(None, scalar_summary(1e-6), npu_dtype, (1,))
    bench = _at_npu_precision(npu, Loaded(None, scalar_summary(1e-6), "float64", ()))
    expected = float(np.float64(1e-6).astype(as_numpy))
    assert expected != 1e-6
    assert (bench.summary.min, bench.summary.max, bench.summary.mean) == (expected, expected, expected)
    assert bench.summary.l2norm == pytest.approx(abs(expected))
    assert "precision" in bench.notes[-1]


def test_raw_scalar_rounded_and_tensors_left_alone():
    npu = Loaded(np.zeros(3, np.float16), None, "DT_FLOAT16", (3,))
    raw = _at_npu_precision(npu, Loaded(np.asarray(0.1), None, "float64", ()))
    assert raw.array.dtype == np.float16 and float(raw.array) == float(np.float16(0.1))
    vector = Loaded(np.full(3, 0.1), None, "float64", (3,))
    assert _at_npu_precision(npu, vector) is vector
    int_npu = Loaded(None, scalar_summary(2.0), "DT_INT32", (1,))
    bench = Loaded(None, scalar_summary(0.1), "float64", ())
    assert _at_npu_precision(int_npu, bench) is bench


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
    laid_out = _in_npu_shape(npu, flat, reshaped)
    assert laid_out.array.shape == (2, 3) and laid_out.shape == (6, 1)
    assert np.array_equal(laid_out.array, npu.array)
    assert _in_npu_shape(npu, flat, TensorRef((), IO.OUTPUT, 0)) is flat
    with pytest.raises(Unavailable, match="no reshape"):
        _in_npu_shape(npu, Loaded(np.zeros(7, np.float32), None, "float32", (7,)), reshaped)
