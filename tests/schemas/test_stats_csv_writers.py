"""Stats-mode CSVs exactly as CANN's two writers write them (hicann/runtime): the AICPU `OpDumpTask::
ProcessDumpStats` (src/aicpu_sched/aicpu_schedule/core/dfx/dump_task.cpp) and the adump `AdxDumpRecord::
GenerateFileData` (src/dfx/adump/adump/adx_dump_record.cpp). Expected values are hand-worked, copied from the
writers' own unit tests (adx_dump_record_utest.cc `GenerateFileData`, aicpusd_dump_task_test.cc), or written by
the few-line port of adump's header/row code below, which follows the C++ line by line."""

from __future__ import annotations

import itertools
import math
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tcmp.schemas.dump_records import IO, Summary
from tcmp.schemas.errors import DumpCorrupt, DumpIncomplete
from tcmp.schemas.stats_files import SummaryTensor, read_stats_csv
from tcmp.schemas.synth.stats_csv import AdumpStatsWriter, DumpedTensor, aicpu_stats_csv

NAME = "Add.Add_1.44.6.1764400000000000.csv"
GRAPH_HEADER = (
    "Input/Output,Index,Data Size,Data Type,Format,Shape,Max Value,Min Value,Avg Value,Count,Nan Count,"
    "Negative Inf Count,Positive Inf Count"
)
DT_FLOAT, DT_FLOAT16, DT_INT32, DT_INT64 = 1, 2, 7, 8
FORMAT_NHWC, FORMAT_ND, FORMAT_FRACTAL_NZ, FORMAT_DHWCN, FORMAT_ALL = 1, 2, 29, 31, 41


def read(tmp_path, text: str) -> tuple[SummaryTensor, ...]:
    path = tmp_path / NAME
    path.write_bytes(text.encode("utf-8"))
    return read_stats_csv(path)


# ------------------------------------------------------------------------------------------------------------
# AICPU OpDumpTask


def test_aicpu_writer_rows(tmp_path):
    """Row 1 is aicpusd_dump_task_test.cc's; the others follow ProcessDumpStats: `-` for a dtype/format outside its
    maps and for a shape without dims, six commas (seven empty cells) for address 0 or an unsupported dtype (bf16),
    ostream's `nan`/`-nan`/`inf`, max/min NaN when the first element is NaN, `0`/`1` for bool."""
    text = (
        f"{GRAPH_HEADER}\n"
        "Output,0,640000,DT_FLOAT,NHWC,4x50x50x16,1.99999,1,1.50004,160000,0,0,0\n"
        "Input,0,2,DT_FLOAT16,ND,-,-3.5,-3.5,-3.5,1,0,0,0\n"
        "Input,1,64,DT_FLOAT,ND,4x4,,,,,,,\n"
        "Input,2,512,-,FRACTAL_NZ,1x1x16x16,,,,,,,\n"
        "Output,1,16,DT_FLOAT,ND,4,nan,nan,-nan,4,2,0,0\n"
        "Output,2,8,DT_FLOAT,ND,2,inf,-inf,-nan,2,0,1,1\n"
        "Output,3,3,DT_BOOL,ND,3,1,0,0.666667,3,0,0,0\n"
    )
    nhwc, scalar, no_address, bf16, leading_nan, infs, flags = read(tmp_path, text)
    assert (nhwc.io, nhwc.index, nhwc.size, nhwc.dtype, nhwc.format, nhwc.shape) == (
        IO.OUTPUT, 0, 640000, DT_FLOAT, FORMAT_NHWC, (4, 50, 50, 16)
    )  # fmt: skip
    assert nhwc.summary == Summary(160000, 1.0, 1.99999, 1.50004, None, 0, 0)
    assert scalar.shape == () and scalar.summary == Summary(1, -3.5, -3.5, -3.5, None, 0, 0)
    assert no_address.summary == Summary(None, None, None) and no_address.shape == (4, 4)
    assert (bf16.dtype, bf16.format, bf16.summary) == (None, FORMAT_FRACTAL_NZ, Summary(None, None, None))
    s = leading_nan.summary
    assert math.isnan(s.max) and math.isnan(s.min) and math.isnan(s.mean) and (s.numel, s.nan_count) == (4, 2)
    assert (infs.summary.max, infs.summary.min, infs.summary.inf_count) == (math.inf, -math.inf, 2)
    assert flags.summary == Summary(3, 0.0, 1.0, 0.666667, None, 0, 0)


