"""Every file tcmp writes for people to read (reports, pages, summaries, caches, `parse -o` tensors), written so
that nobody else who can write the directory can redirect it:

- the directory is opened once; everything after goes through its descriptor, never through its path again;
- a file is created under a new temporary name with O_CREAT | O_EXCL | O_NOFOLLOW, written through the descriptor
  that created it (never reopened by name), and renamed into place relative to the same directory descriptor;
- before and after the rename the entry is checked to be the file written (device and inode), so a temporary
  swapped for a symlink or another file is refused, never published.

Files get the mode the umask gives (0644 under umask 022), so that colleagues can open a report; `mkstemp` would
make them 0600 whatever the umask, and the rename keeps that mode.

A temporary's name carries the writing process's pid and host (`.tcmp-{pid}-{host}-{random}.part`), so that the
next compare into the directory can prove one was left by a process that died (kill -9) and remove it.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import os
import re
import secrets
import socket
import stat
import time
from pathlib import Path
from typing import BinaryIO, Optional, TextIO

_ATTEMPTS = 100
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
TEMPORARY_PREFIX = ".tcmp-"
_TEMPORARY = re.compile(r"\.tcmp-(\d+)-([0-9a-f]{8})-[0-9a-f]{16}\.part")
# Tests of races set this to a directory: a writer about to rename its temporaries into place (the reports of a
# compare, a `parse -o` tensor) creates `paused.{pid}` there and waits until `resume` exists.
PAUSE_ENV = "TCMP_TEST_PAUSE_BEFORE_RENAME"


class WriteError(OSError):
    """A file that could not be written: one line naming it, and what became of it."""


class TemporaryReplacedError(WriteError):
    """A temporary that is no longer the file tcmp created (someone who can write the directory swapped it)."""


class OutputExistsError(FileExistsError):
    """The file to write exists already, and replacing it was not asked for."""

    def __init__(self, path: Path) -> None:
        super().__init__(errno.EEXIST, "exists (--force replaces it)", str(path))
        self.path = path


def _host_tag() -> str:
    """This host and pid namespace: a pid means a process only there."""
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        namespace = 0
    return hashlib.sha256(f"{socket.gethostname()}|{namespace}".encode()).hexdigest()[:8]


class Directory:
    """A directory opened once, by the path the user gave (symlinks in it followed as `cd` follows them); every
    file below is reached through its descriptor."""

    def __init__(self, path: Path, create: bool = False) -> None:
        self.path = Path(path)
        if create:
            self.path.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        if not stat.S_ISDIR(os.fstat(self.fd).st_mode):
            os.close(self.fd)
            raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(self.path))

    @classmethod
    def child(cls, parent: Directory, name: str, mode: int = 0o777) -> Directory:
        """The subdirectory `name` of `parent`, created with `mode` when missing; a symlink there is refused."""
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, mode, dir_fd=parent.fd)
        self = cls.__new__(cls)
        self.path = parent.path / name
        self.fd = os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=parent.fd)
        return self

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Directory:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def lstat(self, name: str) -> Optional[os.stat_result]:
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def exists(self, name: str) -> bool:
        return self.lstat(name) is not None

    def open_regular(self, name: str) -> BinaryIO:
        """`name` for reading, when it is a regular file (not a symlink)."""
        fd = os.open(name, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0), dir_fd=self.fd)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise OSError(errno.EINVAL, "not a regular file", str(self.path / name))
        return os.fdopen(fd, "rb")

    def temporary(self) -> Temporary:
        """A new, empty file under an unused temporary name, open for writing; mode 0666 less the umask."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
        for _ in range(_ATTEMPTS):
            name = f"{TEMPORARY_PREFIX}{os.getpid()}-{_host_tag()}-{secrets.token_hex(8)}.part"
            try:
                fd = os.open(name, flags, 0o666, dir_fd=self.fd)
            except FileExistsError:
                continue
            return Temporary(self, name, fd)
        raise WriteError(errno.EEXIST, f"no unused temporary name after {_ATTEMPTS} attempts", str(self.path))

    def remove_stale_temporaries(self) -> list[str]:
        """Remove the temporaries tcmp processes that died left here: only names of the pattern, regular files
        owned by this user, written on this host by a pid that no longer runs. Returns their names."""
        removed, host = [], _host_tag()
        for name in os.listdir(self.fd):
            match = _TEMPORARY.fullmatch(name)
            if match is None or match.group(2) != host or int(match.group(1)) == os.getpid():
                continue
            info = self.lstat(name)
            if info is None or not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
                continue
            if _running(int(match.group(1))):
                continue
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=self.fd)
                removed.append(name)
        return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process of that pid: running
    return True


