"""`tcmp parse`: GE dump files (and aclgraph .pt files) read without CANN, written as .npy files or described."""

from pathlib import Path
from typing import Annotated, Optional

import typer

from tcmp.cli.application import Verbose, check_writable
from tcmp.cli.errors import EXIT_FAILURES, EXIT_USAGE, fail
from tcmp.cli.output import err, out, progress_display
from tcmp.schemas.display import escape, quoted


def parse(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="GE dump files, aclgraph .pt files, or directories holding them.", metavar="PATH", exists=True
        ),
    ],
    output_path: Annotated[
        Optional[Path],
        typer.Option(
            "--output_path", "--output-path", "-o", metavar="DIR", help="Write each tensor as an ND .npy file here."
        ),
    ] = None,
    info: Annotated[
        bool, typer.Option("--info", help="Print one JSON object per tensor (without -o: read no payloads).")
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace .npy files that exist in the -o directory.")] = False,
    verbose: Verbose = False,
) -> None:
    """Read GE dump files without CANN (and aclgraph .pt files without torch): write their tensors as ND .npy files
    (-o), describe them (--info), or both."""
    from tcmp.schemas.files import Directory, OutputExistsError
    from tcmp.schemas.parse import find_dump_files, parse_file

    if not info and output_path is None:
        raise fail("give --output_path DIR to convert, or --info to describe", EXIT_USAGE)
    files = list(find_dump_files(paths))
    if not files:  # a path without a dump: the same mistake, and code, as in compare
        raise fail("no GE dump files under " + ", ".join(map(str, paths)), EXIT_USAGE)
    target = output_path
    output = None
    if target is not None:
        check_writable(target, "to")
        try:
            output = Directory(target)
        except OSError as exc:
            raise fail(f"cannot write to {quoted(target)}: {exc.strerror or exc}") from None
    failed = 0
    with progress_display() as progress:
        task = progress.add_task("parsing", total=len(files))
        for path in files:
            try:
                result = parse_file(path, output, force=force)
            except OutputExistsError as exc:
                raise fail(f"{exc.path} exists: not replaced (give --force to replace it)", EXIT_USAGE) from None
            progress.advance(task)
            if result.error:
                failed += 1
                err.print(f"[red]{escape(quoted(path))}[/]: {escape(result.error)}", highlight=False, soft_wrap=True)
                continue
            for tensor in result.tensors:
                if info:
                    out.print(tensor.to_json(), markup=False, emoji=False)  # JSON verbatim: names may hold [..] or :x:
            for tensor in result.not_dumped if target is not None else ():  # every other tensor was written
                why = f"{tensor.io} {tensor.index} {tensor.notes[0]}, no .npy written"
                err.print(f"{escape(quoted(path))}: {why}", highlight=False, soft_wrap=True)
    if target is not None:
        converted = f"{len(files) - failed} of {len(files)} files converted into {escape(quoted(target))}"
        err.print(converted, highlight=False, soft_wrap=True)  # whole, to be pasted
    if failed:
        raise typer.Exit(EXIT_FAILURES)
