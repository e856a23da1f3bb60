"""`table.csv_lines` feeds `csv.reader` one line at a time (issue 26: `io.StringIO` held a copy of a unit's rows at
four bytes a character). The reader must give the same rows as from `io.StringIO(text, newline="")`, whatever the
cells hold: names are data, with quotes, commas and every line break Python knows (splitlines' set included).
And `writers.write_in_pieces`, which hands a text file a unit's text a MiB at a time, writes the same bytes."""

from __future__ import annotations

import csv
import io
import tracemalloc

from hypothesis import given
from hypothesis import strategies as st

from tcmp.compare.report import writers
from tcmp.compare.report.table import csv_lines

BREAKS = "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
cell = st.text(alphabet=st.sampled_from([*BREAKS, '"', ",", "a", "é", " ", "0"]), max_size=12)


def written(rows: list[list[str]]) -> str:
    text = io.StringIO(newline="")
    csv.writer(text).writerows(rows)
    return text.getvalue()


@given(st.lists(st.lists(cell, min_size=1, max_size=5), max_size=8))
def test_the_lines_parse_as_the_whole_text_does(rows):
    text = written(rows)
    assert list(csv.reader(csv_lines(text))) == list(csv.reader(io.StringIO(text, newline=""))) == rows


def test_a_text_without_a_final_line_break_keeps_its_last_line():
    assert list(csv_lines("a,b\r\nc")) == ["a,b\r\n", "c"]
    assert list(csv_lines("")) == []


def test_no_copy_of_the_whole_text_is_held():
    text = written([["layers.1/MatMul_1.output.0", "float16", "[8, 32]", "1.0"]] * 50_000)  # ~2 MB
    tracemalloc.start()
    try:
        rows = sum(1 for _ in csv.reader(csv_lines(text)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert rows == 50_000 and peak < len(text) // 10


def test_text_written_in_pieces_is_the_text(tmp_path, monkeypatch):
    monkeypatch.setattr(writers, "TEXT_PIECE", 3)  # pieces cut through 2- and 3-byte UTF-8 characters
    text = "层,名\r\n" * 5 + "é" * 7 + "a"
    with open(tmp_path / "pieces", "w", encoding="utf-8", newline="") as handle:
        writers.write_in_pieces(handle, text)
    assert (tmp_path / "pieces").read_bytes() == text.encode("utf-8")
