"""`tcmp watch` (the daemon that summarizes dump files into the index as they are written), `tcmp status` (what
it has done), and `tcmp demo` (both, and a compare from the index, on a built-in example)."""

import logging
import tempfile
from pathlib import Path
from typing import Annotated, Optional

import typer

from tcmp.cli.application import Verbose, capped
from tcmp.cli.errors import EXIT_USAGE, fail
from tcmp.cli.options import cluster_option
from tcmp.cli.output import err, out, timestamped_log
from tcmp.schemas.display import escape, quoted
from tcmp.schemas.host import default_compare_jobs, default_watch_workers


def watch(
    directories: Annotated[
        list[Path],
        typer.Argument(help="Dump roots to watch.", metavar="DIR", exists=True, file_okay=False, resolve_path=True),
    ],
    db: Annotated[
        Optional[Path],
        typer.Option("--db", metavar="FILE", help="One index for all roots (default: DIR/.tcmp/index.sqlite each)."),
    ] = None,
    drop_raw: Annotated[
        bool, typer.Option("--drop-raw", help="Delete raw dump files once their summary is committed.")
    ] = False,
    raw_budget: Annotated[
        Optional[str],
        typer.Option(
            "--raw-budget",
            metavar="SIZE",
            help="With --drop-raw: keep raw files up to SIZE per root: bytes, or a number with a unit K, M, G, T, "
            "binary (50G, 50GB and 50GiB are all 50 x 2^30 bytes).",
        ),
    ] = None,
    keep_raw_ops: Annotated[
        Optional[list[str]],
        typer.Option(
            "--keep-raw-ops",
            metavar="GLOB",
            help="With --drop-raw: never delete raw files of ops matching this glob (name or type; repeatable).",
        ),
    ] = None,
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            min=0,
            metavar="N",
            help="Summarizing processes (default: the usable CPUs, at most 4); 0: none, the daemon's own process "
            "summarizes every file (the fastest on small trees, which are done before a worker is up).",
        ),
    ] = default_watch_workers(),
    once: Annotated[bool, typer.Option("--once", help="Scan, summarize what is complete, exit.")] = False,
    incomplete_timeout: Annotated[
        float,
        typer.Option(
            "--incomplete-timeout",
            metavar="SECONDS",
            min=0.0,
            help="Seconds an unchanged incomplete file is waited for.",
        ),
    ] = 300.0,
    reconcile_interval: Annotated[
        float, typer.Option("--reconcile-interval", metavar="SECONDS", min=0.1, help="Seconds between reconcile scans.")
    ] = 60.0,
    stall_limit: Annotated[float, typer.Option("--stall-limit", min=0.1, hidden=True)] = 300.0,
    verbose: Verbose = False,
) -> None:
    """Summarize every finished dump file into the index as it appears (a daemon; `--once` for one pass)."""
    from tcmp.daemon.retention import RetentionPolicy, parse_size
    from tcmp.daemon.service import WatchConfig, run_watch

    if (raw_budget is not None or keep_raw_ops) and not drop_raw:
        raise fail("--raw-budget and --keep-raw-ops refine --drop-raw; give --drop-raw too", EXIT_USAGE)
    try:
        budget = parse_size(raw_budget) if raw_budget is not None else 0
    except ValueError as exc:
        raise fail(str(exc), EXIT_USAGE) from None
    if db is not None and not db.resolve().parent.is_dir():
        raise fail(f"--db {db}: directory {db.resolve().parent} does not exist", EXIT_USAGE)
    verbose = logging.getLogger().getEffectiveLevel() <= logging.DEBUG
    logging.getLogger("tcmp.daemon").setLevel(logging.DEBUG if verbose else logging.INFO)
    timestamped_log()
    policy = RetentionPolicy(drop_raw, budget, tuple(keep_raw_ops or ()))
    config = WatchConfig(
        roots=tuple(directories),
        db=db,
        retention=policy,
        workers=workers,
        once=once,
        incomplete_timeout=incomplete_timeout,
        reconcile_interval=reconcile_interval,
        stall_limit=stall_limit,
    )
    report = run_watch(config)
    if once:
        err.print(escape(report.summary()), highlight=False)
        if report.failure is not None:
            raise fail(report.failure)
        raise typer.Exit(report.exit_code)
    if report.error is not None:
        raise fail(report.error)


def status(
    directory: Annotated[
        Optional[Path],
        typer.Argument(help="A watched root (or a directory inside one); default: the cwd.", metavar="DIR"),
    ] = None,
    db: Annotated[Optional[Path], typer.Option("--db", metavar="FILE", help="The index file to report on.")] = None,
    cluster: Annotated[Optional[str], cluster_option("every node's state, as one table")] = None,
    verbose: Verbose = False,
) -> None:
    """Files indexed, pending and failed, bytes read and freed, rate, and whether the daemon runs."""
    from tcmp.daemon.status import locate_index, status_lines, watch_status

    if cluster:
        from tcmp.daemon.cluster_status import cluster_status, table

        rows = cluster_status(cluster, directory, db)
        for text in table(rows):
            out.print(escape(text), highlight=False)
        return

    lines = status_lines(watch_status(locate_index(directory, db)))
    width = max(len(line.label) for line in lines)
    for line in lines:
        out.print(f"{line.label:<{width}}  {escape(str(line.value))}", highlight=False)


def demo(
    directory: Annotated[
        Optional[Path],
        typer.Argument(help="An empty directory for the example (default: a new temp dir).", metavar="DIR"),
    ] = None,
    jobs: Annotated[
        int, typer.Option("--jobs", "-j", metavar="N", min=1, help="Processes (at most the CPUs this process may use).")
    ] = default_compare_jobs(),
    verbose: Verbose = False,
) -> None:
    """The main job on a built-in example: a simulated inference writes a synthetic GE dump (with injected faults)
    and its golden FX dump while `tcmp watch --drop-raw` condenses them; then the compare runs from the index."""
    from tcmp.compare.report.console import print_outcome
    from tcmp.daemon.demo import INCOMPLETE_TIMEOUT_S, run_demo
    from tcmp.daemon.retention import format_size

    root = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="tcmp-demo-"))
    demo_result = run_demo(
        root, jobs=capped(jobs), progress=lambda message: err.print(escape(message), highlight=False, soft_wrap=True)
    )
    replay, index = demo_result.replay, demo_result.index
    out.print(
        f"simulated inference wrote {replay.files} files ({format_size(replay.bytes)}, {replay.chunks} writes) "
        f"in {replay.seconds:.1f} s; the index held every file {demo_result.indexed_after_s:.1f} s after the last "
        f"write (a file cut short is waited for {INCOMPLETE_TIMEOUT_S:.0f} s)"
    )
    out.print(
        f"index {escape(quoted(index.path))}: {index.summarized} dump files and {index.graphs} graphs summarized, "
        f"{format_size(index.bytes_freed)} of raw files deleted, {index.failed} recorded as failed"
    )
    for problem in index.recent_errors:
        assert problem.error is not None  # an error row is written with its reason (ProblemRow.error is a str)
        out.print(f"  kept raw: {escape(quoted(problem.path))}: {escape(problem.error)}")
    out.print(f"injected faults: {', '.join(demo_result.faults)}")
    print_outcome(out, demo_result.result)
