"""The console summary at 80 and at 200 columns, on a terminal and not (issue 18, items 11, 14, 15, 19): API names
are never split, a worst row's metrics stay on one line, tokens with the same first divergence are one line, the
legend says what the verdicts and colours mean; `compare --help` shows every option name; a compare whose output
is not a terminal writes nothing to stderr."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys

import pytest
from rich.console import Console

from tcmp.compare.execute.run import run_compare
from tcmp.compare.judge.metrics import Mode
from tcmp.compare.judge.verdict import Thresholds
from tcmp.compare.report.console import print_outcome, token_ranges
from tcmp.compare.report.legend import legend
from tcmp.compare.report.outcome import CompareOptions, DataMode
from tcmp.schemas.synth.faults import Fault, FaultKind
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

NAN_OP = "SoftmaxV2_2"
TOKENS = 3


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    faults = (
        Fault("layers.1/MatMul_1", FaultKind.REL_ERROR, magnitude=0.03),  # every token: the same first divergence
        Fault(NAN_OP, FaultKind.NAN, tokens=(1,)),
    )
    config = ScenarioConfig(model=ModelConfig(layers=3), tokens=TOKENS, faults=faults, propagate_faults=True,
                            write_fusion_off=False)  # fmt: skip
    return write_scenario(tmp_path_factory.mktemp("console"), config)


@pytest.fixture(scope="module")
def compared(scenario, tmp_path_factory):
    options = CompareOptions(scenario.target, scenario.golden_fx, mode=DataMode.STATISTICS)
    result, _ = run_compare(options, tmp_path_factory.mktemp("reports"), keep_rows=True)
    return result


def render(result, width: int, terminal: bool) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=terminal, color_system=None, highlight=False)
    print_outcome(console, result)
    return buffer.getvalue()


def first_worst_row(output: str) -> list[str]:
    after = output[output.index("worst rows") :].splitlines()[1:]
    return next(line for line in after if line.split()[0].isdigit()).split()


def names_whole(output: str, names) -> None:
    lines = output.splitlines()
    for name in names:
        assert any(name in line for line in lines), f"{name!r} split or missing in:\n{output}"


WIDTHS = [(80, False), (80, True), (200, False), (200, True)]


@pytest.mark.parametrize(("width", "terminal"), WIDTHS)
def test_api_names_are_never_split_and_a_worst_rows_metrics_stay_on_one_line(compared, width, terminal):
    output = render(compared, width, terminal)
    (rank,) = compared.ranks
    shown = rank.worst[:5]
    names_whole(output, [r.pair.api_name for r in shown])
    names_whole(output, [name for d in rank.divergences for name in [d.op_name] if name])
    names_whole(output, [str(rank.report.csv), str(rank.report.summary)])
    for row in shown:
        line = next(line for line in output.splitlines() if f" {row.pair.api_name} " in f"{line} ")
        if row.nan_inf_one_side:  # the counts, on the row's line or the one below it, whole
            assert re.search(r"NPU \d+ NaN, bench no NaN/inf", output)
        else:
            assert "normrel" in output
        assert line.lstrip().startswith(str(row.pair.token))
    if terminal:  # wrapped between words to the width; only a word longer than the room may stick out
        for line in output.splitlines():
            assert len(line) <= width or any(len(w) > width - 12 for w in line.split()), line
    else:  # a log or a pipe: every line whole
        assert any(len(line) > 80 for line in output.splitlines())


@pytest.mark.parametrize(("width", "terminal"), WIDTHS)
def test_the_nan_origin_heads_the_worst_rows_shown(compared, width, terminal):
    output = render(compared, width, terminal)
    assert first_worst_row(output)[:2] == ["1", f"{NAN_OP}.output.0"]
    assert "NPU 4 NaN" in output  # [16, 64]: the synthetic writer sets every 256th element NaN
    (rank,) = compared.ranks
    spread = sum(r.nan_inf_one_side for r in rank.rows)
    assert spread > 10 and f"NaN/inf on one side first ({spread} rows)" in " ".join(output.split())
    assert json.loads(rank.report.summary.read_text())["counts"]["nan_inf_one_side"] == spread


def test_a_wide_console_shows_the_worst_rows_as_a_table(compared):
    output = render(compared, 200, terminal=True)
    rows = output[output.index("worst rows") :].splitlines()[1:6]
    starts = {line.index("FAIL/") for line in rows}
    assert len(starts) == 1  # the verdicts in one column
    assert all("NaN/inf in the NPU tensor only." in line for line in rows if "NaN," in line)  # message on the line


def test_tokens_with_the_same_first_divergence_are_one_line_and_the_json_keeps_every_token(compared):
    (rank,) = compared.ranks
    assert [d.token for d in rank.divergences] == list(range(TOKENS))
    output = render(compared, 200, terminal=False)
    lines = [line for line in output.splitlines() if "first divergence" in line]
    assert lines == [
        f"  first divergence in tokens 0-{TOKENS - 1}: layers.1/MatMul_1 (MatMulV2): layers.1/MatMul_1.output.0"
    ]
    summary = json.loads(rank.report.summary.read_text())
    assert [d["token"] for d in summary["first_divergence"]] == list(range(TOKENS))
    assert {d["op"] for d in summary["first_divergence"]} == {"layers.1/MatMul_1"}


def test_token_ranges():
    assert token_ranges([5, 0, 1, 2, 7, 8, 10]) == "0-2, 5, 7-8, 10"
    assert token_ranges([3]) == "3"


def test_the_legend_says_what_the_verdicts_and_colours_mean(compared):
    output = " ".join(render(compared, 80, terminal=True).split())
    for words in (
        "Result (tcmp's rule): PASS when NormRelativeErr, MaxRelativeErr and MinRelativeErr are <= 0.01",
        "Accuracy Reached or Not (msprobe's rule): Yes when NormRelativeErr <= 0.5",
        "FAIL/Yes is a small but real error",
        "red = FAIL/No, or NaN/inf on one side only",
        "yellow = FAIL/Yes",
        "green = PASS",
    ):
        assert words in output
    custom = " ".join(legend(Mode.TENSOR, Thresholds(cosine=0.95, max_relative_err=0.02, magnitude_factor=5.0)))
    assert "Cosine >= 0.95 and MaxRelativeErr < 0.02" in custom and ">= 5x its inputs'" in custom
    assert "Cosine >= 0.9, MaxAbsErr <= 1, and not both Cosine < 0.99 and MaxAbsErr > 0.001" in custom


def run_cli(*args: str, columns: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": str(columns)}
    env.pop("TTY_COMPATIBLE", None)
    return subprocess.run([sys.executable, "-m", "tcmp", *args], capture_output=True, text=True, env=env,
                          timeout=120, check=False)  # fmt: skip


@pytest.mark.parametrize("columns", [80, 200])
def test_the_cli_output_at_80_and_200_columns(scenario, tmp_path, columns):
    """A real process, its output a pipe (rich then takes COLUMNS, or 80)."""
    done = run_cli("compare", "-tp", str(scenario.target), "-gp", str(scenario.golden_fx), "-o", str(tmp_path),
                   "--data-mode", "statistics", "--jobs", "1", columns=columns)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no progress bar and no blank line where it was
    assert first_worst_row(done.stdout)[:2] == ["1", f"{NAN_OP}.output.0"]
    assert f"first divergence in tokens 0-{TOKENS - 1}: layers.1/MatMul_1 (MatMulV2)" in done.stdout
    assert "Accuracy Reached or Not" in done.stdout


def test_compare_help_shows_every_option_name_at_80_columns():
    from tcmp.cli import app

    done = run_cli("compare", "--help", columns=80)
    assert done.returncode == 0, done.stderr
    import typer.main

    command = typer.main.get_command(app).commands["compare"]
    names = [name for param in command.params for name in (*param.opts, *param.secondary_opts)]
    assert "--target_path" in names and "-tp" in names
    words = set(re.split(r"[\s,/]+", done.stdout))
    missing = [name for name in names if name not in words]
    assert not missing, done.stdout
    assert all(len(line) <= 80 for line in done.stdout.splitlines())
