"""Where the command line writes: stdout (which a reader may close early), stderr, the progress display and the
log lines' form."""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING

from rich.console import Console

from tcmp.schemas.display import DataFormatter

if TYPE_CHECKING:
    from rich.progress import Progress


class Stdout(Console):
    """stdout, which a reader may close early (`tcmp compare … | head`): the rest of the output is dropped, and the
    command ends as it would have (its reports written, its exit code its own), where rich would exit 1 — the code
    that means "failures found"."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # what is still buffered, and the interpreter's last flush, go nowhere
        os.close(devnull)


err = Console(stderr=True)
out = Stdout(highlight=False, soft_wrap=True)


def progress_display(percent: bool = False) -> Progress:
    """A progress display on stderr: done/total (files), or with `percent` a percentage (a compare's units, which
    report the share of their pairs compared as they go)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn() if percent else MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,  # a log file gets no bar (and no blank line where it was)
    )


def timestamped_log() -> None:
    """A daemon's log lines say when (journald stamps the lines it receives itself: not twice there)."""
    stream = os.environ.get("JOURNAL_STREAM", "")
    try:
        st = os.fstat(sys.stderr.fileno())
        to_journal = stream == f"{st.st_dev}:{st.st_ino}"
    except (OSError, ValueError, AttributeError):  # no real stderr (tests capture it)
        to_journal = False
    if to_journal:
        return
    log_format(DataFormatter("%(asctime)s.%(msecs)03d %(levelname)s %(name)s: %(message)s", "%Y-%m-%d %H:%M:%S"))


def log_format(formatter: logging.Formatter) -> None:
    """Log lines on stderr in `formatter`'s form: names in them are data (a DataFormatter), never a forged line."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream in (sys.stderr, sys.__stderr__):
            handler.setFormatter(formatter)
