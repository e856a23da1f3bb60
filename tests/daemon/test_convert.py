"""What a worker makes of one file: summary, not ready, failed, vanished, skipped (and the same through the
process pool, so the results survive pickling)."""

from __future__ import annotations

import logging
import os
import threading
import zlib
from concurrent.futures import Future

import numpy as np
from daemon_testlib import crc, fx_path, npy_bytes, wait_until, write_fx

from tcmp.daemon.examine import Failed, GraphParsed, NotReady, Skipped, Summarized, Vanished, WorkerPool, examine
from tcmp.schemas.graph_reader import read_graph
from tcmp.schemas.index import FileKey
from tcmp.schemas.synth.ge_writer import TensorSpec, encode_ge_dump
from tcmp.schemas.synth.graph_writer import GraphOpSpec, OutputSpec, graph_file_name, write_graph

GE_STEP = "msprobe_ge_dump/worldsize1_global_rank0/20261129083000/0/graph_1_0/1/0"


def _ge_bytes(op_name: str, values: np.ndarray) -> bytes:
    data, _, _ = encode_ge_dump(op_name, [], [TensorSpec(values.astype(np.float64), 1)], dump_time=1764400000000001)
    return data


def test_a_complete_fx_file_is_summarized_from_its_values(root):
    values = np.array([3.0, -1.0, 2.5, 7.0], np.float32)
    path = write_fx(root, 0, 1, values)
    result = examine(str(path))
    assert isinstance(result, Summarized)
    assert result.row.key == FileKey.of(os.lstat(path))
    [tensor] = result.row.summary.tensors
    summary = tensor.summary
    assert (summary.min, summary.max, summary.numel, summary.crc32) == (-1.0, 7.0, 4, crc(values))
    assert summary.mean == 11.5 / 4 and summary.l2norm == float(np.sqrt(9 + 1 + 6.25 + 49))


def test_short_files_are_not_ready_and_longer_ones_corrupt(root):
    data = npy_bytes(np.arange(100, dtype=np.float16))
    short = fx_path(root, 0, 1)
    short.parent.mkdir(parents=True)
    short.write_bytes(data[: len(data) - 7])
    long = fx_path(root, 0, 2)
    long.write_bytes(data + b"\0\0")
    ge = root / GE_STEP / "Mul.mul_1.2.2.1764400000000001"
    ge.parent.mkdir(parents=True)
    ge_data = _ge_bytes("mul/1", np.ones(64, np.float32))
    ge.write_bytes(ge_data[:-10])
    garbage = root / GE_STEP / "Mul.mul_2.3.2.1764400000000002"
    garbage.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00" + b"\xff" * 40)
    assert all(isinstance(r, NotReady) and r.truncated for r in (examine(str(short)), examine(str(ge))))
    for path in (long, garbage):
        result = examine(str(path))
        assert isinstance(result, Failed) and "DumpCorrupt" in result.error, result


def test_ge_file_keeps_the_header_name_and_a_hashed_name_its_mapping_row(root):
    values = np.linspace(-2, 2, 64, dtype=np.float32)
    long_name = "Mul." + "layer_0_" * 40 + "Mul.2.2.1764400000000001"
    hashed = root / GE_STEP / "98765"
    hashed.parent.mkdir(parents=True)
    (hashed.parent / "mapping.csv").write_text(f"98765,{long_name}\n")
    hashed.write_bytes(_ge_bytes("layer.0/Mul", values))
    result = examine(str(hashed))
    assert isinstance(result, Summarized)
    assert result.row.mapped_name == long_name and result.row.summary.op_name == "layer.0/Mul"
    assert result.row.file.op_name == "layer_0_" * 40 + "Mul"
    assert result.row.summary.tensors[0].summary.crc32 == zlib.crc32(values.tobytes())


def test_a_hashed_name_waits_for_its_mapping_row(root):
    hashed = root / GE_STEP / "4242"
    hashed.parent.mkdir(parents=True)
    hashed.write_bytes(_ge_bytes("x", np.ones(4, np.float32)))
    (hashed.parent / "mapping.csv").write_text("1111,Mul.other.2.2.1764400000000001\n")
    result = examine(str(hashed))
    assert isinstance(result, NotReady) and not result.truncated and "mapping.csv" in result.reason
    (hashed.parent / "mapping.csv").write_text("1111,Mul.other.2.2.1764400000000001\n4242,Mul.m.2.2.1764400000000002\n")
    assert isinstance(examine(str(hashed)), Summarized)