# ------------------------------------------------------------------------------------------------------------
# adump AdxDumpRecord: a port of SetOptimizationMode / StatisticsData (adx_dump_record.cpp)

CONFIG = ("Max", "Min", "Avg", "Nan", "Negative Inf", "Positive Inf", "L2norm")  # STATS_ITEM_MAP's order
HEADER_NAME = (",Max Value", ",Min Value", ",Avg Value", ",Nan Count", ",Negative Inf Count", ",Positive Inf Count",
               ",l2norm")  # fmt: skip
# the values one tensor's device result holds, in STATS_ITEM_MAP's order, already as GetStatsString prints them
CELLS = ("6.5", "-2.25", "0.75", "3", "1", "2", "12.5")
COUNT = 24  # shape 2x3x4


def adump_header(items: set[str], compatible: bool) -> tuple[str, bool]:
    """SetOptimizationMode: returns the header and the `compatible_` flag after it (never reset to false)."""
    header = "Input/Output,Index,Data Size,Data Type,Format,Shape"
    if items == set(CONFIG[:6]):
        compatible = True
    else:
        header += ",Count"
    for num, name in enumerate(CONFIG):
        if name in items:
            if compatible and num == 3:
                header += ",Count"
            header += HEADER_NAME[num]
    return header, compatible


def adump_row(items: set[str], compatible: bool, result_ok: bool) -> str:
    """GenerateFileData + StatisticsData for a DT_FLOAT ND tensor of shape 2x3x4."""
    row = "Output,0,96,DT_FLOAT,ND,2x3x4"
    stats_list = [num for num, name in enumerate(CONFIG) if name in items]
    if not result_ok:
        for i in range(len(stats_list)):
            if compatible and i == 3:
                row += f",{COUNT}"
            row += ",NA"
    else:
        if not compatible:
            row += f",{COUNT}"
        for pos in stats_list:
            if compatible and pos == 3:
                row += f",{COUNT}"
            row += "," + CELLS[pos]
    return row


def count_written(items: set[str], compatible: bool, result_ok: bool) -> bool:
    """Whether the row above carries the count (read off the port's branches)."""
    if result_ok:
        return not compatible or "Nan" in items
    return compatible and len(items) > 3


SELECTIONS = [set(c) for n in range(1, 8) for c in itertools.combinations(CONFIG, n)]


@pytest.mark.parametrize("result_ok", [True, False], ids=["summarized", "na_row"])
@pytest.mark.parametrize("after_default", [False, True], ids=["fresh", "after_default_selection"])
def test_every_adump_selection(tmp_path, after_default, result_ok):
    """All 127 selections, in a fresh writer and in one that wrote the default selection before (the slip), with
    the device's statistics or its `NA` row: each statistic is read where the writer put it, or is None."""
    for items in SELECTIONS:
        compatible = after_default
        header, compatible = adump_header(items, compatible)
        text = f"{header}\n{adump_row(items, compatible, result_ok)}\n"
        (tensor,) = read(tmp_path, text)
        value = {name: float(CELLS[num]) if result_ok and name in items else None for num, name in enumerate(CONFIG)}
        counts = {k: None if value[k] is None else int(value[k]) for k in ("Nan", "Negative Inf", "Positive Inf")}
        infs = counts["Negative Inf"], counts["Positive Inf"]
        expected = Summary(
            numel=COUNT if count_written(items, compatible, result_ok) else None,
            min=value["Min"],
            max=value["Max"],
            mean=value["Avg"],
            l2norm=value["L2norm"],
            nan_count=counts["Nan"],
            inf_count=None if None in infs else sum(infs),
        )
        assert tensor.summary == expected, text
        assert (tensor.io, tensor.index, tensor.size, tensor.dtype, tensor.format, tensor.shape) == (
            IO.OUTPUT, 0, 96, DT_FLOAT, FORMAT_ND, (2, 3, 4)
        ), text  # fmt: skip


