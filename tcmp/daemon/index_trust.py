"""The daemon's own files in a tree others write: `ROOT/.tcmp/`, the index and its lock are trusted only when they
are ours, as OpenSSH trusts an `authorized_keys` only when nobody else could have written it.

The watcher creates `.tcmp` (0755) and the index and lock files (0644) itself, each with O_NOFOLLOW relative to
its directory's descriptor, so neither a planted symlink nor the umask decides where they go or who may write
them. An existing one is refused (IndexRefused, one line) when it is a symlink, not a directory (or not a regular
file), owned by a user other than this one or root, or writable by group or others: any user who can write into
the tree could otherwise point the root daemon's database at a file of their choosing, or edit its records. The
same goes for the `-wal` and `-shm` files SQLite opens beside the index. An existing index is only stat'ed,
never opened here (see check_existing: SQLite's locks).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path
from typing import Optional

from tcmp.schemas.dump_tree import INDEX_DIR
from tcmp.schemas.errors import TcmpError

DIRECTORY_MODE = 0o755  # others read the index (tcmp status, tcmp compare); nobody else writes it
FILE_MODE = 0o644
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


class WatchRefused(TcmpError):
    """`tcmp watch` will not start on this: its message is the one line the user gets (exit code 3)."""


class IndexRefused(WatchRefused):
    """The index's directory or files cannot be trusted (see the module docstring)."""


def _check_ours(st: os.stat_result, path: Path, what: str) -> None:
    if st.st_uid not in (os.geteuid(), 0):
        raise IndexRefused(
            f"{what} {path} is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()}) or root: refused; "
            "remove it (tcmp watch creates its own)"
        )
    if st.st_mode & 0o022:
        raise IndexRefused(
            f"{what} {path} is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o}): refused; "
            "make it writable by its owner only (chmod go-w) or remove it"
        )


def open_index_directory(index: Path, create: bool = True) -> int:
    """A descriptor of the directory the index lives in, created (0755) when missing and its parent is a watched
    root's (`.tcmp`); never its parents (a deleted root stays deleted). Raises IndexRefused or OSError."""
    directory = index.parent
    parent_fd = os.open(directory.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if create:
            with contextlib.suppress(FileExistsError):  # the umask may take more than 0022, it never adds any
                os.mkdir(directory.name, DIRECTORY_MODE, dir_fd=parent_fd)
        try:
            fd = os.open(directory.name, _DIRECTORY, dir_fd=parent_fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise IndexRefused(
                    f"{directory} is a symlink or not a directory: refused (tcmp watch writes its index only into "
                    "a directory of its own; remove it)"
                ) from None
            raise
    finally:
        os.close(parent_fd)
    try:
        if directory.name == INDEX_DIR:  # in the dump tree; a --db directory is the administrator's choice
            _check_ours(os.fstat(fd), directory, "the index directory")
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_own_file(directory_fd: int, path: Path, what: str, flags: int = os.O_RDWR) -> int:
    """Open (creating it 0644) one of the daemon's files in its directory; IndexRefused unless it is ours."""
    try:
        fd = os.open(path.name, flags | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE, dir_fd=directory_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise IndexRefused(f"{what} {path} is a symlink: refused (remove it)") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise IndexRefused(f"{what} {path} is not a regular file: refused (remove it)")
        _check_ours(st, path, what)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_existing(directory_fd: int, path: Path, what: str) -> Optional[os.stat_result]:
    """A file SQLite opens by name, when it exists: a regular file of ours (its lstat; None when absent).

    Only ever stat'ed, never opened: closing any descriptor of a database file drops every POSIX lock this
    process holds on it, SQLite's included (another connection would then take the database for unused, and
    checkpoint and reset its WAL under this one's feet)."""
    try:
        st = os.stat(path.name, dir_fd=directory_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise IndexRefused(f"{what} {path} is a symlink: refused (remove it)")
    if not stat.S_ISREG(st.st_mode):
        raise IndexRefused(f"{what} {path} is not a regular file: refused (remove it)")
    _check_ours(st, path, what)
    return st


def _create_index_file(directory_fd: int, index: Path) -> None:
    """A new, empty index file (0644 whatever the umask); a brand-new inode, so no connection holds locks on it."""
    try:
        fd = os.open(
            index.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE,
            dir_fd=directory_fd,
        )  # fmt: skip
    except FileExistsError:  # created meanwhile (or a link planted): checked as an existing one
        return
    os.close(fd)


def prepare_index(index: Path) -> tuple[int, int, int, int]:
    """Before SQLite opens `index` by name: its directory and the index file are ours (created so when missing),
    and so are the side files SQLite would open beside it. Returns the identity (st_dev, st_ino) of the directory
    and of the index file: checked again once SQLite has opened it, so that a swap in between is refused too."""
    directory_fd = open_index_directory(index)
    try:
        index_st = check_existing(directory_fd, index, "the index")
        if index_st is None:
            _create_index_file(directory_fd, index)
            index_st = check_existing(directory_fd, index, "the index")
            if index_st is None:
                raise FileNotFoundError(errno.ENOENT, "the index vanished as it was created", str(index))
        for suffix in SQLITE_SIDE_FILES:
            check_existing(directory_fd, index.with_name(index.name + suffix), "the index's side file")
        directory_st = os.fstat(directory_fd)
    finally:
        os.close(directory_fd)
    return directory_st.st_dev, directory_st.st_ino, index_st.st_dev, index_st.st_ino
