"""Against a fusion-off golden a value-changing GE-inserted Cast is checked as against an FX golden: its output
against Cast(its own input), not against the golden's same-named cast, whose float input carries its own rounding
noise (issue 22: 2 ulps of noise in the float input of a fp16 -> int8 cast move the rounded integer by one); the
int8 tensor such a cast writes is judged the same way where the next op reads it. Values are worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from tcmp.compare.execute.run import run_compare
from tcmp.compare.judge.verdict import Result
from tcmp.compare.records import Role, UnmatchedKind
from tcmp.compare.report.outcome import CompareOptions, DataMode
from tcmp.schemas.dtypes import DataType
from tcmp.schemas.dump_records import IO
from tcmp.schemas.ge_dump import open_ge_dump
from tcmp.schemas.synth.ge_writer import TensorSpec, write_ge_dump
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

F16, I8, BOOL = int(DataType.DT_FLOAT16), int(DataType.DT_INT8), int(DataType.DT_BOOL)
GOLDEN_X = 3.0  # element 0 of trans_Cast_2's input in the golden: Cast gives 3
TARGET_X = 3.0 - 2 * 2.0**-9  # 2 ulps of fp16 below it (one fp16 ulp in [2, 4) is 2^-9): trunc gives 2


def _rewrite(path, change) -> None:
    """Rewrite one GE dump file with `change(inputs, outputs)` applied to its tensors (as float64 / int64)."""
    reader = open_ge_dump(path)
    ins = [np.array(reader.load(t).array) for t in reader.dump.inputs]
    outs = [np.array(reader.load(t).array) for t in reader.dump.outputs]
    dtypes = ([int(t.data_type) for t in reader.dump.inputs], [int(t.data_type) for t in reader.dump.outputs])
    name, dump_time = path.name.split(".")[1], reader.dump.dump_time
    reader.close()
    change(ins, outs)

    def specs(arrays, types):
        return [TensorSpec(a.astype(np.int64 if t in (I8, BOOL) else np.float64), t) for a, t in zip(arrays, types)]

    write_ge_dump(path, name, specs(ins, dtypes[0]), specs(outs, dtypes[1]), dump_time=dump_time)


def _set_first(array: np.ndarray, value) -> None:
    array.reshape(-1)[0] = value


def _cast_file(root, name):
    (path,) = root.rglob(f"Cast.{name}.*")
    return path


@pytest.fixture()
def noisy(tmp_path):
    """A clean fp16 dump, then element 0 of trans_Cast_2's input set to 3.0 in the golden and 2 ulps below in
    the target, each side's casts computing from it: int8 3 in the golden, 2 in the target, bool True on both."""
    scenario = write_scenario(tmp_path, ScenarioConfig(model=ModelConfig(layers=1, dtype=F16), tokens=1))
    for root, x in ((scenario.golden_ge, GOLDEN_X), (scenario.target, TARGET_X)):
        rounded = int(np.trunc(np.float16(x)))
        assert rounded == (3 if x == GOLDEN_X else 2)

        def cast2(ins, outs, x=x, rounded=rounded):
            _set_first(ins[0], x)
            _set_first(outs[0], rounded)

        def cast3(ins, outs, rounded=rounded):
            _set_first(ins[0], rounded)
            _set_first(outs[0], 1)

        _rewrite(_cast_file(root, "trans_Cast_2"), cast2)
        _rewrite(_cast_file(root, "trans_Cast_3"), cast3)
    return scenario


def _rows(scenario, mode=DataMode.TENSOR):
    result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_ge, mode=mode), keep_rows=True)
    rank = result.ranks[0]
    return rank, {(r.pair.op_name, r.pair.io, r.pair.index): r for r in rank.rows}


def test_noise_that_moves_a_rounded_integer_by_one_passes_against_the_fusion_off_golden(noisy):
    rank, rows = _rows(noisy)
    out = rows[("trans_Cast_2", IO.OUTPUT, 0)]
    assert out.result is Result.PASS, out.messages
    assert any("golden trans_Cast_2 output 0 not compared: the target's cast is checked against Cast(its own "
               "input)" in m for m in out.messages), out.messages  # fmt: skip
    assert any("output = Cast(input) float16 -> int8" in m for m in out.messages), out.messages
    fed = rows[("trans_Cast_3", IO.INPUT, 0)]  # the same int8 tensor, where trans_Cast_3 reads it
    assert fed.result is Result.PASS, fed.messages
    assert any("input 0 is output 0 of trans_Cast_2" in m and "Cast(trans_Cast_2 input 0) float16 -> int8" in m
               for m in fed.messages), fed.messages  # fmt: skip
    noisy_input = rows[("trans_Cast_2", IO.INPUT, 0)]  # the float input is still compared with the golden's
    assert noisy_input.result is Result.PASS and noisy_input.pair.cast is None
    assert [r.pair.api_name for r in rank.rows if r.result is Result.FAIL] == [] and not rank.divergences
    # trans_Cast_3 (int8 -> bool): nothing of it pairs with the golden's any more, whose file is listed, with why
    listed = [u for u in rank.unmatched if u.role is Role.GOLDEN and "Cast.trans_Cast_3." in u.path]
    assert listed and all(u.kind is UnmatchedKind.BY_DESIGN for u in listed), listed
    assert all(u.reason == "the target's cast is checked against Cast(its own input)" for u in listed), listed


def test_a_cast_kernel_off_by_one_against_its_own_input_still_fails(noisy):
    def off_by_one(ins, outs):
        outs[0][:] = np.clip(outs[0].astype(np.int64) + 1, -128, 127)

    _rewrite(_cast_file(noisy.target, "trans_Cast_2"), off_by_one)
    rank, rows = _rows(noisy)  # tensor mode: from statistics alone +1 is round-toward-+inf's (cast_check)
    out = rows[("trans_Cast_2", IO.OUTPUT, 0)]
    assert out.result is Result.FAIL, out.messages
    assert any("elements differ from Cast(input)" in m for m in out.messages), out.messages
    assert rank.divergences and rank.divergences[0].op_name == "trans_Cast_2"
