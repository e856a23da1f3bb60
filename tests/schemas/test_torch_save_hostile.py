"""The `.pt` reader on files it must refuse: pickles that would run code, zip bombs, storage keys and views that
point outside the archive or the storage, truncated and legacy files, torch objects that are not dense tensors.
The hostile archives are built here by hand (zipfile, pickle); each refusal is checked to have had no effect."""

from __future__ import annotations

import builtins
import collections
import functools
import io
import os
import pickle
import struct
import subprocess
import sys
import textwrap
import time
import zipfile
import zlib
from pathlib import Path
from typing import Optional

import numpy as np
import pytest
import torch

from tcmp.schemas.dump_records import Completeness
from tcmp.schemas.errors import DumpCorrupt, DumpIncomplete
from tcmp.schemas.torch_save import (
    LegacyTorchSave,
    TorchSaveCorrupt,
    TorchSaveIncomplete,
    UnsupportedObject,
    probe_torch_save,
    read_torch_save,
    torch_save_completeness,
)

# ---------------------------------------------------------------------------------------------------------------
# Hand-made archives: data.pkl pickled as torch pickles it (a storage as a persistent id, a tensor as a REDUCE of
# _rebuild_tensor_v2), with whatever else the test puts in.


class HandStorage:
    def __init__(self, key: str, numel: int, storage_class=None) -> None:
        self.key, self.numel = key, numel
        self.storage_class = storage_class if storage_class is not None else torch.FloatStorage


class HandTensor:
    def __init__(self, storage: HandStorage, offset: int, size: tuple, stride: tuple) -> None:
        self.args = (storage, offset, size, stride, False, collections.OrderedDict())

    def __reduce__(self):
        return (torch._utils._rebuild_tensor_v2, self.args)


class HandPickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, HandStorage):
            return ("storage", obj.storage_class, obj.key, "cpu", obj.numel)
        return None


def data_pkl(obj, protocol: int = 2) -> bytes:
    buffer = io.BytesIO()
    HandPickler(buffer, protocol=protocol).dump(obj)
    return buffer.getvalue()


def write_archive(
    path: Path, pickled: bytes, storages: dict, archive: str = "archive", byteorder: Optional[str] = "little"
) -> Path:
    """A zip as torch.save lays it out (entries stored), with the given data.pkl and data/ entries."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as out:
        out.writestr(f"{archive}/data.pkl", pickled)
        if byteorder is not None:
            out.writestr(f"{archive}/byteorder", byteorder)
        for key, payload in storages.items():
            out.writestr(f"{archive}/data/{key}", payload)
        out.writestr(f"{archive}/version", "3\n")
    return path


FOUR_FLOATS = np.array([1.5, -2.0, 3.25, 8.0], dtype="<f4").tobytes()


def test_a_hand_made_archive_is_one_torch_loads(tmp_path):
    """The helpers write what torch.save writes: torch's own (weights-only) loader reads it, and so does tcmp."""
    storage = HandStorage("0", 4)
    path = write_archive(tmp_path / "hand.pt", data_pkl([HandTensor(storage, 1, (3,), (1,))]), {"0": FOUR_FLOATS})
    (loaded,) = torch.load(path, weights_only=True)
    assert loaded.tolist() == [-2.0, 3.25, 8.0]
    (one,) = read_torch_save(path).tensors
    assert one.values.tolist() == [-2.0, 3.25, 8.0]


# ---------------------------------------------------------------------------------------------------------------
# Pickles that run code


class SystemCall:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class EvalCall:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (builtins.eval, (f"open({str(self.marker)!r}, 'w').close()",))


class PopenCall:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (subprocess.Popen, (["touch", str(self.marker)],))


# the refusal names the global as the pickle does: protocol 2 writes Python 2's names (pickle's fix_imports)
HOSTILE = {
    "os.system": (SystemCall, r"posix\.system"),
    "builtins.eval": (EvalCall, r"(builtins|__builtin__)\.eval"),
    "subprocess.Popen": (PopenCall, r"(subprocess|commands)\.Popen"),
}


