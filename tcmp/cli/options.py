"""Option types of the command line that more than one command takes or that click has no form for."""

import enum

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
