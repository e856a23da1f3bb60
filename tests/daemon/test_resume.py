"""One-pass runs (`--once`, in-process, no worker processes): resume, retention, and leftover deletions."""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path

import numpy as np
from daemon_testlib import crc, fx_path, index_rows, npy_bytes, tensor_rows, write_fx

from tcmp.daemon.retention import RetentionPolicy
from tcmp.daemon.service import WatchConfig, run_watch
from tcmp.schemas.graph_reader import read_graph
from tcmp.schemas.index import default_index_path, open_index
from tcmp.schemas.synth.graph_writer import GraphOpSpec, OutputSpec, graph_file_name, write_graph


def _once(root: Path, **kw):
    return run_watch(WatchConfig(roots=(root,), workers=0, once=True, settle=0.0, **kw))


def test_a_second_run_reads_nothing_and_a_rewritten_file_is_read_again(root):
    paths = [write_fx(root, 0, n) for n in range(5)]
    graph = write_graph(root, graph_file_name(1, 0, 9, "20261129083000000000"), "graph_1",
                        [GraphOpSpec("x", "Data", (), (OutputSpec("x-placeholder.OUTPUT.0", 1, (2,)),))])  # fmt: skip
    first = _once(root)
    assert (first.summarized, first.failed, first.exit_code) == (6, 0, 0)
    assert _once(root).summarized == 0
    rows = index_rows(default_index_path(root))
    assert {r.summaries for r in rows.values()} == {1} and len(rows) == 6
    new_values = np.array([9.0, 8.0, 7.0], np.float32)
    paths[2].write_bytes(npy_bytes(new_values))
    third = _once(root)
    assert third.summarized == 1
    assert index_rows(default_index_path(root))[str(paths[2])].summaries == 2
    assert tensor_rows(default_index_path(root), paths[2]) == [("output", 0, crc(new_values), 7.0, 9.0, 3)]
    with open_index(root) as reader:
        assert reader.graph(graph) == read_graph(graph)


def test_incomplete_and_corrupt_files_are_recorded_without_waiting(root):
    data = npy_bytes(np.arange(64, dtype=np.float32))
    short = fx_path(root, 0, 1)
    short.parent.mkdir(parents=True)
    short.write_bytes(data[:-5])
    corrupt = fx_path(root, 0, 2)
    corrupt.write_bytes(data + b"junk")
    good = write_fx(root, 0, 3)
    report = _once(root, retention=RetentionPolicy(drop_raw=True))
    assert (report.summarized, report.failed, report.incomplete, report.exit_code) == (1, 1, 1, 1)
    rows = index_rows(default_index_path(root))
    assert rows[str(short)].state == "incomplete" and rows[str(corrupt)].state == "error"
    assert "DumpCorrupt" in rows[str(corrupt)].error
    assert short.exists() and corrupt.exists() and not good.exists()  # only summarized raw files go


def test_a_deletion_decided_before_a_crash_is_done_on_the_next_start(root, caplog):
    """Simulates kill -9 between the commit (raw_deleted=1) and the unlink."""
    decided, other = write_fx(root, 0, 1), write_fx(root, 0, 2)
    _once(root)  # no retention yet: both summarized and kept
    conn = sqlite3.connect(default_index_path(root))
    conn.execute("UPDATE files SET raw_deleted = 1 WHERE path = ?", (str(decided),))
    conn.commit()
    conn.close()
    caplog.set_level(logging.DEBUG, logger="tcmp.daemon")
    report = _once(root, retention=RetentionPolicy(drop_raw=True))
    assert report.summarized == 0 and not decided.exists()
    assert other.exists()  # summarized without retention: not deleted after the fact
    assert f"deleting raw {decided}" in caplog.text and "an earlier run's commit" in caplog.text


def test_a_leftover_flag_is_cleared_when_retention_is_off(root):
    path = write_fx(root, 0, 1)
    _once(root)
    conn = sqlite3.connect(default_index_path(root))
    conn.execute("UPDATE files SET raw_deleted = 1")
    conn.commit()
    conn.close()
    _once(root)
    assert path.exists() and index_rows(default_index_path(root))[str(path)].raw_deleted == 0


def test_budget_and_kept_ops_decide_which_raw_files_go(root):
    kept_op = [write_fx(root, 0, n, node="keep") for n in range(3)]
    others = [write_fx(root, 0, n) for n in range(3, 13)]
    size = others[0].stat().st_size
    assert {p.stat().st_size for p in kept_op + others} == {size}
    policy = RetentionPolicy(drop_raw=True, raw_budget=3 * size + size // 2, keep_raw_ops=("keep_*",))
    report = _once(root, retention=policy)
    assert report.summarized == 13 and report.deleted_files == 7
    assert all(p.exists() for p in kept_op) and sum(p.exists() for p in others) == 3
    rows = index_rows(default_index_path(root))
    assert all(rows[str(p)].raw_deleted == int(not p.exists()) for p in kept_op + others)
    with open_index(root) as reader:
        assert reader.status().bytes_freed == 7 * size


def test_symlinks_are_not_followed_and_their_targets_are_left_alone(root, tmp_path, caplog):
    outside = tmp_path / "outside.npy"
    outside.write_bytes(npy_bytes(np.ones(4, np.float32)))
    link = fx_path(root, 0, 1)
    link.parent.mkdir(parents=True)
    link.symlink_to(outside)
    inside_target = write_fx(root, 1, 2)
    inside_link = fx_path(root, 0, 3)
    inside_link.symlink_to(inside_target)
    caplog.set_level(logging.INFO, logger="tcmp.daemon")
    report = _once(root, retention=RetentionPolicy(drop_raw=True))
    assert report.summarized == 1
    assert link.is_symlink() and outside.exists() and inside_link.is_symlink() and not inside_target.exists()
    assert set(index_rows(default_index_path(root))) == {str(inside_target)}
    assert f"{link} is a symlink to {os.path.realpath(outside)}, outside the watched root {root}" in caplog.text
