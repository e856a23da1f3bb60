"""`tcmp parse` (issue 2, deliverable 10) through typer's CliRunner and through the library.

Expected values come from the synthetic model's golden values and from numbers chosen to be exactly representable
in each low-precision dtype (docs/formats.md, "dtypes"), not from reading the files back with the code under test."""

from __future__ import annotations

import json
import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from tcmp.schemas.dtypes import DataType
from tcmp.schemas.formats import Format
from tcmp.schemas.ge_dump import GeDumpReader
from tcmp.schemas.parse import find_dump_files, parse_dumps, parse_file
from tcmp.schemas.synth.faults import Fault, FaultKind
from tcmp.schemas.synth.ge_writer import TensorSpec, write_ge_dump
from tcmp.schemas.synth.model import TensorRef, build_model_values
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

DT = DataType
TS = 1764400000000000
INFO_FIELDS = {"file", "op", "op_type", "io", "index", "dtype", "format", "device_shape", "shape", "size",
               "original_op", "output", "dumped", "notes"}  # fmt: skip
ITEMSIZE = {"DT_FLOAT16": 2, "DT_FLOAT": 4, "DT_BF16": 2, "DT_INT32": 4, "DT_INT8": 1, "DT_BOOL": 1}


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """One token of the default scenario (no faults), and its golden values."""
    config = ScenarioConfig(tokens=1, write_fx=False, write_fusion_off=False)
    scenario = write_scenario(tmp_path_factory.mktemp("clean"), config)
    graph, values = build_model_values(
        config.model, np.random.default_rng([config.seed, 0, 1]), np.random.default_rng([config.seed, 0, 1, 0])
    )
    return scenario, graph, values


def output_refs(graph, op) -> list[TensorRef]:
    if not op.members:
        return [TensorRef(op.op_name, i) for i in range(len(graph.op(op.op_name).output_dtypes))]
    return [TensorRef(op.members[-1], 0)]  # the rms-norm group gives its last member's output


# ------------------------------------------------------------------------------------------------------------
# --info