def test_adump_writers_own_unit_test_output(tmp_path):
    """adx_dump_record_utest.cc `GenerateFileData`, verbatim: the default selection (13 columns, `UNKNOW`/`ALL`,
    an `NA` row keeping the count), then Max|Min|L2norm in the same writer: a header of 10 columns over rows of 9."""
    default = (
        f"{GRAPH_HEADER}\n"
        "Input,0,268435456,DT_INT64,ND,100x20x40,100,200,10.1,80000,400,500,600\n"
        "Input,0,268435456,DT_FLOAT,UNKNOW,100x20x40,12.34,56.7897,10.1,80000,400,500,600\n"
        "Input,0,268435456,DT_INT32,ALL,100x20x40,NA,NA,NA,80000,NA,NA,NA\n"
    )
    int64, unknown_format, unavailable = read(tmp_path, default)
    assert int64.summary == Summary(80000, 200.0, 100.0, 10.1, None, 400, 1100) and int64.dtype == DT_INT64
    assert unknown_format.format is None and unknown_format.summary.max == 12.34
    assert unavailable.format == FORMAT_ALL and unavailable.summary == Summary(80000, None, None)
    slip = (
        "Input/Output,Index,Data Size,Data Type,Format,Shape,Count,Max Value,Min Value,l2norm\n"
        "Input,0,268435456,DT_INT32,ALL,100x20x40,1234,5678,90.3005\n"
    )
    (row,) = read(tmp_path, slip)
    assert row.summary == Summary(None, 5678.0, 1234.0, None, 90.3005)


def test_adump_names_and_shapes(tmp_path):
    """GetShapeString: `-` without dims (a scalar: shape ()), `NA` beyond 25 dims (unknown, count stays 1);
    FORMAT_STRING_MAP names format 31 `DHWCH`; `UNKNOW` for a dtype outside DT_STRING_MAP."""
    header = "Input/Output,Index,Data Size,Data Type,Format,Shape,Count,Max Value,l2norm"
    text = (
        f"{header}\n"
        "Input,0,4,DT_FLOAT,ND,-,1,2.5,2.5\n"
        "Input,1,4,DT_FLOAT,ND,NA,1,2.5,2.5\n"
        "Output,0,64,UNKNOW,DHWCH,1x2x2x2x2,16,1,4\n"
    )
    scalar, many_dims, odd_names = read(tmp_path, text)
    assert scalar.shape == () and scalar.summary == Summary(1, None, 2.5, None, 2.5)
    assert many_dims.shape is None and many_dims.summary.numel == 1
    assert (odd_names.dtype, odd_names.format, odd_names.shape) == (None, FORMAT_DHWCN, (1, 2, 2, 2, 2))


def test_adump_header_written_again_inside_the_file(tmp_path):
    """The writer appends one chunk of at most 10 tensors at a time and writes the header again when the file's
    name has dropped out of its memory of the last 10 names (CheckFileNameExist), possibly for a new selection."""
    text = (
        f"{GRAPH_HEADER}\n"
        "Input,0,4,DT_FLOAT,ND,1,1.5,1.5,1.5,1,0,0,0\n"
        "Input/Output,Index,Data Size,Data Type,Format,Shape,Count,l2norm\n"
        "Output,0,8,DT_FLOAT,ND,2,2,5\n"
    )
    first, second = read(tmp_path, text)
    assert first.summary == Summary(1, 1.5, 1.5, 1.5, None, 0, 0)
    assert second.summary == Summary(2, None, None, None, 5.0)


def test_negative_counts_are_unknown(tmp_path):
    """Int32DataHandle prints NaN/inf counts as int32: a count past 2^31 comes out negative."""
    (row,) = read(tmp_path, f"{GRAPH_HEADER}\nOutput,0,4,DT_FLOAT,ND,1,1,1,1,1,-2147483000,0,0\n")
    assert row.summary.nan_count is None and row.summary.inf_count == 0


# ------------------------------------------------------------------------------------------------------------
# What no writer writes: refused with the line and the column


