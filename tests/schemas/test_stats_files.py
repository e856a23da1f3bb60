"""Summary-only dump files: GE stats-mode CSVs (docs/formats.md, "Stats-mode CSVs") and the appendix script's
`_min_max.npz` / `_min_max.npy` files ("min/max files"). Inputs are written by hand here, in the shapes
docs/formats.md gives."""

from __future__ import annotations

import math
import zipfile

import ml_dtypes
import numpy as np
import pytest

from tcmp.schemas.dump_records import IO
from tcmp.schemas.errors import DumpCorrupt, DumpIncomplete
from tcmp.schemas.stats_files import read_fx_min_max_npy, read_ge_min_max_npz, read_stats_csv

HEADER = (
    "Input/Output,Index,Data Size,Data Type,Format,Shape,Max Value,Min Value,Avg Value,Count,Nan Count,"
    "Negative Inf Count,Positive Inf Count"
)
NAME = "Add.Add_1.44.6.1764400000000000"
# dump-proto codes (docs/formats.md, "dtypes")
DT_FLOAT, DT_FLOAT16, DT_INT32, DT_BF16 = 1, 2, 7, 27
FORMAT_NCHW, FORMAT_ND, FORMAT_FRACTAL_NZ = 0, 2, 29


def write(tmp_path, text: str, name: str = NAME + ".csv"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


# ------------------------------------------------------------------------------------------------------------
# Stats-mode CSV


def test_canonical_stats_csv(tmp_path):
    path = write(
        tmp_path,
        f"{HEADER}\n"
        'Input,0,24,DT_FLOAT16,ND,"[2, 6]",3.5,-1.25,0.5,12,0,0,0\n'
        'Input,1,4,DT_INT32,ND,"[1]",7,7,7,1,0,0,0\n'
        'Output,0,4608,DT_FLOAT,FRACTAL_NZ,"[1, 3, 2, 16, 16]",inf,-inf,nan,1536,2,1,3\n',
    )
    first, second, third = read_stats_csv(path)
    assert (first.io, first.index, first.dtype, first.format, first.shape, first.size) == (
        IO.INPUT,
        0,
        DT_FLOAT16,
        FORMAT_ND,
        (2, 6),
        24,
    )
    assert (first.summary.min, first.summary.max, first.summary.mean, first.summary.numel) == (-1.25, 3.5, 0.5, 12)
    assert (first.summary.nan_count, first.summary.inf_count) == (0, 0)
    assert (second.io, second.index, second.dtype, second.shape) == (IO.INPUT, 1, DT_INT32, (1,))
    assert (third.io, third.index, third.format, third.shape) == (IO.OUTPUT, 0, FORMAT_FRACTAL_NZ, (1, 3, 2, 16, 16))
    assert third.summary.max == math.inf and third.summary.min == -math.inf and math.isnan(third.summary.mean)
    assert (third.summary.nan_count, third.summary.inf_count) == (2, 4)  # negative + positive inf


@pytest.mark.parametrize(
    "header",
    [
        HEADER,
        HEADER.replace(",", ", "),  # spaces after the commas
        "\ufeff" + HEADER,  # a byte-order mark
        "Max Value,Min Value,Index,Input/Output,Extra Column,Shape,Data Type,Format",  # reordered, extra, subset
    ],
    ids=["canonical", "spaces", "bom", "reordered_subset"],
)
def test_header_variants(tmp_path, header):
    columns = [c.strip().lstrip("\ufeff") for c in header.split(",")]
    cells = {"Input/Output": "Output", "Index": "2", "Data Size": "8", "Data Type": "DT_BF16", "Format": "NCHW",
             "Shape": '"(1, 2, 1, 2)"', "Max Value": "2.5", "Min Value": "-0.5", "Avg Value": "1", "Count": "4",
             "Nan Count": "0", "Negative Inf Count": "0", "Positive Inf Count": "0", "Extra Column": "x"}  # fmt: skip
    path = write(tmp_path, header + "\r\n" + ",".join(cells[c] for c in columns) + "\r\n")
    (row,) = read_stats_csv(path)
    assert (row.io, row.index, row.dtype, row.format, row.shape) == (IO.OUTPUT, 2, DT_BF16, FORMAT_NCHW, (1, 2, 1, 2))
    assert (row.summary.min, row.summary.max) == (-0.5, 2.5)
    if "Avg Value" not in columns:  # what the file does not carry stays unknown
        assert row.summary.mean is None and row.summary.numel is None and row.size is None


@pytest.mark.parametrize(
    ("data_type", "fmt", "code", "format_code"),
    [
        ("DT_FLOAT16", "ND", DT_FLOAT16, FORMAT_ND),
        ("FLOAT16", "FORMAT_ND", DT_FLOAT16, FORMAT_ND),
        ("float", "fractal_nz", DT_FLOAT, FORMAT_FRACTAL_NZ),
        ("27", "29", DT_BF16, FORMAT_FRACTAL_NZ),
        ("DT_NOT_A_TYPE", "FORMAT_WHATEVER", None, None),
    ],
)
def test_dtype_and_format_cells(tmp_path, data_type, fmt, code, format_code):
    path = write(tmp_path, f"{HEADER}\nInput,0,2,{data_type},{fmt},[1],1,1,1,1,0,0,0\n")
    (row,) = read_stats_csv(path)
    assert (row.dtype, row.format) == (code, format_code)


def test_shapes_and_odd_cells(tmp_path):
    path = write(
        tmp_path,
        f"{HEADER}\n"
        'input,0,2,DT_FLOAT16,ND,"[]",1,1,1,1,0,0,0\n'  # a scalar; lower-case direction
        "OUTPUT,0,0,DT_FLOAT16,ND,,N/A,,NaN,0,,,\n"  # nothing known
        'Output,1,6,DT_FLOAT16,ND,"[3,1]",-Infinity,1e-3,2.0E+1,3,0,1,0\n',
    )
    scalar, empty, odd = read_stats_csv(path)
    assert scalar.shape == () and scalar.io is IO.INPUT
    assert empty.shape is None and empty.summary.min is None and empty.summary.max is None
    assert math.isnan(empty.summary.mean) and empty.summary.nan_count is None and empty.summary.inf_count is None
    assert (odd.shape, odd.summary.max, odd.summary.min, odd.summary.mean) == ((3, 1), -math.inf, 1e-3, 20.0)
    assert odd.summary.inf_count == 1


def test_header_only_and_blank_lines(tmp_path):
    assert read_stats_csv(write(tmp_path, HEADER + "\n")) == ()
    rows = read_stats_csv(write(tmp_path, f"{HEADER}\n\nOutput,0,2,DT_FLOAT16,ND,[1],1,1,1,1,0,0,0\n\n"))
    assert len(rows) == 1


@pytest.mark.parametrize("missing", ["Input/Output", "Index"])  # any statistic may be left out (adump's selection)
def test_missing_required_column_is_corrupt(tmp_path, missing):
    header = ",".join(c for c in HEADER.split(",") if c != missing)
    with pytest.raises(DumpCorrupt, match=missing):
        read_stats_csv(write(tmp_path, header + "\n"))


@pytest.mark.parametrize(
    "row",
    ["Sideways,0,2,DT_FLOAT16,ND,[1],1,1,1,1,0,0,0", "Input,first,2,DT_FLOAT16,ND,[1],1,1,1,1,0,0,0"],
    ids=["direction", "index"],
)
def test_bad_rows_are_corrupt(tmp_path, row):
    with pytest.raises(DumpCorrupt, match="line 2"):
        read_stats_csv(write(tmp_path, f"{HEADER}\n{row}\n"))


def test_not_a_stats_csv(tmp_path):
    with pytest.raises(DumpCorrupt):
        read_stats_csv(write(tmp_path, "hash,name\n123,Add.Add.1.2.3\n"))


@pytest.mark.parametrize("text", ["", HEADER, f"{HEADER}\nOutput,0,2,DT_FLOAT16,ND,[1],1,1"])
def test_no_trailing_newline_is_incomplete(tmp_path, text):
    with pytest.raises(DumpIncomplete):
        read_stats_csv(write(tmp_path, text))


# ------------------------------------------------------------------------------------------------------------
# Appendix min/max files


def test_ge_min_max_npz(tmp_path):
    path = tmp_path / (NAME + "_min_max.npz")
    np.savez(path, inputs=[[-1.5, 2.0], [0, 7]], outputs=np.array([[-3.0, 4.25]], dtype=np.float16))
    inputs, outputs = read_ge_min_max_npz(path)
    assert [(t.io, t.index, t.summary.min, t.summary.max) for t in inputs] == [
        (IO.INPUT, 0, -1.5, 2.0), (IO.INPUT, 1, 0.0, 7.0)
    ]  # fmt: skip
    assert [(t.io, t.index, t.summary.min, t.summary.max) for t in outputs] == [(IO.OUTPUT, 0, -3.0, 4.25)]
    assert all(t.summary.numel is None and t.summary.mean is None for t in inputs + outputs)


def test_ge_min_max_npz_empty_and_missing_keys(tmp_path):
    empty = tmp_path / "a_min_max.npz"
    np.savez(empty, inputs=[], outputs=[])  # shape (0,): an op without tensors (the appendix script's empty case)
    assert np.load(empty)["inputs"].shape == (0,)
    assert read_ge_min_max_npz(empty) == ((), ())
    only_outputs = tmp_path / "b_min_max.npz"
    np.savez(only_outputs, outputs=[[1, 2]])
    inputs, outputs = read_ge_min_max_npz(only_outputs)
    assert inputs == () and [(t.summary.min, t.summary.max) for t in outputs] == [(1.0, 2.0)]


def test_ge_min_max_npz_nan_and_inf(tmp_path):
    path = tmp_path / "c_min_max.npz"
    np.savez(path, inputs=[[np.nan, np.inf]], outputs=[[-np.inf, 0.0]])
    (i,), (o,) = read_ge_min_max_npz(path)
    assert math.isnan(i.summary.min) and i.summary.max == math.inf and o.summary.min == -math.inf


def test_truncated_npz_is_incomplete(tmp_path):
    path = tmp_path / "d_min_max.npz"
    np.savez(path, inputs=np.arange(40.0).reshape(20, 2), outputs=[[0, 1]])
    data = path.read_bytes()
    for cut in (0, 10, len(data) // 2, len(data) - 1):
        path.write_bytes(data[:cut])
        with pytest.raises(DumpIncomplete):
            read_ge_min_max_npz(path)


@pytest.mark.parametrize(
    "arrays",
    [{"inputs": np.zeros((2, 3))}, {"outputs": np.zeros(2)}, {"inputs": np.array([["a", "b"]])}],
    ids=["three_columns", "flat_pair", "strings"],
)
def test_npz_with_wrong_shapes_is_corrupt(tmp_path, arrays):
    path = tmp_path / "e_min_max.npz"
    np.savez(path, **arrays)
    with pytest.raises(DumpCorrupt):
        read_ge_min_max_npz(path)


def test_npz_with_object_arrays_is_corrupt_not_unpickled(tmp_path):
    path = tmp_path / "f_min_max.npz"
    np.savez(path, inputs=np.array([[None, 1]], dtype=object))
    with zipfile.ZipFile(path) as archive:
        assert archive.namelist() == ["inputs.npy"]
    with pytest.raises(DumpCorrupt):
        read_ge_min_max_npz(path)


@pytest.mark.parametrize(
    ("pair", "low", "high"),
    [
        (np.array([-2.5, 3.0], dtype=np.float16), -2.5, 3.0),
        (np.array([-2.5, 3.0], dtype=ml_dtypes.bfloat16).astype(np.float32), -2.5, 3.0),  # bf16 sources: float32
        (np.array([0, 9], dtype=np.int64), 0.0, 9.0),
        (np.array([np.nan, np.inf]), math.nan, math.inf),
    ],
)
def test_fx_min_max_npy(tmp_path, pair, low, high):
    path = tmp_path / "mm_0-aten.mm.default.OUTPUT.0.20261129083000000017_min_max.npy"
    np.save(path, pair)
    summary = read_fx_min_max_npy(path)
    assert summary.max == high and (summary.min == low or (math.isnan(low) and math.isnan(summary.min)))
    assert summary.numel is None


def test_fx_min_max_npy_truncated_is_incomplete(tmp_path):
    path = tmp_path / "x_min_max.npy"
    np.save(path, np.array([1.0, 2.0]))
    data = path.read_bytes()
    for cut in (3, 60, len(data) - 1):
        path.write_bytes(data[:cut])
        with pytest.raises(DumpIncomplete):
            read_fx_min_max_npy(path)
    path.write_bytes(data + b"\0")
    with pytest.raises(DumpCorrupt):
        read_fx_min_max_npy(path)


@pytest.mark.parametrize("array", [np.zeros(3), np.zeros((1, 2)), np.array(["a", "b"]), np.zeros(0)])
def test_fx_min_max_npy_wrong_shape_is_corrupt(tmp_path, array):
    path = tmp_path / "y_min_max.npy"
    np.save(path, array)
    with pytest.raises(DumpCorrupt):
        read_fx_min_max_npy(path)
