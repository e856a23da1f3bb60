"""Names from a dump are data: on the console, in log lines, in `tcmp status`, in the CSV and the xlsx (issue #23,
items 9 and 10). Each test runs the real `tcmp` in a subprocess over a dump whose op names (or whose root) carry
what an attacker would put there: terminal control sequences, a newline and a forged line, a bidi override, rich
markup, spreadsheet formula prefixes."""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
from pathlib import Path

import openpyxl
import pytest

from tcmp.schemas.synth.faults import Fault, FaultKind
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

TCMP = [sys.executable, "-m", "tcmp"]
# clears the screen, homes the cursor, prints a forged verdict line in markup, rings the bell, reverses the rest
HOSTILE = "\x1b[2J\x1b[H[bold]ALL PASS[/bold]\nINFO tcmp: forged\u202e\x07/"
RAW_CONTROLS = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200", "TERM": "xterm"}
    return subprocess.run([*TCMP, *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=300)


def hostile_scenario(root: Path, scope: str):
    """A one-layer dump pair whose layer-0 op names start with `scope`, with a fault on its MatMul so that the
    name is printed as the first divergence and as a worst row."""
    model = ModelConfig(layers=1, first_scope=scope)
    fault = Fault(scope + "MatMul_0", FaultKind.REL_ERROR, magnitude=0.05)
    return write_scenario(root, ScenarioConfig(model=model, tokens=1, faults=(fault,)))


def test_op_names_reach_the_console_escaped(tmp_path):
    s = hostile_scenario(tmp_path / "dump", HOSTILE)
    result = run("compare", "-m", "torchair", "-tp", str(s.target), "-gp", str(s.golden_fx), "-o", "out",
                 "--jobs", "1", cwd=tmp_path)  # fmt: skip
    assert result.returncode in (0, 1), result.stderr
    for stream in (result.stdout, result.stderr):
        assert not RAW_CONTROLS.search(stream), repr(stream)
    shown = "\\x1b[2J\\x1b[H[bold]ALL PASS[/bold]\\nINFO tcmp: forged\\u202e\\x07/MatMul_0"
    assert f"first divergence in token 0: {shown} (MatMulV2)" in result.stdout
    assert not any(line.startswith(("ALL PASS", "INFO tcmp: forged")) for line in result.stdout.splitlines())


def test_log_lines_cannot_be_forged_by_a_file_name(tmp_path):
    s = hostile_scenario(tmp_path / "dump", HOSTILE)
    result = run("-v", "watch", str(s.target), "--once", "--drop-raw", "--workers", "0", cwd=tmp_path)
    assert result.returncode in (0, 1), result.stderr
    assert "deleting raw" in result.stderr  # the names of the deleted files were logged
    assert "\\x1b[2J" in result.stderr
    assert not RAW_CONTROLS.search(result.stderr), repr(result.stderr)
    summary_lines = 0
    for line in result.stderr.splitlines():
        # every line is one of tcmp's: a log record, or the --once summary at the end
        if re.match(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} )?(DEBUG|INFO|WARNING|ERROR|CRITICAL) ", line):
            continue
        summary_lines += 1
        assert "forged" not in line, line
    assert summary_lines <= 3, result.stderr


def test_status_shows_a_hostile_root_as_text(tmp_path):
    root = tmp_path / "[reverse]root\x1b[31m\u202e"
    root.mkdir()
    watched = run("watch", str(root), "--once", "--workers", "0", cwd=tmp_path)
    assert watched.returncode == 0, watched.stderr
    assert not RAW_CONTROLS.search(watched.stderr), repr(watched.stderr)
    status = run("status", str(root), cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    assert "[reverse]root\\x1b[31m\\u202e" in status.stdout  # markup shown, not applied; controls escaped
    assert not RAW_CONTROLS.search(status.stdout), repr(status.stdout)


@pytest.mark.parametrize("prefix", [" =1+1/", "\t=1+1/", "\r@SUM(1)/", "-2+3/"], ids=["space", "tab", "cr", "minus"])
def test_formula_prefixes_are_escaped_in_the_csv_not_in_the_xlsx(tmp_path, prefix):
    s = hostile_scenario(tmp_path / "dump", prefix)
    result = run("compare", "-m", "torchair", "-tp", str(s.target), "-gp", str(s.golden_fx), "-o", "out",
                 "--jobs", "1", "-hl", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = next(p for p in (tmp_path / "out").glob("*.csv") if "unmatched" not in p.name)
    names = [row["API Name"] for row in csv.DictReader(report.open(newline=""))]
    hostile = [n for n in names if "MatMul_0" in n]
    assert hostile == ["'" + prefix + "MatMul_0.output.0"] or hostile == [
        "'" + prefix + "MatMul_0.input.0",
        "'" + prefix + "MatMul_0.input.1",
        "'" + prefix + "MatMul_0.output.0",
    ], hostile
    sheet = openpyxl.load_workbook(next((tmp_path / "out").glob("*.xlsx"))).active
    header = [c.value for c in sheet[1]]
    column = header.index("API Name")
    # xlsx stores a CR as `_x000D_`, which openpyxl leaves as it is
    cells = [row[column].replace("_x000D_", "\r") for row in sheet.iter_rows(min_row=2, values_only=True)]
    assert prefix + "MatMul_0.output.0" in cells  # typed strings: the name itself, no `'`
    assert not any(isinstance(c, str) and c.startswith("'") for c in cells)


def test_shown_escapes_each_unsafe_character_and_nothing_else():
    from tcmp.schemas.display import escape, shown

    assert shown("a\x1b[2Jb\nc\u202ed\\e\tf\x07\x9b\u2066 é 报告 [x]") == (
        "a\\x1b[2Jb\\nc\\u202ed\\\\e\\tf\\x07\\x9b\\u2066 é 报告 [x]"
    )
    assert escape("[bold]x\x1b") == "\\[bold]x\\x1b"


@pytest.mark.parametrize(
    "value", ["=SUM(A1)", "@x", "-x", "+x", " =x", "  @x", "\t=x", "\rx", "'=x", "''=x", "'abc", "-1.5", "+3e-4",
              "plain", "", " ", "'", "a=b"],
)  # fmt: skip
def test_csv_cells_are_escaped_reversibly(value):
    from tcmp.compare.report.table import text, unescaped

    cell = text(value)
    assert unescaped(cell) == value
    stripped = cell.lstrip(" ")
    is_number = re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", value) is not None
    assert is_number or not stripped or stripped[0] not in "=+-@\t\r"  # what a spreadsheet would evaluate
    assert (cell != value) == (value.lstrip("'").lstrip(" ")[:1] in tuple("=+-@\t\r") and not is_number)
