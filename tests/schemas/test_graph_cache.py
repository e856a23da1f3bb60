"""The parsed-graph cache: a second load does not parse, a changed file is parsed again, damage is ignored."""

from __future__ import annotations

import json
import os
import stat

import pytest

from tcmp.schemas import graph_cache
from tcmp.schemas.graph import read_graph
from tcmp.schemas.synth.graph_writer import GraphOpSpec, OutputSpec, write_graph


@pytest.fixture()
def graph_file(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user-cache"))
    ops = [
        GraphOpSpec("arg0_1", "Data", (), (OutputSpec(None, 1, (2, 3)),)),
        GraphOpSpec("Add_1", "Add", ("arg0_1:0", "arg0_1:0", "x:-1"),
                    (OutputSpec("add-aten.add.Tensor.OUTPUT.0", 1, (2, 3)), OutputSpec(None, 2, (1,), "NCHW"))),
    ]  # fmt: skip
    (tmp_path / "dump").mkdir()
    return write_graph(tmp_path / "dump", "dynamo_original_graph_1_rank_0_pid_1_ts_1.txt", "graph_1", ops)


def test_second_load_comes_from_the_cache(graph_file, monkeypatch):
    first = graph_cache.load_graph(graph_file)
    assert first.ops == read_graph(graph_file).ops
    calls = []
    monkeypatch.setattr(graph_cache, "read_graph", lambda *a, **k: calls.append(a) or read_graph(*a, **k))
    second = graph_cache.load_graph(graph_file)
    assert calls == [] and second.ops == first.ops and second.name == "graph_1"
    assert list((graph_file.parent / ".tcmp" / "graphs").glob("*.json"))  # beside the dump


def test_changed_or_damaged_entries_are_parsed_again(graph_file, monkeypatch):
    graph_cache.load_graph(graph_file)
    (entry,) = (graph_file.parent / ".tcmp" / "graphs").glob("*.json")
    entry.write_text("{not json")
    calls = []
    monkeypatch.setattr(graph_cache, "read_graph", lambda *a, **k: calls.append(a) or read_graph(*a, **k))
    assert graph_cache.load_graph(graph_file).op("Add_1").control_inputs == ("x",)
    text = graph_file.read_text().replace('"Add_1"', '"Add_2"')
    graph_file.write_text(text)
    assert graph_cache.load_graph(graph_file).op("Add_2") is not None
    assert len(calls) == 2
    json.loads(entry.read_text())  # rewritten whole


def test_read_only_dump_directory_uses_the_user_cache(graph_file, tmp_path, monkeypatch):
    blocker = graph_file.parent / ".tcmp"
    blocker.write_text("a file where the cache directory would go")
    graph_cache.load_graph(graph_file)
    assert list((tmp_path / "user-cache" / "tcmp" / "graphs").glob("*.json"))


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o077, 0o600)])
def test_cache_entries_get_the_mode_the_umask_gives(graph_file, mask, mode):
    """Colleagues reading the same dump reuse the entry (issue 18, item 6): not mkstemp's 0600 whatever the umask."""
    previous = os.umask(mask)
    try:
        graph_cache.load_graph(graph_file)
    finally:
        os.umask(previous)
    (entry,) = (graph_file.parent / ".tcmp" / "graphs").iterdir()  # no temporary left beside it
    assert stat.S_IMODE(entry.stat().st_mode) == mode
