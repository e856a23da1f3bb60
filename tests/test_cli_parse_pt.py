"""`tcmp parse FILE.pt` (issue #25, aclgraph compare): an aclgraph dump's `.pt`, written by real torch.save, described
and converted to `.npy` (bf16 widened to float32 as for GE); the expected values are torch's own."""

from __future__ import annotations

import json

import numpy as np
import torch

from tcmp.schemas.parse import find_dump_files, parse_file

RANK = "worldsize1_global_rank0"


def test_parse_converts_an_aclgraph_file(cli, tmp_path):
    directory = tmp_path / "acl" / RANK
    directory.mkdir(parents=True)
    bf16 = torch.linspace(-3, 5, 12).reshape(3, 4).to(torch.bfloat16)
    torch.save(bf16.t().contiguous(), directory / "mm_1_device_0_2.pt")  # torch_npu saves a contiguous copy
    ints = torch.arange(6, dtype=torch.int32).reshape(2, 3)
    torch.save(ints, directory / "add_0.pt")
    assert [p.name for p in find_dump_files([tmp_path / "acl"])] == ["add_0.pt", "mm_1_device_0_2.pt"]

    out = tmp_path / "out"
    result = cli("parse", "--info", "-o", out, tmp_path / "acl", catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    rows = {row["op"]: row for row in map(json.loads, (line for line in result.stdout.splitlines() if line[:1] == "{"))}
    assert rows["mm_1"]["dtype"] == "DT_BF16" and rows["mm_1"]["shape"] == [4, 3] and rows["mm_1"]["io"] == "output"
    assert rows["add"]["dtype"] == "DT_INT32" and rows["add"]["shape"] == [2, 3]
    widened = np.load(out / "mm_1_device_0_2.pt.output.0.npy")
    assert widened.dtype == np.float32
    assert np.array_equal(widened, bf16.t().float().numpy())  # bf16 -> float32 is exact
    assert np.array_equal(np.load(out / "add_0.pt.output.0.npy"), ints.numpy())


def test_parse_reports_an_unfinished_file(tmp_path):
    path = tmp_path / "relu_device_0_0.pt"
    torch.save(torch.ones(64), path)
    path.write_bytes(path.read_bytes()[:-40])  # the zip directory is written last: cut off, still being written
    parsed = parse_file(path)
    assert parsed.error is not None and parsed.tensors == ()
