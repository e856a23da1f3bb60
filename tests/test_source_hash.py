"""code_hash (the cluster's check that every node runs the same tcmp) covers every source file of the package."""

from __future__ import annotations

import os
from pathlib import Path

from tcmp.schemas import source_hash

REPO = Path(__file__).resolve().parents[1]
NOT_SOURCE = {".so", ".pyc", ".typed"}  # built, cached, or the PEP 561 marker


def test_every_file_of_the_package_tree_is_hashed():
    on_disk = set()
    for directory, dirs, files in os.walk(REPO / "tcmp"):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            path = Path(directory, name)
            if path.suffix not in NOT_SOURCE:
                on_disk.add(path.resolve())
    hashed = {path.resolve() for _, path in source_files_of_checkout()}
    assert on_disk == hashed
    # what the old non-recursive glob missed: sub-packages and the non-Python sources
    names = {name for name, _ in source_files_of_checkout()}
    assert "tcmp.schemas/index/schema.py" in names and "tcmp.summaries/compiled.c" in names
    assert "tcmp.compare/report/page_files/page.js" in names


def source_files_of_checkout():
    files = source_hash.source_files()
    assert all(path.is_relative_to(REPO / "tcmp") for _, path in files), "tcmp is not installed from this checkout"
    return files


def test_changing_any_one_file_changes_the_hash(tmp_path, monkeypatch):
    files = source_files_of_checkout()
    copies = []
    for index, (name, path) in enumerate(files[:: max(1, len(files) // 12)]):  # a dozen files spread over the tree
        copy = tmp_path / f"{index}{path.suffix}"
        copy.write_bytes(path.read_bytes())
        copies.append((name, copy))
    monkeypatch.setattr(source_hash, "source_files", lambda: copies)
    source_hash.code_hash.cache_clear()
    try:
        original = source_hash.code_hash()
        for _, copy in copies:
            content = copy.read_bytes()
            copy.write_bytes(content + b" ")
            source_hash.code_hash.cache_clear()
            assert source_hash.code_hash() != original, copy
            copy.write_bytes(content)
        source_hash.code_hash.cache_clear()
        assert source_hash.code_hash() == original
    finally:
        source_hash.code_hash.cache_clear()
