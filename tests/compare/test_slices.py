"""A token's pairs are compared a slice of whole ops at a time (`pairs.SLICE_PAIRS`), so that its records do not
all wait for the report at once (issue 26). Slicing must change nothing a compare reports: the same report files
byte for byte, the same counts, first divergence and worst rows as the token compared in one slice. The same for
the page, which codes a unit's rows a few thousand at a time (`page.ROWS_AT_ONCE`)."""

from __future__ import annotations

import base64
import gzip
import json
import re
import zipfile
from pathlib import Path

import pytest

from tcmp.compare.execute import pairs
from tcmp.compare.execute.run import run_compare
from tcmp.compare.report import page
from tcmp.compare.report.outcome import CompareOptions
from tcmp.compare.report.writers import ReportChoice, chosen_formats
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import Fault, FaultKind, ScenarioConfig, write_scenario

STAMP = re.compile(rb"_\d{14}")  # the second the reports were written, in their names
SPLIT = pairs.split


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    # faults late in the token, so that the first divergence and the worst rows come from a slice after the first
    faults = (
        Fault("MatMul_2", FaultKind.REL_ERROR, magnitude=0.05),
        Fault("MatMul_3", FaultKind.REL_ERROR, magnitude=0.5),
    )
    config = ScenarioConfig(model=ModelConfig(layers=4), tokens=2, faults=faults, write_fusion_off=False)
    return write_scenario(tmp_path_factory.mktemp("slices"), config)


WRITTEN_AT = re.compile(rb"(?<=Written by tcmp )(\S+) at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d")  # the page's footer
PAGE_DATA = re.compile(rb'(<script type="application/x-tcmp-base64" id="tcmp-data">)([^<]*)(</script>)')


def page_data(match: re.Match) -> bytes:
    """The page's data block decoded (it is gzipped: the report files' names in it cannot be replaced as text)."""
    data = json.loads(gzip.decompress(base64.b64decode(match.group(2))))
    del data["meta"]["files"]  # the report files' paths, which hold the directory and the time stamp
    return match.group(1) + json.dumps(data, sort_keys=True).encode() + match.group(3)


def report_files(directory: Path) -> dict[str, bytes]:
    """The report files without their time stamp, directory (which the summary and the page name) and time of
    writing (the page's footer, the workbook's document properties and zip entries), by name."""
    files = {}
    for path in sorted(directory.iterdir()):
        if path.suffix == ".xlsx":  # its parts, without the time it was written (docProps/, and the zip's own)
            with zipfile.ZipFile(path) as book:
                text = b"".join(book.read(n) for n in sorted(book.namelist()) if not n.startswith("docProps/"))
        else:
            text = WRITTEN_AT.sub(b"", STAMP.sub(b"", path.read_bytes().replace(bytes(directory), b"DIR")))
        files[STAMP.sub(b"", path.name.encode()).decode()] = PAGE_DATA.sub(page_data, text)
    return files


def compare_with_slices(scenario, out: Path, slice_pairs: int, monkeypatch):
    monkeypatch.setattr(pairs, "SLICE_PAIRS", slice_pairs)
    monkeypatch.setattr(page, "ROWS_AT_ONCE", slice_pairs - 2)  # the page codes a unit's rows as many at a time
    slices: list[int] = []
    monkeypatch.setattr(pairs, "split", lambda p, parts: slices.append(parts) or SPLIT(p, parts))
    options = CompareOptions(scenario.target, scenario.golden_fx, jobs=1)
    formats = chosen_formats(ReportChoice(highlight=True, html=True))
    result, _ = run_compare(options, out, formats=formats, keep_rows=True)
    return result, slices


def test_slices_of_a_few_pairs_report_what_one_slice_does(scenario, tmp_path, monkeypatch):
    whole, whole_slices = compare_with_slices(scenario, tmp_path / "whole", 10**9, monkeypatch)
    sliced, sliced_slices = compare_with_slices(scenario, tmp_path / "sliced", 7, monkeypatch)
    assert set(whole_slices) == {1} and min(sliced_slices) > 5  # each token in one slice, then in many
    (rank,) = sliced.ranks
    (whole_rank,) = whole.ranks
    assert rank.counts == whole_rank.counts and rank.counts.failed > 0
    assert [d.op_name for d in rank.divergences] == [d.op_name for d in whole_rank.divergences]
    assert all(d.op_name is not None and "MatMul_2" in d.op_name for d in rank.divergences)
    assert rank.worst == whole_rank.worst and "MatMul_3" in rank.worst[0].pair.op_name
    assert rank.rows == whole_rank.rows
    whole_files, sliced_files = report_files(tmp_path / "whole"), report_files(tmp_path / "sliced")
    assert sorted(whole_files) == sorted(sliced_files) and len(whole_files) >= 4
    for name in whole_files:
        assert sliced_files[name] == whole_files[name], name


def test_a_slice_is_cut_only_between_ops(scenario, monkeypatch):
    """Each slice holds whole ops: an op's rows are coloured together (an output checked against its inputs)."""
    monkeypatch.setattr(pairs, "SLICE_PAIRS", 3)
    cut: list = []
    monkeypatch.setattr(pairs, "split", lambda p, parts: cut.append(SPLIT(p, parts)) or cut[-1])
    run_compare(CompareOptions(scenario.target, scenario.golden_fx, jobs=1), None)
    for slices in cut:
        orders = [[p.order for p in piece] for piece in slices]
        assert all(a[-1] != b[0] for a, b in zip(orders, orders[1:]))
        assert sum(map(len, orders)) == len({id(p) for piece in slices for p in piece})
    assert max(len(s) for s in cut) > 5
