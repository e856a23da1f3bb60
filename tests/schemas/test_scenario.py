"""The synthetic dump writer itself (`tcmp.schemas.synth.scenario`): the files it writes are format-exact and hold
the model's golden values, faults land where its manifest says, fused ops carry `original_op` only where their
group records it, the 12-way reverse cat and the repeated op exist, and a seed fixes every byte.

Expected values come from the model's golden values (`build_model_values`, float64 rounded to each dtype) and
from small numpy re-computations (faults, the split/cat pieces), never from re-reading the files with the reader
alone; the GE reader is only the means of getting the numbers back out of the files.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from tcmp.schemas.dtypes import DataType
from tcmp.schemas.errors import DumpCorrupt, DumpIncomplete
from tcmp.schemas.formats import Format
from tcmp.schemas.ge_dump import open_ge_dump, read_ge_dump
from tcmp.schemas.synth.faults import Fault, FaultKind
from tcmp.schemas.synth.model import ModelGraph, ModelValues, OpKind, TensorRef, build_model_values, cann_cast
from tcmp.schemas.synth.scenario import Scenario, ScenarioConfig, TargetOp, write_scenario

DT = DataType
FUSED_0 = "Square_0ReduceMean_0Add_0Rsqrt_0Mul_0Mul_1_0"  # GE's concatenated name of layer 0's rms-norm group
FAULTS = (
    Fault("MatMul_0", FaultKind.REL_ERROR, magnitude=0.05),
    Fault("SoftmaxV2_0", FaultKind.NAN),
    Fault("Gelu_0", FaultKind.INF),
    Fault("Cast_1_0", FaultKind.SHAPE),
    Fault("SplitV_0", FaultKind.TRUNCATE),
    Fault("ConcatV2_0", FaultKind.CORRUPT_HEADER),
    Fault(FUSED_0, FaultKind.REL_ERROR, magnitude=0.25, tokens=(1,)),
)
# the dtype each device value is stored in (docs/formats.md, "dtypes"); FX saves bf16 as float32 ("FX file contents")
STORED = {int(DT.DT_FLOAT16): np.float16, int(DT.DT_FLOAT): np.float32, int(DT.DT_BF16): ml_dtypes.bfloat16}
FX_SAVED = {int(DT.DT_FLOAT16): "float16", int(DT.DT_FLOAT): "float32", int(DT.DT_BF16): "float32",
            int(DT.DT_INT32): "int32", int(DT.DT_INT64): "int64"}  # fmt: skip


@pytest.fixture(scope="module")
def scenario(tmp_path_factory) -> Scenario:
    return write_scenario(tmp_path_factory.mktemp("faulty"), ScenarioConfig(tokens=2, faults=FAULTS))


def model(config: ScenarioConfig, rank: int, number: int, token: int) -> tuple[ModelGraph, ModelValues]:
    """The model's golden values for one rank, graph and token (weights per rank and graph, input per token)."""
    weights = np.random.default_rng([config.seed, rank, number])
    activations = np.random.default_rng([config.seed, rank, number, token])
    return build_model_values(config.model, weights, activations, f"graph_{number}")


def dumped_refs(graph: ModelGraph, op: TargetOp) -> tuple[list[TensorRef], list[TensorRef]]:
    """Inputs and outputs of one dumped op. A fused op takes the inputs its members take from outside the group
    (first use order) and gives the members' outputs that are used outside it."""
    if not op.members:
        node = graph.op(op.op_name)
        return list(node.inputs), [TensorRef(node.name, i) for i in range(len(node.output_dtypes))]
    inside = set(op.members)
    inputs: list[TensorRef] = []
    for member in op.members:
        inputs += [r for r in graph.op(member).inputs if r.op not in inside and r not in inputs]
    used_outside = {r for node in graph.ge_ops if node.name not in inside for r in node.inputs}
    outputs = [
        TensorRef(m, i)
        for m in op.members
        for i in range(len(graph.op(m).output_dtypes))
        if TensorRef(m, i) in used_outside
    ]
    return inputs, outputs


def golden(values: ModelValues, ref: TensorRef, execution: int = 0) -> np.ndarray:
    if execution:
        return values.repeats[(ref.op, execution)][ref.index]
    return values.tensors[ref]