@pytest.mark.parametrize(
    ("row", "where"),
    [
        ("Output,0,4,DT_FLOAT,ND,1,abc,1,1,1,0,0,0", r"line 2, column 7 \('max value'\): 'abc' is not a number"),
        ("Output,0,4,DT_FLOAT,ND,1,1,1,1,1.5,0,0,0", r"line 2, column 10 \('count'\)"),
        ("Output,0,4,DT_FLOAT,ND,4y4,1,1,1,1,0,0,0", r"line 2, column 6 \('shape'\)"),
        ("Output,-1,4,DT_FLOAT,ND,1,1,1,1,1,0,0,0", r"line 2, column 2 \('index'\)"),
        ("Output,0,4,DT_FLOAT,ND," + "9" * 5000 + ",1,1,1,1,0,0,0", r"line 2, column 6 \('shape'\)"),
        ("Output,0,4,DT_FLOAT,ND,1,1,1,1,1,0,0,0,7", r"line 2: 14 cells where the header \(line 1\) has 13"),
        ("Output,0,4,DT_FLOAT,ND,1,1,1,1,1,0,0", r"line 2: 12 cells"),
    ],
    ids=["number", "count", "shape", "index", "huge_dim", "long_row", "short_row"],
)
def test_unreadable_rows_name_line_and_column(tmp_path, row, where):
    with pytest.raises(DumpCorrupt, match=where):
        read(tmp_path, f"{GRAPH_HEADER}\n{row}\n")


def test_binary_junk_is_corrupt(tmp_path):
    with pytest.raises(DumpCorrupt, match="NUL byte at offset 14"):
        read(tmp_path, GRAPH_HEADER[:14] + "\0\0\0\n")


# ------------------------------------------------------------------------------------------------------------
# Garbled files: summaries or the documented errors, nothing else


def _valid_file(items: set[str], after_default: bool, rows: list[bool]) -> str:
    header, compatible = adump_header(items, after_default)
    return header + "\n" + "".join(adump_row(items, compatible, ok) + "\n" for ok in rows)


files = st.builds(
    _valid_file,
    st.sampled_from(SELECTIONS),
    st.booleans(),
    st.lists(st.booleans(), min_size=1, max_size=4),
) | st.just(f"{GRAPH_HEADER}\nOutput,0,640000,DT_FLOAT,NHWC,4x50x50x16,1.99999,1,1.50004,160000,0,0,0\n")
junk = (
    st.sampled_from(["NA", "", "-", "nan", "-nan", "inf", "1e999", "9" * 25, "-7", "x", '"', "\r", "Input/Output"])
    | st.text(st.characters(codec="utf-8"), max_size=30)
    | st.integers(4000, 6000).map(lambda n: "9" * n)  # past int()'s 4300 digits
)


