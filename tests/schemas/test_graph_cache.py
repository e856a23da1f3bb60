"""The parsed-graph cache: a second load does not parse, a changed file is parsed again, damage is ignored."""

from __future__ import annotations

import json
import os
import stat

import pytest

from tcmp.schemas import graph_cache
from tcmp.schemas.graph_reader import read_graph
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


def _cache(tmp_path):
    return tmp_path / "user-cache" / "tcmp" / "graphs"


def _counting_parser(monkeypatch) -> list:
    calls: list = []
    real = graph_cache.parse_graph_bytes
    monkeypatch.setattr(graph_cache, "parse_graph_bytes", lambda *a, **k: calls.append(a) or real(*a, **k))
    return calls


def _tree(root) -> dict:
    """Every entry under `root` (hidden ones too), with its type, mode and bytes."""
    found = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        found[str(path.relative_to(root))] = (info.st_mode, path.read_bytes() if path.is_file() else None)
    return found


def test_second_load_comes_from_the_user_cache_not_the_dump(graph_file, tmp_path, monkeypatch):
    before = _tree(graph_file.parent)
    first = graph_cache.load_graph(graph_file)
    assert first.ops == read_graph(graph_file).ops
    calls = _counting_parser(monkeypatch)
    second = graph_cache.load_graph(graph_file)
    assert calls == [] and second.ops == first.ops and second.name == "graph_1"
    assert len(list(_cache(tmp_path).glob("*.json"))) == 1
    assert _tree(graph_file.parent) == before  # nothing written into the dump tree (issue 23, item 4)
    assert stat.S_IMODE(_cache(tmp_path).stat().st_mode) == 0o700
    assert stat.S_IMODE(_cache(tmp_path).parent.stat().st_mode) == 0o700


def test_read_only_dump_tree_is_cached_too(graph_file, tmp_path, monkeypatch):
    graph_file.parent.chmod(0o555)
    try:
        graph_cache.load_graph(graph_file)
        calls = _counting_parser(monkeypatch)
        graph_cache.load_graph(graph_file)
    finally:
        graph_file.parent.chmod(0o755)
    assert calls == []


def test_changed_or_damaged_entries_are_parsed_again(graph_file, tmp_path, monkeypatch):
    graph_cache.load_graph(graph_file)
    (entry,) = _cache(tmp_path).glob("*.json")
    entry.write_text("{not json")
    calls = _counting_parser(monkeypatch)
    assert graph_cache.load_graph(graph_file).op("Add_1").control_inputs == ("x",)
    json.loads(entry.read_text())  # rewritten whole
    info = graph_file.stat()
    text = graph_file.read_text().replace('"Add_1"', '"Add_2"')  # same length, same mtime: only the hash tells
    graph_file.write_text(text)
    os.utime(graph_file, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert graph_cache.load_graph(graph_file).op("Add_2") is not None
    assert len(calls) == 2


def test_a_planted_symlink_is_not_followed(graph_file, tmp_path, monkeypatch):
    """A cache directory that is a symlink is not used; a symlink where the entry goes is replaced, its target
    untouched."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _cache(tmp_path).parent.mkdir(parents=True)
    _cache(tmp_path).symlink_to(elsewhere)
    graph_cache.load_graph(graph_file)
    assert list(elsewhere.iterdir()) == []
    _cache(tmp_path).unlink()
    graph_cache.load_graph(graph_file)
    (entry,) = _cache(tmp_path).glob("*.json")
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    entry.unlink()
    entry.symlink_to(victim)
    calls = _counting_parser(monkeypatch)
    graph_cache.load_graph(graph_file)  # the symlink is not read as an entry
    assert len(calls) == 1 and victim.read_text() == "keep me" and not entry.is_symlink()


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o077, 0o600)])
def test_cache_entries_get_the_mode_the_umask_gives(graph_file, tmp_path, mask, mode):
    previous = os.umask(mask)
    try:
        graph_cache.load_graph(graph_file)
    finally:
        os.umask(previous)
    (entry,) = _cache(tmp_path).iterdir()  # no temporary left beside it
    assert stat.S_IMODE(entry.stat().st_mode) == mode
