"""An FFTS+ op merged from its slices' summaries (what the index holds once `tcmp watch --drop-raw` deleted the
slice files) is the summary of the op merged from the raw slices: each slice file is summarized as the daemon
summarizes it, and the result is checked against numpy's statistics and zlib's CRC-32 of the raw merge."""

from __future__ import annotations

import json
import math
import zlib
from pathlib import Path

import numpy as np
import pytest
from fx_dumps import F16, GE_RANK_DIR, DumpPair, data, op, out, values

from tcmp.compare.execute.run import run_compare
from tcmp.compare.judge.verdict import Result
from tcmp.compare.report.outcome import CompareOptions, DataMode
from tcmp.daemon.retention import RetentionPolicy
from tcmp.daemon.service import WatchConfig, run_watch
from tcmp.schemas.dtypes import DataType
from tcmp.schemas.dump_records import IO, Side
from tcmp.schemas.dump_tree import DumpFile, FileKind
from tcmp.schemas.ffts import SliceFile, merge_ffts_slices
from tcmp.schemas.ge_dump import open_ge_dump
from tcmp.schemas.ge_names import parse_ge_file_name
from tcmp.schemas.synth.ge_writer import TensorSpec, write_ge_dump
from tcmp.summaries.ffts import merged_slice_tensors
from tcmp.summaries.merge import CRC_UNKNOWN
from tcmp.summaries.summarize import summarize_file

TS = 1764400000000000


def _slice(directory: Path, op_name: str, thread: int, outputs, inputs, attr) -> DumpFile:
    path = directory / f"MatMulV2.{op_name}.7.2.{TS + thread}.4.7.{thread}.0"
    spec = [TensorSpec(np.asarray(v, dtype=np.float64), int(DataType.DT_FLOAT16)) for v in (*inputs, *outputs)]
    attrs = [] if attr is None else [("ffts", json.dumps(attr))]
    write_ge_dump(path, op_name, spec[: len(inputs)], spec[len(inputs) :], dump_time=TS + thread, attrs=attrs)
    name = parse_ge_file_name(path.name)
    return DumpFile(Side.GE, FileKind.GE_BINARY, path, 0, 0, "graph_1_0", "run", "MatMulV2", op_name, None, None,
                    name.timestamp, name)  # fmt: skip


def _raw_merge(files):
    parts = []
    for f in files:
        with open_ge_dump(f.path) as reader:
            inputs, outputs = (tuple(np.array(reader.load(t).array) for t in items)
                               for items in (reader.dump.inputs, reader.dump.outputs))  # fmt: skip
            parts.append(SliceFile(f.name, reader.dump, inputs, outputs))
    return merge_ffts_slices(parts)


def _auto(rows: tuple[tuple[int, int], ...], columns: tuple[tuple[int, int], ...], cut: list[int]) -> dict:
    """An automatic-mode attribute: thread k took `rows[k]` x `columns[k]` of every input and output."""
    bounds = [[[{"lower": r[0], "higher": r[1]}, {"lower": c[0], "higher": c[1]}]] for r, c in zip(rows, columns)]
    return {"threadMode": 1, "slice_instance_num": 2, "outputCutList": [cut], "input_tensor_slice": bounds,
            "output_tensor_slice": bounds}  # fmt: skip


RNG = np.random.default_rng(11)
WHOLE = RNG.normal(size=(4, 6))
WHOLE[1, 2] = np.nan
WHOLE[3, 5] = -np.inf


