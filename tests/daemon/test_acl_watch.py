"""`tcmp watch` on an aclgraph dump (issue #25): `.pt` files written by real torch.save while a real daemon watches
(real inotify) are summarized into the index and, with --drop-raw, deleted; an unfinished `.pt` (its zip directory
not written yet) waits as an incomplete GE file does, and is summarized once finished. The expected summaries are
computed here from the tensors' own values."""

from __future__ import annotations

import io
from pathlib import Path

import torch
from daemon_testlib import crc, index_rows, tensor_rows, wait_until

from tcmp.schemas.index import default_index_path

RANK = "worldsize1_global_rank0"


def _saved(tensor) -> bytes:
    buffer = io.BytesIO()
    torch.save(tensor, buffer)
    return buffer.getvalue()


def test_watch_summarizes_and_drops_pt_files(root, daemon):
    d = daemon(str(root), "--workers", "1", "--drop-raw", "--reconcile-interval", "600")
    assert d.wait_for_log(f"full scan of {root} done"), d.log()
    rank = root / "acl" / RANK
    rank.mkdir(parents=True)
    unfinished = rank / "relu_device_0_0.pt"
    whole = _saved(torch.full((16,), 2.5))
    unfinished.write_bytes(whole[: len(whole) // 2])  # torch.save writes the zip directory last
    tensors = {rank / f"add_1_device_0_{k}.pt": torch.arange(8, dtype=torch.float32) + k for k in range(3)}
    for path, tensor in tensors.items():
        torch.save(tensor, path)
    db = default_index_path(root)

    def state(path: Path):
        row = index_rows(db).get(str(path))
        return row.state if row is not None else None

    assert wait_until(lambda: all(state(p) == "summarized" and not p.exists() for p in tensors), 60), d.log()[-3000:]
    assert wait_until(lambda: state(unfinished) == "incomplete", 30), d.log()[-3000:]
    assert unfinished.exists()  # nothing summarized: never deleted
    for k, (path, tensor) in enumerate(tensors.items()):
        ((io_, index, crc32, low, high, numel),) = tensor_rows(db, path)
        assert (io_, index, numel, low, high) == ("output", 0, 8, float(k), float(k + 7))
        assert crc32 == crc(tensor.numpy())
    unfinished.write_bytes(whole)  # the writer finishes it
    assert wait_until(lambda: state(unfinished) == "summarized" and not unfinished.exists(), 60), d.log()[-3000:]
    ((_, _, _, low, high, numel),) = tensor_rows(db, unfinished)
    assert (low, high, numel) == (2.5, 2.5, 16)
    assert d.stop() == 0
