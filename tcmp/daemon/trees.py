"""One watcher per tree: a `tcmp watch` refuses a root that is inside, or contains, a root another running
watcher holds. Two watchers over nested trees with `--drop-raw` would race for the same raw files: the outer
one deletes what the inner one has not read yet, and each index ends up with part of the dump.

Running watchers are found two ways. Each registers in a directory of the machine (`/run/tcmp/watchers`: the
service's RuntimeDirectory, or root's; `$XDG_RUNTIME_DIR/tcmp/watchers` for another user): one file per watcher
naming its roots, held under an exclusive flock(2) for the watcher's life (the kernel drops it however the process
ends, so a dead watcher's file is recognized and removed). And each index lock records its watcher's roots
(lock.py): the locks where a containing root's `.tcmp` would be are probed too, which finds a watcher of another
user (or another registry). The check and the registration happen under the registry's own lock, so two
watchers starting at once do not both miss each other.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import itertools
import json
import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tcmp.daemon.index_trust import WatchRefused, open_own_file
from tcmp.daemon.lock import LockHolder, LockState, probe
from tcmp.schemas.index import default_index_path

log = logging.getLogger(__name__)

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_ENTRY_SUFFIX = ".watcher"
_claims = itertools.count()


class TreeTaken(WatchRefused):
    """Another running watcher holds a root inside or around one of ours."""


@dataclass(frozen=True)
class OtherWatcher:
    pid: Optional[int]
    host: Optional[str]
    roots: tuple[str, ...]
    indexes: tuple[str, ...] = ()  # each root's index, where known (the registry says, a lock file does not)


def overlapping(a: str, b: str) -> bool:
    """`a` and `b` are the same tree, or one is inside the other."""
    a, b = a.rstrip("/") or "/", b.rstrip("/") or "/"
    return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")


def registry_directory() -> Optional[Path]:
    """systemd's RuntimeDirectory (the unit's /run/tcmp), else /run/tcmp for root, else the user's runtime
    directory; None when there is none (then only watchers of containing roots are found)."""
    service = os.environ.get("RUNTIME_DIRECTORY", "").split(":")[0]
    if service.startswith("/"):
        return Path(service) / "watchers"
    if os.geteuid() == 0:
        return Path("/run/tcmp/watchers")
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return Path(runtime) / "tcmp" / "watchers" if runtime else None


def _open_registry(directory: Path) -> int:
    """The registry directory's descriptor, created 0755 where missing, never through a symlink."""
    fd = os.open("/", _DIRECTORY)
    try:
        for name in directory.parts[1:]:
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o755, dir_fd=fd)
            child = os.open(name, _DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        st = os.fstat(fd)
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise OSError(errno.EPERM, f"{directory} is not this user's own directory")
    except BaseException:
        os.close(fd)
        raise
    return fd


@dataclass
class TreeClaim:
    """This watcher's registration: released (file removed, lock dropped) when the watcher stops."""

    directory_fd: Optional[int]
    name: Optional[str]
    fd: Optional[int]

    def release(self) -> None:
        if self.directory_fd is None:
            return
        if self.name is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.name, dir_fd=self.directory_fd)
        for fd in (self.fd, self.directory_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.directory_fd = self.fd = self.name = None


def _registered(directory_fd: int) -> list[OtherWatcher]:
    """The live watchers of the registry; a dead one's file is removed."""
    found = []
    for name in os.listdir(directory_fd):
        if not name.endswith(_ENTRY_SUFFIX):
            continue
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=directory_fd)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:  # its watcher runs
                found.append(_watcher_of(os.pread(fd, 1 << 16, 0)))
                continue
            except OSError:
                continue
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=directory_fd)  # under the registry lock: no watcher is registering it now
        finally:
            os.close(fd)
    return found


def _watcher_of(content: bytes) -> OtherWatcher:
    try:
        entry = json.loads(content.decode("utf-8", errors="surrogateescape"))
        return OtherWatcher(entry["pid"], entry["host"], tuple(entry["roots"]), tuple(entry["indexes"]))
    except (ValueError, KeyError, TypeError):  # being written this instant, or damaged: it names nothing
        return OtherWatcher(None, None, ())


def _holders_around(root: str) -> list[OtherWatcher]:
    """Watchers whose index lock sits where the root's own or a containing directory's `.tcmp` would be."""
    found = []
    for directory in Path(root).parents:  # the root's own lock is the index lock's business (IndexBusy)
        state, holder = probe(default_index_path(directory))
        if state is LockState.HELD and holder is not None:
            found.append(_from_holder(holder, str(directory)))
    return found


def _from_holder(holder: LockHolder, directory: str) -> OtherWatcher:
    roots = holder.roots or (directory,)  # an older tcmp's lock names no roots: its own directory's, then
    return OtherWatcher(holder.pid, holder.host, roots, (str(default_index_path(directory)),) * len(roots))


def _refuse_overlap(roots: tuple[tuple[str, str], ...], others: list[OtherWatcher]) -> None:
    ours = {index for _, index in roots}
    for root, _ in roots:
        for other in others:
            if other.pid == os.getpid() or ours & set(other.indexes):
                continue  # (the same index: its lock refuses, saying so: IndexBusy)
            for theirs in other.roots:
                if overlapping(root, theirs):
                    who = f"tcmp watch pid {other.pid}" if other.pid is not None else "another tcmp watch"
                    if root == theirs:
                        where = f"{root} is watched already, into another index, by {who}"
                    else:
                        verb = "contains" if theirs.startswith(root) else "is inside"
                        where = f"{root} {verb} {theirs}, which {who} watches"
                    raise TreeTaken(
                        f"{where}: one watcher per tree (nested watchers with --drop-raw delete each other's "
                        "unread files); stop it, or watch the outer root only"
                    )


def claim_trees(roots: tuple[tuple[str, str], ...]) -> TreeClaim:
    """Refuse (TreeTaken) when another running watcher holds a root inside or around one of `roots` ((root,
    index) pairs); else register them until `release`."""
    _refuse_overlap(roots, [w for root, _ in roots for w in _holders_around(root)])
    directory = registry_directory()
    if directory is None:
        return TreeClaim(None, None, None)
    try:
        directory_fd = _open_registry(directory)
    except OSError as exc:
        log.warning("cannot use the watcher registry %s (%s): only watchers of containing roots are looked for",
                    directory, exc.strerror or exc)  # fmt: skip
        return TreeClaim(None, None, None)
    claim = TreeClaim(directory_fd, None, None)
    try:
        guard = open_own_file(directory_fd, directory / "registry.lock", "the watcher registry's lock")
        try:
            fcntl.flock(guard, fcntl.LOCK_EX)
            _refuse_overlap(roots, _registered(directory_fd))
            name = f"{os.getpid()}-{next(_claims)}{_ENTRY_SUFFIX}"  # a process may run several (tests)
            fd = open_own_file(directory_fd, directory / name, "the watcher registry entry")
            claim.name, claim.fd = name, fd
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.ftruncate(fd, 0)
            entry = {"pid": os.getpid(), "host": socket.gethostname(), "roots": [r for r, _ in roots],
                     "indexes": [i for _, i in roots]}  # fmt: skip
            os.pwrite(fd, json.dumps(entry).encode("utf-8", errors="surrogateescape"), 0)
        finally:
            os.close(guard)
    except BaseException:
        claim.release()
        raise
    return claim