@pytest.mark.parametrize(
    ("case", "outputs", "attr", "contiguous"),
    [
        ("rows", [WHOLE[:2], WHOLE[2:]], _auto(((0, 2), (2, 4)), ((0, 6), (0, 6)), [2, 1]), True),
        # cut along axis 1, each slice dumped flat: reshaped by the extents, not contiguous in C order
        ("columns", [WHOLE[:, :3].reshape(-1), WHOLE[:, 3:].reshape(-1)],
         _auto(((0, 4), (0, 4)), ((0, 3), (3, 6)), [1, 2]), False),
        ("no attribute", [WHOLE[:2], WHOLE[2:]], None, True),  # the latest slice only, with the raw merge's note
    ],
)  # fmt: skip
def test_merged_from_summaries_is_the_summary_of_the_raw_merge(tmp_path, case, outputs, attr, contiguous):
    inputs = [[WHOLE[:2] * 2], [WHOLE[2:] * 2]] if case != "columns" else [[WHOLE[:, :3] * 2], [WHOLE[:, 3:] * 2]]
    files = [_slice(tmp_path, "MatMul_0", t, [outputs[t]], inputs[t], attr) for t in (0, 1)]
    raw = _raw_merge(files)
    tensors = merged_slice_tensors(files, [summarize_file(f) for f in files])
    by_place = {(t.io, t.index): t for t in tensors}
    for io, arrays in ((IO.INPUT, raw.inputs), (IO.OUTPUT, raw.outputs)):
        for index, array in enumerate(arrays):
            merged = by_place[(io, index)]
            values = array.astype(np.float64)
            finite = values[np.isfinite(values)]
            s = merged.summary
            assert merged.shape == array.shape and tuple(n for n in merged.notes if CRC_UNKNOWN not in n) == raw.notes
            assert (s.numel, s.nan_count, s.inf_count) == (array.size, int(np.isnan(values).sum()),
                                                             int(np.isinf(values).sum()))  # fmt: skip
            assert s.min == (-math.inf if np.isneginf(values).any() else finite.min()) and s.max == finite.max()
            if not np.isinf(values).any():
                assert s.mean == pytest.approx(finite.mean(), rel=1e-6)
                assert s.l2norm == pytest.approx(math.sqrt((finite**2).sum()), rel=1e-6)
            if case != "no attribute":
                assert array.shape == WHOLE.shape  # the raw merge made the whole tensor: inputs too, cut alike
            if contiguous:
                assert s.crc32 == zlib.crc32(np.ascontiguousarray(array).tobytes())
            else:
                assert s.crc32 is None and any(n.startswith(CRC_UNKNOWN) for n in merged.notes)


def test_md5_mode_from_the_index_says_why_a_column_cut_has_no_crc(tmp_path):
    """An FFTS+ MatMul cut along columns, paired with its FX output: raw, md5 mode merges the slices and PASSes;
    from the index (slice files deleted) the CRC cannot be combined, and the row says so instead of a bare N/A."""
    d = DumpPair(tmp_path)
    x = values(4, 6, start=0.5, dtype=np.float16)
    mm = "mm-aten.mm.default"
    d.graph(data("x", (4, 6), F16), op("MatMul_0", "MatMulV2", ("x:0",), (out(f"{mm}.OUTPUT.0", (4, 6), F16),)))
    directory = tmp_path / GE_RANK_DIR / "0"
    directory.mkdir(parents=True)
    attr = _auto(((0, 4), (0, 4)), ((0, 3), (3, 6)), [1, 2])
    for t, cols in ((0, slice(0, 3)), (1, slice(3, 6))):
        _slice(directory, "MatMul_0", t, [x[:, cols].reshape(-1)], [x[:, cols]], attr)
    d.fx(mm, [x], [x])
    d.write_graph()

    def md5_row():
        result, _ = run_compare(CompareOptions(d.target, d.golden, mode=DataMode.MD5), keep_rows=True)
        (row,) = [r for r in result.ranks[0].rows if r.pair.api_name == "MatMul_0.output.0"]
        return row

    raw = md5_row()
    assert raw.result is Result.PASS and "(+1 FFTS+ slices)" in raw.pair.npu.label
    report = run_watch(WatchConfig(roots=(tmp_path,), retention=RetentionPolicy(True, 0, ()), workers=0, once=True))
    assert report.error is None and not list(directory.iterdir())
    indexed = md5_row()
    assert indexed.from_index and indexed.result is Result.NA
    assert any(m.startswith(CRC_UNKNOWN) and "not contiguous" in m for m in indexed.messages), indexed.messages
