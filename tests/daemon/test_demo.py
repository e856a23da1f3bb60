"""`tcmp demo` (issue 4, item 9): a simulated inference writes the synthetic dump in chunks while a real
`tcmp watch --drop-raw` process runs; the compare then runs from the index it left."""

from __future__ import annotations

import pytest

from tcmp.daemon.demo import DemoError, run_demo
from tcmp.schemas.index import default_index_path


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return run_demo(tmp_path_factory.mktemp("demo") / "run", jobs=1)


def left_in_dump(demo):
    """Every file still in the watched tree, by walking it (not by asking the index)."""
    return {p: p.stat().st_size for p in demo.dump.rglob("*") if p.is_file() and ".tcmp" not in p.parts}


def test_the_daemon_indexed_every_file_and_kept_only_what_it_could_not_summarize(demo):
    assert "stopped: " in demo.watch_log.read_text()  # by SIGTERM, after its last commit (a non-zero exit raises)
    index = demo.index
    assert index.summarized + index.graphs + index.failed == demo.replay.files
    assert demo.replay.chunks > demo.replay.files  # the bigger files did arrive in several writes
    left = left_in_dump(demo)
    graphs = {p for p in left if p.suffix == ".txt"}
    raw = set(left) - graphs
    # the one data file kept is the truncated one (Gelu_0, token 0), recorded with the reason
    assert len(raw) == 1 and next(iter(raw)).name.startswith("Gelu.Gelu_0.")
    assert index.failed == 1 and index.recent_errors[0].error.startswith("cut short: file has ")
    assert "still being written" not in index.recent_errors[0].error  # it was given up: not "still being written"
    assert str(index.recent_errors[0].path) == str(next(iter(raw)))
    assert len(graphs) == index.graphs
    assert index.bytes_freed == demo.replay.bytes - sum(left.values())  # every other byte written was freed
    assert default_index_path(demo.dump).is_file()
    log = demo.watch_log.read_text()
    assert "raw dump files are deleted once their summary is committed" in log and ": cut short: " in log
    (stopped,) = [line for line in log.splitlines() if " stopped: " in line]  # says what status says
    assert f"{index.summarized + index.graphs} files summarized, {index.failed} failed, 0 incomplete" in stopped


def test_the_compare_ran_from_the_index_and_found_the_faults(demo):
    result = demo.result
    (rank,) = result.ranks
    assert result.mode.value == "statistics" and "summaries only" in result.mode_reason
    assert rank.counts.rows > 0 and rank.counts.rows_from_index == rank.counts.rows
    first = {d.token: d.op_name for d in rank.divergences}
    assert first == {0: "layers.1/MatMul_1", 1: "layers.1/MatMul_1"}  # the injected REL_ERROR, both tokens
    report = rank.report
    assert report.csv.is_file() and report.xlsx.is_file() and report.csv.parent == demo.root / "report"
    assert report.html.is_file() and report.html.name.endswith("_report.html")


def test_needs_a_directory_of_its_own(tmp_path):
    (tmp_path / "something").write_text("mine")
    with pytest.raises(DemoError, match="not empty"):
        run_demo(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["something"]


def test_cli(cli, tmp_path):
    result = cli("demo", tmp_path / "demo", "--jobs", "1")
    assert result.exit_code == 0, result.output
    assert "first divergence in tokens 0-1: layers.1/MatMul_1" in result.stdout  # one line for both tokens
    assert "1 recorded as failed" in result.stdout and "kept raw:" in result.stdout
    (page,) = (tmp_path / "demo" / "report").glob("*_report.html")
    assert f"page: {page}" in result.stdout  # the demo prints where its HTML report is
    assert "starting `tcmp watch" in result.stderr
    taken = cli("demo", tmp_path / "demo")
    assert taken.exit_code == 2 and "not empty" in taken.stderr  # a directory the demo cannot have: usage


def test_a_file_given_as_the_directory_is_a_usage_error(cli, tmp_path):
    a_file = tmp_path / "afile"
    a_file.write_text("mine")
    result = cli("demo", a_file)
    assert result.exit_code == 2, result.output
    assert "is not a directory" in result.stderr and "internal error" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert a_file.read_text() == "mine" and [p.name for p in tmp_path.iterdir()] == ["afile"]
