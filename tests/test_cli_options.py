"""The command line as users type it (issue 18, items 17 and 19): `-v` after the command, `--version`, flags that
take no value, msprobe's `-m` in any case, and `parse -o DIR --info` doing both."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tcmp import __version__
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11: the same parser, as pip ships it
    from pip._vendor import tomli as tomllib

COMMANDS = ("compare", "parse", "demo", "watch", "status", "version")
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    return write_scenario(tmp_path_factory.mktemp("options"), ScenarioConfig(model=ModelConfig(layers=1), tokens=2))


def compare(cli, scenario, out, *extra):
    return cli("compare", "-tp", scenario.target, "-gp", scenario.golden_fx, "-o", out, "--jobs", "1", *extra)


def test_verbose_after_the_command_prints_what_was_bound_and_the_time(cli, scenario, tmp_path):
    quiet = compare(cli, scenario, tmp_path / "q")
    verbose = compare(cli, scenario, tmp_path / "v", "-v")
    assert quiet.exit_code == verbose.exit_code == 0, verbose.output
    graph = next(scenario.target.glob("dynamo_original_graph_*")).name
    fx_dir = next(scenario.golden_fx.glob("worldsize*/gm_*")).name
    bound = f"rank 0, model graph_1_0: graph {graph}, golden {fx_dir}, tokens 0-1"
    assert bound in verbose.stderr and re.search(r"compared in \d+\.\d\d s with 1 process", verbose.stderr)
    assert bound not in quiet.stderr and "compared in" not in quiet.stderr
    assert quiet.stdout.splitlines()[0] == verbose.stdout.splitlines()[0]  # the same summary on stdout
    before = cli("-v", "compare", "-tp", scenario.target, "-gp", scenario.golden_fx, "-o", tmp_path / "b", "-j", "1")
    assert before.exit_code == 0 and bound in before.stderr  # the app's own -v, as before


def test_verbose_shows_the_traceback_of_an_error(cli, scenario, tmp_path):
    plain = cli("compare", "-tp", scenario.target, "-gp", scenario.target)
    verbose = cli("compare", "-tp", scenario.target, "-gp", scenario.target, "--verbose")
    assert plain.exit_code == verbose.exit_code == 2
    assert "Traceback" not in plain.stderr and len(plain.stderr.strip().splitlines()) == 1
    assert "Traceback (most recent call last)" in verbose.stderr and "CompareError" in verbose.stderr
    assert verbose.stderr.strip().splitlines()[-1] == plain.stderr.strip()  # then the same one line


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_takes_verbose_after_its_name(cli, command):
    help_text = cli(command, "--help").stdout
    assert re.search(r"-v, --verbose\s", help_text), help_text


def test_version_option(cli):
    result = cli("--version")
    assert result.exit_code == 0 and result.stdout.strip() == __version__


def _boolean_options(command: str) -> list[str]:
    """The option names of a command's boolean parameters, from its function's signature."""
    import typing

    import typer.models

    from tcmp import cli as cli_module

    hints = typing.get_type_hints(getattr(cli_module, command), include_extras=True)
    names = []
    for hint in hints.values():
        if typing.get_origin(hint) is typing.Annotated and typing.get_args(hint)[0] is bool:
            info = next(m for m in typing.get_args(hint)[1:] if isinstance(m, typer.models.OptionInfo))
            decls = (info.default, *(info.param_decls or ()))  # typer keeps the first name as the "default"
            names.append(next(d for d in decls if isinstance(d, str) and d.startswith("--")))
    return names


@pytest.mark.parametrize("command", COMMANDS)
def test_flags_show_no_value_and_take_none(cli, command):
    """Every boolean option is a flag, shown without a metavar (`-hl, --highlight`, not `--highlight <bool>`)."""
    help_text = cli(command, "--help").stdout
    assert not re.search(r"<bool>|BOOLEAN", help_text, re.IGNORECASE), help_text
    option_lines = [ln.strip() for ln in help_text.splitlines() if re.match(r"\s+-", ln)]
    for name in _boolean_options(command):
        line = next(ln for ln in option_lines if re.search(rf"(^|[ ,]){name}([ ,]|$)", ln))
        names = re.split(r"\s{2,}", line)[0]  # the names column, before the help
        assert "<" not in names and names.endswith(name), line


@pytest.mark.parametrize("spelling", ["TorchAir", "TORCHAIR", "torchair"])
def test_mode_in_any_case(cli, scenario, tmp_path, spelling):
    assert compare(cli, scenario, tmp_path, "-m", spelling).exit_code == 0


def test_parse_converts_and_describes_at_once(cli, scenario, tmp_path):
    step = next(scenario.target.glob("worldsize*/*/*/graph_1_0/*/0"))
    out = tmp_path / "npy"
    result = cli("parse", step, "-o", out, "--info")
    assert result.exit_code == 0, result.output
    described = [json.loads(line) for line in result.stdout.splitlines()]
    written = sorted(out.glob("*.npy"))
    assert described and written
    # every tensor described, every dumped one written, and each description names its file
    assert sorted(Path(d["output"]) for d in described if d["dumped"]) == written
    files = {p.name for p in step.iterdir() if p.is_file() and p.name[0].isupper()}
    assert {Path(d["file"]).name for d in described} == files


def test_the_build_warns_of_nothing_in_pyproject():
    """setuptools ≥ 77 deprecates a license given as a table (`make demo` printed its warning 3-4 times): the
    license is an SPDX expression, which needs setuptools ≥ 77 to build."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert project["project"]["license"] == "Apache-2.0"
    assert "setuptools>=77" in project["build-system"]["requires"]


@pytest.mark.slow
def test_preparing_the_metadata_gives_no_build_backend_warning():
    """What `make install` runs first, against the setuptools the build really gets (build isolation)."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--quiet", str(REPO)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "BuildBackendWarning" not in done.stderr + done.stdout, done.stderr


@pytest.mark.slow
def test_building_the_wheel_gives_no_build_backend_warning_and_ships_the_page_files(tmp_path):
    """The build itself (`make install` builds an editable wheel): setuptools warned of compare/report/page_files, a
    directory of data it took for an undeclared package."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path), str(REPO)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "BuildBackendWarning" not in done.stderr + done.stdout, done.stderr
    (wheel,) = tmp_path.glob("tcmp-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"tcmp/compare/report/page_files/page.{ext}" for ext in ("css", "html", "js")} <= names
