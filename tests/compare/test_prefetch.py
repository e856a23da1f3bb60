"""Read-ahead: which files are requested from the kernel, and when (the speed it buys is bench_compare's cold
rows). Pairs here are stand-ins with only the attributes read_ahead reads (npu/bench refs with files and
has_raw); the files are real, so the requests go through real posix_fadvise calls, recorded on the way."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from tcmp.compare import prefetch
from tcmp.schemas.layout import FileKind


@pytest.fixture
def advised(monkeypatch):
    """(path, length) of every WILLNEED request, in order."""
    calls = []
    real = os.posix_fadvise

    def record(fd, offset, length, advice):
        assert advice == os.POSIX_FADV_WILLNEED and offset == 0
        calls.append((os.readlink(f"/proc/self/fd/{fd}"), length))
        return real(fd, offset, length, advice)

    monkeypatch.setattr(prefetch.os, "posix_fadvise", record)
    return calls


def _file(path, size, kind=FileKind.FX_NPY):
    path.write_bytes(b"\0" * size)
    return SimpleNamespace(path=path, kind=kind)


def _ref(*files, has_raw=True):
    return SimpleNamespace(files=files, has_raw=has_raw)


def test_files_are_requested_before_their_pair_and_never_beyond_the_window(tmp_path, advised, monkeypatch):
    monkeypatch.setattr(prefetch, "AHEAD_BYTES", 10_000)
    sizes = [3000, 5000, 1000, 8000, 2000, 4000, 6000, 1000]
    files = [_file(tmp_path / f"f{i}", size) for i, size in enumerate(sizes)]
    shared = files[0]  # an input repeating its producer's golden output: requested once
    gone = _file(tmp_path / "gone", 9999)
    pairs = [
        SimpleNamespace(npu=_ref(files[i]), bench=_ref(files[i + 1] if i + 1 < len(files) else shared))
        for i in range(0, len(files), 2)
    ]
    pairs.insert(2, SimpleNamespace(npu=_ref(gone, has_raw=False), bench=_ref(shared)))  # summary only: skipped
    order = {str(f.path): i for i, p in enumerate(pairs) for r in (p.npu, p.bench) if r.has_raw for f in r.files}
    given = []
    for i, pair in enumerate(prefetch.read_ahead(pairs)):
        given.append(pair)
        requested = [path for path, _ in advised]
        # every file of this pair and the ones before it has been requested
        assert {p for p, first in order.items() if first <= i} <= set(requested)
        # what is requested for later pairs stays within the window plus the one request that crossed it
        later = [os.path.getsize(p) for p in requested if order[p] > i]
        assert sum(later[:-1]) < prefetch.AHEAD_BYTES
    assert given == pairs
    assert sorted(path for path, _ in advised) == sorted(str(f.path) for f in files)  # each once, none skipped
    assert all(length == 0 for _, length in advised)  # whole files


def test_headers_are_requested_for_ge_binaries_only(tmp_path, advised):
    ge = [_file(tmp_path / f"Add.add_{i}.1.1.1", 50_000, FileKind.GE_BINARY) for i in range(3)]
    others = [_file(tmp_path / "x.npy", 100), _file(tmp_path / "s.csv", 100, FileKind.GE_STATS_CSV)]
    prefetch.read_headers_ahead([*ge, *others])
    assert advised == [(str(f.path), prefetch.HEADER_BYTES) for f in ge]


def test_a_file_that_vanished_is_left_to_the_reader(tmp_path, advised):
    missing = SimpleNamespace(path=tmp_path / "missing", kind=FileKind.GE_BINARY)
    present = _file(tmp_path / "present", 10)
    pairs = [SimpleNamespace(npu=_ref(missing), bench=_ref(present))]
    assert list(prefetch.read_ahead(pairs)) == pairs
    prefetch.read_headers_ahead([missing])
    assert [path for path, _ in advised] == [str(present.path)]
