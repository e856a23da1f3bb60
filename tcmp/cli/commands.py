"""The `tcmp` commands: each a thin wrapper over one library call, its options parsed, its progress shown; their
errors end in exit codes in errors.py, their output goes through output.py. A reader that closes stdout early
(`| head`) changes nothing but what is printed.
"""

import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from tcmp import __version__
from tcmp.cli.errors import EXIT_FAILURES, EXIT_USAGE, TcmpTyper, fail, internal_error, verbose_given
from tcmp.cli.options import CompareMode, capped_jobs, cluster_option, positive, with_cluster_address
from tcmp.cli.output import err, log_format, out, progress_display, timestamped_log
from tcmp.schemas.display import DataFormatter, escape
from tcmp.schemas.host import default_compare_jobs, default_watch_workers, one_blas_thread, usable_cpus

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


def _check_writable(directory: Path, what: str) -> None:
    """Fail before any work when the output directory cannot be created or written (not after an hour)."""
    from tcmp.schemas.files import check_writable

    try:
        check_writable(directory)
    except OSError as exc:
        raise fail(f"cannot write {what} {directory}: {exc.strerror or exc}") from None


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


@app.command()
def version(verbose: Verbose = False) -> None:
    """Print the version."""
    out.print(__version__)


@app.command()
def parse(
    paths: Annotated[
        list[Path], typer.Argument(help="GE dump files, aclgraph .pt files, or directories holding them.", exists=True)
    ],
    output_path: Annotated[
        Optional[Path],
        typer.Option("--output_path", "--output-path", "-o", help="Write each tensor as an ND .npy file here."),
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
        _check_writable(target, "to")
        try:
            output = Directory(target)
        except OSError as exc:
            raise fail(f"cannot write to {target}: {exc.strerror or exc}") from None
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
                err.print(f"[red]{escape(str(path))}[/]: {escape(result.error)}", highlight=False, soft_wrap=True)
                continue
            for tensor in result.tensors:
                if info:
                    out.print(tensor.to_json(), markup=False, emoji=False)  # JSON verbatim: names may hold [..] or :x:
            for tensor in result.not_dumped if target is not None else ():  # every other tensor was written
                why = f"{tensor.io} {tensor.index} {tensor.notes[0]}, no .npy written"
                err.print(f"{escape(str(path))}: {why}", highlight=False, soft_wrap=True)
    if target is not None:
        err.print(f"{len(files) - failed} of {len(files)} files converted into {target}", highlight=False)
    if failed:
        raise typer.Exit(EXIT_FAILURES)


@app.command()
def compare(
    target_path: Annotated[
        Path, typer.Option("--target_path", "--target-path", "-tp", help="The GE graph-mode dump (fusion on).")
    ],
    golden_path: Annotated[
        Path,
        typer.Option("--golden_path", "--golden-path", "-gp", help="The golden: an FX dump or a fusion-off GE dump."),
    ],
    mode: Annotated[
        CompareMode, typer.Option("--mode", "-m", case_sensitive=False, help="Compare mode.")
    ] = CompareMode.torchair,
    output_path: Annotated[
        Path, typer.Option("--output_path", "--output-path", "-o", help="Directory for the reports.")
    ] = Path("."),
    rank: Annotated[Optional[int], typer.Option("--rank", min=0, help="Compare this rank only.")] = None,
    data_mode: Annotated[
        str, typer.Option("--data-mode", "--data_mode", help="auto | tensor | statistics | md5.")
    ] = "auto",
    highlight: Annotated[
        bool, typer.Option("--highlight", "-hl", help="Also write an .xlsx with red/yellow/green rows.")
    ] = False,
    no_html: Annotated[
        bool, typer.Option("--no-html", help="Skip the HTML report (chart, table, graph neighbourhoods).")
    ] = False,
    jobs: Annotated[
        int, typer.Option("--jobs", "-j", min=1, help="Processes (at most the CPUs this process may use).")
    ] = default_compare_jobs(),
    oversubscribe: Annotated[
        bool,
        typer.Option(
            "--oversubscribe",
            help="Run all --jobs processes even beyond the CPUs this process may use (they then share the CPUs).",
        ),
    ] = False,
    fail_on_diff: Annotated[bool, typer.Option("--fail-on-diff", help="Exit 1 when any row FAILs.")] = False,
    target_run: Annotated[
        Optional[str],
        typer.Option("--target-run", help="The target GE {time} directory, when it holds several runs."),
    ] = None,
    golden_run: Annotated[
        Optional[str], typer.Option("--golden-run", help="The run (GE {time} or FX graph directory) of the golden.")
    ] = None,
    fx_token_base: Annotated[
        Optional[int], typer.Option("--fx-token-base", min=0, max=1, help="FX step numbering (0 or 1) if not detected.")
    ] = None,
    db: Annotated[
        Optional[Path], typer.Option("--db", help="tcmp watch's index, if not in the dump trees (.tcmp/).")
    ] = None,
    graph: Annotated[
        Optional[Path],
        typer.Option(
            "--graph",
            help="torchair's graph text file(s), a file or a directory, when they are not under the target path "
            "(torchair's graph_dump.path; default: the working directory). For an aclgraph target: its graph dump "
            "of the optimized graph (dynamo_optimized_*.py), which says which output each saved getitem takes.",
        ),
    ] = None,
    target_stage: Annotated[
        str, typer.Option("--target-stage", help="aclgraph target: torchair's data_dump_stage (original|optimized).")
    ] = "original",
    golden_stage: Annotated[
        str, typer.Option("--golden-stage", help="aclgraph golden: torchair's data_dump_stage (original|optimized).")
    ] = "original",
    dump_options: Annotated[
        Optional[Path],
        typer.Option(
            "--dump-options",
            help="GE's dump options JSON (torchair's ge_dump_data_json/dump_options_*.json or an acl.json): ops it "
            "does not select are out of scope (default: found beside the dump or in the working directory).",
        ),
    ] = None,
    cosine: Annotated[float, typer.Option(min=-1.0, max=1.0, help="PASS needs Cosine >= this.")] = 0.99,
    max_rel_err: Annotated[
        float, typer.Option(callback=positive, help="PASS needs MaxRelativeErr < this (> 0).")
    ] = 0.01,
    stats_rel_err: Annotated[float, typer.Option(min=0.0, help="Statistics PASS: relative errors <= this.")] = 0.01,
    cluster: Annotated[Optional[str], cluster_option("compare each rank on the Ray node that holds its files")] = None,
    verbose: Verbose = False,
) -> None:
    """Compare a GE graph-mode dump with its golden (FX dump or fusion-off GE dump), op by op; or an aclgraph dump
    with an FX dump or another aclgraph dump, node by node."""
    from tcmp.compare.execute.run import compare_workers, run_compare
    from tcmp.compare.judge.verdict import Thresholds
    from tcmp.compare.report.console import print_outcome, print_plan
    from tcmp.compare.report.outcome import CompareOptions, DataMode
    from tcmp.compare.report.writers import ReportChoice, chosen_formats
    from tcmp.schemas.acl_dump import AclStage

    try:
        chosen = DataMode(data_mode)
    except ValueError:
        raise fail(f"--data-mode must be one of {', '.join(m.value for m in DataMode)}", EXIT_USAGE) from None
    stages = []
    for option, stage in (("--target-stage", target_stage), ("--golden-stage", golden_stage)):
        try:
            stages.append(AclStage(stage))
        except ValueError:
            raise fail(f"{option} must be one of {', '.join(s.value for s in AclStage)}", EXIT_USAGE) from None
    _check_writable(output_path, "reports to")
    if not cluster and not oversubscribe:  # (a cluster compare starts no processes here)
        jobs = _capped(jobs, "; --oversubscribe runs them all")
    thresholds = Thresholds(cosine=cosine, max_relative_err=max_rel_err, stats_relative_err=stats_rel_err)
    options = CompareOptions(
        target=target_path, golden=golden_path, mode=chosen, rank=rank, target_run=target_run,
        golden_run=golden_run, fx_token_base=fx_token_base, jobs=jobs, thresholds=thresholds, db=db, graph=graph,
        target_stage=stages[0], golden_stage=stages[1],
        dump_options=dump_options,
    )  # fmt: skip
    formats = chosen_formats(ReportChoice(highlight=highlight, html=not no_html))
    if cluster:
        return _compare_on_cluster(options, cluster, output_path, formats, fail_on_diff)
    started = time.monotonic()
    with (
        compare_workers(jobs) as workers,
        progress_display(percent=True) as progress,
    ):  # forked before the progress thread starts
        task = progress.add_task("comparing", total=None)

        def advance(done: float, total: int) -> None:
            progress.update(task, completed=done, total=total)

        result, inputs = run_compare(options, output_path, formats=formats, progress=advance, workers=workers)
    if verbose_given():  # what was compared with what, and how long it took
        print_plan(err, inputs, time.monotonic() - started, jobs)
    print_outcome(out, result)
    if result.unreadable or (fail_on_diff and result.failed):
        raise typer.Exit(EXIT_FAILURES)


def _compare_on_cluster(options, address: str, output_path: Path, formats: tuple, fail_on_diff: bool) -> None:
    from tcmp.compare.cluster.run import run_cluster_compare
    from tcmp.compare.report.console import print_outcome

    with progress_display(percent=True) as progress:
        task = progress.add_task("comparing on the cluster", total=None)

        def advance(done: float, total: int) -> None:
            progress.update(task, completed=done, total=total)

        done = run_cluster_compare(options, address, output_path, formats=formats, progress=advance)
    print_outcome(out, done.result, done.not_compared)
    if done.overview_path is not None:
        out.print(f"cluster summary: {escape(str(done.overview_path))}", highlight=False)
    if done.page_path is not None:
        out.print(f"cluster page: {escape(str(done.page_path))}", highlight=False)
    if not done.complete:
        ranks = ", ".join(str(n.rank) for n in done.not_compared if n.rank is not None)
        raise fail(f"cluster compare incomplete: {len(done.not_compared)} not compared"
                    + (f" (ranks {ranks}: no report written for them)" if ranks else ""))  # fmt: skip
    if done.result.unreadable or (fail_on_diff and done.result.failed):
        raise typer.Exit(EXIT_FAILURES)


def _capped(jobs: int, opt_out: str = "") -> int:
    """--jobs, capped at the CPUs this process may use (said on stderr)."""
    jobs, note = capped_jobs(jobs, usable_cpus())
    if note is not None:
        err.print(f"note: {escape(note + opt_out)}", highlight=False, soft_wrap=True)
    return jobs


@app.command()
def demo(
    directory: Annotated[
        Optional[Path], typer.Argument(help="An empty directory for the example (default: a new temp dir).")
    ] = None,
    jobs: Annotated[
        int, typer.Option("--jobs", "-j", min=1, help="Processes (at most the CPUs this process may use).")
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
        root, jobs=_capped(jobs), progress=lambda message: err.print(escape(message), highlight=False, soft_wrap=True)
    )
    replay, index = demo_result.replay, demo_result.index
    out.print(
        f"simulated inference wrote {replay.files} files ({format_size(replay.bytes)}, {replay.chunks} writes) "
        f"in {replay.seconds:.1f} s; the index held every file {demo_result.indexed_after_s:.1f} s after the last "
        f"write (a file cut short is waited for {INCOMPLETE_TIMEOUT_S:.0f} s)"
    )
    out.print(
        f"index {escape(str(index.path))}: {index.summarized} dump files and {index.graphs} graphs summarized, "
        f"{format_size(index.bytes_freed)} of raw files deleted, {index.failed} recorded as failed"
    )
    for problem in index.recent_errors:
        assert problem.error is not None  # an error row is written with its reason (ProblemRow.error is a str)
        out.print(f"  kept raw: {escape(str(problem.path))}: {escape(problem.error)}")
    out.print(f"injected faults: {', '.join(demo_result.faults)}")
    print_outcome(out, demo_result.result)


@app.command()
def watch(
    directories: Annotated[
        list[Path], typer.Argument(help="Dump roots to watch.", exists=True, file_okay=False, resolve_path=True)
    ],
    db: Annotated[
        Optional[Path], typer.Option("--db", help="One index for all roots (default: DIR/.tcmp/index.sqlite each).")
    ] = None,
    drop_raw: Annotated[
        bool, typer.Option("--drop-raw", help="Delete raw dump files once their summary is committed.")
    ] = False,
    raw_budget: Annotated[
        Optional[str], typer.Option("--raw-budget", help="With --drop-raw: keep raw files up to SIZE per root (50G).")
    ] = None,
    keep_raw_ops: Annotated[
        Optional[list[str]],
        typer.Option("--keep-raw-ops", help="With --drop-raw: never delete raw files of ops matching this glob."),
    ] = None,
    workers: Annotated[
        int, typer.Option("--workers", min=0, help="Summarizing processes (default: the cores, at most 4).")
    ] = default_watch_workers(),
    once: Annotated[bool, typer.Option("--once", help="Scan, summarize what is complete, exit.")] = False,
    incomplete_timeout: Annotated[
        float, typer.Option("--incomplete-timeout", min=0.0, help="Seconds an unchanged incomplete file is waited for.")
    ] = 300.0,
    reconcile_interval: Annotated[
        float, typer.Option("--reconcile-interval", min=0.1, help="Seconds between reconcile scans.")
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


@app.command()
def status(
    directory: Annotated[
        Optional[Path], typer.Argument(help="A watched root (or a directory inside one); default: the cwd.")
    ] = None,
    db: Annotated[Optional[Path], typer.Option("--db", help="The index file to report on.")] = None,
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


def main() -> None:
    """The `tcmp` command; what no command foresaw ends as `errors.internal_error` says."""
    try:
        app(args=with_cluster_address(sys.argv[1:]))
    except Exception as exc:
        if verbose_given():
            raise
        internal_error(exc)
