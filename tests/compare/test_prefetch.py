"""Read-ahead: which files are requested from the kernel, and when (the speed it buys is bench_compare's cold
rows). Pairs here are stand-ins with only the attributes read_ahead reads (npu/bench refs with files and
has_raw); the files are real, so the requests go through real posix_fadvise calls, recorded on the way."""

from __future__ import annotations

import os
import threading
from types import SimpleNamespace

import pytest

from tcmp.compare.execute import prefetch
from tcmp.schemas.dump_tree import FileKind

PROBE = prefetch.in_page_cache  # the real probe, which the fixture below replaces in the module


@pytest.fixture
def advised(monkeypatch):
    """(path, length) of every WILLNEED request, in order; the files written by the test count as on disk (read
    ahead) unless it says otherwise."""
    monkeypatch.setattr(prefetch, "in_page_cache", lambda path, at_end: False)
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


def test_a_dump_in_the_page_cache_is_not_read_ahead(tmp_path, advised, monkeypatch):
    files = [_file(tmp_path / f"Add.add_{i}.1.1.1", 5000, FileKind.GE_BINARY) for i in range(20)]
    probed = []

    def cached(path, at_end):
        probed.append((path, at_end))
        return True

    monkeypatch.setattr(prefetch, "in_page_cache", cached)
    pairs = [SimpleNamespace(npu=_ref(f), bench=_ref(f)) for f in files]
    assert list(prefetch.read_ahead(pairs)) == pairs
    prefetch.read_headers_ahead(files)
    assert advised == []
    # a few files spread over the token, their last byte for the pairs and their header for the planning
    assert len(probed) == 2 * prefetch.SAMPLES
    in_use_order = [f.path for f in files for _ in ("npu", "bench")]
    spread = in_use_order[:: len(in_use_order) // prefetch.SAMPLES][: prefetch.SAMPLES]
    assert [p for p, at_end in probed if at_end] == spread and spread[-1] == files[-3].path
    assert not all(at_end for _, at_end in probed)


def test_one_file_on_disk_among_the_samples_is_enough_to_read_ahead(tmp_path, advised, monkeypatch):
    files = [_file(tmp_path / f"f{i}", 100) for i in range(20)]
    monkeypatch.setattr(prefetch, "in_page_cache", lambda path, at_end: path != files[10].path)
    pairs = [SimpleNamespace(npu=_ref(f), bench=_ref(f)) for f in files]
    list(prefetch.read_ahead(pairs))
    assert len(advised) == len(files)


def test_page_cache_probe(tmp_path, monkeypatch):
    """Real: a file just written is in the page cache. A read that would wait for the disk (stand-in: the
    EAGAIN RWF_NOWAIT gives then) or cannot be asked that way (an older kernel) counts as on disk."""
    path = tmp_path / "written"
    path.write_bytes(b"x" * 10_000)
    assert prefetch.in_page_cache(path, at_end=True) and prefetch.in_page_cache(path, at_end=False)
    for error in (BlockingIOError(11, "would block"), OSError(95, "not supported")):

        def failing(*args, error=error):
            raise error

        monkeypatch.setattr(prefetch.os, "preadv", failing)
        assert not prefetch.in_page_cache(path, at_end=True)
    assert prefetch.in_page_cache(tmp_path / "missing", at_end=True)  # gone: nothing to read ahead


def test_a_fifo_named_like_a_dump_file_does_not_block(tmp_path, advised):
    """Opening a FIFO for reading waits for a writer, unless non-blocking: the calls must all return."""
    fifo = tmp_path / "Add.add_1.1.1.1"
    os.mkfifo(fifo)
    files = [SimpleNamespace(path=fifo, kind=FileKind.GE_BINARY)]
    pairs = [SimpleNamespace(npu=_ref(files[0]), bench=_ref(files[0]))]
    done = threading.Event()

    def work():
        prefetch.read_headers_ahead(files)
        assert list(prefetch.read_ahead(pairs)) == pairs
        PROBE(fifo, at_end=True)
        PROBE(fifo, at_end=False)
        done.set()

    worker = threading.Thread(target=work, daemon=True)  # a blocked open would keep it, not the test run
    worker.start()
    worker.join(timeout=30)
    assert done.is_set()
