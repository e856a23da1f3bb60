"""Retention decisions and the deleter's refusals (in-process; the end-to-end order commit -> delete is checked by
the crash test)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Optional

import numpy as np
import pytest
from daemon_testlib import fx_path, npy_bytes, write_fx

from tcmp.daemon.retention import Deleter, Deletion, DeletionFailed, RawBudget, RetentionPolicy, parse_size
from tcmp.schemas.dump_tree import DumpFile, locate
from tcmp.schemas.index import FileKey


@pytest.mark.parametrize(
    ("text", "expected"),
    [("4096", 4096), ("500M", 500 << 20), ("50G", 50 << 30), ("1.5T", 3 << 39), ("2 GiB", 2 << 30), ("7kb", 7 << 10)],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "G", "-1G", "5X", "1,5G"])
def test_parse_size_refuses(text):
    with pytest.raises(ValueError, match="not a size"):
        parse_size(text)


def _file(root: Path, n: int, node: str = "op") -> DumpFile:
    found = locate(fx_path(root, 0, n, node))
    assert isinstance(found, DumpFile)
    return found


def test_budget_keeps_the_first_bytes_then_deletes_and_patterns_always_keep(root):
    policy = RetentionPolicy(drop_raw=True, raw_budget=250, keep_raw_ops=("keep_*", "aten.mm*"))
    budget = RawBudget(policy, kept_bytes=100)  # an earlier run kept 100 bytes
    decisions = [
        budget.should_delete(_file(root, 1), None, 100),  # 200 kept: within budget
        budget.should_delete(_file(root, 2), None, 100),  # would be 300: deleted
        budget.should_delete(_file(root, 3), None, 50),  # exactly 250: kept
        budget.should_delete(_file(root, 4, node="keep_me"), None, 10**9),  # pattern on the node name
        budget.should_delete(_file(root, 5), "keep_header_name", 10**9),  # pattern on the header name
        budget.should_delete(_file(root, 6), None, 1),
    ]
    assert decisions == [False, True, False, False, False, True]
    assert budget.kept_bytes == 250  # pattern-kept files do not use up the budget
    assert not RawBudget(RetentionPolicy(drop_raw=False), 0).should_delete(_file(root, 7), None, 1)


def test_graph_and_stats_files_are_never_deleted(root):
    stats = locate(root / "msprobe_ge_dump/1/0/graph_1_0/1/0/Mul.mul_3.12.2.1764400000000050.csv")
    assert isinstance(stats, DumpFile)
    assert not RawBudget(RetentionPolicy(drop_raw=True), 0).should_delete(stats, None, 1)


class _Deletions:
    def __init__(self) -> None:
        self.failed: list[DeletionFailed] = []
        self.deleter = Deleter(self.failed.append)

    def run(self, *deletions: Deletion) -> list[DeletionFailed]:
        self.deleter.start()
        for deletion in deletions:
            self.deleter.put(deletion)
        self.deleter.stop()
        self.deleter.join(timeout=10)
        return self.failed


def _deletion(path: Path, root: Path, key: Optional[FileKey] = None) -> Deletion:
    return Deletion(str(path), str(root), root / ".tcmp/index.sqlite", key or FileKey.of(os.lstat(path)), seq=3)


def test_deleter_deletes_only_unchanged_regular_raw_files_inside_the_root(root, tmp_path):
    ok = write_fx(root, 0, 1)
    changed = write_fx(root, 0, 2)
    changed_key = FileKey.of(os.lstat(changed))
    time.sleep(0.01)
    changed.write_bytes(npy_bytes(np.zeros(3, np.float32)))  # rewritten after it was summarized
    outside = tmp_path / "outside.npy"
    outside.write_bytes(npy_bytes(np.ones(2, np.float32)))
    link = fx_path(root, 0, 3)
    link.symlink_to(outside)
    graph = root / "dynamo_original_graph_1_rank_0_pid_1_ts_1.txt"
    graph.write_text("name: 'g'\n")
    gone = fx_path(root, 0, 4)
    real_step = write_fx(tmp_path / "elsewhere", 0, 5).parent
    (root / "linked").symlink_to(real_step, target_is_directory=True)
    through_link = root / "linked" / fx_path(root, 0, 5).name  # a regular file, reached through a symlink
    failed = _Deletions().run(
        _deletion(ok, root),
        _deletion(changed, root, changed_key),
        _deletion(link, root, FileKey.of(os.lstat(link))),
        _deletion(graph, root),
        Deletion(str(gone), str(root), root / "i", FileKey(1, 2, 3), seq=1),  # already gone: fine
        _deletion(through_link, root),
        _deletion(ok, tmp_path / "another-root"),
    )
    assert not ok.exists()
    assert changed.exists() and outside.exists() and link.is_symlink() and graph.exists() and through_link.exists()
    reasons = [(Path(f.deletion.path).name, f.reason) for f in failed]
    other = tmp_path / "another-root"
    assert reasons == [
        (changed.name, "changed since it was summarized"),
        (link.name, "not a regular file"),
        (graph.name, "not a raw dump file"),
        (
            through_link.name,
            f"not a file of the watched root {root} (linked is a symlink or not a directory: not followed)",
        ),
        (
            ok.name,
            f"not a file of the watched root {other} (not below the root {other})",
        ),
    ]
