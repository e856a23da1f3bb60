"""Listing the tree: full scans see every dump-like name; reconciles list only directories that changed."""

from __future__ import annotations

import os
import time

from daemon_testlib import write_fx

from tcmp.daemon.scan import TreeScanner


def _names(listings) -> set[str]:
    return {os.path.basename(f.path) for listing in listings for f in listing.files}


def _age(path, seconds: float = 10.0) -> None:
    """Make a directory look modified `seconds` ago (recently modified directories are listed again anyway)."""
    past = time.time() - seconds
    os.utime(path, (past, past))


def test_full_scan_lists_dump_names_skips_the_index_and_symlinked_directories(root, tmp_path):
    a = write_fx(root, 0, 1)
    b = write_fx(root, 1, 2)
    (a.parent / "notes.txt").write_text("not a dump")
    (root / ".tcmp").mkdir()
    write_fx(root / ".tcmp", 0, 3)  # the index directory is never part of the dump
    elsewhere = tmp_path / "elsewhere"
    write_fx(elsewhere, 0, 4)
    (root / "linked").symlink_to(elsewhere, target_is_directory=True)
    link = a.parent / "link.npy"
    link.symlink_to(b)
    listings = list(TreeScanner(str(root)).scan(full=True))
    found = {f.path: f.symlink for listing in listings for f in listing.files}
    assert found == {str(a): False, str(b): False, str(link): True}


def test_reconcile_lists_only_changed_and_new_directories(root):
    first = write_fx(root, 0, 1)
    second = write_fx(root, 1, 2)
    for directory in {first.parent, second.parent, *first.parents}:
        if str(directory).startswith(str(root)):
            _age(directory)
    scanner = TreeScanner(str(root))
    assert _names(scanner.scan(full=True)) == {first.name, second.name}
    assert _names(scanner.scan(full=False)) == set()  # nothing changed: nothing listed
    third = write_fx(root, 1, 3)  # a new file in a known directory
    fourth = write_fx(root, 7, 4)  # a new directory below a known one
    assert _names(scanner.scan(full=False)) == {second.name, third.name, fourth.name}


def test_recently_modified_directories_are_listed_again(root):
    path = write_fx(root, 0, 1)  # just written: its directory's mtime is "now"
    scanner = TreeScanner(str(root))
    assert _names(scanner.scan(full=True)) == {path.name}
    assert path.name in _names(scanner.scan(full=False))  # not trusted yet (coarse timestamps)


def test_deleted_directories_are_forgotten(root):
    path = write_fx(root, 0, 1)
    scanner = TreeScanner(str(root))
    list(scanner.scan(full=True))
    known = scanner.directories
    path.unlink()
    path.parent.rmdir()
    list(scanner.scan(full=False))
    assert scanner.directories == known - 1
