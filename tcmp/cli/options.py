"""Option types of the command line that more than one command takes or that click has no form for."""

import enum
from typing import Optional

import typer


def cluster_option(what: str):
    """`--cluster [ADDRESS]`: alone it means `auto` (the cluster this machine belongs to: `with_cluster_address`
    fills it in); TCMP_CLUSTER is the default."""
    return typer.Option(
        "--cluster",
        envvar="TCMP_CLUSTER",
        show_envvar=True,
        help=f"On a running Ray cluster: {what}. ADDRESS: auto (default), ray://host:port, host:port, or local "
        "(starts a Ray on this machine, for trying it). Needs tcmp[cluster].",
    )


def with_cluster_address(args: list[str]) -> list[str]:
    """`--cluster` without an address (last, or before another option) is `--cluster auto`: click has no option
    whose value may be left out."""
    found = list(args)
    for k, arg in enumerate(found):
        if arg == "--cluster" and (k + 1 == len(found) or found[k + 1].startswith("-")):
            found.insert(k + 1, "auto")
            break
    return found


class CompareMode(str, enum.Enum):
    torchair = "torchair"


def positive(value: float) -> float:
    if not value > 0:  # `MaxRelativeErr < 0` can never hold: every row would FAIL
        raise typer.BadParameter(f"{value} is not > 0")
    return value


def capped_jobs(requested: int, cpus: int) -> tuple[int, Optional[str]]:
    """`--jobs` as a compare on this machine runs it, and the note that says so when it is less: processes beyond
    the CPUs this process may use only queue for them, each after a fork and a start-up of its own (`--jobs 1000`
    on 2 CPUs took 34 s where the default took 4.5 s). The library runs the jobs it is given; this is the CLI's."""
    if requested <= cpus:
        return requested, None
    return cpus, f"--jobs {requested}: capped at the {cpus} CPU{'s' if cpus > 1 else ''} this process may use"
