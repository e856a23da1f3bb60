"""What the dispatcher thread is told, by the other threads, through its inbox."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from tcmp.daemon.work import BatchDone


@dataclass(frozen=True)
class FsEvent:
    kind: str  # watch.py's event kinds
    path: str


@dataclass(frozen=True)
class Reconcile:
    full: bool
    root: Optional[str] = None


@dataclass(frozen=True)
class IndexState:
    index: Path
    up: bool


@dataclass(frozen=True)
class RootPresence:
    root: str
    present: bool


@dataclass(frozen=True)
class Committed:
    paths: tuple[str, ...]


@dataclass(frozen=True)
class StopDispatch:
    pass


Message = Union[FsEvent, Reconcile, IndexState, RootPresence, BatchDone, Committed, StopDispatch]
