"""Reaching files below a root without following a symlink (tcmp/schemas/under_root.py), on real directories."""

from __future__ import annotations

import os
import stat

import pytest

from tcmp.schemas.under_root import (
    DirectoryUnder,
    LeftTheRoot,
    NotRegular,
    lstat_under,
    names_below,
    open_file_under,
)


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f").write_bytes(b"inside")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_bytes(b"outside")
    return str(root), outside


def test_a_plain_path_is_opened_and_read_through_its_descriptor(tree):
    root, _ = tree
    with open_file_under(root, f"{root}/a/b/f") as opened:
        assert opened.readable.read_bytes() == b"inside"
        assert opened.name_still_leads_here()
    assert lstat_under(root, f"{root}/a/b/f").st_size == len(b"inside")


@pytest.mark.parametrize("where", ["a", "a/b", "a/b/f"])
def test_a_symlink_anywhere_on_the_way_leaves_the_root(tree, where):
    root, outside = tree
    target = f"{root}/{where}"
    os.rename(target, target + ".moved")
    os.symlink(outside / "f" if where.endswith("f") else outside, target)
    if where == "a":
        os.symlink(outside, f"{outside}/b")  # outside/b/f would be the file were the links followed
    with pytest.raises(LeftTheRoot, match="not followed"):
        open_file_under(root, f"{root}/a/b/f")
    if where == "a/b/f":  # the last name is lstat'ed: the caller sees the link itself
        assert stat.S_ISLNK(lstat_under(root, f"{root}/a/b/f").st_mode)
    else:
        with pytest.raises(LeftTheRoot):
            lstat_under(root, f"{root}/a/b/f")


@pytest.mark.parametrize("path", ["{root}/../outside/f", "{root}/a//b/f", "{root}x/a", "/elsewhere/f", "{root}/"])
def test_names_not_plainly_below_the_root_are_refused(tree, path):
    root, _ = tree
    with pytest.raises(LeftTheRoot):
        names_below(root, path.format(root=root))


def test_a_directory_swapped_after_it_was_opened_is_no_longer_at_its_path(tree):
    root, outside = tree
    with DirectoryUnder.open(root, f"{root}/a/b") as directory:
        assert directory.still_at_its_path()
        os.rename(f"{root}/a/b", f"{root}/a/b.moved")
        os.symlink(outside, f"{root}/a/b")
        assert not directory.still_at_its_path()
        assert directory.lstat("f").st_size == len(b"inside")  # the descriptor still is the directory it was


def test_a_fifo_is_never_opened(tree):
    root, _ = tree
    os.mkfifo(f"{root}/a/pipe")
    with pytest.raises(NotRegular):
        open_file_under(root, f"{root}/a/pipe")  # would block forever if opened for reading


def test_a_root_whose_own_path_became_a_symlink_leads_nowhere(tree):
    """The root is configured resolved; its owner may later rename it and plant a link under its name."""
    root, outside = tree
    os.rename(root, root + ".moved")
    os.symlink(outside, root)
    with pytest.raises(LeftTheRoot, match="not followed"):
        open_file_under(root, f"{root}/f")
    with pytest.raises(LeftTheRoot):
        DirectoryUnder.open(root, root)
