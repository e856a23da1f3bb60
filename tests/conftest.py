"""Fixtures shared by every test directory."""

from __future__ import annotations

import inspect
from typing import Callable

import pytest
from click.testing import Result
from typer.testing import CliRunner

from tcmp.cli import app

# click < 8.2 (typer < 0.26, what Python 3.9 gets) mixes stderr into stdout unless told not to
_RUNNER = CliRunner(**({"mix_stderr": False} if "mix_stderr" in inspect.signature(CliRunner).parameters else {}))


@pytest.fixture(scope="session")
def cli() -> Callable[..., Result]:
    """`cli("compare", "-tp", path, ...)`: the tcmp command line in this process, stdout and stderr kept apart."""

    def invoke(*args: object, catch_exceptions: bool = True) -> Result:
        return _RUNNER.invoke(app, [str(a) for a in args], catch_exceptions=catch_exceptions)

    return invoke
