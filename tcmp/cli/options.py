"""Option types of the command line that more than one command takes or that click has no form for."""

import enum
from typing import Any, Optional

import typer
import typer.core


def cluster_option(what: str):
    """`--cluster [ADDRESS]`: alone it means `auto` (the cluster this machine belongs to: `with_cluster_address`
    fills it in); TCMP_CLUSTER is the default."""
    return typer.Option(
        "--cluster",
        envvar="TCMP_CLUSTER",
        metavar="ADDRESS",
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


class NamedArguments(typer.core.TyperCommand):
    """A command whose arguments with a metavar are shown by it alone, in the usage line and in the list of
    arguments: `PATH...`, where typer 0.29 shows `{PATH}...` and `PATH <list[Path]>` (click's public methods, so
    that the typer of Python 3.9, which shows metavars as click does, gives the same)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if isinstance(param, typer.core.TyperArgument) and param.metavar is not None:
                param.__class__ = _MetavarArgument  # typer builds its parameters with no hook for their class


class _MetavarArgument(typer.core.TyperArgument):
    def _shown(self) -> str:
        assert self.metavar is not None  # NamedArguments gives this class only to arguments with a metavar
        return self.metavar + ("..." if self.nargs != 1 else "")

    def get_usage_pieces(self, ctx: Any) -> list[str]:
        return [self._shown() if self.required else f"[{self._shown()}]"]

    def get_help_record(self, ctx: Any) -> Optional[tuple[str, str]]:
        record = super().get_help_record(ctx)
        return None if record is None else (self._shown(), record[1])
