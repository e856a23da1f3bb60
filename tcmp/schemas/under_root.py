"""Files of a tree that other users write, reached without following a symlink: every directory from the root
down is opened with O_NOFOLLOW | O_DIRECTORY relative to its parent's descriptor, and the file relative to its
directory's descriptor, so no name on the way can be swapped for a link that leaves the tree. A path is only
ever split into names below the root; nothing is resolved by realpath, nothing is cached.

Used by the daemon (tcmp watch runs as root over dump trees that the dumping jobs' users can write) to list,
read and delete. A directory or file that is a symlink raises LeftTheRoot; anything else is the OSError it is.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

PATH_MAX = 4096  # Linux: a path given to a system call holds at most 4095 bytes (and its NUL)
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO planted between the check and the open must not block the reader (no effect on files)
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY


class LeftTheRoot(Exception):
    """The path leaves the root: one of its names is a symlink (or `..`), or a directory on its way is not one."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def path_too_long(path: str) -> bool:
    """Past what a system call takes as one path (the compare reads files by path)."""
    return len(os.fsencode(path)) >= PATH_MAX


def names_below(root: str, path: str) -> tuple[str, ...]:
    """`path`'s names below `root` (the file's name last); LeftTheRoot when it is not below it."""
    prefix = root.rstrip("/") + "/"
    if not path.startswith(prefix) or len(path) == len(prefix):
        raise LeftTheRoot(path, f"not below the root {root}")
    names = tuple(path[len(prefix) :].split("/"))
    if any(name in ("", ".", "..") for name in names):
        raise LeftTheRoot(path, "not a plain path below the root (empty, '.' or '..' name)")
    return names


def open_root(root: str) -> int:
    """The root's own descriptor, walked from `/` with O_NOFOLLOW too: the root is a resolved path (no symlink
    in it when it was configured), and a directory on its way that became a symlink since (its owner may rename
    and replace it) leads nowhere."""
    if not root.startswith("/"):
        raise LeftTheRoot(root, "not an absolute path")
    return open_directory(None, tuple(name for name in root.split("/") if name), root)


def _open_directory_at(parent: int, name: str, path: str) -> int:
    try:
        return os.open(name, _DIRECTORY, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise LeftTheRoot(path, f"{name} is a symlink or not a directory: not followed") from None
        raise


def open_directory(root_fd: Optional[int], names: tuple[str, ...], path: str) -> int:
    """A new descriptor of the directory `names` below the root's descriptor (None: `/`), each name opened
    O_NOFOLLOW."""
    fd = os.open("/", _DIRECTORY) if root_fd is None else os.dup(root_fd)
    try:
        for name in names:
            child = _open_directory_at(fd, name, path)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


@dataclass
class DirectoryUnder:
    """An open directory below a root, and how it was reached (to check that the path still leads to it)."""

    root: str
    names: tuple[str, ...]
    fd: int
    path: str

    @classmethod
    def open(cls, root: str, directory: str) -> DirectoryUnder:
        names = () if directory.rstrip("/") == root.rstrip("/") else names_below(root, directory)
        root_fd = open_root(root)
        try:
            return cls(root, names, open_directory(root_fd, names, directory), directory)
        finally:
            os.close(root_fd)

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def __enter__(self) -> DirectoryUnder:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def lstat(self, name: str) -> os.stat_result:
        return os.stat(name, dir_fd=self.fd, follow_symlinks=False)

    def still_at_its_path(self) -> bool:
        """Walking from the root again (O_NOFOLLOW) still reaches this very directory (st_dev, st_ino)."""
        try:
            again = DirectoryUnder.open(self.root, self.path)
        except (LeftTheRoot, OSError):
            return False
        try:
            return same_file(os.fstat(again.fd), os.fstat(self.fd))
        finally:
            again.close()


def same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def lstat_under(root: str, path: str) -> os.stat_result:
    """lstat of `path` with no symlink followed on its way from `root` (LeftTheRoot when one is on it)."""
    names = names_below(root, path)
    with DirectoryUnder.open(root, path.rpartition("/")[0]) as directory:
        return directory.lstat(names[-1])


@dataclass
class OpenedFile:
    """A regular file below a root, open for reading, with the directory it was opened in. `path` is its name
    as the caller knows it; `readable` names the open file itself (/proc/self/fd/N), for readers that take a
    path (and may mmap it): whatever happens to the names meanwhile, it is this file."""

    path: str
    fd: int
    directory: DirectoryUnder
    name: str
    stat: os.stat_result

    @property
    def readable(self) -> Path:
        return Path(f"/proc/self/fd/{self.fd}")

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)
        self.directory.close()

    def __enter__(self) -> OpenedFile:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def name_still_leads_here(self) -> bool:
        """Its name in its directory is still this file (not renamed over or replaced)."""
        try:
            return same_file(self.directory.lstat(self.name), os.fstat(self.fd))
        except OSError:
            return False


class NotRegular(Exception):
    """Not a regular file (a FIFO, device, socket or directory is never opened)."""


def open_regular_in(directory: DirectoryUnder, name: str, path: str) -> int:
    """A read descriptor of the regular file `name` in `directory`; NotRegular when it is none, LeftTheRoot when
    it is a symlink. The type is checked before the open (no device or FIFO is ever opened) and the identity after
    it (a swap in between is refused)."""
    before = directory.lstat(name)
    if stat.S_ISLNK(before.st_mode):
        raise LeftTheRoot(path, "a symlink: not followed")
    if not stat.S_ISREG(before.st_mode):
        raise NotRegular(path)
    try:
        fd = os.open(name, _FILE, dir_fd=directory.fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LeftTheRoot(path, "a symlink: not followed") from None
        raise
    after = os.fstat(fd)
    if not (stat.S_ISREG(after.st_mode) and same_file(before, after)):
        os.close(fd)
        raise NotRegular(path)
    return fd


def open_file_under(root: str, path: str) -> OpenedFile:
    """Open the regular file `path` below `root` for reading, no symlink followed on the way or at the end."""
    names = names_below(root, path)
    directory = DirectoryUnder.open(root, path.rpartition("/")[0])
    try:
        fd = open_regular_in(directory, names[-1], path)
        return OpenedFile(path, fd, directory, names[-1], os.fstat(fd))
    except BaseException:
        directory.close()
        raise


def read_small_file_in(directory: DirectoryUnder, name: str, limit: int) -> Optional[bytes]:
    """The content of a small regular file beside the one being read (None: absent), O_NOFOLLOW."""
    try:
        fd = open_regular_in(directory, name, f"{directory.path}/{name}")
    except FileNotFoundError:
        return None
    try:
        chunks = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise OSError(errno.EFBIG, f"larger than {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)