def stored(values: np.ndarray, dtype: int) -> np.ndarray:
    """Values as the device stores them, back in float64 (integers unchanged)."""
    if dtype in STORED:
        return np.asarray(values, dtype=np.float64).astype(STORED[dtype]).astype(np.float64)
    return np.asarray(values)


def comparable(array: np.ndarray) -> np.ndarray:
    return array.astype(np.int64) if array.dtype.kind in "iub" else array.astype(np.float64)


def load(path: Path) -> tuple[object, list[np.ndarray], list[np.ndarray]]:
    with open_ge_dump(path) as reader:
        dump = reader.dump
        arrays = [comparable(reader.load(t).array) for t in dump.tensors]
    return dump, arrays[: len(dump.inputs)], arrays[len(dump.inputs) :]


def assert_equal_values(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.shape == np.shape(want), what
    assert np.array_equal(got, want), what


# ------------------------------------------------------------------------------------------------------------
# Format-exact files holding the model's values


def test_target_files_hold_the_golden_values(scenario):
    """Every target op without a fault reads back exactly as the model computed it, dtype and format included."""
    checked = 0
    for op in scenario.target_ops:
        if op.fault is not None:
            continue
        graph, values = model(scenario.config, op.rank, op.graph, op.token)
        inputs, outputs = dumped_refs(graph, op)
        dump, got_in, got_out = load(op.paths[0])
        assert dump.op_name == op.op_name  # the header keeps the unsanitized name
        assert len(got_in) == len(inputs) and len(got_out) == len(outputs), op.op_name
        for ref, tensor, got in zip(inputs + outputs, dump.tensors, got_in + got_out):
            producer = graph.op(ref.op)
            assert tensor.data_type == producer.output_dtypes[ref.index], (op.op_name, ref)
            assert tensor.format == producer.output_formats[ref.index], (op.op_name, ref)
            execution = op.execution if tensor in dump.outputs else 0
            assert_equal_values(got, golden(values, ref, execution), f"{op.op_name} {ref}")
        checked += 1
    assert checked == len(scenario.target_ops) - sum(o.fault is not None for o in scenario.target_ops) > 40


def test_device_formats_are_exercised(scenario):
    """The weight TransData writes FRACTAL_NZ (C0 16 for fp16): the values above came through the NZ packing."""
    (op,) = [o for o in scenario.target_ops if o.op_name == "TransData_0" and o.token == 0]
    dump = read_ge_dump(op.paths[0])
    (out,) = dump.outputs
    hidden = scenario.config.model.hidden
    assert out.format == Format.FRACTAL_NZ and out.data_type == DT.DT_FLOAT16
    assert out.shape == (hidden // 16, hidden // 16, 16, 16) and out.original_shape == (hidden, hidden)


def test_fusion_off_golden_holds_every_unfused_op(scenario):
    config = scenario.config
    graph, _ = model(config, 0, 1, 0)
    executed = sum(o.repeat for o in graph.ge_ops if o.type not in ("Data", "Const"))
    files = sorted(p for p in scenario.golden_ge.rglob("*") if p.is_file() and not p.name.endswith(".txt"))
    assert len(files) == executed * config.tokens
    executions: dict[tuple[Path, str], int] = defaultdict(int)
    for path in files:
        token = int(path.parent.name)
        graph, values = model(config, 0, 1, token)
        dump, got_in, got_out = load(path)
        node = graph.op(dump.op_name)
        execution = executions[(path.parent, node.name)]
        executions[(path.parent, node.name)] += 1
        for ref, got in zip(node.inputs, got_in):
            assert_equal_values(got, golden(values, ref), f"{node.name} input {ref}")
        for index, got in enumerate(got_out):
            assert_equal_values(got, golden(values, TensorRef(node.name, index), execution), f"{node.name} out")
    assert max(executions.values()) == 2  # the op executed twice per token


def test_fused_ops_and_original_op(scenario):
    graph = scenario.graphs[0]
    fused = [o for o in scenario.target_ops if o.members and o.token == 0]
    assert {o.op_type for o in fused} == {"AutomaticBufferFusionOp", "FusedRmsNorm"}
    records = {g.name: g.record_original_op for g in graph.fusion_groups}
    assert set(records.values()) == {True, False}  # both kinds are written
    for op in fused:
        assert op.op_name == "".join(op.members)  # GE concatenates the member names (docs/formats.md, "Fused names")
        dump = read_ge_dump(op.paths[0])
        _, outputs = dumped_refs(graph, op)
        for tensor, ref in zip(dump.outputs, outputs):
            if records[op.op_name]:
                assert tensor.original_op is not None
                assert (tensor.original_op.name, tensor.original_op.output_index) == (ref.op, ref.index)
            else:
                assert tensor.original_op is None
    for op in scenario.target_ops:  # unfused ops never carry it
        if not op.members and op.fault not in (FaultKind.TRUNCATE, FaultKind.CORRUPT_HEADER):
            assert all(t.original_op is None for t in read_ge_dump(op.paths[0]).outputs)


def test_reverse_twelve_way_cat_and_repeated_op(scenario):
    config = scenario.config
    _, values = model(config, 0, 1, 0)
    x = values.tensors[TensorRef("arg0_1", 0)]  # the graph input
    pieces = np.split(x, np.arange(1, 12), axis=0)  # sizes 1 x 11 and seq - 11
    ops = {(o.op_name, o.execution): o for o in scenario.target_ops if o.token == 0}

    _, _, split_out = load(ops[("SplitV_big", 0)].paths[0])
    assert [p.shape[0] for p in split_out] == [1] * 11 + [config.model.seq - 11]
    for got, want in zip(split_out, pieces):
        assert_equal_values(got, want, "SplitV_big")
    _, cat_in, (cat_out,) = load(ops[("ConcatV2_big", 0)].paths[0])
    assert len(cat_in) == 12
    for i, got in enumerate(cat_in):
        assert_equal_values(got, pieces[11 - i], f"ConcatV2_big input {i}")
    assert_equal_values(cat_out, np.concatenate(pieces[::-1]), "ConcatV2_big output")
    assert not np.array_equal(cat_out, x)  # the order matters

    cat = values.tensors[TensorRef("ConcatV2_0", 0)]
    first, second = ops[("Mul_rep_0", 0)], ops[("Mul_rep_0", 1)]
    assert first.paths != second.paths
    for op, factor in ((first, 1), (second, 2)):
        _, (got_in,), (got_out,) = load(op.paths[0])
        assert_equal_values(got_in, cat, "Mul_rep_0 input")
        assert_equal_values(got_out, stored(cat * factor, int(DT.DT_FLOAT16)), f"Mul_rep_0 execution {factor - 1}")


# ------------------------------------------------------------------------------------------------------------
# Faults


def test_manifest_lists_the_faults(scenario):
    expected = {f.op: f.kind for f in FAULTS if f.tokens is None}
    assert {o.op_name: o.fault for o in scenario.faulty(0, 0)} == expected
    assert {o.op_name: o.fault for o in scenario.faulty(0, 1)} == {**expected, FUSED_0: FaultKind.REL_ERROR}
    faulty_names = {f.op for f in FAULTS}
    assert all(o.fault is None for o in scenario.target_ops if o.op_name not in faulty_names)


@pytest.mark.parametrize("kind", [FaultKind.REL_ERROR, FaultKind.NAN, FaultKind.INF, FaultKind.SHAPE])
def test_value_faults_land_on_the_outputs_only(scenario, kind):
    faulty = [o for o in scenario.target_ops if o.fault is kind]
    assert faulty
    for op in faulty:
        fault = next(f for f in FAULTS if f.op == op.op_name)
        graph, values = model(scenario.config, op.rank, op.graph, op.token)
        inputs, outputs = dumped_refs(graph, op)
        dump, got_in, got_out = load(op.paths[0])
        for ref, got in zip(inputs, got_in):  # faults stay local: the inputs are the golden ones
            assert_equal_values(got, golden(values, ref), f"{op.op_name} input {ref}")
        for ref, tensor, got in zip(outputs, dump.outputs, got_out):
            want = golden(values, ref)
            dtype = graph.op(ref.op).output_dtypes[ref.index]
            if kind is FaultKind.REL_ERROR:
                assert_equal_values(got, stored(want * (1 + fault.magnitude), dtype), op.op_name)
                assert not np.array_equal(got, want)
            elif kind is FaultKind.SHAPE:
                assert got.shape == (want.shape[0] + 1, *want.shape[1:]) and tensor.format == Format.ND
                assert_equal_values(got[:-1], want, op.op_name)
                assert not got[-1].any()
            else:
                hit = np.isnan(got) if kind is FaultKind.NAN else np.isposinf(got)
                assert 0 < hit.sum() < got.size
                assert np.array_equal(got[~hit], want[~hit]) and np.isfinite(want).all()


def test_token_restricted_fault(scenario):
    (clean,) = [o for o in scenario.target_ops if o.op_name == FUSED_0 and o.token == 0]
    (off,) = [o for o in scenario.target_ops if o.op_name == FUSED_0 and o.token == 1]
    assert clean.fault is None and off.fault is FaultKind.REL_ERROR
    for op, factor in ((clean, 1.0), (off, 1.25)):
        graph, values = model(scenario.config, 0, 1, op.token)
        _, (out_ref,) = dumped_refs(graph, op)
        _, _, (got,) = load(op.paths[0])
        assert_equal_values(got, stored(golden(values, out_ref) * factor, int(DT.DT_FLOAT16)), op.op_name)


def test_truncated_and_corrupt_files(scenario):
    truncated = [o for o in scenario.target_ops if o.fault is FaultKind.TRUNCATE]
    corrupt = [o for o in scenario.target_ops if o.fault is FaultKind.CORRUPT_HEADER]
    assert len(truncated) == len(corrupt) == scenario.config.tokens
    for op in truncated:
        with pytest.raises(DumpIncomplete):
            read_ge_dump(op.paths[0])
    for op in corrupt:
        with pytest.raises(DumpCorrupt):
            read_ge_dump(op.paths[0])
    # the op after each damaged one is intact (a fault damages one file only)
    order = [o.op_name for o in scenario.target_ops if o.token == 0]
    for name in ("SplitV_0", "ConcatV2_0"):
        following = next(o for o in scenario.target_ops if o.token == 0 and o.op_name == order[order.index(name) + 1])
        assert read_ge_dump(following.paths[0]).op_name == following.op_name


# ------------------------------------------------------------------------------------------------------------
# FX golden


_FX_FILE = re.compile(r"(?P<key>.+)\.(?P<io>INPUT|OUTPUT)\.(?P<index>\d+)(?:\.(?P<sub>\d+))?\.(?P<ts>\d{20})\.npy")


def test_fx_files_hold_the_golden_values_in_the_fx_dtype(scenario):
    config = scenario.config
    root = scenario.golden_fx
    for token in range(config.tokens):
        graph, values = model(config, 0, 1, token)
        (step,) = [p for p in root.rglob(str(token)) if p.is_dir()]  # the ranked era: steps from 0
        files: dict[tuple[str, str], dict[tuple, Path]] = defaultdict(dict)
        for path in step.iterdir():
            match = _FX_FILE.fullmatch(path.name)
            assert match, path.name
            sub = int(match["sub"]) if match["sub"] else None
            files[(match["key"], match["ts"])][(match["io"], int(match["index"]), sub)] = path
        calls: dict[str, list[dict]] = defaultdict(list)
        for (key, _ts), call in sorted(files.items(), key=lambda item: item[0][1]):
            calls[key].append(call)
        assert set(calls) == {node.key for node in graph.fx_nodes}
        for node in graph.fx_nodes:
            assert len(calls[node.key]) == node.repeat
            for execution, call in enumerate(calls[node.key]):
                for k, ref in enumerate(node.output_refs):
                    array = np.load(call[("OUTPUT", k, None)])
                    dtype = FX_SAVED[node_output_dtype(graph, node, k)]
                    assert array.dtype == np.dtype(dtype), (node.key, k)
                    assert np.array_equal(array, golden(values, ref, execution).astype(dtype)), (node.key, k)
                for i, arg in enumerate(node.args):
                    if arg.kind.value == "tensor":
                        check_fx_tensor(call[("INPUT", i, None)], graph, values, arg.refs[0])
                    elif arg.kind.value == "list":
                        for j, ref in enumerate(arg.refs):
                            check_fx_tensor(call[("INPUT", i, j)], graph, values, ref)
                    else:
                        assert np.array_equal(np.load(call[("INPUT", i, None)]), np.array(arg.scalar))


def node_output_dtype(graph: ModelGraph, node, k: int) -> int:
    """FX output k's dtype: the GE tensor's, except aten.max.dim's indices, int64 in torch (int32 in GE), and the
    scaling Mul GE computes in float32 between its inserted casts: torch computes it in its argument's dtype."""
    ref = node.output_refs[k]
    if node.target == "aten.max.dim" and k == 1:
        return int(DT.DT_INT64)
    if node.name.startswith("mul_s_"):
        (source,) = node.args[0].refs
        return graph.op(source.op).output_dtypes[source.index]
    return graph.op(ref.op).output_dtypes[ref.index]


def check_fx_tensor(path: Path, graph: ModelGraph, values: ModelValues, ref: TensorRef) -> None:
    dtype = FX_SAVED[graph.op(ref.op).output_dtypes[ref.index]]
    array = np.load(path)
    assert array.dtype == np.dtype(dtype) and np.array_equal(array, values.tensors[ref].astype(dtype)), path.name


def test_fx_special_cases(scenario):
    _, values = model(scenario.config, 0, 1, 0)
    (step,) = [p for p in scenario.golden_fx.rglob("0") if p.is_dir()]  # token 0
    (bf16_out,) = step.rglob("mul_bf_1-aten.mul.Tensor.OUTPUT.0.*.npy")
    bf16 = np.load(bf16_out)
    assert bf16.dtype == np.float32  # bf16 saved as float32
    assert np.array_equal(bf16.astype(ml_dtypes.bfloat16).astype(np.float32), bf16)  # … holding bf16 values
    halves = np.split(values.tensors[TensorRef("Cast_1_0", 0)], 2, axis=-1)
    (max_values,) = step.rglob("max_0-aten.max.dim.OUTPUT.0.*.npy")
    (max_indices,) = step.rglob("max_0-aten.max.dim.OUTPUT.1.*.npy")
    assert np.array_equal(np.load(max_values), halves[0].max(-1).astype(np.float16))
    assert np.load(max_indices).dtype == np.int64
    assert np.array_equal(np.load(max_indices), halves[0].argmax(-1))
    cat_inputs = sorted(step.rglob("cat_big-aten.cat.default.INPUT.0.*.npy"), key=lambda p: int(p.name.split(".")[5]))
    pieces = np.split(values.tensors[TensorRef("arg0_1", 0)], np.arange(1, 12), axis=0)
    assert len(cat_inputs) == 12
    for j, path in enumerate(cat_inputs):  # INPUT.0.10 sorts before INPUT.0.2 by name, not by index
        assert np.array_equal(np.load(path), pieces[11 - j].astype(np.float16))


# ------------------------------------------------------------------------------------------------------------
# Seeds


def tree_bytes(root: Path) -> dict[Path, bytes]:
    return {p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_same_seed_same_bytes_other_seed_other_values(tmp_path):
    config = ScenarioConfig(tokens=1, faults=FAULTS[:3] + FAULTS[4:6])
    first = tree_bytes(write_scenario(tmp_path / "a", config).root)
    again = tree_bytes(write_scenario(tmp_path / "b", config).root)
    assert first.keys() == again.keys() and len(first) > 100
    assert all(first[k] == again[k] for k in first)

    other_root = write_scenario(tmp_path / "c", ScenarioConfig(tokens=1, seed=1, faults=config.faults)).root
    other = tree_bytes(other_root)
    assert other.keys() == first.keys()  # same structure and names
    ge_files = [k for k in first if "msprobe_ge_dump" in k.parts and k.suffix != ".txt"]
    assert ge_files and all(first[k] != other[k] for k in ge_files)
    float_outputs = [k for k in first if ".OUTPUT." in k.name and np.load(tmp_path / "a" / k).dtype.kind == "f"]
    assert float_outputs
    for key in float_outputs:
        assert not np.array_equal(np.load(tmp_path / "a" / key), np.load(other_root / key)), key


def test_propagated_faults_compose(tmp_path):
    """With propagation, an op below a relative error that itself makes NaN carries both: its finite values are
    the golden ones off by the upstream error, and its NaN are there too."""
    faults = (Fault("MatMul_0", FaultKind.REL_ERROR, magnitude=0.05), Fault("SoftmaxV2_0", FaultKind.NAN))
    config = ScenarioConfig(tokens=1, faults=faults, propagate_faults=True, write_fusion_off=False)
    scenario = write_scenario(tmp_path, config)
    (op,) = [o for o in scenario.target_ops if o.op_name == "SoftmaxV2_0"]
    graph, values = model(config, op.rank, op.graph, op.token)
    _, (out_ref,) = dumped_refs(graph, op)
    _, _, (got,) = load(op.paths[0])
    want = stored(golden(values, out_ref) * 1.05, graph.op(out_ref.op).output_dtypes[out_ref.index])
    nan = np.isnan(got)
    assert 0 < nan.sum() < got.size
    assert np.array_equal(got[~nan], want[~nan])


def ulps(got: np.ndarray, want: np.ndarray, dtype: int) -> np.ndarray:
    """|got - want| in units in the last place of `dtype` at `want`: numpy's spacing for fp16/fp32; bf16 is fp32 with
    16 mantissa bits fewer, so its unit is 2^16 of fp32's (normal numbers)."""
    if dtype == int(DT.DT_BF16):
        unit = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64) * 2.0**16
    else:
        unit = np.spacing(np.abs(want).astype(STORED[dtype])).astype(np.float64)
    return np.abs(got - want) / unit


def test_ulp_noise_is_a_clean_run_within_k_ulps(tmp_path):
    """`ulp_noise`: each computed float output within k units in the last place of its dtype of the exact value
    (k reached); a plain Cast's output its dumped input cast; a GE-inserted TransData's output its input; integers,
    graph inputs and constants exact; an op's dumped input its producer's dumped output."""
    config = ScenarioConfig(tokens=1, ulp_noise=2, write_fx=False, write_fusion_off=False)
    written = write_scenario(tmp_path, config)
    graph, values = model(config, 0, 1, 0)
    dumped = {}
    for op in written.target_ops:
        inputs, outputs = dumped_refs(graph, op)
        _, got_in, got_out = load(op.paths[0])
        dumped[(op.op_name, op.execution)] = (inputs, outputs, got_in, got_out)
    produced = {ref: got for (_, k), (_, outs, _, got) in dumped.items() if k == 0 for ref, got in zip(outs, got)}
    worst, exact, casts, data_moves, inserted_casts = 0.0, 0, 0, 0, 0
    for (name, execution), (inputs, outputs, got_in, got_out) in dumped.items():
        for ref, got in zip(inputs, got_in):
            if ref in produced:
                assert_equal_values(got, produced[ref], f"{name} {ref}: its producer's output")
            else:
                assert_equal_values(got, golden(values, ref), f"{name} {ref}: a graph input or constant, exact")
                exact += 1
        node = graph.op(outputs[0].op)
        dtype = node.output_dtypes[outputs[0].index]
        if node.type == "TransData":
            assert_equal_values(got_out[0], got_in[0], f"{name}: a data move")
            data_moves += 1
        elif node.type == "Cast" and node.kind is OpKind.INSERTED:  # what CANN's Cast writes from its dumped input
            assert_equal_values(got_out[0], cann_cast(got_in[0], dtype), f"{name}: CANN's cast of its input")
            inserted_casts += 1
        elif node.type == "Cast" and np.array_equal(
            golden(values, outputs[0]), stored(golden(values, inputs[0]), dtype)
        ):
            assert_equal_values(got_out[0], stored(got_in[0], dtype), f"{name}: its input cast")
            casts += 1
        else:
            for ref, got in zip(outputs, got_out):
                dtype, want = graph.op(ref.op).output_dtypes[ref.index], golden(values, ref, execution)
                if dtype not in STORED:
                    assert_equal_values(got, want, f"{name} {ref}: integers exact")
                    continue
                assert np.array_equal(got == 0, want == 0), f"{name} {ref}: zeros stay zero"
                worst = max(worst, float(ulps(got[want != 0], want[want != 0], dtype).max(initial=0.0)))
    # Cast_0, layers.1/Cast_1 (fp16 -> fp32) and layers.1/Cast_bf_1 (-> bf16) are plain casts; Cast_1_* scale too
    assert worst == 2.0 and exact > 10 and casts == 3 and data_moves == 2 and inserted_casts > 0
