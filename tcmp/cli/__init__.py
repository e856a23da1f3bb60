"""The `tcmp` command line: the commands (commands.py), their shared option types (options.py), where they write
(output.py), and the one mapping of errors to exit codes (errors.py)."""

from tcmp.cli.commands import app, compare, demo, main, parse, status, version, watch
from tcmp.cli.options import with_cluster_address

__all__ = ["app", "compare", "demo", "main", "parse", "status", "version", "watch", "with_cluster_address"]
