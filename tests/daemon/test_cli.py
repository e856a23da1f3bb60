"""`tcmp watch` and `tcmp status` through the CLI (typer's CliRunner: the same process, separate stdout/stderr)."""

from __future__ import annotations

import numpy as np
from daemon_testlib import fx_path, npy_bytes, write_fx


def test_watch_once_then_status(cli, root):
    write_fx(root, 0, 1)
    write_fx(root, 0, 2)
    short = fx_path(root, 0, 3)
    short.write_bytes(npy_bytes(np.zeros(10, np.float32))[:-3])
    result = cli("watch", str(root), "--once", "--workers", "0", "--drop-raw")
    assert result.exit_code == 0, result.output
    assert "2 files summarized, 0 failed, 1 incomplete, 2 raw files deleted" in result.stderr
    status = cli("status", str(root / "msprobe_fx_dump"))
    assert status.exit_code == 0, status.output
    lines = {line.split("  ", 1)[0]: line.split("  ", 1)[1].strip() for line in status.stdout.splitlines()}
    assert lines["files indexed"] == "2 (2 tensors) and 0 graph files"
    assert lines["pending"] == "1 file not complete yet" and lines["failed"] == "0 files"
    assert lines["daemon"].startswith("not running")
    assert lines["bytes freed"].startswith(f"{2 * (128 + 32)} B")  # two npy files of 8 float32 each


def test_watch_once_exits_1_when_files_failed(cli, root):
    bad = fx_path(root, 0, 1)
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"\x93NUMPY garbage")
    result = cli("watch", str(root), "--once", "--workers", "0")
    assert result.exit_code == 1 and "1 failed" in result.stderr


def test_usage_errors(cli, root, tmp_path):
    cases = [
        (["watch", str(root), "--raw-budget", "10G"], "give --drop-raw too"),
        (["watch", str(root), "--drop-raw", "--raw-budget", "lots"], "not a size"),
        (["watch", str(root), "--db", str(tmp_path / "no" / "such" / "x.sqlite")], "does not exist"),
        (["watch", str(tmp_path / "missing")], "does not exist"),
    ]
    for args, message in cases:
        result = cli(*args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.stderr.replace("\n", " "), (args, result.stderr)


def test_status_without_an_index(cli, tmp_path):
    result = cli("status", str(tmp_path))
    assert result.exit_code == 3 and "no .tcmp/index.sqlite" in result.stderr
    result = cli("status", "--db", str(tmp_path / "x.sqlite"))
    assert result.exit_code == 3 and "no such index file" in result.stderr


def test_one_db_for_several_roots(cli, tmp_path, root):
    other = tmp_path / "other"
    other.mkdir()
    write_fx(root, 0, 1)
    write_fx(other, 0, 2)
    db = tmp_path / "all.sqlite"
    result = cli("watch", str(root), str(other), "--db", str(db), "--once", "--workers", "0")
    assert result.exit_code == 0, result.output
    status = cli("status", "--db", str(db))
    assert "files indexed  2 (2 tensors)" in status.stdout
    assert not (root / ".tcmp").exists() and not (other / ".tcmp").exists()


def test_default_workers_are_the_cores_but_at_most_four(monkeypatch):
    """A 192-core NPU host must not get 192 summarizing processes of ~150 MB each (past the unit's MemoryMax)."""
    from tcmp.daemon.service import WatchConfig
    from tcmp.schemas.host import default_watch_workers

    for cores, expected in ((1, 1), (2, 2), (4, 4), (192, 4)):
        monkeypatch.setattr("tcmp.schemas.host.usable_cpus", lambda cores=cores: cores)
        assert default_watch_workers() == expected
        assert WatchConfig(roots=()).workers == expected


def test_watch_exit_codes_follow_the_table():
    """`tcmp watch --once`: 0 done; 1 files failed (corrupt, or given up as cut short); 3 the run could not do its
    job (it broke down, an index could not be written, records were not committed), which outranks 1."""
    from dataclasses import replace
    from pathlib import Path

    from tcmp.daemon.index_slots import IndexProblem
    from tcmp.daemon.service import RunReport

    done = RunReport(summarized=2, failed=0, incomplete=1, given_up=0, deleted_files=0, deleted_bytes=0,
                     committed_bytes=0, uncommitted=0)  # fmt: skip
    unwritable = (IndexProblem(Path("/r/.tcmp/index.sqlite"), ("/r",), "Permission denied"),)
    cases = [
        (done, 0, None),
        (replace(done, failed=1), 1, None),
        (replace(done, given_up=1), 1, None),
        (replace(done, failed=1, unwritable=unwritable), 3,
         "cannot write the index /r/.tcmp/index.sqlite: Permission denied; nothing under /r was summarized"),
        (replace(done, uncommitted=1), 3, "1 record could not be committed to the index"),
        (replace(done, error="the writer thread ended unexpectedly"), 3, "the writer thread ended unexpectedly"),
    ]  # fmt: skip
    for report, code, failure in cases:
        assert (report.exit_code, report.failure) == (code, failure), report
    assert replace(done, summarized=1, failed=1, deleted_files=1, deleted_bytes=2048).summary() == (
        "1 file summarized, 1 failed, 1 incomplete, 1 raw file deleted (2.0 KiB)"
    )