def _identity(info: os.stat_result) -> tuple[int, int]:
    return info.st_dev, info.st_ino


def pause_for_tests() -> None:
    directory = os.environ.get(PAUSE_ENV)
    if not directory:
        return
    Path(directory, f"paused.{os.getpid()}").touch()
    while not Path(directory, "resume").exists():
        time.sleep(0.02)


class Temporary:
    """A file being written in a `Directory` under a temporary name; `publish` renames it into place."""

    def __init__(self, directory: Directory, name: str, fd: int) -> None:
        self.directory, self.name, self.fd = directory, name, fd
        self.identity = _identity(os.fstat(fd))
        self._file: Optional[io.IOBase] = None

    @property
    def path(self) -> Path:
        return self.directory.path / self.name

    def text(self, newline: Optional[str] = None) -> TextIO:
        self._file = os.fdopen(self.fd, "w", encoding="utf-8", newline=newline)
        return self._file

    def binary(self) -> BinaryIO:
        self._file = os.fdopen(self.fd, "wb")
        return self._file

    def close(self) -> None:
        """Flush and close (errors such as a full disk raised here, naming the file)."""
        try:
            if self._file is not None:
                self._file.close()
            elif self.fd >= 0:
                os.close(self.fd)
        except OSError as exc:
            raise _named(exc, self.path) from exc
        finally:
            self.fd = -1

    def _is_ours(self, name: str) -> bool:
        info = self.directory.lstat(name)
        return info is not None and stat.S_ISREG(info.st_mode) and _identity(info) == self.identity

    def publish(self, final: str, replace: bool = True) -> Path:
        """Close, then rename to `final` in the same directory (`replace`: over an entry of that name, never
        through it; else OutputExistsError when there is one). A temporary that is no longer the file written is
        refused: TemporaryReplacedError, and nothing is published."""
        self.close()
        d, target = self.directory, self.directory.path / final
        if not self._is_ours(self.name):
            raise TemporaryReplacedError(errno.EPERM, "replaced while being written, not published", str(self.path))
        if replace:
            os.rename(self.name, final, src_dir_fd=d.fd, dst_dir_fd=d.fd)
        else:
            try:  # link(2) does not replace: an entry made since the caller looked is kept
                os.link(self.name, final, src_dir_fd=d.fd, dst_dir_fd=d.fd, follow_symlinks=False)
            except FileExistsError:
                raise OutputExistsError(target) from None
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
                    raise
                if d.exists(final):  # a file system without hard links: look, then rename
                    raise OutputExistsError(target) from None
                os.rename(self.name, final, src_dir_fd=d.fd, dst_dir_fd=d.fd)
            else:
                os.unlink(self.name, dir_fd=d.fd)
        if not self._is_ours(final):  # swapped between the check and the rename: take the stranger's entry away
            with contextlib.suppress(OSError):
                os.unlink(final, dir_fd=d.fd)
            raise TemporaryReplacedError(errno.EPERM, "replaced while being written, not published", str(self.path))
        return target

    def discard(self) -> None:
        """Close and remove (only if the name is still the file written); errors ignored."""
        with contextlib.suppress(OSError):
            self.close()
        if self._is_ours(self.name):
            with contextlib.suppress(OSError):
                os.unlink(self.name, dir_fd=self.directory.fd)


def _named(exc: OSError, path: Path) -> WriteError:
    return WriteError(exc.errno, exc.strerror or str(exc), str(path))


def write_atomically(final: Path, data, directory: Optional[Directory] = None, replace: bool = True) -> Path:
    """`data` (text or bytes) as the file `final`, written under a temporary name beside it and renamed into place:
    a reader never sees it half written, a failed write leaves nothing behind, and nothing is followed. With
    `directory` (the opened `final.parent`) no path is resolved at all."""
    own = directory is None
    directory = Directory(final.parent) if directory is None else directory
    try:
        temporary = directory.temporary()
        try:
            out = temporary.binary() if isinstance(data, bytes) else temporary.text()
            try:
                out.write(data)
            except OSError as exc:
                raise _named(exc, temporary.path) from exc
            return temporary.publish(final.name, replace)
        except BaseException:
            temporary.discard()
            raise
    finally:
        if own:
            directory.close()


def check_writable(path: Path) -> None:
    """Create `path` if missing and a temporary in it, removed again: fails early when it cannot be written."""
    with Directory(path, create=True) as directory:
        directory.temporary().discard()
