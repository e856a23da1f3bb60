"""The `tcmp` command line: the commands (commands.py), their shared option types (options.py), where they write
(output.py), and the one mapping of errors to exit codes (errors.py).

The modules (and typer and rich with them) are imported on first use, not with this package: the `tcmp` console
script imports it, and a spawned worker of `tcmp watch` runs that script again (as multiprocessing's
`__mp_main__`, which never calls `main`), so each worker would otherwise import the whole command line for
nothing (0.2-0.4 s)."""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    **{name: "commands" for name in ("app", "compare", "demo", "parse", "status", "version", "watch")},
    "with_cluster_address": "options",
}


def main() -> None:
    """The `tcmp` command (commands.main)."""
    from tcmp.cli.commands import main as run

    run()


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"tcmp.cli.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
