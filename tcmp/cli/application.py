"""The `tcmp` application: its options before any command (`-v`, `--version`), the `-v` every command takes after
its name too, and what several commands check of their options (a writable output directory, --jobs capped)."""

import logging
import sys
from pathlib import Path
from typing import Annotated

import typer

from tcmp import __version__
from tcmp.cli.errors import TcmpTyper, fail
from tcmp.cli.options import capped_jobs
from tcmp.cli.output import err, log_format, out
from tcmp.schemas.display import DataFormatter, escape, quoted
from tcmp.schemas.host import one_blas_thread, usable_cpus

one_blas_thread()  # before numpy loads


def _set_verbose(verbose: bool) -> bool:
    """Log details and show tracebacks: `tcmp -v CMD` and `tcmp CMD … -v` alike."""
    if verbose:
        logging.getLogger().setLevel(logging.DEBUG)
        app.pretty_exceptions_enable = True
    return verbose


# Every command takes it after its name too, where users type it (`tcmp compare … -v`).
_VERBOSE_HELP = "Log details and show tracebacks."
Verbose = Annotated[bool, typer.Option("--verbose", "-v", callback=_set_verbose, is_eager=True, help=_VERBOSE_HELP)]


app = TcmpTyper(
    name="tcmp",
    help="torchair accuracy compare: read GE/FX dumps without CANN, summarize them while they are written, "
    "and compare a GE graph-mode dump against its golden.",
    no_args_is_help=True,
    add_completion=False,
    # click's own help layout: rich's option table cuts long option names at 80 columns (`--target_path,--tar…`)
    rich_markup_mode=None,
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def check_writable(directory: Path, what: str) -> None:
    """Fail before any work when the output directory cannot be created or written (not after an hour)."""
    from tcmp.schemas import files

    try:
        files.check_writable(directory)
    except OSError as exc:
        raise fail(f"cannot write {what} {quoted(directory)}: {exc.strerror or exc}") from None


def _print_version(version: bool) -> None:
    if version:
        out.print(__version__)
        raise typer.Exit()


@app.callback()
def _main(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help=_VERBOSE_HELP)] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, stream=sys.stderr)
    log_format(DataFormatter("%(levelname)s %(name)s: %(message)s"))
    logging.getLogger().setLevel(logging.DEBUG if verbose else logging.WARNING)  # basicConfig only sets it once
    app.pretty_exceptions_enable = verbose


def capped(jobs: int, opt_out: str = "") -> int:
    """--jobs, capped at the CPUs this process may use (said on stderr)."""
    jobs, note = capped_jobs(jobs, usable_cpus())
    if note is not None:
        err.print(f"note: {escape(note + opt_out)}", highlight=False, soft_wrap=True)
    return jobs