def marker_appears(marker: Path, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if marker.exists():
            return True
        time.sleep(0.05)
    return marker.exists()


@pytest.mark.parametrize("protocol", [2, 4], ids=["GLOBAL", "STACK_GLOBAL"])
@pytest.mark.parametrize("call", list(HOSTILE), ids=list(HOSTILE))
def test_a_pickle_that_runs_code_is_refused_without_effect(tmp_path, call, protocol):
    maker, global_name = HOSTILE[call]
    marker = tmp_path / "marker"
    storage = HandStorage("0", 4)
    # the call first: a plain unpickler runs it before it stops at the tensor's persistent id
    pickled = data_pkl([maker(marker), HandTensor(storage, 0, (4,), (1,))], protocol)
    path = write_archive(tmp_path / "evil.pt", pickled, {"0": FOUR_FLOATS})
    for read in (read_torch_save, probe_torch_save):
        with pytest.raises(UnsupportedObject, match=f"unsupported object: {global_name}"):
            read(path)
    assert not marker_appears(marker, within=0.5)
    # the payload is live: a real unpickler runs it (so the refusal above is what kept the marker away)
    script = textwrap.dedent(
        """
        import pickle, sys, zipfile
        class Unpickler(pickle.Unpickler):  # stops at the tensor after the call, without importing torch
            def find_class(self, module, name):
                if module.startswith("torch"):
                    raise SystemExit(0)
                return super().find_class(module, name)
        Unpickler(zipfile.ZipFile(sys.argv[1]).open("archive/data.pkl")).load()
        """
    )
    subprocess.run([sys.executable, "-c", script, str(path)], check=False, capture_output=True, timeout=60)
    assert marker_appears(marker)


def test_instance_opcodes_are_refused(tmp_path):
    """Protocol 0's INST (`i`) calls a class without any GLOBAL: refused as an opcode torch does not write."""
    marker = tmp_path / "marker"
    pickled = b"(S'touch " + str(marker).encode() + b"'\nios\nsystem\n."
    path = write_archive(tmp_path / "inst.pt", pickled, {})
    with pytest.raises(UnsupportedObject, match="pickle opcode INST"):
        read_torch_save(path)
    assert not marker.exists()


def test_objects_other_than_tensors_are_refused_by_name(tmp_path):
    path = tmp_path / "array.pt"
    torch.save({"weights": np.arange(3)}, path)
    with pytest.raises(UnsupportedObject, match=r"unsupported object: numpy\.\S*_reconstruct"):
        read_torch_save(path)


def test_a_memo_index_of_four_billion_costs_nothing(tmp_path):
    """LONG_BINPUT 0xFFFFFFFF (the C unpickler would grow its memo to that many slots): an entry of a dict here."""
    pickled = b"\x80\x02]r\xff\xff\xff\xff."  # PROTO 2, EMPTY_LIST, LONG_BINPUT 4294967295, STOP
    path = write_archive(tmp_path / "memo.pt", pickled, {})
    assert read_torch_save(path).tensors == ()


# ---------------------------------------------------------------------------------------------------------------
# torch objects that are not dense tensors, and the legacy format


class SubTensor(torch.Tensor):
    pass


def _with_attribute():
    tensor = torch.ones(2)
    tensor.note = "an attribute"
    return tensor


UNSUPPORTED = {
    "quantized": (lambda: torch.quantize_per_tensor(torch.ones(4), 0.1, 0, torch.quint8), "_rebuild_qtensor"),
    "sparse": (lambda: torch.eye(3).to_sparse(), "_rebuild_sparse_tensor"),
    "sparse csr": (lambda: torch.eye(3).to_sparse_csr(), "_rebuild_sparse_tensor"),
    "nested": (lambda: torch.nested.nested_tensor([torch.ones(2), torch.ones(3)]), "_rebuild_nested_tensor"),
    "subclass": (lambda: torch.ones(3).as_subclass(SubTensor), "_rebuild_from_type_v2"),
    "python attribute": (_with_attribute, "_rebuild_from_type_v2"),
    "meta": (lambda: torch.empty(3, device="meta"), "_rebuild_meta_tensor_no_storage"),
}


@pytest.mark.parametrize("kind", list(UNSUPPORTED), ids=list(UNSUPPORTED))
def test_tensors_that_are_not_plain_dense_are_refused(tmp_path, kind):
    make, rebuild = UNSUPPORTED[kind]
    path = tmp_path / "odd.pt"
    torch.save(make(), path)
    with pytest.raises(UnsupportedObject, match=f"unsupported object: torch\\._[a-z_]+\\.{rebuild} \\("):
        read_torch_save(path)


def test_the_legacy_format_is_refused_as_such(tmp_path):
    path = tmp_path / "legacy.pt"
    torch.save(torch.ones(3), path, _use_new_zipfile_serialization=False)
    with pytest.raises(LegacyTorchSave, match=r"legacy format \(torch < 1\.6"):
        read_torch_save(path)
    state, reason = torch_save_completeness(path)
    assert state is Completeness.CORRUPT
    assert "legacy format" in reason


def test_a_file_that_is_no_archive_is_corrupt(tmp_path):
    path = tmp_path / "noise.pt"
    path.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(TorchSaveCorrupt, match=r"not a torch\.save file"):
        read_torch_save(path)


# ---------------------------------------------------------------------------------------------------------------
# Truncated files: what the daemon sees while torch.save is still writing


def test_every_cut_of_a_real_file_is_incomplete(tmp_path):
    whole = tmp_path / "whole.pt"
    torch.save([torch.arange(10, dtype=torch.float32), torch.ones(3, dtype=torch.bfloat16)], whole)
    data = whole.read_bytes()
    cut = tmp_path / "cut.pt"
    for length in range(len(data)):
        cut.write_bytes(data[:length])
        state, reason = torch_save_completeness(cut)
        assert state is Completeness.INCOMPLETE, (length, reason)
        if length % 5 == 0 or length > len(data) - 128:  # the reader says it too (sampled: the same checks)
            with pytest.raises(TorchSaveIncomplete) as raised:
                read_torch_save(cut)
            assert isinstance(raised.value, DumpIncomplete)
    assert torch_save_completeness(whole) == (Completeness.COMPLETE, "")


# ---------------------------------------------------------------------------------------------------------------
# Storage keys, sizes and views that point outside


@pytest.mark.parametrize("key", ["../x", "/etc/passwd", "a/b", "..", "", "7"])
def test_a_storage_key_outside_the_archive_is_refused(tmp_path, key):
    storage = HandStorage(key, 4)
    # an entry of that very name is there where the name can be one: only the key check keeps it out
    entries = {"0": FOUR_FLOATS, **({key: FOUR_FLOATS} if key not in ("", "7") else {})}
    path = write_archive(tmp_path / "key.pt", data_pkl(HandTensor(storage, 0, (4,), (1,))), entries)
    with pytest.raises(TorchSaveCorrupt, match=r"storage key|has no entry") as raised:
        read_torch_save(path)
    assert isinstance(raised.value, DumpCorrupt)


VIEWS_OUTSIDE = {
    "one past the end": (0, (5,), (1,)),
    "offset past the end": (3, (2,), (1,)),
    "stride past the end": (0, (2, 2), (3, 1)),
    "2**40 elements": (0, (1 << 40,), (1,)),
    "huge stride": (0, (2,), (1 << 62,)),
}


@pytest.mark.parametrize("view", list(VIEWS_OUTSIDE), ids=list(VIEWS_OUTSIDE))
def test_a_view_outside_its_storage_is_refused(tmp_path, view):
    offset, size, stride = VIEWS_OUTSIDE[view]
    storage = HandStorage("0", 4)
    path = write_archive(tmp_path / "view.pt", data_pkl(HandTensor(storage, offset, size, stride)), {"0": FOUR_FLOATS})
    with pytest.raises(TorchSaveCorrupt, match="reaches element"):
        read_torch_save(path)


@pytest.mark.parametrize(
    ("offset", "size", "stride"), [(-1, (2,), (1,)), (0, (-2,), (1,)), (0, (2,), (-1,)), (0, (2, 2), (1,))]
)
def test_negative_or_mismatched_geometry_is_refused(tmp_path, offset, size, stride):
    storage = HandStorage("0", 4)
    path = write_archive(tmp_path / "neg.pt", data_pkl(HandTensor(storage, offset, size, stride)), {"0": FOUR_FLOATS})
    with pytest.raises(TorchSaveCorrupt, match="tensor offset"):
        probe_torch_save(path)


def test_a_storage_larger_than_its_entry_is_refused(tmp_path):
    storage = HandStorage("0", 1000)  # claims 4000 bytes, the entry has 16
    path = write_archive(tmp_path / "short.pt", data_pkl(HandTensor(storage, 0, (4,), (1,))), {"0": FOUR_FLOATS})
    assert [h.shape for h in probe_torch_save(path)] == [(4,)]  # data.pkl alone is fine
    with pytest.raises(TorchSaveCorrupt, match="of 4,000 bytes has an entry of 16"):
        read_torch_save(path)


def test_too_many_tensors_are_refused(tmp_path):
    storage = HandStorage("0", 4)
    many = [HandTensor(storage, 0, (1,), (1,)) for _ in range(16_385)]
    path = write_archive(tmp_path / "many.pt", data_pkl(many), {"0": FOUR_FLOATS})
    with pytest.raises(TorchSaveCorrupt, match="more than 16,384 tensors"):
        probe_torch_save(path)


def test_an_oversized_data_pkl_is_refused_before_it_is_read(tmp_path):
    path = write_archive(tmp_path / "fat.pt", data_pkl([b"x" * (9 << 20)]), {})
    with pytest.raises(TorchSaveCorrupt, match=r"refused: data\.pkl of 9,437,"):
        probe_torch_save(path)


def _patched_zip64_directory(path: Path, entries: int, directory_bytes: int) -> None:
    """Make the end record defer to the zip64 one (0xFFFF entries) and give that one these counts."""
    data = bytearray(path.read_bytes())
    end = len(data) - 22
    assert data[end : end + 4] == b"PK\x05\x06"
    struct.pack_into("<HH", data, end + 8, 0xFFFF, 0xFFFF)
    (zip64_end,) = struct.unpack_from("<Q", data, end - 20 + 8)
    assert data[zip64_end : zip64_end + 4] == b"PK\x06\x06"
    struct.pack_into("<QQQ", data, zip64_end + 24, entries, entries, directory_bytes)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("entries", "directory_bytes", "message"),
    [(1_000_000, 4096, "1,000,000 entries"), (7, 1 << 30, "1,073,741,824 bytes")],
)
def test_a_zip_directory_past_the_caps_is_refused_before_it_is_parsed(tmp_path, entries, directory_bytes, message):
    path = tmp_path / "dir.pt"
    torch.save(torch.ones(2), path)  # torch writes a zip64 end record
    _patched_zip64_directory(path, entries, directory_bytes)
    with pytest.raises(TorchSaveCorrupt, match=f"refused: a zip directory of {message}"):
        read_torch_save(path)