@st.composite
def garbled(draw) -> bytes:
    text = draw(files)
    lines = text.split("\n")
    for _ in range(draw(st.integers(1, 6))):
        n = draw(st.integers(0, len(lines) - 1) | st.integers(min(1, len(lines) - 1), len(lines) - 1))  # rows more
        cells = lines[n].split(",")
        edit = draw(st.sampled_from(["cell", "cell", "cell", "insert", "delete", "truncate_line"]))
        k = draw(st.integers(0, max(len(cells) - 1, 0)))
        if edit == "cell":
            cells[k] = draw(junk)
        elif edit == "insert":
            cells.insert(k, draw(junk))
        elif edit == "delete" and len(cells) > 1:
            del cells[k]
        elif edit == "truncate_line":
            cells = cells[:k]
        lines[n] = ",".join(cells)
    data = "\n".join(lines).encode("utf-8")
    how = draw(st.sampled_from(["as_is", "cut", "binary"]))
    if how == "cut":
        data = data[: draw(st.integers(0, len(data)))]
    elif how == "binary":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=16)) + data[at:]
    return data


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(garbled())
def test_garbled_stats_csvs_give_summaries_or_the_documented_errors(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("garbled") / NAME
    path.write_bytes(data)
    try:
        tensors = read_stats_csv(path)
    except (DumpCorrupt, DumpIncomplete) as exc:
        assert exc.path == path and exc.message
        if isinstance(exc, DumpCorrupt) and re.match(r"line \d+, column", exc.message):
            assert re.match(r"line \d+, column \d+ \('[a-z0-9 /]+'\): ", exc.message)
        return
    assert isinstance(tensors, tuple) and all(isinstance(t, SummaryTensor) for t in tensors)
    for t in tensors:
        assert t.io in (IO.INPUT, IO.OUTPUT) and t.index >= 0
        assert all(isinstance(v, (float, type(None))) for v in (t.summary.min, t.summary.max, t.summary.l2norm))


@settings(max_examples=100, deadline=None)
@given(files, st.data())
def test_a_file_cut_anywhere_is_incomplete_or_its_first_rows(tmp_path_factory, text, data):
    """The writers append whole lines: a cut file is "still being written", or (cut at a line end) the rows so far —
    never rows with wrong values."""
    path = tmp_path_factory.mktemp("cut") / NAME
    path.write_bytes(text.encode())
    full = read_stats_csv(path)
    cut = data.draw(st.integers(0, len(text) - 1))
    path.write_bytes(text[:cut].encode())
    if not text[:cut].endswith("\n"):
        with pytest.raises(DumpIncomplete):
            read_stats_csv(path)
    else:
        part = read_stats_csv(path)
        assert part == full[: len(part)] and len(part) == text[:cut].count("\n") - 1


# ------------------------------------------------------------------------------------------------------------
# tcmp's synthetic writers (tcmp/schemas/synth/stats_csv.py) write what the C++ writes: hand-worked lines


def test_synthetic_aicpu_writer_lines():
    tensors = [
        DumpedTensor(IO.OUTPUT, 0, 8, DT_FLOAT, FORMAT_ND, (2,), np.array([np.nan, 1.0], np.float32)),
        DumpedTensor(IO.INPUT, 0, 8, DT_FLOAT16, FORMAT_FRACTAL_NZ, (2, 2), np.array([1, -2, 3.5, np.inf], np.float16)),
        DumpedTensor(IO.INPUT, 1, 2, 27, FORMAT_ND, (), np.array(1.0, np.float32)),  # bf16: no stats, no name
        DumpedTensor(IO.INPUT, 2, 12, DT_INT32, 49, (3,), None),  # address 0; format 49 outside its map
        DumpedTensor(IO.OUTPUT, 1, 24, DT_FLOAT, FORMAT_ND, (3, 2), np.array([1e6, 2e-7, 3, 4, 5, 6.0], np.float32)),
    ]
    assert aicpu_stats_csv(tensors).split("\n") == [
        GRAPH_HEADER,
        "Input,0,8,DT_FLOAT16,FRACTAL_NZ,2x2,inf,-2,inf,4,0,0,1",  # one +inf: the mean is +inf (AdjustAvgValue)
        "Input,1,2,-,ND,-,,,,,,,",
        "Input,2,12,DT_INT32,-,3,,,,,,,",
        "Output,0,8,DT_FLOAT,ND,2,nan,nan,nan,2,1,0,0",  # maxValue_ = minValue_ = data_[0] = NaN
        "Output,1,24,DT_FLOAT,ND,3x2,1e+06,2e-07,166670,6,0,0,0",
        "",
    ]


def test_synthetic_adump_writer_lines():
    """The inputs of adx_dump_record_utest.cc's GenerateFileData with values that give its numbers: the default
    selection, then Max|Min|L2norm in the same writer (header 10 columns, row 9), then in a fresh one."""
    t = DumpedTensor(IO.INPUT, 0, 268435456, DT_INT64, FORMAT_ALL, (100, 20, 40), np.array([1234, 5678], np.int64))
    writer = AdumpStatsWriter()
    assert writer.csv([t]).split("\n")[:2] == [
        GRAPH_HEADER,
        "Input,0,268435456,DT_INT64,ALL,100x20x40,5678,1234,3456,80000,0,0,0",
    ]
    slip = writer.csv([t], ("Max", "Min", "L2norm")).split("\n")
    assert slip[:2] == [
        "Input/Output,Index,Data Size,Data Type,Format,Shape,Count,Max Value,Min Value,l2norm",
        "Input,0,268435456,DT_INT64,ALL,100x20x40,5678,1234,5810.55",  # sqrt(1234² + 5678²) = 5810.5456
    ]
    fresh = AdumpStatsWriter().csv([t], ("Max", "Min", "L2norm"), unsummarized=frozenset({(IO.INPUT, 0)}))
    assert fresh.split("\n")[1] == "Input,0,268435456,DT_INT64,ALL,100x20x40,NA,NA,NA"  # no count: one cell short
    nan_first = writer.csv([t], ("Nan", "L2norm")).split("\n")
    assert nan_first[0].endswith(",Shape,Count,Count,Nan Count,l2norm") and nan_first[1].endswith("x40,80000,0,5810.55")
