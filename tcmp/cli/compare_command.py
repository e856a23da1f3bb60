"""`tcmp compare`: a dump compared with its golden, on this machine or on a Ray cluster (`--cluster`)."""

import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from tcmp.cli.application import Verbose, capped, check_writable
from tcmp.cli.errors import EXIT_FAILURES, EXIT_USAGE, fail, interruption_said, verbose_given
from tcmp.cli.options import CompareMode, cluster_option, positive
from tcmp.cli.output import err, out, progress_display
from tcmp.schemas.display import escape, quoted
from tcmp.schemas.host import default_compare_jobs

NOTHING_WRITTEN = (
    "the compare stopped before its end; no report was written (the reports are written whole or not at all)"
)


def compare(
    target_path: Annotated[
        Path,
        typer.Option(
            "--target_path", "--target-path", "-tp", metavar="DIR", help="The GE graph-mode dump (fusion on)."
        ),
    ],
    golden_path: Annotated[
        Path,
        typer.Option(
            "--golden_path",
            "--golden-path",
            "-gp",
            metavar="DIR",
            help="The golden: an FX dump or a fusion-off GE dump.",
        ),
    ],
    mode: Annotated[
        str, typer.Option("--mode", "-m", metavar="torchair", help="Compare mode: torchair (the only one).")
    ] = CompareMode.torchair.value,
    output_path: Annotated[
        Path, typer.Option("--output_path", "--output-path", "-o", metavar="DIR", help="Directory for the reports.")
    ] = Path("."),
    rank: Annotated[Optional[int], typer.Option("--rank", metavar="N", min=0, help="Compare this rank only.")] = None,
    data_mode: Annotated[
        str, typer.Option("--data-mode", "--data_mode", metavar="MODE", help="auto | tensor | statistics | md5.")
    ] = "auto",
    highlight: Annotated[
        bool, typer.Option("--highlight", "-hl", help="Also write an .xlsx with red/yellow/green rows.")
    ] = False,
    no_html: Annotated[
        bool, typer.Option("--no-html", help="Skip the HTML report (chart, table, graph neighbourhoods).")
    ] = False,
    jobs: Annotated[
        int, typer.Option("--jobs", "-j", metavar="N", min=1, help="Processes (at most the CPUs this process may use).")
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
        typer.Option("--target-run", metavar="RUN", help="The target GE {time} directory, when it holds several runs."),
    ] = None,
    golden_run: Annotated[
        Optional[str],
        typer.Option("--golden-run", metavar="RUN", help="The run (GE {time} or FX graph directory) of the golden."),
    ] = None,
    fx_token_base: Annotated[
        Optional[int],
        typer.Option(
            "--fx-token-base", metavar="0|1", min=0, max=1, help="FX step numbering (0 or 1) if not detected."
        ),
    ] = None,
    db: Annotated[
        Optional[Path],
        typer.Option("--db", metavar="FILE", help="tcmp watch's index, if not in the dump trees (.tcmp/)."),
    ] = None,
    graph: Annotated[
        Optional[Path],
        typer.Option(
            "--graph",
            metavar="PATH",
            help="torchair's graph text file(s), a file or a directory, when they are not under the target path "
            "(torchair's graph_dump.path; default: the working directory). For an aclgraph target: its graph dump "
            "of the optimized graph (dynamo_optimized_*.py), which says which output each saved getitem takes.",
        ),
    ] = None,
    target_stage: Annotated[
        str,
        typer.Option(
            "--target-stage", metavar="STAGE", help="aclgraph target: torchair's data_dump_stage (original|optimized)."
        ),
    ] = "original",
    golden_stage: Annotated[
        str,
        typer.Option(
            "--golden-stage", metavar="STAGE", help="aclgraph golden: torchair's data_dump_stage (original|optimized)."
        ),
    ] = "original",
    dump_options: Annotated[
        Optional[Path],
        typer.Option(
            "--dump-options",
            metavar="FILE",
            help="GE's dump options JSON (torchair's ge_dump_data_json/dump_options_*.json or an acl.json): ops it "
            "does not select are out of scope (default: found beside the dump or in the working directory).",
        ),
    ] = None,
    cosine: Annotated[float, typer.Option(metavar="X", min=-1.0, max=1.0, help="PASS needs Cosine >= this.")] = 0.99,
    max_rel_err: Annotated[
        float, typer.Option(metavar="X", callback=positive, help="PASS needs MaxRelativeErr < this (> 0).")
    ] = 0.01,
    stats_rel_err: Annotated[
        float, typer.Option(metavar="X", min=0.0, help="Statistics PASS: relative errors <= this.")
    ] = 0.01,
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

    if mode.lower() not in {m.value for m in CompareMode}:  # any case: -m TorchAir
        raise fail(f"--mode {mode}: tcmp compares torchair dumps only (--mode torchair, the default)", EXIT_USAGE)
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
    check_writable(output_path, "reports to")
    if not cluster and not oversubscribe:  # (a cluster compare starts no processes here)
        jobs = capped(jobs, "; --oversubscribe runs them all")
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
        interruption_said(NOTHING_WRITTEN),
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

    with interruption_said(NOTHING_WRITTEN), progress_display(percent=True) as progress:
        task = progress.add_task("comparing on the cluster", total=None)

        def advance(done: float, total: int) -> None:
            progress.update(task, completed=done, total=total)

        done = run_cluster_compare(options, address, output_path, formats=formats, progress=advance)
    print_outcome(out, done.result, done.not_compared)
    if done.overview_path is not None:
        out.print(f"cluster summary: {escape(quoted(done.overview_path))}", highlight=False)
    if done.page_path is not None:
        out.print(f"cluster page: {escape(quoted(done.page_path))}", highlight=False)
    if not done.complete:
        ranks = ", ".join(str(n.rank) for n in done.not_compared if n.rank is not None)
        raise fail(f"cluster compare incomplete: {len(done.not_compared)} not compared"
                    + (f" (ranks {ranks}: no report written for them)" if ranks else ""))  # fmt: skip
    if done.result.unreadable or (fail_on_diff and done.result.failed):
        raise typer.Exit(EXIT_FAILURES)
