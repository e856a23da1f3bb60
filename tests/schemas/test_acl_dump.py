"""aclgraph `.pt` dump names and places: torch_npu's `_build_save_npugraph_tensor_path` forms (hand-worked from its
rules: `{stem}_device_{d}_{k}{suffix}` for an NPU tensor, `{stem}_{k}{suffix}` for a CPU one, k counting the saves
to one path in the process), torchair's dump directory `{dump_path}/worldsize{W}_global_rank{R}`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tcmp.schemas.acl_dump import AclFileName, parse_acl_file_name, shared_counters
from tcmp.schemas.dump_outline import discover, dump_roots, outline, scan_directory
from tcmp.schemas.dump_records import IO, Side
from tcmp.schemas.dump_tree import RAW_TENSOR_KINDS, DumpFile, FileKind, Unrecognized, classify_name, locate
from tcmp.schemas.errors import NameParseError

RANK0 = "worldsize1_global_rank0"


@pytest.mark.parametrize(
    ("name", "node", "device", "counter"),
    [
        ("add_device_0_0.pt", "add", 0, 0),
        ("add_1_device_3_12.pt", "add_1", 3, 12),  # a node name ending in _N: the last _{k} is the counter
        ("getitem_7_device_0_2.pt", "getitem_7", 0, 2),
        ("arg0_1_device_1_0.pt", "arg0_1", 1, 0),
        ("add_1_0.pt", "add_1", None, 0),  # a CPU tensor
        ("mm_5.pt", "mm", None, 5),  # CPU: node mm, save 5 (an overwrite=True file of node mm_5 reads the same)
        ("x_device_0.pt", "x_device", None, 0),  # the counted CPU form wins over the overwrite NPU form
        ("a_device_b_device_2_4.pt", "a_device_b", 2, 4),
    ],
)
def test_names(name, node, device, counter):
    assert parse_acl_file_name(name) == AclFileName(node, device, counter)


@pytest.mark.parametrize("name", ["relu.pt", "add_device_x_1.pt_", "_3.pt", ".pt"])
def test_names_without_a_counter_are_refused(name):
    assert classify_name(name) in (FileKind.ACL_PT, None)
    with pytest.raises(NameParseError):
        parse_acl_file_name(name)


def test_kind_is_raw_tensors():
    assert classify_name("add_device_0_0.pt") is FileKind.ACL_PT
    assert FileKind.ACL_PT in RAW_TENSOR_KINDS  # watch --drop-raw may delete it once summarized


def test_locate_reads_rank_and_token():
    found = locate(Path("/dumps/acl") / "worldsize4_global_rank2" / "add_1_device_2_5.pt")
    assert isinstance(found, DumpFile)
    assert (found.side, found.kind, found.rank, found.token, found.op_name, found.device) == (
        Side.ACL, FileKind.ACL_PT, 2, 5, "add_1", 2,
    )  # fmt: skip
    assert (found.io, found.index, found.op_type) == (IO.OUTPUT, 0, None)


def test_outside_a_rank_directory_is_unrecognized():
    found = locate(Path("/dumps/acl/add_device_0_0.pt"))
    assert isinstance(found, Unrecognized) and "worldsize" in found.reason
    found = locate(Path("/dumps") / RANK0 / "relu.pt")
    assert isinstance(found, Unrecognized) and "overwrite" in found.reason


def _touch(directory: Path, *names: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        (directory / name).write_bytes(b"x")


def test_outline_one_directory_per_token(tmp_path):
    rank = tmp_path / "acl" / RANK0
    _touch(rank, *(f"{n}_device_0_{k}.pt" for n in ("add", "add_1", "relu") for k in range(3)), "junk.pt")
    shape = outline(tmp_path / "acl")
    acl = [d for d in shape.dirs if d.side is Side.ACL]
    assert [(d.path, d.token, d.rank) for d in acl] == [(rank, k, 0) for k in range(3)]
    assert [p.path.name for p in shape.problems] == ["junk.pt"]
    assert [r.path for r in dump_roots(shape)] == [tmp_path / "acl"]
    scan = scan_directory(tmp_path / "acl", rank, side=Side.ACL, token=1)
    assert sorted(f.path.name for f in scan.files) == ["add_1_device_0_1.pt", "add_device_0_1.pt",
                                                       "relu_device_0_1.pt"]  # fmt: skip
    tree = discover(tmp_path / "acl")
    assert len(tree.acl_files) == 9 and [p.path.name for p in tree.problems] == ["junk.pt"]


def test_shared_counter_is_reported_not_guessed(tmp_path):
    # graphs A and B both have a node `add`: torch_npu's one counter for `.../add.pt` counts both graphs' saves
    rank = tmp_path / "acl" / RANK0
    _touch(rank, *(f"relu_device_0_{k}.pt" for k in range(2)), *(f"add_device_0_{k}.pt" for k in range(4)))
    shape = outline(tmp_path / "acl")
    assert [d.token for d in shape.dirs] == [0, 1]
    problems = sorted(p.path.name for p in shape.problems)
    assert problems == [f"add_device_0_{k}.pt" for k in range(4)]
    assert all("saved 4 times" in p.reason and "2 times" in p.reason for p in shape.problems)
    for token in (0, 1):
        scan = scan_directory(tmp_path / "acl", rank, side=Side.ACL, token=token)
        assert [f.path.name for f in scan.files] == [f"relu_device_0_{token}.pt"]


def test_shared_counters_equal_counts_are_fine():
    names = [AclFileName(n, 0, k) for n in ("a", "b") for k in range(3)]
    assert shared_counters(names) == {}
    assert set(shared_counters([*names, AclFileName("b", 0, 3)])) == {"b"}
