"""inotify through watchdog: which events mean "a file may be finished", and knowing when events were lost.

Subscribed events (watchdog's names): `closed` (IN_CLOSE_WRITE, the writer finished), `created` (files
written into a new directory before its watch existed reach us only as watchdog's simulated creates; a create
does not mean complete), `moved` (tmp + rename writers never close the final name) and `attrib` (IN_ATTRIB: copy
tools such as `cp -a`, `shutil.copytree` and `tar x` set the source's mtime after writing the content, so the
file changes once more after its close event). watchdog turns the filter into the kernel's inotify mask, so nothing
else is even queued; IN_ATTRIB is added to it by hand, because watchdog would only add it together with
IN_MODIFY, one event per write(2) of every dump file.

The kernel queue can overflow under a fast writer; events are then lost. watchdog 7.1 logs a warning and rebuilds
its watches but tells no handler, older versions drop the overflow event silently. Both are caught here — the
log record through a logging.Handler, the raw IN_Q_OVERFLOW event through a thin wrapper of watchdog's event
buffer parser — and turned into one callback, after which the daemon reconciles by listing the tree.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import warnings
from pathlib import Path
from typing import Callable

from watchdog import events as watchdog_events
from watchdog.events import (
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import ObservedWatch

log = logging.getLogger(__name__)

EventCallback = Callable[[str, str], None]  # (event kind: "closed" | "created" | "moved" | "attrib" | "dir", path)
# watchdog >= 7 reports IN_ATTRIB as its own event; older versions as a FileModifiedEvent (IN_MODIFY is not in the
# mask, so then every FileModifiedEvent is an attribute change)
ATTRIB_EVENT = getattr(watchdog_events, "FileAttribEvent", FileModifiedEvent)
EVENT_FILTER = [FileClosedEvent, FileCreatedEvent, FileMovedEvent, DirMovedEvent, ATTRIB_EVENT]


class _Handler(FileSystemEventHandler):
    """O(1) per event: hand the path over, nothing else (the observer thread must keep draining the queue)."""

    def __init__(self, on_event: EventCallback) -> None:
        self._on_event = on_event

    def dispatch(self, event: FileSystemEvent) -> None:
        kind = event.event_type
        if event.is_directory:
            if kind == "moved":  # a directory moved in: list it, its files announce nothing
                self._on_event("dir", os.fsdecode(event.dest_path))
            return
        if kind == "moved":
            self._on_event("moved", os.fsdecode(event.dest_path))
        elif kind in ("closed", "created"):
            self._on_event(kind, os.fsdecode(event.src_path))
        elif isinstance(event, ATTRIB_EVENT):
            self._on_event("attrib", os.fsdecode(event.src_path))


# ----------------------------------------------------------------------------------------------------------------
# Overflow detection (process-wide: watchdog's inotify layer is shared by all observers of the process)

_overflow_callbacks: list[Callable[[], None]] = []
_install_lock = threading.Lock()
_installed = False


def _notify_overflow() -> None:
    for callback in list(_overflow_callbacks):
        callback()


class _OverflowLogHook(logging.Handler):
    """watchdog 7.1: `WARNING ... Inotify queue overflowed; filesystem events were lost`."""

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING and "queue overflowed" in record.getMessage():
            _notify_overflow()


def _wrap_event_parser() -> bool:
    """Spot IN_Q_OVERFLOW (wd == -1) in the raw events; works across watchdog 4-7, whose parser is a static
    method of InotifyFD (7.x) or Inotify (older)."""
    try:
        from watchdog.observers import inotify_c
    except ImportError:  # not Linux
        return False
    owner = getattr(inotify_c, "InotifyFD", None) or getattr(inotify_c, "Inotify", None)
    original = owner.__dict__.get("_parse_event_buffer") if owner is not None else None
    if not isinstance(original, staticmethod):
        return False
    assert owner is not None  # original came from it
    parse = original.__func__
    overflow = int(inotify_c.InotifyConstants.IN_Q_OVERFLOW)

    def parse_and_spot_overflow(event_buffer):
        for wd, mask, cookie, name in parse(event_buffer):
            if wd == -1 and mask & overflow:
                _notify_overflow()
            yield wd, mask, cookie, name

    owner._parse_event_buffer = staticmethod(parse_and_spot_overflow)
    return True


def _patch_watch_repr() -> None:
    """watchdog 7.x formats a bound method's repr, which holds every watched path, into a warning on each
    `mkdir -p` (O(#watches) per warning, 52 ms at 50k directories). Cheap repr, warning muted."""
    try:
        from watchdog.observers import inotify_c
    except ImportError:
        return
    watch_class = getattr(inotify_c, "Watch", None)
    if watch_class is not None:
        watch_class.__repr__ = lambda self: f"<Watch wd={self.wd}>"
    warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"watchdog\.")


def _with_attrib_events(observer) -> bool:
    """Make the inotify observer's watches include IN_ATTRIB (but not IN_MODIFY): its emitters get a mask that is
    watchdog's own for the filter (less FileModifiedEvent, which would bring IN_MODIFY) plus IN_ATTRIB."""
    try:
        from watchdog.observers import inotify_c
        from watchdog.observers.inotify import InotifyEmitter
    except ImportError:  # not Linux
        return False
    base = getattr(observer, "_emitter_class", None)
    if not (isinstance(base, type) and issubclass(base, InotifyEmitter)):
        return False
    if not hasattr(base, "get_event_mask_from_filter"):
        return False
    attrib = int(inotify_c.InotifyConstants.IN_ATTRIB)

    def get_event_mask_from_filter(self):  # runs on the emitter's own thread, before it reads any event
        kept = self._event_filter
        if kept is not None:
            self._event_filter = frozenset(c for c in kept if c is not FileModifiedEvent)
        try:
            return base.get_event_mask_from_filter(self) | attrib
        finally:
            self._event_filter = kept

    observer._emitter_class = type(
        "AttribInotifyEmitter", (base,), {"get_event_mask_from_filter": get_event_mask_from_filter}
    )
    return True


class _StopRaceFilter(logging.Filter):
    """watchdog 7.1 logs an ERROR ("InotifyEmitter.queue_events() called when the thread is inactive") when a watch
    is stopped while its emitter thread is reading an event, as on every stop of a busy daemon. The event is dropped,
    as it should be once stopped: nothing is wrong, nothing to tell."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "called when the thread is inactive" not in record.getMessage()


def _install_process_hooks() -> None:
    global _installed
    with _install_lock:
        if _installed:
            return
        _patch_watch_repr()
        if not _wrap_event_parser():
            log.debug("watchdog's inotify event parser not found; overflow seen only through its log")
        observers_log = logging.getLogger("watchdog.observers")
        observers_log.addHandler(_OverflowLogHook())
        logging.getLogger("watchdog.observers.inotify").addFilter(_StopRaceFilter())
        # warnings must reach the hook; watchdog's per-event debug lines would flood a verbose log
        observers_log.setLevel(logging.WARNING if observers_log.getEffectiveLevel() > logging.WARNING else logging.INFO)
        _installed = True


class Watcher:
    """A watchdog observer over the watched roots, feeding `on_event`; `on_overflow` when events were lost."""

    def __init__(self, on_event: EventCallback, on_overflow: Callable[[], None]) -> None:
        _install_process_hooks()
        self._on_overflow = on_overflow
        _overflow_callbacks.append(on_overflow)
        self._handler = _Handler(on_event)
        self._observer = Observer()
        self._observer.daemon = True
        if not _with_attrib_events(self._observer):
            log.debug("no attribute-change events from this watchdog; such changes are found by the reconcile scans")
        self._watches: dict[str, ObservedWatch] = {}

    def start(self) -> None:
        self._observer.start()

    def watch(self, root: Path) -> bool:
        """Start watching `root` recursively; False (logged) if inotify refuses, e.g. the watch limit."""
        key = str(root)
        if key in self._watches:
            return True
        try:
            self._watches[key] = self._observer.schedule(
                self._handler, key, recursive=True, event_filter=list(EVENT_FILTER)
            )
        except OSError as exc:
            log.error(
                "cannot watch %s: %s (raise fs.inotify.max_user_watches, see systemd/90-tcmp-inotify.conf); "
                "its files are still found by the reconcile scans",
                root,
                exc.strerror or exc,
            )
            return False
        return True

    def unwatch(self, root: Path) -> None:
        watch = self._watches.pop(str(root), None)
        if watch is not None:
            with contextlib.suppress(KeyError, OSError):  # its emitter stopped already (directory deleted)
                self._observer.unschedule(watch)

    def is_alive(self) -> bool:
        return self._observer.is_alive()

    def stop(self) -> None:
        if self._on_overflow in _overflow_callbacks:
            _overflow_callbacks.remove(self._on_overflow)
        self._observer.stop()
        if self._observer.is_alive():
            self._observer.join(timeout=10)
