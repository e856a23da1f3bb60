"""FFTS+ slice files (docs/formats.md, "FFTS+ slice files"): automatic-mode slices written by the synthetic writer
merge back
into the unsliced tensors the model computed; manual mode is ordered by `_lxslice<N>`; damaged slice sets give
notes, never errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tcmp.schemas.dtypes import DataType
from tcmp.schemas.ffts import SliceFile, ffts_base_name, merge_ffts_slices, parse_ffts_attr
from tcmp.schemas.ge_dump import open_ge_dump
from tcmp.schemas.ge_names import parse_ge_file_name
from tcmp.schemas.synth.ge_writer import TensorSpec, write_ge_dump
from tcmp.schemas.synth.model import TensorRef, build_model_values
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

DT = DataType
TS = 1764400000000000
SLICED = ("MatMul_0", "SplitV_0", "ArgMaxWithValue_0", "Mul_rep_0")


def read_slice(path: Path) -> SliceFile:
    with open_ge_dump(path) as reader:
        inputs = tuple(np.array(reader.load(t).array) for t in reader.dump.inputs)
        outputs = tuple(np.array(reader.load(t).array) for t in reader.dump.outputs)
        return SliceFile(parse_ge_file_name(path.name), reader.dump, inputs, outputs)


def as_float(array: np.ndarray) -> np.ndarray:
    return array.astype(np.int64) if array.dtype.kind in "iub" else array.astype(np.float64)


@pytest.fixture(scope="module")
def sliced(tmp_path_factory):
    config = ScenarioConfig(tokens=1, write_fx=False, write_fusion_off=False, ffts_ops=SLICED)
    scenario = write_scenario(tmp_path_factory.mktemp("ffts"), config)
    graph, values = build_model_values(
        config.model, np.random.default_rng([config.seed, 0, 1]), np.random.default_rng([config.seed, 0, 1, 0])
    )
    return scenario, graph, values


def test_automatic_slices_merge_into_the_unsliced_tensors(sliced):
    scenario, graph, values = sliced
    ops = [o for o in scenario.target_ops if len(o.paths) > 1]
    assert sorted({o.op_name for o in ops}) == sorted(SLICED) and len(ops) == len(SLICED) + 1  # Mul_rep_0 twice
    for op in ops:
        parts = [read_slice(p) for p in reversed(op.paths)]  # the order given does not matter
        assert all(p.outputs[0].shape[0] < 16 for p in parts)  # each slice holds part of the tensor
        merged = merge_ffts_slices(parts)
        assert merged.op_name == op.op_name and merged.notes == ()
        node = graph.op(op.op_name)
        assert len(merged.outputs) == len(node.output_dtypes)
        for index, got in enumerate(merged.outputs):
            ref = TensorRef(node.name, index)
            want = values.repeats[(ref.op, op.execution)][index] if op.execution else values.tensors[ref]
            assert got.shape == want.shape and np.array_equal(as_float(got), want), (op.op_name, index)
        assert len(merged.inputs) == len(node.inputs)
        for ref, got in zip(node.inputs, merged.inputs):
            want = values.tensors[ref]
            assert got.shape == want.shape and np.array_equal(as_float(got), want), (op.op_name, ref)


def test_slicing_attribute_of_written_slices(sliced):
    scenario, _, _ = sliced
    (op,) = [o for o in scenario.target_ops if o.op_name == "MatMul_0"]
    attr = parse_ffts_attr(read_slice(op.paths[0]).dump)
    assert attr is not None and attr.auto and attr.slice_count == 2
    assert attr.output_cut_axes == ((0,),)
    seq, hidden = scenario.config.model.seq, scenario.config.model.hidden
    assert attr.output_slices == (
        (((0, seq // 2), (0, hidden)),),
        (((seq // 2, seq), (0, hidden)),),
    )
    assert [len(thread) for thread in attr.input_slices] == [2, 2]


def test_single_slice_passes_through_with_a_note(sliced):
    scenario, _, _ = sliced
    (op,) = [o for o in scenario.target_ops if o.op_name == "MatMul_0"]
    part = read_slice(op.paths[1])
    merged = merge_ffts_slices([part])
    assert merged.outputs[0] is part.outputs[0]
    assert len(merged.notes) == 1 and "slice_instance_num is 2" in merged.notes[0]


# ------------------------------------------------------------------------------------------------------------
# Hand-written slice sets


def write_slice(directory: Path, op_name: str, thread: int, ts: int, outputs, attr=None, inputs=()) -> SliceFile:
    path = directory / f"MatMulV2.{op_name.replace('/', '_')}.7.2.{ts}.4.7.{thread}.0"
    specs = [TensorSpec(np.asarray(v, dtype=np.float64), int(DT.DT_FLOAT)) for v in outputs]
    attrs = [] if attr is None else [("ffts", attr if isinstance(attr, str) else json.dumps(attr))]
    in_specs = [TensorSpec(np.asarray(v, dtype=np.float64), int(DT.DT_FLOAT)) for v in inputs]
    write_ge_dump(path, op_name, in_specs, specs, dump_time=ts, attrs=attrs)
    return read_slice(path)


def pieces(count: int, rows: int = 2, columns: int = 3) -> list[np.ndarray]:
    return [np.arange(rows * columns, dtype=np.float64).reshape(rows, columns) + 100 * k for k in range(count)]


def test_manual_mode_is_ordered_by_lxslice(tmp_path):
    blocks = pieces(3)
    attr = {"threadMode": 0, "slice_instance_num": 3, "outputCutList": [[3, 1]]}
    # thread ids and timestamps run against the _lxslice order: only the op-name digit may decide
    parts = [
        write_slice(tmp_path, f"scope/sgt_graph_4_MatMul_0_lxslice{n}", thread=2 - n, ts=TS + 10 - n,
                    outputs=[blocks[n]], attr=attr, inputs=[np.full((2, 2), n)])
        for n in range(3)
    ]  # fmt: skip
    merged = merge_ffts_slices(parts[::-1])
    assert merged.op_name == "MatMul_0"
    (out,) = merged.outputs
    assert np.array_equal(out, np.concatenate(blocks, axis=0))
    (first_input,) = merged.inputs  # no per-thread input slices in manual mode: slice 0's inputs, with a note
    assert np.array_equal(first_input, np.zeros((2, 2)))
    assert any("slice 0" in note for note in merged.notes)


def test_automatic_mode_reshapes_flat_slices(tmp_path):
    full = np.arange(48, dtype=np.float64).reshape(4, 12)
    halves = [full[:, :6], full[:, 6:]]  # cut along axis 1
    attr = {
        "threadMode": 1,
        "slice_instance_num": 2,
        "outputCutList": [[1, 2]],
        "output_tensor_slice": [[[{"lower": 0, "higher": 4}, {"lower": 0, "higher": 6}]],
                                [[{"lower": 0, "higher": 4}, {"lower": 6, "higher": 12}]]],
    }  # fmt: skip
    parts = [
        write_slice(tmp_path, "MatMul_0", thread=t, ts=TS + t, outputs=[halves[t].reshape(-1)], attr=attr)
        for t in (1, 0)
    ]
    merged = merge_ffts_slices(parts)
    assert merged.notes == ()
    assert np.array_equal(merged.outputs[0], full)


@pytest.mark.parametrize("attr", [None, "{not json", {"threadMode": 1}], ids=["missing", "garbled", "no_cut_list"])
def test_missing_or_unusable_json_gives_a_note_and_the_latest_slice(tmp_path, attr):
    blocks = pieces(2)
    parts = [write_slice(tmp_path, "MatMul_0", thread=t, ts=TS + 5 * t, outputs=[blocks[t]], attr=attr) for t in (0, 1)]
    merged = merge_ffts_slices(parts)
    assert len(merged.notes) == 1 and "latest slice" in merged.notes[0]
    assert np.array_equal(merged.outputs[0], blocks[1])  # the latest by timestamp


def test_no_cut_axis_gives_a_note(tmp_path):
    blocks = pieces(2)
    attr = {"threadMode": 1, "slice_instance_num": 2, "outputCutList": [[1, 1]]}
    parts = [write_slice(tmp_path, "MatMul_0", thread=t, ts=TS + t, outputs=[blocks[t]], attr=attr) for t in (0, 1)]
    merged = merge_ffts_slices(parts)
    assert any("no cut axis" in note for note in merged.notes)
    assert np.array_equal(merged.outputs[0], blocks[1])


def test_missing_slice_file_gives_a_note(tmp_path):
    blocks = pieces(3)
    attr = {"threadMode": 1, "slice_instance_num": 3, "outputCutList": [[3, 1]]}
    parts = [write_slice(tmp_path, "MatMul_0", thread=t, ts=TS + t, outputs=[blocks[t]], attr=attr) for t in (0, 2)]
    merged = merge_ffts_slices(parts)
    assert any("2 slice files but slice_instance_num is 3" in note for note in merged.notes)
    assert np.array_equal(merged.outputs[0], np.concatenate([blocks[0], blocks[2]]))  # what is there, in order


def test_slices_that_do_not_concatenate_give_a_note(tmp_path):
    attr = {"threadMode": 0, "slice_instance_num": 2, "outputCutList": [[1, 2]]}
    parts = [
        write_slice(tmp_path, f"MatMul_0_lxslice{n}", thread=n, ts=TS + n, outputs=[np.zeros((2 + n, 3))], attr=attr)
        for n in (0, 1)
    ]
    merged = merge_ffts_slices(parts)
    assert merged.outputs[0].shape == (2, 3)
    assert any("do not concatenate" in note for note in merged.notes)


@pytest.mark.parametrize(
    ("name", "base"),
    [
        ("MatMul_0", "MatMul_0"),
        ("MatMul_0_lxslice3", "MatMul_0"),
        ("sgt_graph_0_MatMul_0", "MatMul_0"),
        ("model/scope/sgt_graph_12_Add_1_lxslice0", "Add_1"),
        ("Add_lxslice", "Add_lxslice"),  # no digit: not a slice suffix
        ("graph_0_Add", "graph_0_Add"),
    ],
)
def test_ffts_base_name(name, base):
    assert ffts_base_name(name) == base
