"""The `tcmp` commands, registered in the order `tcmp --help` lists them (by use: compare first): each a thin
wrapper over one library call, its options parsed, its progress shown, in a module of its concern; their errors
end in exit codes in errors.py, their output goes through output.py. A reader that closes stdout early (`| head`)
changes nothing but what is printed.
"""

import sys

from tcmp import __version__
from tcmp.cli.application import Verbose, app
from tcmp.cli.compare_command import compare
from tcmp.cli.errors import internal_error, verbose_given
from tcmp.cli.options import with_cluster_address
from tcmp.cli.output import out
from tcmp.cli.parse_command import parse
from tcmp.cli.watch_commands import demo, status, watch


def version(verbose: Verbose = False) -> None:
    """Print the version."""
    out.print(__version__)


for command in (compare, watch, status, parse, demo, version):
    app.command()(command)


def main() -> None:
    """The `tcmp` command; what no command foresaw ends as `errors.internal_error` says."""
    try:
        app(args=with_cluster_address(sys.argv[1:]))
    except Exception as exc:
        if verbose_given():
            raise
        internal_error(exc)