# ---------------------------------------------------------------------------------------------------------------
# Zip bombs: refused with bounded memory (measured in a fresh process)


def _raw_zip(path: Path, entries: list) -> Path:
    """A zip written byte by byte: (name, method, crc, data as stored, declared inflated size) per entry."""
    out, directory = bytearray(), bytearray()
    for name, method, crc, stored, declared in entries:
        encoded = name.encode()
        fields = struct.pack("<HHHHHIII", 20, 0, method, 0, 0, crc, len(stored), declared)
        directory += b"PK\x01\x02" + struct.pack("<H", 20) + fields
        directory += struct.pack("<HHHHHII", len(encoded), 0, 0, 0, 0, 0, len(out)) + encoded
        out += b"PK\x03\x04" + fields + struct.pack("<HH", len(encoded), 0) + encoded + stored
    end = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, len(entries), len(entries), len(directory), len(out), 0)
    path.write_bytes(bytes(out + directory + end))
    return path


@functools.lru_cache(maxsize=1)  # shared by the bomb tests: the CRC of 2 GiB takes seconds
def _deflated_zeros(size: int) -> tuple[bytes, int]:
    """Raw deflate of `size` zero bytes, and their CRC-32, without compressing them all: after a full flush the
    compressor starts afresh, so every 1 MiB block of zeros deflates to the same bytes."""
    chunk = bytes(1 << 20)
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = compressor.compress(chunk) + compressor.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(size // len(chunk)):
        crc = zlib.crc32(chunk, crc)
    return block * (size // len(chunk)) + compressor.flush(zlib.Z_FINISH), crc


def _deflated_archive(path: Path, bomb: str, inflated: int, declared: int) -> Path:
    """A torch-like archive whose entry `bomb` is deflated zeros inflating to `inflated` bytes (the directory says
    `declared`: a bomb may lie about its size)."""
    storage = HandStorage("0", 4)
    pickled = data_pkl(HandTensor(storage, 0, (4,), (1,)))
    stored = {"archive/data.pkl": pickled, "archive/data/0": FOUR_FLOATS}
    deflated, crc = _deflated_zeros(inflated)
    assert zlib.decompressobj(-15).decompress(deflated, 1 << 16) == bytes(1 << 16)  # it is real deflate of zeros
    entries = [
        (name, 8, crc, deflated, declared) if name == bomb else (name, 0, zlib.crc32(data), data, len(data))
        for name, data in stored.items()
    ]
    return _raw_zip(path, entries)


PEAK_SCRIPT = textwrap.dedent(
    """
    import resource, sys
    from tcmp.schemas.torch_save import read_torch_save, UnsupportedObject
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        read_torch_save(sys.argv[1])
    except UnsupportedObject as exc:
        print("refused:", exc)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print("peak-growth-kib", after - before)
    """
)


@pytest.mark.parametrize("declared", ["honest", "lying"])
@pytest.mark.parametrize("bomb", ["archive/data.pkl", "archive/data/0"])
def test_a_zip_bomb_is_refused_with_bounded_memory(tmp_path, bomb, declared):
    inflated = 2 << 30  # 2 GiB of zeros in ~2 MB
    path = _deflated_archive(tmp_path / "bomb.pt", bomb, inflated, inflated if declared == "honest" else 16)
    assert path.stat().st_size < 4 << 20
    result = subprocess.run(
        [sys.executable, "-c", PEAK_SCRIPT, str(path)], capture_output=True, text=True, timeout=120, check=True
    )
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert f"zip entry '{bomb}' is compressed" in lines["refused:"]
    assert int(lines["peak-growth-kib"]) < 32 << 10  # < 32 MiB over the interpreter with tcmp imported


def test_without_a_byteorder_record_the_archive_is_little_endian(tmp_path):
    """torch < 1.10 wrote no byteorder record; torch.load takes such an archive as little-endian, so does tcmp."""
    storage = HandStorage("0", 4)
    pickled = data_pkl(HandTensor(storage, 0, (4,), (1,)))
    path = write_archive(tmp_path / "old.pt", pickled, {"0": FOUR_FLOATS}, archive="old", byteorder=None)
    assert torch.load(path, weights_only=True).tolist() == [1.5, -2.0, 3.25, 8.0]
    assert read_torch_save(path).tensors[0].values.tolist() == [1.5, -2.0, 3.25, 8.0]


def test_a_big_endian_archive_is_refused(tmp_path):
    storage = HandStorage("0", 4)
    pickled = data_pkl(HandTensor(storage, 0, (4,), (1,)))
    path = write_archive(tmp_path / "big.pt", pickled, {"0": FOUR_FLOATS}, byteorder="big")
    with pytest.raises(UnsupportedObject, match="big-endian"):
        read_torch_save(path)


def test_a_fifo_is_not_waited_on(tmp_path):
    fifo = tmp_path / "pipe.pt"
    os.mkfifo(fifo)
    with pytest.raises(TorchSaveCorrupt, match="not a regular file"):
        read_torch_save(fifo)


def test_deep_nesting_is_refused_quickly(tmp_path):
    """MARK … TUPLE 400,000 times: a recursive walk or repr would overflow the stack, keys would grow
    quadratically."""
    depth = 400_000  # 800,000 opcodes: under their cap
    pickled = b"\x80\x02" + b"(" * depth + b"t" * depth + b"."
    path = write_archive(tmp_path / "deep.pt", pickled, {})
    started = time.monotonic()
    with pytest.raises(TorchSaveCorrupt, match="nested deeper than 32"):
        read_torch_save(path)
    assert time.monotonic() - started < 30


def test_shared_lists_that_would_explode_are_refused(tmp_path):
    """Each list holds the one below twice (memo): 2**30 paths through 30 lists, walked only up to the cap."""
    pickled = bytearray(b"\x80\x02]q\x00")  # the innermost list, memo 0
    for level in range(1, 31):
        pickled += b"(h" + bytes([level - 1]) + b"h" + bytes([level - 1]) + b"lq" + bytes([level])
    pickled += b"."
    path = write_archive(tmp_path / "dag.pt", bytes(pickled), {})
    with pytest.raises(TorchSaveCorrupt, match="items in the saved object"):
        read_torch_save(path)


def test_more_opcodes_than_the_cap_are_refused(tmp_path):
    pickled = b"\x80\x02" + b"N0" * (1 << 20) + b"N."  # NONE, POP a million times: 3 MB, under the size cap
    path = write_archive(tmp_path / "ops.pt", pickled, {})
    with pytest.raises(TorchSaveCorrupt, match="opcodes"):
        probe_torch_save(path)


def test_an_entry_named_twice_is_refused(tmp_path):
    """Two `data/0` entries: which one torch would read is the zip reader's choice; tcmp reads neither."""
    storage = HandStorage("0", 4)
    path = write_archive(tmp_path / "twice.pt", data_pkl(HandTensor(storage, 0, (4,), (1,))), {"0": FOUR_FLOATS})
    with pytest.warns(UserWarning, match="Duplicate name"), zipfile.ZipFile(path, "a") as out:
        out.writestr("archive/data/0", bytes(16))
    with pytest.raises(TorchSaveCorrupt, match="named twice"):
        read_torch_save(path)
