"""Exit codes, and the one place errors become them (the README's table): 0 done, 1 the command ran but found
failures (dump files that could not be read, rows that FAIL with `--fail-on-diff`), 2 usage error (an option, or a
path that is not what it must be), 3 runtime error (one line, no traceback unless `--verbose`).

Every command of a `TcmpTyper` ends a `TcmpError` the library raises (usage or not) and an `OSError` that way
(`exit_codes`); a command's own check of its options ends with `fail(message, code)`; whatever no command foresaw
(a bug, an error a library raises) ends in one line and 3 too, in `main` (`internal_error`)."""

from __future__ import annotations

import functools
import logging
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Callable, TypeVar, cast

import typer

from tcmp.cli.options import NamedArguments
from tcmp.cli.output import err
from tcmp.schemas.display import escape, quoted
from tcmp.schemas.errors import TcmpError

EXIT_FAILURES, EXIT_USAGE, EXIT_RUNTIME = 1, 2, 3
EXIT_INTERRUPTED = 128 + 2  # SIGINT's, as a shell gives a command that Ctrl-C ended

F = TypeVar("F", bound=Callable[..., Any])


def verbose_given() -> bool:
    """`-v` given (before the command or after it): log details and show tracebacks."""
    return logging.getLogger().isEnabledFor(logging.DEBUG)


def fail(message: str, code: int = EXIT_RUNTIME) -> typer.Exit:
    """One line on stderr (after the traceback of the error being handled, with --verbose), and the exit."""
    if verbose_given() and sys.exc_info()[0] is not None:
        traceback.print_exc(file=sys.stderr)
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)  # one line, taken literally
    return typer.Exit(code)


@contextmanager
def interruption_said(what: str) -> Iterator[None]:
    """Ctrl-C inside: one line, `interrupted: ` and `what` (what became of the work), and exit code 130."""
    try:
        yield
    except KeyboardInterrupt:
        err.print(f"interrupted: {escape(what)}", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None


def os_error_line(exc: OSError) -> str:
    from tcmp.schemas.files import WriteError

    if isinstance(exc, WriteError):  # a report, page or cache file: named, with what became of the others
        return f"cannot write {quoted(exc.filename)}: {exc.strerror}"
    return f"{exc.strerror or exc}: {quoted(exc.filename) if exc.filename else ''}".strip(": ")


def error_exit(exc: Exception) -> tuple[str, int]:
    """The line and exit code of an error a command ends with: a TcmpError's own line, 2 for a usage error, else
    3; an OSError's strerror and file, 3."""
    if isinstance(exc, TcmpError):
        return exc.line(), EXIT_USAGE if exc.usage else EXIT_RUNTIME
    if isinstance(exc, OSError):
        return os_error_line(exc), EXIT_RUNTIME
    raise TypeError(f"not an error a command ends with: {type(exc).__name__}")


def exit_codes(command: F) -> F:
    """`command`, its TcmpError and OSError mapped to their line and exit code (`error_exit`)."""

    @functools.wraps(command)
    def mapped(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (TcmpError, OSError) as exc:
            message, code = error_exit(exc)
            raise fail(message, code) from None

    return cast(F, mapped)


class TcmpTyper(typer.Typer):
    """A typer app whose every command ends its errors as `exit_codes` says."""

    def command(self, *args: Any, **kwargs: Any) -> Callable[[F], F]:
        register = super().command(*args, **{"cls": NamedArguments, **kwargs})

        def registered(function: F) -> F:
            register(exit_codes(function))
            return function

        return registered


def internal_error(exc: Exception) -> None:
    """What no command foresaw: one line and exit code 3, not a traceback and exit code 1, which `--fail-on-diff`
    gives to FAILing rows; `--verbose` shows the traceback (the caller re-raises)."""
    fail(f"internal error ({type(exc).__name__}: {exc}); run with --verbose for the traceback")
    sys.exit(EXIT_RUNTIME)