def test_unplaceable_names_vanished_files_and_non_files(root):
    odd = root / "msprobe_ge_dump" / "no.such.dump.name"  # looks like a GE name, is none
    odd.parent.mkdir(parents=True)
    odd.write_bytes(b"x")
    directory = fx_path(root, 0, 9)
    directory.mkdir(parents=True)
    result = examine(str(odd))
    assert isinstance(result, Failed) and result.located is None and "GE dump file name" in result.error
    assert examine(str(fx_path(root, 0, 5))) == Vanished(str(fx_path(root, 0, 5)))
    assert examine(str(directory)) == Skipped(str(directory), "not a regular file")


def test_graph_files_are_parsed_and_broken_ones_fail(root):
    path = write_graph(root, graph_file_name(1, 0, 7, "20261129083000000000"), "graph_1",
                       [GraphOpSpec("x", "Data", (), (OutputSpec("x-placeholder.OUTPUT.0", 1, (2,)),))])  # fmt: skip
    result = examine(str(path))
    assert isinstance(result, GraphParsed) and result.row.graph == read_graph(path)
    broken = root / graph_file_name(2, 0, 7, "20261129083000000000")
    broken.write_text("op {\n  name: 'unterminated\n")
    result = examine(str(broken))
    assert isinstance(result, Failed) and "GraphParseError" in result.error


def test_the_process_pool_returns_the_same_results(root):
    """The same results from the pool's thread (before the workers are up, or without any) and from a worker."""
    written = [str(write_fx(root, 0, n, np.full(3, n, np.float16))) for n in range(5)]
    paths = (*written, str(root / "gone.npy"))
    in_process = [examine(p) for p in paths]
    for workers in (0, 1):
        pool = WorkerPool(workers)
        try:
            assert pool.submit_files(paths).result(timeout=60) == tuple(in_process)
            pool.start()
            assert pool.started
            if workers:
                assert wait_until(lambda pool=pool: pool.up, timeout=60)
                worker = pool.submit_files(paths).result(timeout=60)
                assert worker == tuple(in_process)
        finally:
            pool.shutdown()


class _StartingExecutor:
    """A process pool whose workers' warm-ups end as the test says (each submit returns that one future)."""

    def __init__(self, future: Future) -> None:
        self.future = future

    def submit(self, *args) -> Future:
        return self.future

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        pass


def test_warm_up_reports_ready_failed_or_nothing_when_stopped_first(monkeypatch, caplog):
    """The warm-up thread logs "workers ready" or the start-up error, and stays quiet (no traceback) when the
    daemon stopped before its workers were up. Files go to the workers once they started (or failed to: the
    first batch then shows why); never while they are still starting."""
    raised: list = []
    monkeypatch.setattr(threading, "excepthook", raised.append)
    caplog.set_level(logging.INFO, logger="tcmp.daemon.examine")
    for outcome in ("ready", "failed", "cancelled"):
        pool = WorkerPool(2)
        future: Future = Future()
        pool._files.shutdown()  # never started
        monkeypatch.setattr(pool, "_files", _StartingExecutor(future))
        assert not pool.started
        pool.start()
        assert pool.started and not pool.up
        thread = next(t for t in threading.enumerate() if t.name == "tcmp-warm-up")  # waiting for the future
        if outcome == "ready":
            future.set_result(None)
        elif outcome == "failed":
            future.set_exception(ImportError("no numpy here"))
        else:  # as an executor shutting down does: cancel, then notify whoever waits
            future.cancel()
            future.set_running_or_notify_cancel()
        thread.join(timeout=10)
        assert not thread.is_alive(), outcome
        assert pool.up is (outcome != "cancelled"), outcome
        pool.shutdown()
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0].startswith("workers ready (2) after") and "no numpy here" in messages[1]
    assert len(messages) == 2 and not raised
