"""The `tcmp` command line: option parsing, progress and exit codes around one library call per command.

Exit codes: 0 done, 1 the command ran but found failures (files that did not parse, rows that FAIL with
`--fail-on-diff`), 2 usage error, 3 runtime error (one line, no traceback unless `--verbose`).
"""

from __future__ import annotations

import logging
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from tcmp import __version__

app = typer.Typer(
    name="tcmp",
    help="torchair accuracy compare: read GE/FX dumps without CANN, summarize them while they are written, "
    "and compare a GE graph-mode dump against its golden.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
err = Console(stderr=True)
out = Console(highlight=False, soft_wrap=True)

EXIT_FAILURES, EXIT_USAGE, EXIT_RUNTIME = 1, 2, 3


def _fail(message: str, code: int = EXIT_RUNTIME) -> typer.Exit:
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    return typer.Exit(code)


def _progress():
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
    )


@app.callback()
def _main(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log details and show tracebacks.")] = False,
) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    app.pretty_exceptions_enable = verbose


@app.command()
def version() -> None:
    """Print the version."""
    out.print(__version__)


@app.command()
def parse(
    paths: Annotated[list[Path], typer.Argument(help="GE dump files or directories holding them.", exists=True)],
    output_path: Annotated[
        Optional[Path],
        typer.Option("--output_path", "--output-path", "-o", help="Write each tensor as an ND .npy file here."),
    ] = None,
    info: Annotated[bool, typer.Option("--info", help="Print one JSON object per tensor; read no payloads.")] = False,
) -> None:
    """Read GE dump files without CANN: write their tensors as ND .npy files, or describe them (--info)."""
    from tcmp.schemas.parse import find_dump_files, parse_file

    if not info and output_path is None:
        raise _fail("give --output_path DIR to convert, or --info to describe", EXIT_USAGE)
    files = list(find_dump_files(paths))
    if not files:
        raise _fail("no GE dump files found under " + ", ".join(map(str, paths)), EXIT_FAILURES)
    target = None if info else output_path
    if target is not None:
        try:
            target.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=target, prefix=".tcmp-write-test"):
                pass
        except OSError as exc:
            raise _fail(f"cannot write to {target}: {exc.strerror or exc}") from None
    failed = 0
    with _progress() as progress:
        task = progress.add_task("parsing", total=len(files))
        for path in files:
            result = parse_file(path, target)
            progress.advance(task)
            if result.error:
                failed += 1
                err.print(f"[red]{path}[/]: {result.error}", highlight=False)
                continue
            for tensor in result.tensors:
                if info:
                    out.print(tensor.to_json())
    if target is not None:
        err.print(f"{len(files) - failed} of {len(files)} files converted into {target}", highlight=False)
    if failed:
        raise typer.Exit(EXIT_FAILURES)


@app.command()
def demo(
    directory: Annotated[
        Optional[Path], typer.Argument(help="Where to write the example (default: a temp dir).")
    ] = None,
) -> None:
    """Synthesize a small GE dump with its golden and read it back with `tcmp parse --info`."""
    from tcmp.schemas.parse import parse_dumps
    from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

    root = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="tcmp-demo-"))
    scenario = write_scenario(root, ScenarioConfig())
    err.print(f"synthetic dump written to {root}", highlight=False)
    results = list(parse_dumps([scenario.target]))
    tensors = sum(len(r.tensors) for r in results)
    for result in results[:3]:
        for tensor in result.tensors:
            out.print(tensor.to_json())
    out.print(f"parsed {len(results)} GE dump files, {tensors} tensors, {sum(bool(r.error) for r in results)} errors")


def main() -> None:
    app()
