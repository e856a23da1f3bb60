"""The one mapping of errors to exit codes (issue 24): every error class a command ends with derives from
TcmpError, its `usage` decides between the README's exit codes 2 (usage error) and 3 (runtime error), an OSError
is 3, and every command goes through that one mapping instead of catching errors of its own."""

from __future__ import annotations

import ast
import errno
import inspect
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from tcmp.cli import app, commands, compare_command, parse_command, watch_commands
from tcmp.cli.errors import TcmpTyper, error_exit, exit_codes
from tcmp.compare.records import CompareError
from tcmp.daemon.demo import DemoError
from tcmp.daemon.index_trust import IndexRefused, WatchRefused
from tcmp.daemon.lock import IndexBusy, LockHolder
from tcmp.daemon.trees import TreeTaken
from tcmp.schemas.errors import TcmpError
from tcmp.schemas.files import WriteError
from tcmp.schemas.index import IndexDamaged, IndexUnusable

BUSY = IndexBusy(Path("/d/index.sqlite"), LockHolder(41, "host-a"))

# (error, the line the user gets, the exit code): the README's table, 2 a usage error, 3 a runtime error
CASES = [
    (TcmpError("a wrong option", usage=True), "a wrong option", 2),
    (TcmpError("could not run"), "could not run", 3),
    (CompareError("target path /x does not exist", usage=True), "target path /x does not exist", 2),
    (CompareError("two runs in one tree"), "two runs in one tree", 3),
    (
        DemoError("/d is not empty: the demo needs a directory of its own", usage=True),
        "/d is not empty: the demo needs a directory of its own",
        2,
    ),
    (DemoError("`tcmp watch` exited with 3; see log"), "`tcmp watch` exited with 3; see log", 3),
    (WatchRefused("refused"), "refused", 3),
    (IndexRefused("not its own"), "not its own", 3),
    (TreeTaken("inside another root"), "inside another root", 3),
    (
        BUSY,
        "index /d/index.sqlite is being written by tcmp watch pid 41 on host-a; one writer per index: stop it "
        "first, or give this one another --db",
        3,
    ),
    (IndexUnusable("no .tcmp/index.sqlite in /d or its parents"), "no .tcmp/index.sqlite in /d or its parents", 3),
    (IndexDamaged("/d/index.sqlite: damaged"), "/d/index.sqlite: damaged", 3),
    (PermissionError(errno.EACCES, "Permission denied", "/d/x"), "Permission denied: /d/x", 3),
    (
        WriteError(errno.ENOSPC, "No space left on device; no report kept", "/o/r.csv"),
        "cannot write /o/r.csv: No space left on device; no report kept",
        3,
    ),
]


@pytest.mark.parametrize(
    ("error", "line", "code"), CASES, ids=lambda c: type(c).__name__ if isinstance(c, Exception) else ""
)
def test_each_error_maps_to_its_line_and_exit_code(error, line, code):
    assert error_exit(error) == (line, code)


@pytest.mark.parametrize(
    ("error", "line", "code"), CASES, ids=lambda c: type(c).__name__ if isinstance(c, Exception) else ""
)
def test_a_command_ending_with_it_prints_one_line_and_exits_with_its_code(error, line, code):
    probe = TcmpTyper(add_completion=False)

    @probe.command()
    def fails() -> None:
        raise error

    @probe.command()
    def other() -> None:  # two commands: typer then takes the command's name
        pass

    result = CliRunner().invoke(probe, ["fails"])
    assert result.exit_code == code, result.output
    assert result.output == f"error: {line}\n"


def test_what_is_not_an_error_of_a_command_passes_through():
    probe = TcmpTyper(add_completion=False)

    @probe.command()
    def fails() -> None:
        raise RuntimeError("a bug")

    @probe.command()
    def other() -> None:
        pass

    result = CliRunner().invoke(probe, ["fails"])
    assert isinstance(result.exception, RuntimeError)  # left to main's "internal error"
    with pytest.raises(TypeError):
        error_exit(RuntimeError("a bug"))


def test_every_error_class_a_command_ends_with_is_a_tcmp_error():
    for cls in (CompareError, DemoError, WatchRefused, IndexRefused, TreeTaken, IndexBusy, IndexUnusable):
        assert issubclass(cls, TcmpError), cls


def test_every_tcmp_command_goes_through_the_one_mapping():
    group = typer.main.get_command(app)
    assert set(group.commands) == {"compare", "parse", "demo", "watch", "status", "version"}
    mapped = exit_codes(lambda: None).__code__
    for name, command in group.commands.items():
        chain = [command.callback]  # typer's wrapper, the mapping's, the command
        while hasattr(chain[-1], "__wrapped__"):
            chain.append(chain[-1].__wrapped__)
        assert chain[-1] is getattr(commands, name), name
        assert any(f.__code__ is mapped for f in chain), name


def test_no_command_catches_an_error_the_mapping_maps():
    """The commands translate what only they can name (a ValueError of --raw-budget, an existing .npy: usage
    errors), but never catch a TcmpError to map it themselves."""
    modules = (commands, compare_command, parse_command, watch_commands)
    caught = {
        (module, n.id)
        for module in modules
        for handler in ast.walk(ast.parse(inspect.getsource(module)))
        if isinstance(handler, ast.ExceptHandler) and handler.type is not None
        for n in ast.walk(handler.type)
        if isinstance(n, ast.Name)
    }
    mapped = {name for module, name in caught if isinstance(getattr(module, name, None), type)
              and issubclass(getattr(module, name), TcmpError)}  # fmt: skip
    caught_names = {name for _, name in caught}
    assert caught_names and not mapped, caught_names
    assert not {"CompareError", "DemoError", "IndexBusy", "WatchRefused", "IndexUnusable"} & caught_names
