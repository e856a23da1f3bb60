"""The daemon's threaded components share their life-cycle calls."""

from __future__ import annotations

import threading
from typing import Optional


class OwnThread:
    """A component that does its work on one thread of its own, `self._thread`, which the subclass creates."""

    _thread: threading.Thread

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: Optional[float] = None) -> None:
        self._thread.join(timeout)

    def is_alive(self) -> bool:
        return self._thread.is_alive()
