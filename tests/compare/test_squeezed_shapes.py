"""A pair whose shapes differ only by dimensions of size 1 (`[1, 8, 32]` against `[8, 32]`) is compared after
squeezing them, as before, and its Err_message now says so (issue 27): a PASS with an empty message hid it."""

from __future__ import annotations

import numpy as np
from fx_dumps import data, op, out, values

from tcmp.compare.judge.verdict import Result
from tcmp.compare.report.table import message
from tcmp.schemas.dump_records import IO

TANH = "tanh-aten.tanh.default"
NOTE = "Shapes of NPU [1, 8, 32] and bench [8, 32] differ only in dimensions of size 1: compared after squeezing them."


def test_a_squeezed_shape_passes_and_says_so(dumps):
    x = values(8, 32) / 64
    y = np.tanh(x.astype(np.float64)).astype(np.float32)
    dumps.graph(data("x", (8, 32)), op("Tanh", "Tanh", ("x:0",), (out(f"{TANH}.OUTPUT.0", (1, 8, 32)),)))
    dumps.ge("Tanh", "Tanh", [x], [y.reshape(1, 8, 32)])
    dumps.fx(TANH, [x], [y])
    o = dumps.compare()
    output = o.row("Tanh", IO.OUTPUT, 0)
    assert output.result is Result.PASS and output.accuracy_reached  # the verdict as before: the same values
    assert output.npu.shape == (1, 8, 32) and output.bench.shape == (8, 32)
    assert message(output) == NOTE  # the row's Err_message cell
    same = o.row("Tanh", IO.INPUT, 0)  # [8, 32] on both sides: nothing to say
    assert same.result is Result.PASS and "size 1" not in message(same)