def test_info_prints_one_json_object_per_tensor(cli, clean, monkeypatch):
    scenario, graph, values = clean

    def no_payloads(self, tensor):
        raise AssertionError("--info must not read payloads")

    monkeypatch.setattr(GeDumpReader, "_payload", no_payloads)
    result = cli("parse", "--info", scenario.target, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rows = json_lines(result.stdout)
    assert len(rows) == len(result.stdout.splitlines())  # nothing but JSON on stdout
    assert all(set(row) == INFO_FIELDS for row in rows)
    by_file: dict[str, list[dict]] = {}
    for row in rows:
        by_file.setdefault(row["file"], []).append(row)
    assert set(by_file) == {str(p) for o in scenario.target_ops for p in o.paths}
    for op in scenario.target_ops:
        tensors = by_file[str(op.paths[0])]
        outputs = [t for t in tensors if t["io"] == "output"]
        assert {t["op"] for t in tensors} == {op.op_name} and {t["op_type"] for t in tensors} == {op.op_type}
        assert [t["index"] for t in outputs] == list(range(len(outputs)))
        for row, ref in zip(outputs, output_refs(graph, op)):
            want = values.tensors[ref] if not op.execution else values.repeats[(ref.op, op.execution)][ref.index]
            assert row["shape"] == list(np.shape(want))
            assert row["size"] == int(np.prod(row["device_shape"])) * ITEMSIZE[row["dtype"]]
            assert row["output"] is None and row["notes"] == []
            expected_original = {"name": ref.op, "output_index": 0} if op.op_type == "AutomaticBufferFusionOp" else None
            assert row["original_op"] == expected_original
    (nz,) = [r for r in rows if r["op"] == "TransData_0" and r["io"] == "output"]
    hidden = scenario.config.model.hidden
    assert (nz["format"], nz["dtype"], nz["shape"]) == ("FRACTAL_NZ", "DT_FLOAT16", [hidden, hidden])
    assert nz["device_shape"] == [hidden // 16, hidden // 16, 16, 16]


def test_info_prints_names_verbatim(cli, tmp_path):
    """Op names and paths may hold `[..]` or `:name:`; JSON output must not be read as console markup."""
    directory = tmp_path / "[bold]dump"
    directory.mkdir()
    path = directory / f"Add.op_[red]_x.1.2.{TS}"
    write_ge_dump(path, "op[blue]:smile:", [TensorSpec(np.ones(3), int(DT.DT_FLOAT))], [], dump_time=TS)
    (row,) = json_lines(cli("parse", "--info", directory, catch_exceptions=False).stdout)
    assert (row["file"], row["op"]) == (str(path), "op[blue]:smile:")


def test_info_without_files(cli, tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    result = cli("parse", "--info", tmp_path, catch_exceptions=False)
    assert result.exit_code == 2 and "no GE dump files" in result.stderr  # as in compare: a path without a dump


def test_usage_error_without_output_or_info(cli, clean):
    result = cli("parse", clean[0].target, catch_exceptions=False)
    assert result.exit_code == 2 and "--output_path" in result.stderr


# ------------------------------------------------------------------------------------------------------------
# Conversion to .npy


def test_convert_directory(cli, clean, tmp_path):
    scenario, graph, values = clean
    out = tmp_path / "npy"
    result = cli("parse", scenario.target, "--output_path", out, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    written = {p.name for p in out.iterdir()}
    for op in scenario.target_ops:
        dump_name = op.paths[0].name
        for index, ref in enumerate(output_refs(graph, op)):
            name = f"{dump_name}.output.{index}.npy"
            assert name in written
            array = np.load(out / name)
            want = values.tensors[ref] if not op.execution else values.repeats[(ref.op, op.execution)][ref.index]
            assert array.shape == np.shape(want) and np.array_equal(array.astype(np.float64), want), name
            dtype = graph.op(ref.op).output_dtypes[ref.index]
            expected_dtype = {int(DT.DT_BF16): np.float32, int(DT.DT_INT32): np.int32}.get(dtype)
            if expected_dtype is not None:
                assert array.dtype == expected_dtype, name  # bf16 is written as float32
    assert all(re.fullmatch(r".+\.(input|output)\.\d+\.npy", n) for n in written)
    assert f"{len(scenario.target_ops)} of {len(scenario.target_ops)} files converted" in result.stderr
    (nz_input,) = [n for n in written if ".MatMul_0." in n and n.endswith(".input.1.npy")]  # the NZ weight, as ND
    assert np.load(out / nz_input).shape == (scenario.config.model.hidden,) * 2


LOW_PRECISION = [
    # (dtype, device format, values exactly representable in the dtype, docs/formats.md, "dtypes")
    (DT.DT_BF16, Format.ND, [[1.5, -2.0, 3.140625], [65280.0, -0.0, 2.0**-133]]),
    (DT.DT_FLOAT8_E4M3FN, Format.ND, [0.5, -1.75, 448.0, 2.0**-9, -240.0]),
    (DT.DT_FLOAT8_E5M2, Format.ND, [57344.0, -0.25, 1.5, 2.0**-16, -3.0]),
    (DT.DT_INT4, Format.ND, [[-8, 7, 0], [-1, 3, 5]]),
    (DT.DT_BF16, Format.FRACTAL_NZ, np.arange(-40, 40, dtype=np.float64).reshape(5, 16) / 8),
]


@pytest.mark.parametrize(("dtype", "fmt", "values"), LOW_PRECISION, ids=lambda v: getattr(v, "name", None))
def test_low_precision_types_become_float32_exactly(cli, tmp_path, dtype, fmt, values):
    values = np.asarray(values, dtype=np.float64)
    path = tmp_path / f"Op.op_1.1.2.{TS}"
    write_ge_dump(path, "op_1", [], [TensorSpec(values, int(dtype), int(fmt))], dump_time=TS)
    out = tmp_path / "out"
    result = cli("parse", path, "-o", out, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    array = np.load(out / f"{path.name}.output.0.npy")
    assert array.dtype == np.float32 and array.shape == values.shape
    assert np.array_equal(array.astype(np.float64), values)
    assert np.array_equal(np.signbit(array), np.signbit(values))  # -0.0 stays negative


def test_big_nz_tensor_converts_exactly(tmp_path):
    """Above 8 MiB the NZ -> ND copy runs tile by tile on two threads; padded N and a partial last C0 block."""
    values = np.random.default_rng(3).standard_normal((3, 1000, 1500))
    path = tmp_path / f"Op.big.1.2.{TS}"
    write_ge_dump(path, "big", [], [TensorSpec(values, int(DT.DT_FLOAT16), int(Format.FRACTAL_NZ))], dump_time=TS)
    converted = parse_file(path, tmp_path)
    assert converted.error is None
    array = np.load(converted.tensors[0].output)
    assert array.nbytes > 8 << 20 and array.dtype == np.float16
    assert np.array_equal(array, values.astype(np.float16))


def test_bad_files_get_one_line_each_and_the_rest_converts(cli, tmp_path):
    faults = (Fault("SplitV_0", FaultKind.TRUNCATE), Fault("ConcatV2_0", FaultKind.CORRUPT_HEADER))
    scenario = write_scenario(tmp_path / "dump", ScenarioConfig(tokens=1, write_fx=False, write_fusion_off=False,
                                                                faults=faults))  # fmt: skip
    bad = {o.paths[0]: o.fault for o in scenario.target_ops if o.fault is not None}
    good = [o for o in scenario.target_ops if o.fault is None]
    out = tmp_path / "out"
    result = cli("parse", scenario.target, "-o", out, catch_exceptions=False)
    assert result.exit_code != 0
    assert result.exit_code == 1
    error_lines = [line for line in result.stderr.splitlines() if line.strip()]
    for path, kind in bad.items():
        (line,) = [line for line in error_lines if str(path) in line]
        expected = "DumpIncomplete" if kind is FaultKind.TRUNCATE else "DumpCorrupt"
        assert expected in line
    assert "Traceback" not in result.output
    converted = {p.name.split(".output.")[0].split(".input.")[0] for p in out.iterdir()}
    assert converted == {o.paths[0].name for o in good}
    assert f"{len(good)} of {len(scenario.target_ops)} files converted" in result.stderr


def test_tensors_not_dumped_are_marked_and_the_others_converted(cli, tmp_path):
    """A MatMul whose bias (input 2) and second output the writer skipped (device address 0: size in the header, no
    payload): --info marks them, -o writes the other tensors exactly and says which were not dumped."""
    x1, x2 = np.arange(12, dtype=np.float64).reshape(3, 4) / 4, np.arange(8, dtype=np.float64).reshape(4, 2) - 3
    y = x1 @ x2  # exact in float32: multiples of 1/4 well below 2^24
    bias = np.zeros(2)
    inputs = [TensorSpec(x1, DT.DT_FLOAT), TensorSpec(x2, DT.DT_FLOAT), TensorSpec(bias, DT.DT_FLOAT, dumped=False)]
    outputs = [TensorSpec(y, DT.DT_FLOAT), TensorSpec(y, DT.DT_FLOAT16, dumped=False)]
    path = tmp_path / "dump" / f"MatMulV2.mm.2.2.{TS}"
    write_ge_dump(path, "mm", inputs, outputs, dump_time=TS)
    info = cli("parse", "--info", path, catch_exceptions=False)
    assert info.exit_code == 0, info.output
    rows = json_lines(info.stdout)
    assert all(set(row) == INFO_FIELDS for row in rows)
    assert [(r["io"], r["index"], r["dumped"]) for r in rows] == [
        ("input", 0, True), ("input", 1, True), ("input", 2, False), ("output", 0, True), ("output", 1, False)
    ]  # fmt: skip
    skipped = [r for r in rows if not r["dumped"]]
    assert [(r["size"], r["shape"], r["notes"]) for r in skipped] == [
        (8, [2], ["not dumped: device address 0"]), (12, [3, 2], ["not dumped: device address 0"])
    ]  # fmt: skip
    assert all(r["notes"] == [] for r in rows if r["dumped"])
    out = tmp_path / "out"
    result = cli("parse", path, "-o", out, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"{path.name}.{name}.npy" for name in ("input.0", "input.1", "output.0")
    )
    for name, want in (("input.0", x1), ("input.1", x2), ("output.0", y)):
        array = np.load(out / f"{path.name}.{name}.npy")
        assert array.dtype == np.float32 and np.array_equal(array, want)
    lines = [line for line in result.stderr.splitlines() if "not dumped" in line]
    assert lines == [
        f"{path}: input 2 not dumped: device address 0, no .npy written",
        f"{path}: output 1 not dumped: device address 0, no .npy written",
    ]
    assert "1 of 1 files converted" in result.stderr


@pytest.mark.parametrize("kind", ["under_a_file", "read_only_filesystem"])
def test_unwritable_output_directory(cli, clean, tmp_path, kind):
    if kind == "under_a_file":
        blocker = tmp_path / "regular_file"
        blocker.write_text("x")
        target = blocker / "out"  # cannot be created, root or not
    else:
        target = Path("/proc/tcmp-parse-output")  # procfs refuses new directories even to root
    result = cli("parse", clean[0].target, "-o", target, catch_exceptions=False)
    assert result.exit_code == 3
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "cannot write" in lines[0] and str(target) in lines[0]
    assert "Traceback" not in result.output and result.stdout == ""


# ------------------------------------------------------------------------------------------------------------
# The library


def test_library_parse_file_and_find_dump_files(clean, tmp_path):
    scenario, _, _ = clean
    (stats := scenario.target / "Add.Add_1.1.2.1764400000000000.csv").write_text("Input/Output,Index\n")
    try:
        found = list(find_dump_files([scenario.target]))
    finally:
        stats.unlink()
    assert found == sorted(p for o in scenario.target_ops for p in o.paths)  # GE binaries only, in name order
    op = next(o for o in scenario.target_ops if o.op_name == "TransData_0")
    info = parse_file(op.paths[0])
    assert info.error is None and [(t.io, t.index, t.format) for t in info.tensors] == [
        ("input", 0, "ND"), ("output", 0, "FRACTAL_NZ")
    ]  # fmt: skip
    converted = parse_file(op.paths[0], tmp_path)
    assert [Path(t.output).name for t in converted.tensors] == [
        f"{op.paths[0].name}.input.0.npy", f"{op.paths[0].name}.output.0.npy"
    ]  # fmt: skip
    assert np.array_equal(np.load(converted.tensors[0].output), np.load(converted.tensors[1].output))
    results = list(parse_dumps([op.paths[0], scenario.target_ops[0].paths[0]]))
    assert [r.path for r in results] == [op.paths[0], scenario.target_ops[0].paths[0]]


def test_library_reports_bad_files_and_write_errors(tmp_path):
    short = tmp_path / f"Add.short.1.2.{TS}"
    write_ge_dump(short, "short", [TensorSpec(np.ones(8), int(DT.DT_FLOAT))], [], dump_time=TS)
    short.write_bytes(short.read_bytes()[:-1])
    result = parse_file(short)
    assert result.tensors == () and result.error.startswith("DumpIncomplete")
    good = tmp_path / f"Add.good.1.2.{TS}"
    write_ge_dump(good, "good", [TensorSpec(np.ones(2), int(DT.DT_FLOAT))], [], dump_time=TS)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = parse_file(good, blocker)  # the output "directory" is a regular file
    assert result.error is not None and result.error.startswith("cannot write")
    missing = parse_file(tmp_path / f"Add.gone.1.2.{TS}")
    assert missing.error is not None and "cannot read" in missing.error


def test_bf16_conversion_matches_ml_dtypes(tmp_path):
    """A bf16 payload of every sign/exponent class widens to float32 bit-exactly (nan stays nan)."""
    bits = np.array([0x0000, 0x8000, 0x3F80, 0xBF80, 0x7F7F, 0x0001, 0x7F80, 0xFF80, 0x7FC0], dtype=np.uint16)
    want = bits.view(ml_dtypes.bfloat16).astype(np.float32)
    path = tmp_path / f"Op.bf.1.2.{TS}"
    write_ge_dump(path, "bf", [], [TensorSpec(want.astype(np.float64), int(DT.DT_BF16))], dump_time=TS)
    converted = parse_file(path, tmp_path)
    array = np.load(converted.tensors[0].output)
    assert array.dtype == np.float32
    assert np.array_equal(array.view(np.uint32), want.view(np.uint32))


# ------------------------------------------------------------------------------------------------------------
# demo
