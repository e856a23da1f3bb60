"""'no partner' only where a partner should exist (issue 22, item 9).

A clean dump of the synthetic writer — built as torchair's converters build the graph and as GE and the FX dumper
write it — has no 'no partner' item against either golden kind. The two cases seen on clean dumps:

- the Const inputs of a fused RMS norm (torchair: `ge.ReduceMean(self, dim_vec)` with the dims as a Const `axes`
  input, `ge.Add(self, other)` with eps as a Const; GE's data dumper writes every input of the op desc, a Const-fed
  one included, in the fusion-on and the fusion-off run alike) pair with the fusion-off members' inputs;
- `npu_rms_norm` (torchair: `ge.RmsNorm(self, gamma, epsilon=…)`, both outputs named; the FX dumper writes a node
  whose target has a converter, so both outputs have FX files) pairs output for output.
"""

from __future__ import annotations

import numpy as np
import pytest
from fx_dumps import by_design, data, op, out, values

from tcmp.compare.execute.run import run_compare
from tcmp.compare.judge.verdict import Result
from tcmp.compare.records import Role, UnmatchedKind
from tcmp.compare.report.outcome import CompareOptions
from tcmp.schemas.dump_records import IO
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

TOKENS = (0, 1)
FUSED_0 = "Square_0ReduceMean_0Add_0Rsqrt_0Mul_0Mul_1_0"
# the fused op's inputs, in the order of its members' external inputs: x, the axes [-1], eps, gamma
FUSED_0_INPUTS = (("Square_0", 0), ("ReduceMean_0", 1), ("Add_0", 1), ("Mul_1_0", 1))


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    return write_scenario(tmp_path_factory.mktemp("clean"), ScenarioConfig(model=ModelConfig(layers=2), tokens=2))


def _rows(result) -> dict:
    (rank,) = result.ranks
    return {(r.pair.token, r.pair.op_name, r.pair.io, r.pair.index): r for r in rank.rows}


def _no_partner(result) -> list[str]:
    return [
        f"{u.role.value} {u.op_name} {u.io} {u.index} (token {u.token}): {u.reason}"
        for rank in result.ranks
        for u in rank.unmatched
        if u.kind is UnmatchedKind.NO_PARTNER
    ]


def test_fusion_off_golden_pairs_the_const_inputs_of_the_fused_rms_norm(clean):
    result, _ = run_compare(CompareOptions(clean.target, clean.golden_ge), keep_rows=True)
    assert _no_partner(result) == []
    rows = _rows(result)
    for token in TOKENS:
        for k, (member, index) in enumerate(FUSED_0_INPUTS):
            row = rows[(token, FUSED_0, IO.INPUT, k)]
            golden = row.pair.bench
            assert golden.files[0].path.name.split(".")[1] == member  # {type}.{name}.{task}.{stream}.{time}
            assert (golden.io, golden.index) == (IO.INPUT, index)
            assert row.result is Result.PASS
    assert not result.failed


def test_fx_golden_pairs_npu_rms_norm_and_lists_the_converter_constants_by_design(clean):
    result, _ = run_compare(CompareOptions(clean.target, clean.golden_fx), keep_rows=True)
    assert _no_partner(result) == []
    rows = _rows(result)
    for token in TOKENS:
        for j in (0, 1):  # y and rstd
            row = rows[(token, "RmsNorm_0", IO.OUTPUT, j)]
            assert row.pair.bench.files[0].path.name.startswith(f"npu_rms_norm_0-npu.npu_rms_norm.default.OUTPUT.{j}.")
            assert row.result is Result.PASS
    (rank,) = result.ranks
    constants = {
        (u.token, u.index): u
        for u in rank.unmatched
        if u.role is Role.TARGET and u.op_name == FUSED_0 and u.io is IO.INPUT
    }
    # the axes are torchair's Const made from mean's dim list, which the FX dumper saved as an int array
    assert set(constants) == {(t, 1) for t in TOKENS}
    for u in constants.values():
        assert u.kind is UnmatchedKind.BY_DESIGN and "constant" in u.reason
    assert not result.failed


def test_a_dict_output_file_is_listed_by_design_like_its_entries(dumps):
    """A node returning {"out": 2x, "aux": x + 1} (conformance's custom_dict): torchair names the GE tensors by key
    (`OUTPUT.out`, `OUTPUT.aux`, `_set_fx_tensor_names`), the FX dumper saves `[result]`, the whole dict as one
    pickled `OUTPUT.0`. Neither side can pair: the entries and the file are both `by design`, never 'no partner'."""
    node = "scale_and_aux-my.scale_and_aux.default"
    x = values(4, 3)
    dumps.graph(
        data("x", (4, 3)),
        op("Mul", "Mul", ("x:0",), (out(f"{node}.OUTPUT.out", (4, 3)),)),
        op("Add", "Add", ("x:0",), (out(f"{node}.OUTPUT.aux", (4, 3)),)),
    )
    dumps.ge("Mul", "Mul", [x], [x * 2])
    dumps.ge("Add", "Add", [x], [x + 1])
    dumps.fx(node, [x], [np.array({"out": x * 2, "aux": x + 1}, dtype=object)])
    o = dumps.compare()
    for name in ("Mul", "Add"):
        by_design(o.one_unmatched(name, IO.OUTPUT, 0), "dict", "pickle")
    by_design(o.golden(f"{node}.OUTPUT.0"), "dict", "pickle")
    assert [u for u in o.rank.unmatched if u.kind is UnmatchedKind.NO_PARTNER] == []
