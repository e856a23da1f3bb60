"""A GE-inserted Cast is checked by what a cast computes (issue 22: "Casts are checked by what a cast computes",
"What was seen" item 2): a value-changing cast's output against Cast(its input) under the roundings CANN
documents, a value-preserving one against its input. Expected values are worked by hand, or written by the
synthetic writer's own model of CANN's kernel (`cann_cast`: trunc and saturation for float → int, nearest even
for a narrower float)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tcmp.compare.execute.run import run_compare
from tcmp.compare.judge.metrics import Mode
from tcmp.compare.judge.verdict import Result
from tcmp.compare.report.outcome import CompareOptions, DataMode
from tcmp.compare.report.table import row_cells
from tcmp.compare.rules.cast_check import cast_check_for, expected_output, expected_summary
from tcmp.daemon.retention import RetentionPolicy
from tcmp.daemon.service import WatchConfig, run_watch
from tcmp.schemas.dtypes import DataType
from tcmp.schemas.dump_records import Summary
from tcmp.schemas.ge_dump import open_ge_dump
from tcmp.schemas.synth.faults import Fault, FaultKind
from tcmp.schemas.synth.ge_writer import TensorSpec, write_ge_dump
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

BF16 = ml_dtypes.bfloat16


def _expected(source: str, target: str, x, out):
    check = cast_check_for(source, target)
    assert check is not None and not check.preserving
    return expected_output(np.asarray(x), np.asarray(out), check)


# --- which casts change values -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "target"),
    [("DT_FLOAT16", "DT_FLOAT"), ("DT_BF16", "DT_FLOAT"), ("DT_INT8", "DT_FLOAT16"), ("DT_UINT8", "DT_BF16"),
     ("DT_INT16", "DT_FLOAT"), ("DT_INT32", "DT_INT64"), ("DT_INT8", "DT_INT32"), ("DT_BOOL", "DT_FLOAT16")],
)  # fmt: skip
def test_a_cast_that_keeps_every_value_keeps_the_plain_self_check(source, target):
    check = cast_check_for(source, target)
    assert check is not None and check.preserving


@pytest.mark.parametrize(
    ("source", "target"),
    [("DT_FLOAT16", "DT_INT8"), ("DT_FLOAT", "DT_INT32"), ("DT_FLOAT", "DT_FLOAT16"), ("DT_FLOAT", "DT_BF16"),
     ("DT_FLOAT16", "DT_BF16"), ("DT_BF16", "DT_FLOAT16"), ("DT_INT16", "DT_FLOAT16"), ("DT_INT32", "DT_FLOAT"),
     ("DT_INT64", "DT_INT32"), ("DT_FLOAT16", "DT_BOOL"), ("DT_INT32", "DT_BOOL")],
)  # fmt: skip
def test_a_cast_that_can_change_values_is_compared_with_cast_of_its_input(source, target):
    check = cast_check_for(source, target)
    assert check is not None and not check.preserving


def test_same_dtype_and_unmodelled_dtypes_keep_the_plain_self_check():
    assert cast_check_for("DT_FLOAT16", "DT_FLOAT16") is None
    assert cast_check_for("DT_FLOAT", "DT_FLOAT8_E4M3FN") is None
    assert cast_check_for(None, "DT_INT8") is None


# --- hand-worked expected outputs --------------------------------------------------------------------------


def test_fp16_to_int8_round_toward_zero():
    x = np.array([1.5, -1.5, 2.7, -2.7, 0.49, 2.5], np.float16)
    got = _expected("DT_FLOAT16", "DT_INT8", x, [1, -1, 2, -2, 0, 2])
    assert got.array.dtype == np.int8 and got.array.tolist() == [1, -1, 2, -2, 0, 2]
    assert got.note == "self check: output = Cast(input) float16 -> int8 (round toward zero)"


def test_fp16_to_int8_round_half_to_even_is_recognised():
    x = np.array([1.5, -1.5, 2.7, -2.7, 0.49, 2.5], np.float16)
    got = _expected("DT_FLOAT16", "DT_INT8", x, [2, -2, 3, -3, 0, 2])
    assert got.array.tolist() == [2, -2, 3, -3, 0, 2] and got.note.endswith("(round half to even)")


def test_fp16_to_int8_saturates_and_nan_becomes_zero():
    x = np.array([200.0, -300.0, 127.9, np.inf, -np.inf, np.nan], np.float16)
    got = _expected("DT_FLOAT16", "DT_INT8", x, [127, -128, 127, 127, -128, 0])
    assert got.array.tolist() == [127, -128, 127, 127, -128, 0] and "differ" not in got.note


def test_an_output_no_documented_rounding_explains_says_how_many_elements_differ():
    x = np.array([1.2, 2.2, 3.2, 4.2], np.float16)
    garbage = _expected("DT_FLOAT16", "DT_INT8", x, [3, 5, 7, 9])
    assert garbage.array.tolist() == [1, 2, 3, 4]  # none closer: CANN's kernel rounding (toward zero), first
    assert "4 of 4 elements differ from Cast(input)" in garbage.note and "closest: round toward zero" in garbage.note
    nearly = _expected("DT_FLOAT16", "DT_INT8", x, [2, 3, 4, 4])  # ceil but for one element
    assert nearly.array.tolist() == [2, 3, 4, 5] and "1 of 4 elements differ" in nearly.note


def test_fp32_to_fp16_rounds_to_nearest_even():
    one_ulp = 2.0**-10
    x = np.array([1 + one_ulp / 2, 1 + 3 * one_ulp / 2, -(1 + one_ulp / 2), 65519.0, 65520.0], np.float32)
    nearest = [1.0, 1 + 2 * one_ulp, -1.0, 65504.0, np.inf]  # ties to even; 65520 is past fp16's max: inf
    got = _expected("DT_FLOAT", "DT_FLOAT16", x, np.array(nearest, np.float16))
    assert got.array.dtype == np.float16 and got.array.astype(np.float64).tolist() == nearest
    assert got.note.endswith("(round half to even)")
    truncated = [1.0, 1 + one_ulp, -1.0, 65504.0, 65504.0]
    assert _expected("DT_FLOAT", "DT_FLOAT16", x, np.array(truncated, np.float16)).note.endswith("(round toward zero)")


def test_fp32_to_bf16_rounds_the_top_16_bits_to_nearest_even():
    step = 2.0**-7  # bf16 keeps 7 fraction bits
    x = np.array([1 + step / 2, 1 + 3 * step / 2, 1 + step / 2 + 2.0**-20, -(1 + step / 2)], np.float32)
    nearest = [1.0, 1 + 2 * step, 1 + step, -1.0]
    got = _expected("DT_FLOAT", "DT_BF16", x, np.array(nearest, np.float32).astype(BF16))
    assert got.array.dtype == BF16 and got.array.astype(np.float64).tolist() == nearest
    assert got.note.endswith("(round half to even)")


def test_int32_to_fp16_beyond_2048_rounds():
    x = np.array([2047, 2049, 2051, 4097, -2049, 70000], np.int32)
    nearest = [2047.0, 2048.0, 2052.0, 4096.0, -2048.0, np.inf]  # fp16 has a step of 2 above 2048, 4 above 4096
    got = _expected("DT_INT32", "DT_FLOAT16", x, np.array(nearest, np.float16))
    assert got.array.astype(np.float64).tolist() == nearest and got.note.endswith("(round half to even)")


def test_to_bool_is_nonzero():
    x = np.array([0.0, -0.0, np.nan, 2.0, 1e-30, -3.0], np.float32)
    got = _expected("DT_FLOAT", "DT_BOOL", x, [False, False, True, True, True, True])
    assert got.array.tolist() == [False, False, True, True, True, True] and "differ" not in got.note


def test_int_narrowing_saturates_or_keeps_the_low_bits():
    x = np.array([300, -300, 5], np.int32)
    assert _expected("DT_INT32", "DT_INT8", x, [127, -128, 5]).note.endswith("(saturate)")
    assert _expected("DT_INT32", "DT_INT8", x, [44, -44, 5]).note.endswith("(low bits kept)")  # 300 - 256 = 44


# --- statistics only -------------------------------------------------------------------------------------


def test_statistics_of_a_cast_bound_what_they_can():
    check = cast_check_for("DT_FLOAT16", "DT_INT8")
    # input [0.5, 1.5, 2.5, 3.7]: trunc gives [0, 1, 2, 3]: mean 1.5, L2 sqrt(14)
    inp = Summary(4, 0.5, 3.7, 2.05, float(np.sqrt(0.25 + 2.25 + 6.25 + 3.7**2)), 0, 0)
    out = Summary(4, 0.0, 3.0, 1.5, float(np.sqrt(14.0)), 0, 0)
    expected, note = expected_summary(inp, out, check)
    assert (expected.min, expected.max) == (0.0, 3.0)  # the input's min and max, rounded toward zero
    assert (expected.mean, expected.l2norm) == (out.mean, out.l2norm)  # within the bounds: no difference shown
    assert "round toward zero" in note and "only bounded" in note
    garbage = Summary(4, 0.0, 3.0, 90.0, 200.0, 0, 0)  # min/max right, mean far beyond what trunc can move it
    expected, _ = expected_summary(inp, garbage, check)
    assert expected.mean == pytest.approx(2.05 + 1.0) and expected.mean < garbage.mean


def test_statistics_of_a_saturating_cast_check_only_min_and_max():
    check = cast_check_for("DT_FLOAT16", "DT_INT8")
    inp = Summary(3, -500.0, 300.0, 10.0, 600.0, 0, 0)
    out = Summary(3, -128.0, 127.0, 3.0, 180.0, 0, 0)
    expected, note = expected_summary(inp, out, check)
    assert (expected.min, expected.max, expected.mean, expected.l2norm) == (-128.0, 127.0, 3.0, 180.0)
    assert "not checkable from statistics" in note


# --- through the compare: a synthetic dump with GE-inserted casts --------------------------------------------

CASTS = {"trans_Cast_1": "float32 -> float16", "trans_Cast_2": "float16 -> int8", "trans_Cast_3": "int8 -> bool"}


def _compare(target, golden, mode=DataMode.AUTO):
    result, _ = run_compare(CompareOptions(target, golden, mode=mode), keep_rows=True)
    return result.ranks[0]


def _sources(scenario):
    """The compare of every source the same dump can come from: raw tensors, raw statistics, raw md5."""
    for golden in (scenario.golden_fx, scenario.golden_ge):
        for mode in (DataMode.TENSOR, DataMode.STATISTICS, DataMode.MD5):
            yield f"{golden.name}/{mode.value}", _compare(scenario.target, golden, mode)


def _cast_rows(rank):
    return {r.pair.op_name: r for r in rank.rows if r.pair.op_name in CASTS}


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    root = tmp_path_factory.mktemp("clean_casts")
    return write_scenario(root, ScenarioConfig(model=ModelConfig(layers=1), tokens=1))


def test_a_clean_dump_with_ge_inserted_casts_has_no_fail_and_no_first_divergence(clean):
    """Issue 22, seen item 2: `trans_Cast_2` (fp16 -> int8, output exactly trunc(input)) FAILed its self check and
    was the first divergence of a dump with no fault."""
    for source, rank in _sources(clean):
        rows = _cast_rows(rank)
        assert set(rows) == set(CASTS), source
        if "msprobe_fx_dump" in source:  # the casts are GE-inserted: checked against Cast(their own input)
            for name, row in rows.items():
                assert row.result is Result.PASS, (source, name, row.messages)
                assert any(f"Cast(input) {CASTS[name]}" in m for m in row.messages), (source, row.messages)
                data_name = row_cells(row, Mode(source.split("/")[1]))[4]
                assert f"input 0) {CASTS[name]}" in data_name and "'Cast(Cast." in data_name, data_name
        if source.endswith("/md5"):
            continue  # GE vs FX md5 differs wherever the dtypes differ (not a cast's doing)
        assert [r.pair.api_name for r in rank.rows if r.result is not Result.PASS] == [], source
        assert not rank.divergences, source


def test_a_clean_cast_passes_from_the_index_too(tmp_path):
    scenario = write_scenario(tmp_path, ScenarioConfig(model=ModelConfig(layers=1), tokens=1))
    run_watch(WatchConfig(roots=(tmp_path,), db=None, retention=RetentionPolicy(True, 0, ()), workers=1, once=True))
    for golden in (scenario.golden_fx, scenario.golden_ge):
        rank = _compare(scenario.target, golden)
        assert rank.counts.rows_from_index == rank.counts.rows > 0
        assert [r.pair.api_name for r in rank.rows if r.result is not Result.PASS] == [] and not rank.divergences
        if golden is scenario.golden_fx:
            notes = " ".join(m for r in _cast_rows(rank).values() for m in r.messages)
            assert "from statistics: min and max are Cast(input)'s" in notes


@pytest.mark.parametrize("dtype", [DataType.DT_FLOAT16, DataType.DT_BF16])
def test_a_corrupted_cast_output_fails_and_is_the_first_divergence(tmp_path, dtype):
    faults = (Fault("trans_Cast_1", FaultKind.REL_ERROR, magnitude=0.05),)
    scenario = write_scenario(tmp_path, ScenarioConfig(model=ModelConfig(layers=1, dtype=int(dtype)), tokens=1,
                                                       faults=faults))  # fmt: skip
    for source, rank in _sources(scenario):
        failing = {r.pair.op_name for r in rank.rows if r.result is Result.FAIL}
        assert "trans_Cast_1" in failing, source
        if not source.endswith("/md5"):
            assert failing == {"trans_Cast_1"}, source
            assert [d.op_name for d in rank.divergences] == ["trans_Cast_1"], source
    run_watch(WatchConfig(roots=(tmp_path,), db=None, retention=RetentionPolicy(True, 0, ()), workers=1, once=True))
    rank = _compare(scenario.target, scenario.golden_fx)  # statistics from the index: min/max are off by 5 %
    assert {r.pair.op_name for r in rank.rows if r.result is Result.FAIL} == {"trans_Cast_1"}
    assert [d.op_name for d in rank.divergences] == ["trans_Cast_1"]


def test_an_int8_cast_off_by_one_fails(clean, tmp_path):
    """A float → int8 cast whose output is Cast(input) + 1 in every element: no rounding explains it."""
    (path,) = [p for p in clean.target.rglob("Cast.trans_Cast_2.*")]
    reader = open_ge_dump(path)
    x = reader.load(reader.dump.inputs[0]).array
    out = reader.load(reader.dump.outputs[0]).array
    assert out.dtype == np.int8
    wrong = np.clip(out.astype(np.int64) + 1, -128, 127)
    reader.close()
    write_ge_dump(path, "trans_Cast_2", [TensorSpec(x.astype(np.float64), int(DataType.DT_FLOAT16))],
                  [TensorSpec(wrong, int(DataType.DT_INT8))], dump_time=reader.dump.dump_time)  # fmt: skip
    try:
        rank = _compare(clean.target, clean.golden_fx, DataMode.TENSOR)
        row = _cast_rows(rank)["trans_Cast_2"]
        assert row.result is Result.FAIL, row.messages
        assert any("elements differ from Cast(input)" in m for m in row.messages)
        assert rank.divergences and rank.divergences[0].op_name == "trans_Cast_2"
    finally:  # the module's clean dump is shared: put the writer's output back
        write_ge_dump(path, "trans_Cast_2", [TensorSpec(x.astype(np.float64), int(DataType.DT_FLOAT16))],
                      [TensorSpec(out.astype(np.int64), int(DataType.DT_INT8))],
                      dump_time=reader.dump.dump_time)  # fmt: skip
