"""The daemon's life cycle: start the threads and processes, speak sd_notify, watch the roots come and go, keep
the pipeline healthy, and stop cleanly on SIGTERM/SIGINT.

Threads: the main loop (this module), watchdog's observer, the dispatcher, the index writer and the deleter;
processes: `workers` examiners plus one parser of big graph files (see examine.WorkerPool). Until the examiners are
up (with `--once`, unless the files found call for them) a thread of this process examines the files.

sd_notify is written by hand (a datagram to $NOTIFY_SOCKET): READY=1 once the roots are watched (the start-up
scan then runs in the background and STATUS= reports progress), WATCHDOG=1 every WatchdogSec/2 but only while
the pipeline is healthy (a stuck writer or worker gets the service restarted instead of pinged forever),
STATUS= with counts, STOPPING=1 on the way out. SIGTERM/SIGINT: stop watching, let the examinations under way
finish, commit everything, exit 0. Files that were only queued are found again by the next start-up scan. The
worker processes never act on SIGINT (a Ctrl-C reaches the terminal's whole process group): the daemon drains
them. Before anything starts, the daemon takes its indexes' locks (lock.py): a second daemon on an index refuses.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from tcmp.daemon.dispatch import Dispatcher, DispatchSettings
from tcmp.daemon.examine import WorkerPool
from tcmp.daemon.index_slots import IndexProblem, RootIndex
from tcmp.daemon.index_trust import WatchRefused
from tcmp.daemon.inotify import Watcher
from tcmp.daemon.retention import Deleter, RetentionPolicy, format_size
from tcmp.daemon.trees import TreeClaim, claim_trees
from tcmp.daemon.wording import counted
from tcmp.daemon.writer_thread import IndexWriterThread
from tcmp.schemas.host import default_watch_workers
from tcmp.schemas.index import daemon_state_now, default_index_path

log = logging.getLogger(__name__)

TICK_S = 0.5
STATUS_EVERY_S = 5.0
HEARTBEAT_EVERY_S = 15.0
ROOT_CHECK_EVERY_S = 2.0
OVERFLOW_LOG_EVERY_S = 10.0
STALL_LIMIT_S = 300.0  # records waiting this long for a commit, or a worker batch this old: unhealthy


@dataclass(frozen=True)
class WatchConfig:
    roots: tuple[Path, ...]
    db: Optional[Path] = None  # one index for every root; default: <root>/.tcmp/index.sqlite each
    retention: RetentionPolicy = field(default_factory=RetentionPolicy)
    workers: int = field(default_factory=default_watch_workers)
    once: bool = False
    incomplete_timeout: float = 300.0
    reconcile_interval: float = 60.0
    settle: float = 2.0
    stall_limit: float = STALL_LIMIT_S

    def root_indexes(self) -> tuple[RootIndex, ...]:
        resolved = [Path(os.path.realpath(r)) for r in self.roots]
        db = Path(os.path.abspath(self.db)) if self.db is not None else None
        return tuple(RootIndex(str(r), db if db is not None else default_index_path(r)) for r in resolved)


@dataclass(frozen=True)
class RunReport:
    summarized: int
    failed: int
    incomplete: int  # files left incomplete (still waited for when the daemon stopped; with `once`, not waited for)
    given_up: int
    deleted_files: int
    deleted_bytes: int
    committed_bytes: int
    uncommitted: int
    error: Optional[str] = None  # why the daemon stopped on its own (a thread died)
    unwritable: tuple[IndexProblem, ...] = ()  # indexes that could not be opened for writing

    @property
    def exit_code(self) -> int:
        """3: the run could not do its job (the daemon broke down, an index could not be written, summaries were
        not committed); 1: files failed; 0: done."""
        if self.failure is not None:
            return 3
        return 1 if self.failed or self.given_up else 0

    @property
    def failure(self) -> Optional[str]:
        """Why the run failed as a whole, in one line (None: it did its job)."""
        if self.error is not None:
            return self.error
        if self.unwritable:
            return "; ".join(
                f"cannot write the index {p.index}: {p.reason}; nothing under {', '.join(p.roots)} was summarized"
                for p in self.unwritable
            )
        if self.uncommitted:
            return f"{counted(self.uncommitted, 'record')} could not be committed to the index"
        return None

    def summary(self) -> str:
        return (
            f"{counted(self.summarized, 'file')} summarized, {self.failed + self.given_up} failed, "
            f"{self.incomplete} incomplete, {counted(self.deleted_files, 'raw file')} deleted "
            f"({format_size(self.deleted_bytes)})"
        )


# ----------------------------------------------------------------------------------------------------------------
# sd_notify


class Notifier:
    """The sd_notify protocol: one datagram per message to $NOTIFY_SOCKET (nothing when not run by systemd)."""

    def __init__(self, address: Optional[str], watchdog_usec: Optional[int]) -> None:
        self.address = address
        self.watchdog_interval = watchdog_usec / 2e6 if watchdog_usec else None

    @classmethod
    def from_environment(cls) -> Notifier:
        address = os.environ.get("NOTIFY_SOCKET") or None
        usec, pid = os.environ.get("WATCHDOG_USEC"), os.environ.get("WATCHDOG_PID")
        watchdog = int(usec) if usec and usec.isdigit() and (not pid or pid == str(os.getpid())) else None
        return cls(address, watchdog)

    def notify(self, *states: str) -> bool:
        if not self.address:
            return False
        address = "\0" + self.address[1:] if self.address.startswith("@") else self.address
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.sendto("\n".join(states).encode(), address)
        except OSError as exc:
            log.debug("sd_notify to %s failed: %s", self.address, exc)
            return False
        return True


# ----------------------------------------------------------------------------------------------------------------
# The daemon


class Daemon:
    """One run of `tcmp watch`. `run()` returns when stopped (signal, `request_stop`) or, with `once`, done."""

    def __init__(self, config: WatchConfig) -> None:
        self.config = config
        self.roots = config.root_indexes()
        self.stop_requested = threading.Event()
        self._stop_signal: Optional[str] = None
        self.notifier = Notifier.from_environment()
        self.started_ns = time.time_ns()
        self.deleter = Deleter(on_failed=lambda failure: self.writer.deletion_failed(failure))
        self.writer = IndexWriterThread(
            self.roots,
            config.retention,
            self.deleter,
            on_index=lambda index, up: self.dispatcher.on_index(index, up),
            on_committed=lambda paths: self.dispatcher.on_committed(paths),
            once=config.once,
            read_only_limit_s=config.stall_limit,  # as long as records may wait before the daemon is unhealthy
        )
        self.pool = WorkerPool(config.workers)
        settings = DispatchSettings(config.incomplete_timeout, config.settle, config.once)
        self.dispatcher = Dispatcher(self.roots, self.pool, self.writer, self.deleter, config.retention, settings)
        self.watcher: Optional[Watcher] = None
        self._present = {r.root: os.path.isdir(r.root) for r in self.roots}
        self._last_overflow_log = -OVERFLOW_LOG_EVERY_S
        self._error: Optional[str] = None
        self._claim: Optional[TreeClaim] = None

    def request_stop(self) -> None:
        self.stop_requested.set()

    def run(self) -> RunReport:
        """Raises WatchRefused, with nothing started, when another daemon writes one of the indexes or watches a
        tree inside or around one of the roots, or when an index's directory or files are not ours."""
        try:
            self._claim = claim_trees(tuple((r.root, str(r.index)) for r in self.roots))
            self.writer.take_locks()
        except WatchRefused:
            if self._claim is not None:
                self._claim.release()
            self.pool.shutdown()
            raise
        previous = self._install_signal_handlers()
        try:
            self._start()
            self._loop()
        finally:
            self._shutdown()
            self._restore_signal_handlers(previous)
            if self._claim is not None:
                self._claim.release()
        return self.report()

    # -- start and stop

    def _start(self) -> None:
        self.dispatcher.start()
        self.deleter.start()
        if not self.config.once:
            self.watcher = Watcher(self.dispatcher.on_fs_event, self._overflowed)
            self.watcher.start()
            for root in self.roots:  # watch first, scan second: nothing falls between the two
                if self._present[root.root]:
                    self.watcher.watch(Path(root.root))
                else:
                    log.error("watched directory %s does not exist; waiting for it to appear", root.root)
        self.writer.start()  # opening an index triggers its root's full scan
        log.info(
            "watching %s with %d worker(s)%s",
            ", ".join(r.root for r in self.roots),
            self.config.workers,
            self._retention_text(),
        )
        self.notifier.notify("READY=1", f"STATUS={self._status_line()}")

    def _retention_text(self) -> str:
        policy = self.config.retention
        if not policy.drop_raw:
            return "; raw files are kept"
        text = "; raw dump files are deleted once their summary is committed"
        if policy.raw_budget:
            text += f" (the first {format_size(policy.raw_budget)} per root are kept)"
        if policy.keep_raw_ops:
            text += f", except ops matching {', '.join(policy.keep_raw_ops)}"
        return text

    def _overflowed(self) -> None:
        """Called from watchdog's thread, possibly several times for one overflow (its log and the raw event)."""
        now = time.monotonic()
        if now - self._last_overflow_log >= OVERFLOW_LOG_EVERY_S:
            self._last_overflow_log = now
            log.warning("inotify queue overflowed: events were lost; reconciling by listing the watched trees")
        self.dispatcher.request_reconcile(full=False)

    def _shutdown(self) -> None:
        self.notifier.notify("STOPPING=1", "STATUS=finishing the files under way and committing")
        if self.stop_requested.is_set():
            under_way = self.dispatcher.in_flight
            log.info(
                "stopping%s: finishing the %s under way, committing",
                f" on {self._stop_signal}" if self._stop_signal else "",
                counted(under_way, "file"),
            )
        if self.watcher is not None:
            self.watcher.stop()
        self.dispatcher.stop()
        self.dispatcher.join(timeout=120)
        self.pool.shutdown()
        self.writer.heartbeat(self._daemon_state(stopped=True))
        self.writer.stop()
        self.writer.join(timeout=60)
        self.deleter.stop()
        self.deleter.join(timeout=60)
        if not self.config.once:  # a one-pass run's summary is its caller's to print (the CLI does)
            log.info("stopped: %s", self.report().summary())

    def _install_signal_handlers(self) -> list:
        if threading.current_thread() is not threading.main_thread():
            return []
        previous = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous.append((sig, signal.signal(sig, self._on_signal)))
        return previous

    def _on_signal(self, signum: int, _frame: object) -> None:
        """Only a flag: logging here could deadlock on a lock the interrupted code holds. A second signal while
        stopping changes nothing (the files under way are still finished and committed)."""
        if self._stop_signal is None:
            self._stop_signal = signal.Signals(signum).name
        self.stop_requested.set()

    @staticmethod
    def _restore_signal_handlers(previous: list) -> None:
        for sig, handler in previous:
            signal.signal(sig, handler)

    # -- the main loop

    def _loop(self) -> None:
        now = time.monotonic()
        next_reconcile = now + self.config.reconcile_interval
        next_status = next_heartbeat = next_root_check = now
        next_ping = now
        while not self.stop_requested.wait(TICK_S):
            now = time.monotonic()
            if self.config.once and self.dispatcher.finished.is_set():
                return
            broken = self._broken_thread()
            if broken is not None:
                self._error = f"the {broken} thread ended unexpectedly"
                log.error("%s; stopping", self._error)
                return
            gave_up = self.writer.gave_up()
            if gave_up is not None:  # the one line: `tcmp watch` prints it as its error
                self._error = gave_up
                log.debug("stopping: %s", gave_up)
                return
            if now >= next_root_check:
                next_root_check = now + ROOT_CHECK_EVERY_S
                self._check_roots()
            if not self.config.once and now >= next_reconcile:
                next_reconcile = now + self.config.reconcile_interval
                self.dispatcher.request_reconcile(full=False)
            if now >= next_heartbeat:
                next_heartbeat = now + HEARTBEAT_EVERY_S
                self.writer.heartbeat(self._daemon_state())
            if now >= next_status:
                next_status = now + STATUS_EVERY_S
                self.notifier.notify(f"STATUS={self._status_line()}")
            interval = self.notifier.watchdog_interval
            if interval is not None and now >= next_ping:
                next_ping = now + interval
                problem = self.health_problem()
                if problem is None:
                    self.notifier.notify("WATCHDOG=1")
                else:
                    log.error("unhealthy, not pinging the systemd watchdog: %s", problem)

    def _check_roots(self) -> None:
        """A deleted watched directory is logged and skipped; it is picked up again if it comes back."""
        for root in self.roots:
            present = os.path.isdir(root.root)
            if present == self._present[root.root]:
                continue
            self._present[root.root] = present
            if present:
                log.warning("watched directory %s is back; watching and scanning it again", root.root)
                if self.watcher is not None:
                    self.watcher.unwatch(Path(root.root))
                    self.watcher.watch(Path(root.root))
            else:
                log.error(
                    "watched directory %s was deleted; its files are no longer watched (the other roots are); "
                    "it is picked up again if it reappears",
                    root.root,
                )
                if self.watcher is not None:
                    self.watcher.unwatch(Path(root.root))
                self.writer.root_gone(root.root)
            self.dispatcher.root_presence(root.root, present)

    def _broken_thread(self) -> Optional[str]:
        for name, thread in (("dispatcher", self.dispatcher), ("writer", self.writer), ("deleter", self.deleter)):
            if not thread.is_alive():
                return name
        return None

    def health_problem(self) -> Optional[str]:
        """Why the daemon should not tell systemd it is fine (None: healthy)."""
        broken = self._broken_thread()
        if broken is not None:
            return f"the {broken} thread ended"
        if self.watcher is not None and not self.watcher.is_alive():
            return "the inotify observer ended"
        limit = self.config.stall_limit
        waited = self.writer.oldest_wait_s()
        if waited > limit:
            return f"records have waited {waited:.0f} s for a commit"
        oldest = self.dispatcher.oldest_batch_s()
        if oldest > limit:
            return f"a worker batch has been running for {oldest:.0f} s"
        return None

    # -- reporting

    def _daemon_state(self, stopped: bool = False):
        return daemon_state_now(
            [Path(r.root) for r in self.roots],
            self.started_ns,
            queued=self.dispatcher.queued,
            in_flight=self.dispatcher.in_flight,
            pending=self.dispatcher.pending,
            stopped=stopped,
        )

    def _status_line(self) -> str:
        counters = self.dispatcher.counters
        committed = format_size(self.writer.committed_bytes)
        return (
            f"{counted(counters.summarized, 'file')} summarized ({committed} committed), "
            f"{self.dispatcher.pending} pending, {self.dispatcher.queued + self.dispatcher.in_flight} queued, "
            f"{counters.failed + counters.given_up} failed, {format_size(self.deleter.deleted_bytes)} freed"
        )

    def report(self) -> RunReport:
        counters = self.dispatcher.counters
        return RunReport(
            summarized=counters.summarized,
            failed=counters.failed,
            incomplete=self.dispatcher.incomplete,
            given_up=counters.given_up,
            deleted_files=self.deleter.deleted_files,
            deleted_bytes=self.deleter.deleted_bytes,
            committed_bytes=self.writer.committed_bytes,
            uncommitted=self.writer.waiting(),
            error=self._error if self._error is not None else self.writer.gave_up(),
            unwritable=self.writer.open_errors() if self.config.once else (),
        )


def run_watch(config: WatchConfig) -> RunReport:
    """`tcmp watch`: run the daemon until SIGTERM/SIGINT (or, with `once`, until everything found is done).
    Raises WatchRefused (IndexBusy among them) when it will not start (see Daemon.run)."""
    return Daemon(config).run()
