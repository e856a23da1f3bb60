"""Rounding noise is not an error (issue 22, "What was seen" 3): a tensor-mode row whose every element is within
2 units in the last place of the lower-precision dtype of its two sides is PASS, with "within 2 ulp of <dtype>",
whatever MaxRelativeErr says; MaxUlpErr shows the largest difference in those units.

The expected ulps come from hand-worked examples and from a re-implementation of msprobe's ULP error (its API
precision standard: the bench's exponent floor(log2|b|), never below the dtype's smallest normal one, the error
(n - b) * 2^(mantissa bits - exponent)), written out here independently of tcmp.compare. Every test of the
metrics runs twice: with the compiled pair loop and with the numpy path.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from tcmp.compare.execute.run import run_compare
from tcmp.compare.judge.metrics import NA, Mode, tensor_metrics
from tcmp.compare.judge.verdict import Result, Thresholds, judge_tensor
from tcmp.compare.report.legend import legend
from tcmp.compare.report.outcome import CompareOptions
from tcmp.compare.report.table import columns
from tcmp.compare.rules.ulp import RULE
from tcmp.schemas.dtypes import DataType
from tcmp.schemas.synth.faults import Fault, FaultKind
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

BF16 = ml_dtypes.bfloat16
README = Path(__file__).resolve().parents[2] / "README.md"


def judged(npu, bench):
    m = tensor_metrics(npu, bench)
    j = judge_tensor(m, Thresholds())
    return m, j


# --- hand-worked ------------------------------------------------------------------------------------------------

# bf16 has 7 stored significand bits: at 1.0 one step is 2^-7 = 0.0078125, at 1.5 also 2^-7 (same binade)
ONE_STEP = 2.0**-7


@pytest.mark.parametrize(("steps", "max_rel", "result", "note"), [
    (1, ONE_STEP, Result.PASS, None),  # 0.0078 < 0.01: the plain rule passes it already
    (2, 2 * ONE_STEP, Result.PASS, "within 2 ulp of bf16"),  # 0.0156 >= 0.01: noise, not an error
    (3, 3 * ONE_STEP, Result.FAIL, None),
])  # fmt: skip
def test_bf16_one_and_two_steps_pass_three_fail(metrics_engine, steps, max_rel, result, note):
    bench = np.array([1.0, 1.5, -1.0, 1.25], dtype=BF16)
    npu = np.array([1.0 + steps * ONE_STEP, 1.5, -1.0, 1.25], dtype=BF16)
    m, j = judged(npu, bench)
    assert m.max_ulp_err == steps and m.ulp_unit.name == "bf16"
    assert m.max_relative_err == pytest.approx(max_rel, rel=1e-9)
    assert j.result is result and j.note == note


def test_bf16_one_step_where_it_is_a_large_relative_error_passes_with_the_note(metrics_engine):
    # below the smallest normal (2^-126) bf16 keeps a fixed step of 2^-133: one step from 2^-133 doubles it
    tiny = 2.0**-133
    bench = np.array([1.0, tiny], dtype=BF16)
    npu = np.array([1.0, 2 * tiny], dtype=BF16)
    m, j = judged(npu, bench)
    assert m.max_ulp_err == 1 and m.max_relative_err == pytest.approx(1.0)
    assert j.result is Result.PASS and j.note == "within 2 ulp of bf16"
    npu3 = np.array([1.0, 4 * tiny], dtype=BF16)  # three steps
    m, j = judged(npu3, bench)
    assert m.max_ulp_err == 3 and j.result is Result.FAIL


def test_fp16_steps_are_2_to_the_minus_10_and_its_subnormal_floor_2_to_the_minus_24(metrics_engine):
    bench = np.float16([1.0, 1.5, 2.0**-24, 0.0])
    npu = np.float16([1.0 + 2 * 2.0**-10, 1.5 + 2.0**-10, 3 * 2.0**-24, 2.0**-24])
    m, j = judged(npu, bench)
    # 2 steps at 1.0, 1 at 1.5, 2 at the smallest subnormal (MaxRelativeErr 2.0), 1 at zero (the floor's step)
    assert m.max_ulp_err == 2 and m.ulp_unit.name == "fp16"
    assert m.max_relative_err == pytest.approx(2.0)
    assert j.result is Result.PASS and j.note == "within 2 ulp of fp16"
    npu[2] = np.float16(4 * 2.0**-24)
    m, j = judged(npu, bench)
    assert m.max_ulp_err == 3 and j.result is Result.FAIL


def test_fp32_steps_are_2_to_the_minus_23(metrics_engine):
    bench = np.float32([3.0, 2.0**-149 * 5])  # 3.0 lies in [2, 4): one step is 2^(1-23)
    npu = np.float32([3.0 + 2 * 2.0**-22, 2.0**-149 * 7])
    m, j = judged(npu, bench)
    assert m.max_ulp_err == 2 and m.ulp_unit.name == "fp32"
    assert m.max_relative_err == pytest.approx(0.4)  # the subnormal element: 2 steps of 5
    assert j.result is Result.PASS and j.note == "within 2 ulp of fp32"
    npu[0] = np.float32(3.0 + 3 * 2.0**-22)
    m, j = judged(npu, bench)
    assert m.max_ulp_err == 3 and j.result is Result.FAIL


def test_the_unit_is_the_lower_precision_side_a_bf16_ge_tensor_against_the_fx_float32_file(metrics_engine):
    bench = np.array([1.0, 1.5], dtype=BF16).astype(np.float32)  # the FX dumper's float32 copy of a bf16 tensor
    npu = np.array([1.0 + 2 * ONE_STEP, 1.5], dtype=BF16)
    m, j = judged(npu, bench)
    assert m.ulp_unit.name == "bf16" and m.max_ulp_err == 2
    assert j.result is Result.PASS and j.note == "within 2 ulp of bf16"
    # the other way round, and fp16 against fp32
    m, _ = judged(bench, npu)
    assert m.ulp_unit.name == "bf16"
    m, _ = judged(np.float16([1.0, 2.0]), np.float32([1.0, 2.0 + 2.0**-9]))
    assert m.ulp_unit.name == "fp16" and m.max_ulp_err == 1  # 2^-9 at 2.0 is one fp16 step (2^(1-10))


def test_ints_have_no_ulp_and_keep_the_plain_rule(metrics_engine):
    m, j = judged(np.int32([100, 200]), np.int32([100, 201]))
    assert m.max_ulp_err is NA and m.ulp_unit is None
    assert j.result is Result.PASS  # MaxRelativeErr 0.005
    m, j = judged(np.int32([100, 200]), np.int32([100, 203]))  # 0.0148
    assert m.max_ulp_err is NA and j.result is Result.FAIL and j.note is None


def test_an_error_beyond_the_ulps_fails_as_before(metrics_engine):
    bench = np.array(np.linspace(0.5, 4.0, 64), dtype=BF16)
    npu = (bench.astype(np.float32) * 1.05).astype(BF16)  # a real 5 % error
    m, j = judged(npu, bench)
    assert m.max_ulp_err > RULE.k and j.result is Result.FAIL and j.note is None


# --- the forward re-implementation --------------------------------------------------------------------------------


def msprobe_ulp_err(npu: np.ndarray, bench: np.ndarray, mantissa: int, min_exponent: int) -> float:
    """msprobe's ULP error, max over elements, but with the bench's exponent at 0 taken as the dtype's smallest
    normal one (msprobe takes 0 there)."""
    n = np.asarray(npu).astype(np.float64)
    b = np.asarray(bench).astype(np.float64)
    magnitude = np.abs(b)
    eb = np.where(magnitude == 0, min_exponent, np.floor(np.log2(np.where(magnitude == 0, 1.0, magnitude))))
    eb = np.maximum(eb, min_exponent)
    return float(np.max(np.abs((n - b) * np.exp2(-eb + mantissa))))


def _random(rng, dtype, size):
    """Values over many binades, with zeros, subnormals and both signs."""
    magnitude = np.exp2(rng.uniform(-30 if dtype == np.float16 else -140, 10, size))
    values = (magnitude * rng.choice([-1.0, 1.0], size)).astype(dtype)
    values[rng.random(size) < 0.05] = 0
    return values


@pytest.mark.parametrize(("dtype", "mantissa", "min_exponent"), [
    (np.float16, 10, -14), (BF16, 7, -126), (np.float32, 23, -126),
])  # fmt: skip
@pytest.mark.parametrize("seed", range(4))
def test_max_ulp_err_matches_a_forward_implementation_on_random_data(
    metrics_engine, dtype, mantissa, min_exponent, seed
):
    rng = np.random.default_rng(seed)
    bench = _random(rng, dtype, 5000)
    # the NPU: the bench a few steps off (next representable values)
    npu = bench.copy()
    for _ in range(int(rng.integers(1, 4))):
        npu = np.nextafter(npu, np.where(rng.random(npu.size) < 0.5, np.inf, -np.inf).astype(dtype))
    if seed % 2:  # and a few elements far off
        npu[rng.integers(0, npu.size, 3)] *= dtype(1.5)
    m = tensor_metrics(npu, bench)
    assert m.max_ulp_err == pytest.approx(msprobe_ulp_err(npu, bench, mantissa, min_exponent), rel=1e-12)
    # and against a wider bench of the same values (the FX dumper's float32 / float64 copies)
    wide = bench.astype(np.float64)
    m = tensor_metrics(npu, wide)
    assert m.max_ulp_err == pytest.approx(msprobe_ulp_err(npu, wide, mantissa, min_exponent), rel=1e-12)


def test_matched_nan_and_inf_are_zeroed_before_the_ulps(metrics_engine):
    bench = np.float16([1.0, np.nan, np.inf, 1.5])
    npu = np.float16([1.0 + 2.0**-10, np.nan, np.inf, 1.5])
    m = tensor_metrics(npu, bench)
    assert m.max_ulp_err == 1


# --- where the rule is written down ------------------------------------------------------------------------------


def test_the_column_follows_five_thousandth_err_ratio_in_tensor_mode_only():
    tensor = columns(Mode.TENSOR)
    assert tensor[tensor.index("Five Thousandth Err Ratio") + 1] == "MaxUlpErr"
    assert "MaxUlpErr" not in columns(Mode.STATISTICS) and "MaxUlpErr" not in columns(Mode.MD5)
    # one cell per metric column, in the column's place
    m = tensor_metrics(np.float16([1.0, 2.0]), np.float16([1.0, 2.0 + 2.0**-9]))
    metric_columns = tensor[tensor.index("Cosine") : tensor.index("MaxUlpErr") + 1]
    assert len(m.cells) == len(metric_columns) and m.cells[metric_columns.index("MaxUlpErr")] == 1
    assert m.cells[metric_columns.index("MaxRelativeErr")] == m.max_relative_err


def test_the_rule_is_declared_once_and_the_legend_and_readme_say_it():
    text = RULE.text()
    assert f"at most {RULE.k} units in the last place" in text
    for t in RULE.table:
        assert f"{t.name}: 2^-{t.mantissa_bits}" in text
    assert text in legend(Mode.TENSOR, Thresholds())
    assert text in legend(Mode.STATISTICS, Thresholds())  # it bounds the statistics too
    assert text not in legend(Mode.MD5, Thresholds())
    readme = re.sub(r"\s+", " ", README.read_text(encoding="utf-8")).replace("**", "")  # its wrapping, its bold
    assert text in readme, "README.md must carry RULE.text() word for word"


# --- end to end: GE vs fusion-off GE in bf16, rounding noise only (issue 22 item 3) --------------------------------


@pytest.fixture(scope="module")
def bf16_noise(tmp_path_factory):
    config = ScenarioConfig(model=ModelConfig(layers=2, dtype=int(DataType.DT_BF16)), tokens=2, ulp_noise=2)
    return write_scenario(tmp_path_factory.mktemp("bf16_noise"), config)


@pytest.mark.parametrize("golden", ["golden_ge", "golden_fx"])
def test_bf16_rounding_noise_gives_no_fail_and_no_first_divergence(bf16_noise, golden):
    result, _ = run_compare(CompareOptions(bf16_noise.target, getattr(bf16_noise, golden)), keep_rows=True)
    rows = [r for rank in result.ranks for r in rank.rows]
    assert rows and result.mode is Mode.TENSOR
    failing = [(r.pair.api_name, r.tensor.cells if r.tensor else None) for r in rows if r.result is Result.FAIL]
    assert failing == []
    assert [d for rank in result.ranks for d in rank.divergences] == []
    # the noise is there, and it is what the rule let pass: rows the plain rule fails, each with the note
    rescued = [r for r in rows if "within 2 ulp of bf16" in r.messages]
    assert rescued, "the scenario should hold rows the plain rule fails"
    for r in rescued:
        t = r.tensor
        assert 0 < t.max_ulp_err <= 2 and t.ulp_unit.name == "bf16"
        assert not (t.cosine >= 0.99 and t.max_relative_err < 0.01)  # the plain rule would FAIL it
    assert max(r.tensor.max_ulp_err for r in rows if r.tensor and isinstance(r.tensor.max_ulp_err, float)) == 2


def test_an_injected_fault_under_rounding_noise_still_fails_and_is_the_first_divergence(tmp_path):
    config = ScenarioConfig(model=ModelConfig(layers=2, dtype=int(DataType.DT_BF16)), tokens=1, ulp_noise=2,
                            faults=(Fault("MatMul_0", FaultKind.REL_ERROR, magnitude=0.03),))  # fmt: skip
    scenario = write_scenario(tmp_path, config)
    for golden in (scenario.golden_ge, scenario.golden_fx):
        result, _ = run_compare(CompareOptions(scenario.target, golden), keep_rows=True)
        rank = result.ranks[0]
        failing = {r.pair.op_name for r in rank.rows if r.result is Result.FAIL}
        assert failing == {"MatMul_0"}
        assert [d.op_name for d in rank.divergences] == ["MatMul_0"]
        row = next(r for r in rank.rows if r.pair.op_name == "MatMul_0" and r.result is Result.FAIL)
        assert row.tensor.max_ulp_err > 2 and not any("ulp" in m for m in row.messages)
        assert not math.isnan(row.tensor.max_ulp_err)
