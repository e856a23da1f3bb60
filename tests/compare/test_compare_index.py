"""`tcmp compare` from `tcmp watch`'s index: raw files deleted after their summaries were committed still take
part (statistics and md5 modes), the index is found by itself (or given with --db), and the summary says how
many rows came from raw data and how many from the index."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from tcmp.compare.execute.run import run_compare
from tcmp.compare.judge.verdict import Result
from tcmp.compare.records import CompareError
from tcmp.compare.report.outcome import CompareOptions, DataMode
from tcmp.daemon.retention import RetentionPolicy
from tcmp.daemon.service import WatchConfig, run_watch
from tcmp.schemas.dtypes import to_float32
from tcmp.schemas.dump_records import IO
from tcmp.schemas.ge_dump import open_ge_dump
from tcmp.schemas.index import open_index
from tcmp.schemas.synth.faults import Fault, FaultKind
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario
from tcmp.schemas.synth.stats_csv import CONFIG_NAMES, AdumpStatsWriter
from tcmp.schemas.synth.summaries import to_stats_csv

FAULTS = (Fault("MatMul_0", FaultKind.REL_ERROR, magnitude=0.2), Fault("SoftmaxV2_0", FaultKind.NAN, tokens=(1,)))


def watch_once(root: Path, db=None, drop_raw: bool = True) -> None:
    config = WatchConfig(roots=(root,), db=db, retention=RetentionPolicy(drop_raw, 0, ()), workers=1, once=True)
    report = run_watch(config)
    assert report.error is None and report.summarized > 0


def failing(rank) -> set:
    return {(r.pair.token, r.pair.op_name) for r in rank.rows if r.result is Result.FAIL}


@pytest.fixture()
def scenario(tmp_path):
    return write_scenario(tmp_path, ScenarioConfig(model=ModelConfig(layers=1), tokens=2, faults=FAULTS))


def test_statistics_from_the_index_after_raw_files_are_gone(scenario):
    raw, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx, mode=DataMode.STATISTICS), keep_rows=True)
    watch_once(scenario.root)
    assert not any(p.suffix == ".npy" for p in scenario.golden_fx.rglob("*"))  # raw FX files deleted
    assert not [p for p in scenario.target.rglob("*") if p.is_file() and p.name[0].isupper()]  # and GE files
    result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx), keep_rows=True)
    rank = result.ranks[0]
    assert result.mode.value == "statistics" and "summaries only" in result.mode_reason
    assert rank.counts.rows == raw.ranks[0].counts.rows and rank.counts.rows_from_index == rank.counts.rows
    # the same verdicts as from the raw files: exactly the faulty ops fail
    assert failing(rank) == failing(raw.ranks[0]) == {(0, "MatMul_0"), (1, "MatMul_0"), (1, "SoftmaxV2_0")}
    assert [(d.token, d.op_name) for d in rank.divergences] == [(0, "MatMul_0"), (1, "MatMul_0")]


def test_md5_from_the_index_matches_md5_from_raw(scenario):
    raw, _ = run_compare(CompareOptions(scenario.target, scenario.golden_ge, mode=DataMode.MD5), keep_rows=True)
    watch_once(scenario.root)
    indexed, _ = run_compare(CompareOptions(scenario.target, scenario.golden_ge, mode=DataMode.MD5), keep_rows=True)
    cells = {(r.pair.api_name, r.pair.token): (r.npu.crc32, r.bench.crc32, r.result) for r in raw.ranks[0].rows}
    again = {(r.pair.api_name, r.pair.token): (r.npu.crc32, r.bench.crc32, r.result) for r in indexed.ranks[0].rows}
    # a value-changing GE-inserted cast is checked against Cast(its own input), whose CRC-32 needs the raw input
    casts = {(r.pair.api_name, r.pair.token) for r in raw.ranks[0].rows if r.pair.cast and not r.pair.cast.preserving}
    assert casts and all(cells[k][2] is Result.PASS for k in casts)
    for r in indexed.ranks[0].rows:
        if (r.pair.api_name, r.pair.token) in casts:
            assert r.result is Result.NA and any("CRC-32 of Cast(input) needs the raw" in m for m in r.messages)
    assert {k: v for k, v in cells.items() if k not in casts} == {k: v for k, v in again.items() if k not in casts}
    assert cells.keys() == again.keys() and indexed.ranks[0].counts.rows_from_index == len(again)


def test_mixed_raw_and_index_and_explicit_db(tmp_path):
    scenario = write_scenario(tmp_path / "dump", ScenarioConfig(model=ModelConfig(layers=1), tokens=1, faults=FAULTS))
    db = tmp_path / "elsewhere" / "index.sqlite"
    db.parent.mkdir()
    watch_once(scenario.golden_fx, db=db)  # only the golden's raw files go; the target stays raw
    result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx, db=db), keep_rows=True)
    rank = result.ranks[0]
    assert result.mode.value == "statistics"
    self_checks = sum(any(m.startswith("self check") for m in r.pair.notes) for r in rank.rows)
    # every row has its bench from the index, but a GE-inserted op's self check, whose bench is its own raw input
    assert self_checks and 0 < rank.counts.rows_from_index == rank.counts.rows - self_checks
    assert failing(rank) == {(0, "MatMul_0")}
    explicit, _ = run_compare(
        CompareOptions(scenario.target, scenario.golden_fx, db=db, mode=DataMode.TENSOR), keep_rows=True
    )
    rows = [r for r in explicit.ranks[0].rows if not any(m.startswith("self check") for m in r.pair.notes)]
    assert len(rows) == rank.counts.rows_from_index
    assert all(r.result is Result.NA for r in rows)  # written with N/A cells and the reason, never dropped
    assert all("raw tensor not available" in " ".join(r.messages) for r in rows)


def test_graphs_come_from_the_index(scenario, monkeypatch):
    watch_once(scenario.root, drop_raw=False)
    import tcmp.compare.collect.binding as binding

    def no_parsing(*args, **kwargs):
        raise AssertionError("the graph was parsed again although the index holds it")

    monkeypatch.setattr(binding, "load_graph", no_parsing)
    result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx), keep_rows=True)
    assert result.mode.value == "tensor" and failing(result.ranks[0])


def test_step_directories_removed_after_the_raw_files_are_compared_from_the_index(scenario):
    """`tcmp watch --drop-raw` keeps the emptied step directories, but a user may clear them away: the index alone
    then says where each file was (rank, token, model), and the compare is the same."""
    raw, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx, mode=DataMode.STATISTICS), keep_rows=True)
    watch_once(scenario.root)
    removed = 0
    for tree in (scenario.target, scenario.golden_fx):
        for directory, _, files in sorted(os.walk(tree), key=lambda d: -len(Path(d[0]).parts)):
            if not files and not os.listdir(directory) and Path(directory) != tree:
                os.rmdir(directory)
                removed += 1
    assert removed and not [p for p in scenario.golden_fx.rglob("*") if p.is_dir() and p.name.isdigit()]
    result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx), keep_rows=True)
    rank = result.ranks[0]
    assert rank.counts.rows == raw.ranks[0].counts.rows == rank.counts.rows_from_index
    assert failing(rank) == failing(raw.ranks[0]) == {(0, "MatMul_0"), (1, "MatMul_0"), (1, "SoftmaxV2_0")}
    assert rank.counts.unmatched_target == raw.ranks[0].counts.unmatched_target


def _damage(monkeypatch, method: str) -> None:
    """The index opens and answers its first queries, then fails where `method` reads (a page of the file garbled:
    sqlite finds out only when it reads that page)."""
    from tcmp.schemas.index.reader import IndexReader

    def garbled(*args, **kwargs):
        raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(IndexReader, method, garbled)


def test_a_damaged_index_costs_its_stored_graphs_only_where_the_raw_files_remain(scenario, monkeypatch):
    raw, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx), keep_rows=True)
    watch_once(scenario.root, drop_raw=False)
    _damage(monkeypatch, "graph")
    result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx), keep_rows=True)
    assert any("parsed from the file" in note and "malformed" in note for note in result.notes)
    assert failing(result.ranks[0]) == failing(raw.ranks[0]) and result.ranks[0].counts == raw.ranks[0].counts


def test_a_damaged_index_holding_the_only_record_of_deleted_files_stops_the_compare(scenario, monkeypatch, tmp_path):
    watch_once(scenario.root)
    reports = tmp_path / "reports"
    reports.mkdir()
    _damage(monkeypatch, "deleted_in")
    with pytest.raises(CompareError, match=r"unreadable where it holds files deleted by tcmp watch: .*malformed"):
        run_compare(CompareOptions(scenario.target, scenario.golden_fx), reports)
    assert list(reports.iterdir()) == []  # no report that looks complete


def test_no_dump_files_and_an_unusable_index_says_both(scenario):
    watch_once(scenario.root)
    index = next(scenario.root.rglob("index.sqlite"))
    index.write_bytes(b"garbage garbage!" + index.read_bytes()[16:])  # not a database any more
    with pytest.raises(CompareError, match=r"no GE dump files under the target path .*; index .* unusable"):
        run_compare(CompareOptions(scenario.target, scenario.golden_fx))


def test_stats_csvs_summarized_by_watch_and_compared_with_a_golden_from_the_index(scenario):
    """The target as adump writes it with every statistic selected after the default selection (the header one
    column longer than its rows): `tcmp watch` stores each CSV's L2 norm, and the statistics compare against
    the golden's index rows uses it."""
    norms = {}  # the L2 norm of each target output, from the GE dump before it is converted
    for path in scenario.target.rglob("*"):
        if path.is_file() and path.name[0].isupper() and not path.name.endswith(".csv"):
            with open_ge_dump(path) as reader:
                for t in reader.dump.outputs:
                    values = to_float32(reader.load(t, nd=False).array).astype(np.float64)
                    # over the non-NaN elements: Summary's definition, which the synthetic adump writer follows
                    norms[(path.name + ".csv", t.index)] = float(np.sqrt(np.nansum(np.square(values))))
    assert to_stats_csv(scenario.target, AdumpStatsWriter(compatible=True), CONFIG_NAMES) == len(
        {name for name, _ in norms}
    )
    watch_once(scenario.root)
    assert not any(p.suffix == ".npy" for p in scenario.golden_fx.rglob("*"))  # the golden only in the index now
    with open_index(scenario.root) as reader:
        indexed = {
            (f.path.name, t.index): t.summary.l2norm
            for f in reader.files_under(scenario.target)
            for t in reader.summaries(f).tensors
            if t.io is IO.OUTPUT
        }
    assert indexed.keys() == norms.keys()
    assert all(abs(indexed[k] - norms[k]) <= 1e-5 * norms[k] + 1e-30 for k in norms)  # float32, 6 digits
    result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx), keep_rows=True)
    rank = result.ranks[0]
    gone = [r for r in rank.rows if not r.pair.bench.files[0].path.exists()]  # golden rows from the index
    assert result.mode.value == "statistics" and rank.counts.rows_from_index == len(gone) > rank.counts.rows / 2
    assert failing(rank) == {(0, "MatMul_0"), (1, "MatMul_0"), (1, "SoftmaxV2_0")}
    matmul = [r for r in rank.rows if r.pair.op_name == "MatMul_0" and r.pair.io is IO.OUTPUT]
    assert matmul and all(abs(r.statistics.l2norm.relative - 0.2) < 2e-3 for r in matmul)
