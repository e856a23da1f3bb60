"""Worker side of the daemon: examine one file (place it, check it is complete, summarize or parse it) and the
process pool that runs those examinations.

A worker never writes the index and never deletes anything: it returns a typed result, and the dispatcher and the
writer thread decide what happens next. Completeness is the readers' own size check (GE: `8 + L + Σ sizes` equals
the file size; `.npy`: the header's promise): `summarize_file` raises DumpIncomplete for a short file, so the
check costs no extra read. The file is opened once, from the watched root down without following a symlink, and
read through that descriptor; its (device, inode, size, mtime) is taken before and after reading; if it changed (or
its name now names another file), the content that was read is not the file's final content and the result says
"not ready".
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import dataclasses
import logging
import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from tcmp.schemas.dump_tree import DumpFile, GraphFile, Unrecognized, locate
from tcmp.schemas.errors import DumpCorrupt, DumpError, DumpIncomplete, GraphParseError, describe
from tcmp.schemas.ge_names import MAPPING_FILE, hashed_stem, parse_mapping
from tcmp.schemas.host import one_blas_thread
from tcmp.schemas.index import FileKey, GraphRow, SummaryRow
from tcmp.schemas.under_root import (
    LeftTheRoot,
    NotRegular,
    OpenedFile,
    open_file_under,
    read_small_file_in,
)
from tcmp.summaries.moments import COMPILED, warm
from tcmp.summaries.summarize import summarize_file

log = logging.getLogger(__name__)

MAPPING_LIMIT = 64 << 20  # a mapping.csv row per hashed file name: far below this
ENGINE = COMPILED  # the fused C loops, 2-3x numpy's speed (numpy where the extension is not built)


@dataclass(frozen=True)
class Summarized:
    path: str
    row: SummaryRow


@dataclass(frozen=True)
class GraphParsed:
    path: str
    row: GraphRow


@dataclass(frozen=True)
class NotReady:
    """Shorter than its header promises (`truncated`), changed while it was read (`changed`: the content read is
    not the file's; `key` is the file as it was after the read), or a hashed name whose mapping.csv row is not
    written yet: look again later."""

    path: str
    key: FileKey
    reason: str
    located: Union[DumpFile, GraphFile, None]
    truncated: bool = False
    changed: bool = False


@dataclass(frozen=True)
class Failed:
    """Cannot be used as it is: corrupt, unreadable, or a name that cannot be placed."""

    path: str
    key: Optional[FileKey]
    error: str
    located: Union[DumpFile, GraphFile, None]


@dataclass(frozen=True)
class Vanished:
    path: str


@dataclass(frozen=True)
class Skipped:
    """Not a dump file after all (not a regular file, or a name locate() ignores), or reached through a symlink
    (`left_the_root`)."""

    path: str
    reason: str
    left_the_root: bool = False


WorkResult = Union[Summarized, GraphParsed, NotReady, Failed, Vanished, Skipped]


def _mapping_for(opened: OpenedFile, path: Path) -> tuple[Optional[dict[str, str]], Optional[str]]:
    """The directory's mapping.csv when the name is a hashed long name, and this file's row of it (read through
    the directory's descriptor, never through a symlink)."""
    stem = hashed_stem(path.name)
    if stem is None:
        return None, None
    try:
        content = read_small_file_in(opened.directory, MAPPING_FILE, MAPPING_LIMIT)
    except (LeftTheRoot, NotRegular):
        raise DumpCorrupt(path.parent / MAPPING_FILE, "not a regular file (a symlink is not followed)") from None
    mapping = {} if content is None else parse_mapping(content.decode("utf-8", "replace"), path.parent / MAPPING_FILE)
    return mapping, mapping.get(stem)


def examine(path_text: str, root: Optional[str] = None) -> WorkResult:
    """Place, check and summarize (or parse) one file of the watched `root` (default: its own directory). Never
    raises for a problem of the file itself.

    The file is opened from the root down without following a symlink (under_root.py), and the readers read that
    open file (through /proc/self/fd), so a name swapped for a link on the way reads nothing outside the tree."""
    path = Path(path_text)
    try:
        opened = open_file_under(root if root is not None else str(path.parent), path_text)
    except LeftTheRoot as exc:
        return Skipped(path_text, f"{exc.reason} (it would leave the watched root)", left_the_root=True)
    except NotRegular:
        return Skipped(path_text, "not a regular file")
    except FileNotFoundError:
        return Vanished(path_text)
    except OSError as exc:
        return Failed(path_text, None, f"cannot read: {exc.strerror or exc}", None)
    with opened:
        return _examine_opened(opened, path, path_text)


def _examine_opened(opened: OpenedFile, path: Path, path_text: str) -> WorkResult:
    key = FileKey.of(opened.stat)
    readable = opened.readable
    located: Union[DumpFile, GraphFile, Unrecognized, None] = None
    try:
        mapping, mapped_name = _mapping_for(opened, path)
        if mapping is not None and mapped_name is None:  # the runtime may append the row after the file
            return NotReady(path_text, key, "hashed long name without a mapping.csv row (yet)", None)
        located = locate(path, mapping=mapping if mapping is not None else {})
        if located is None:
            return Skipped(path_text, "not a dump file name")
        if isinstance(located, Unrecognized):
            return Failed(path_text, key, located.reason, None)
        if isinstance(located, GraphFile):
            from tcmp.schemas.graph_reader import read_graph  # here: a worker for dump files never needs it

            graph = dataclasses.replace(read_graph(readable), path=located.path)
            result: WorkResult = GraphParsed(path_text, GraphRow(located, key, graph))
        else:
            summary = summarize_file(dataclasses.replace(located, path=readable), engine=ENGINE)
            summary = dataclasses.replace(summary, path=located.path)
            result = Summarized(path_text, SummaryRow(located, key, summary, mapped_name=mapped_name))
    except DumpIncomplete as exc:
        return NotReady(path_text, key, _named(exc.message, readable, path), _placed(located), truncated=True)
    except (DumpCorrupt, GraphParseError, DumpError) as exc:
        return Failed(path_text, key, _named(describe(exc), readable, path), _placed(located))
    except FileNotFoundError:
        return Vanished(path_text)
    except PermissionError as exc:
        return Failed(path_text, key, f"cannot read: {exc.strerror or 'permission denied'}", _placed(located))
    except OSError as exc:
        return Failed(path_text, key, f"cannot read: {exc.strerror or exc}", _placed(located))
    except Exception as exc:  # a reader bug must cost one file, not the daemon
        return Failed(path_text, key, _named(f"unexpected {describe(exc)}", readable, path), _placed(located))
    after = FileKey.of(os.fstat(opened.fd))
    if after != key or not opened.name_still_leads_here():
        return NotReady(path_text, after, "changed while it was read", _placed(located), changed=True)
    return result


def _named(message: str, readable: Path, path: Path) -> str:
    """A reader's message names the file it read (/proc/self/fd/N): name it as the user knows it."""
    return message.replace(str(readable), str(path))


def _placed(located: object) -> Union[DumpFile, GraphFile, None]:
    return located if isinstance(located, (DumpFile, GraphFile)) else None


def examine_batch(paths: tuple[str, ...], roots: Optional[tuple[str, ...]] = None) -> tuple[WorkResult, ...]:
    """Several files per task (each of the watched root beside it in `roots`): one round trip to the worker for
    many small files."""
    return tuple(examine(path, roots[n] if roots is not None else None) for n, path in enumerate(paths))


WARM_UP_WAIT_S = 30.0
# Graph texts up to this size are parsed in the daemon's thread: at the graph reader's 8-30 MB/s (8 measured on a
# loaded machine; bench_graph.py's target 30) at most half a second, less than the graph process takes to start.
GRAPH_IN_PROCESS_BYTES = 4 << 20
_start_barrier = None  # in a worker: its pool's start-up barrier (see WorkerPool.warm_up)


def _warm_up() -> None:
    warm(ENGINE)
    if _start_barrier is not None:  # one warm-up per worker: each waits here until all of them have started
        _start_barrier.wait(WARM_UP_WAIT_S)


# ----------------------------------------------------------------------------------------------------------------
# The pool


_PR_SET_PDEATHSIG = 1


def _init_worker(daemon_pid: int, barrier) -> None:
    """Workers die with the daemon (even on kill -9) and leave Ctrl-C to it, so it can drain and commit.

    A Ctrl-C goes to the terminal's whole process group, workers included. They are born with SIGINT blocked (see
    `WorkerPool.warm_up`), so one that arrives while a worker still starts (imports, unpickling) waits; ignoring
    SIGINT here discards it, and only then is it unblocked."""
    global _start_barrier
    _start_barrier = barrier
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the daemon's stop path still shuts the pool down
        pass
    if os.getppid() != daemon_pid:  # the daemon died before prctl took effect (reparented to init or a reaper)
        os._exit(1)


class WorkerPool:
    """`workers` spawned processes for dump files, a thread of this process that examines files until they are up,
    and one process for big graph files (parsing a big graph text file takes minutes of pure Python and must not
    hold up dump files; a small one is parsed in the thread). `workers=0` runs everything in the thread
    (debugging, tests, small trees).

    A spawned worker takes seconds to start (an interpreter; numpy and the readers imported): the thread examines
    the files meanwhile, so a dump's first files never wait for it, and `start` may be left until a backlog
    calls for the workers (`tcmp watch --once` on a small tree is done before they would be up).

    Submit only from one thread (`claim_thread`), and start and shut the pool down from that thread too: the
    kernel ties a worker's parent-death signal to the thread that started it. Were that thread to end first, it
    would kill the idle workers — one of them blocked in the task queue's read, holding its lock, which a worker
    still starting (its parent-death signal not set yet, so it lives on) then waits for forever, and with it the
    pool's shutdown.
    """

    def __init__(self, workers: int) -> None:
        self.workers = workers
        one_blas_thread()  # per worker: the workers are the parallelism
        self._thread = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="tcmp-examine")
        # Made here, not in the thread that submits (no process starts before the first task): making it starts
        # multiprocessing's resource tracker, which unblocks SIGINT in the thread it was made in afterwards.
        self._files = self._new_executor(workers) if workers else None
        self._graphs: Optional[concurrent.futures.Executor] = None
        self._started = workers == 0
        self._up = threading.Event()  # the workers have started (or failed to): files go to them

    @property
    def started(self) -> bool:
        return self._started

    @property
    def up(self) -> bool:
        """Files submitted now go to the worker processes (else to the thread)."""
        return self._up.is_set()

    def _new_executor(self, size: int) -> concurrent.futures.Executor:
        context = multiprocessing.get_context("spawn")  # the daemon runs threads: never fork it
        barrier = context.Barrier(size)  # handed over as the workers are spawned (it cannot travel with a task)
        return concurrent.futures.ProcessPoolExecutor(
            max_workers=size, mp_context=context, initializer=_init_worker, initargs=(os.getpid(), barrier)
        )

    def claim_thread(self) -> None:
        """Make the calling thread the one that starts the workers and submits all work; call it first.

        It blocks SIGINT in this thread, and the signal mask is inherited through fork and exec, so every worker
        this thread spawns (at `start`, or after a crash) starts with SIGINT blocked until `_init_worker` ignores
        it. Python would otherwise die of a KeyboardInterrupt (or "Fatal Python error: init_import_site") in a
        worker that is still starting. The daemon's own SIGINT handler runs in the main thread, which this does
        not touch."""
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})

    def start(self) -> None:
        """Start every worker now, each running one warm-up (which waits for the others, so no worker runs two of
        them while another is still starting). Once they all have, files go to them and "workers ready" is
        logged. Does nothing with `workers=0` or when started already."""
        if self._started or self._files is None:
            return
        self._started = True
        started = time.monotonic()
        futures = [self._files.submit(_warm_up) for _ in range(self.workers)]

        def report() -> None:
            done, _ = concurrent.futures.wait(futures)
            if any(f.cancelled() for f in done):  # stopped before the workers were up: nothing to report
                return
            failed = [exc for exc in (f.exception() for f in done) if exc is not None]
            if failed:  # the first file sent to them will show the same problem, with its path
                log.warning("a worker failed to start: %s", failed[0])
            else:
                log.info("workers ready (%d) after %.1f s", len(futures), time.monotonic() - started)
            self._up.set()

        threading.Thread(target=report, name="tcmp-warm-up", daemon=True).start()

    def submit_files(self, paths: tuple[str, ...], roots: Optional[tuple[str, ...]] = None) -> Future:
        executor = self._files if self._files is not None and self.up else self._thread
        return executor.submit(examine_batch, paths, roots)

    def submit_graph(self, path: str, root: Optional[str] = None, size: int = 0) -> Future:
        roots = None if root is None else (root,)
        if self.workers == 0 or size <= GRAPH_IN_PROCESS_BYTES:
            return self._thread.submit(examine_batch, (path,), roots)
        if self._graphs is None:
            self._graphs = self._new_executor(1)
        return self._graphs.submit(examine_batch, (path,), roots)

    def restart(self) -> None:
        """Replace executors broken by a worker that died (killed, out of memory)."""
        if self._files is not None and getattr(self._files, "_broken", False):
            self._files.shutdown(wait=False, cancel_futures=True)
            self._files = self._new_executor(self.workers)  # its workers start as work comes
        if self._graphs is not None and getattr(self._graphs, "_broken", False):
            self._graphs.shutdown(wait=False, cancel_futures=True)
            self._graphs = None

    def shutdown(self) -> None:
        for executor in (self._thread, self._files, self._graphs):
            if executor is not None:
                executor.shutdown(wait=True, cancel_futures=True)
