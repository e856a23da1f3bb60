"""The README's usage examples run as written: every command of each block marked `<!-- doc-test … -->` runs in a
real subprocess against a synthetic dump pair (tcmp.schemas.synth) put where the README's paths say, and must
exit as the README says (0) and write what it says. A marked command this test has no check for fails it, and so
does a README without a marked block.

What each command must have written is worked out from the synthetic scenario (its op names and file paths, the
files on disk), never from tcmp's own readers."""

from __future__ import annotations

import csv
import json
import re
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import Scenario, ScenarioConfig, write_scenario

README = Path(__file__).resolve().parent.parent / "README.md"
MARKER = re.compile(r"^<!-- doc-test\b.*-->\s*$")
FENCE = re.compile(r"^```(\w*)\s*$")

# the README's example paths, relative to the directory the commands run in
GE_DUMP = "dump/ge/msprobe_ge_dump"
FX_DUMP = "dump/fx/msprobe_fx_dump"
DUMP_ROOT = "dump"


def marked_blocks(text: str) -> list[list[str]]:
    """The lines of every fenced block whose opening fence follows a doc-test marker (blank lines between allowed)."""
    blocks: list[list[str]] = []
    lines = text.splitlines()
    armed = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if MARKER.match(line):
            armed = True
        elif FENCE.match(line):
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            if armed:
                blocks.append(lines[i + 1 : end])
            armed = False
            i = end
        elif line.strip():
            armed = False
        i += 1
    return blocks


def commands(block: list[str]) -> list[list[str]]:
    """Each command of a block as argv: comments (also whole comment lines continuing one) dropped."""
    found = []
    for line in block:
        argv = shlex.split(line, comments=True)
        if argv:
            found.append(argv)
    return found


def test_marked_blocks_are_found_and_hold_tcmp_commands():
    blocks = marked_blocks(README.read_text(encoding="utf-8"))
    assert blocks, "no README block is marked `<!-- doc-test … -->`: the README's examples would go untested"
    for block in blocks:
        argvs = commands(block)
        assert argvs, f"a marked block holds no command: {block}"
        assert all(argv[0] == "tcmp" for argv in argvs), argvs


def test_marker_parsing_on_a_hand_made_text():
    text = "\n".join(
        [
            "```sh",
            "tcmp not-marked",
            "```",
            "<!-- doc-test: run -->",
            "",
            "```sh",
            "tcmp one --flag   # says what",
            "         # a comment going on",
            "tcmp two",
            "```",
            "<!-- doc-test -->",
            "a paragraph in between disarms the marker",
            "```sh",
            "tcmp three",
            "```",
        ]
    )
    assert [commands(b) for b in marked_blocks(text)] == [[["tcmp", "one", "--flag"], ["tcmp", "two"]]]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> tuple[Path, Scenario]:
    """A directory holding the README's `dump/`: the synthetic GE dump at dump/ge/…, its FX golden at dump/fx/…."""
    root = tmp_path_factory.mktemp("readme")
    written = write_scenario(
        root / "synth", ScenarioConfig(model=ModelConfig(layers=1), tokens=1, write_fusion_off=False)
    )
    assert written.golden_fx is not None
    (root / "dump" / "ge").mkdir(parents=True)
    (root / "dump" / "fx").mkdir()
    written.target.rename(root / GE_DUMP)
    written.golden_fx.rename(root / FX_DUMP)
    # the scenario's file paths, moved with the trees: only their names and op names are used below
    return root, written


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    assert argv[0] == "tcmp"
    return subprocess.run(
        [sys.executable, "-m", "tcmp", *argv[1:]], cwd=cwd, capture_output=True, text=True, timeout=900
    )


def only(directory: Path, pattern: str) -> Path:
    matches = sorted(directory.glob(pattern))
    assert len(matches) == 1, (pattern, sorted(p.name for p in directory.iterdir()))
    return matches[0]


def check_demo(argv: list[str], cwd: Path, scenario: Scenario, out: str) -> None:
    assert len(argv) == 3, argv  # tcmp demo DIR
    report = cwd / argv[2] / "report"
    for pattern in ("tcmp_compare_*[0-9].csv", "tcmp_compare_*.xlsx", "tcmp_compare_*_report.html"):
        only(report, pattern)
    printed = dict(re.findall(r"^\s+(page|report|unmatched|summary): (\S+)", out, flags=re.MULTILINE))
    assert set(printed) == {"page", "report", "unmatched", "summary"}, out  # "whose paths it prints"
    assert all(Path(path).parent == report and Path(path).is_file() for path in printed.values()), printed


def check_parse_info(argv: list[str], cwd: Path, scenario: Scenario, out: str) -> None:
    assert argv[2] == GE_DUMP, argv
    objects = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert objects
    for key in ("op", "io", "index", "dtype", "format", "device_shape", "shape", "size", "original_op", "dumped"):
        assert all(key in o for o in objects), key
    assert {o["op"] for o in objects} == {op.op_name for op in scenario.target_ops}
    assert {Path(o["file"]).name for o in objects} == {p.name for op in scenario.target_ops for p in op.paths}


def check_parse_out(argv: list[str], cwd: Path, scenario: Scenario, out: str) -> None:
    assert argv[2] == GE_DUMP, argv
    written = sorted(p.name for p in (cwd / argv[argv.index("-o") + 1]).iterdir())
    named = re.compile(r"^(?P<file>.+)\.(?:input|output)\.\d+\.npy$")
    assert written and all(named.match(name) for name in written), written
    assert {named.match(name)["file"] for name in written} == {p.name for op in scenario.target_ops for p in op.paths}


def check_compare(argv: list[str], cwd: Path, scenario: Scenario, out: str) -> None:
    assert argv[argv.index("-tp") + 1] == GE_DUMP and argv[argv.index("-gp") + 1] == FX_DUMP, argv
    reports = cwd / argv[argv.index("-o") + 1]
    table = only(reports, "tcmp_compare_rank0_*[0-9].csv")
    stem = table.name[: -len(".csv")]
    for suffix in ("_unmatched.csv", "_summary.json", "_report.html"):
        assert (reports / (stem + suffix)).is_file(), suffix
    with open(table, newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0][:3] == ["Token", "Rank", "API Name"]
    assert len(rows) > 1
    api_ops = {row[2].rsplit(".", 2)[0] for row in rows[1:]}
    assert api_ops <= {op.op_name for op in scenario.target_ops}


def check_watch_once(argv: list[str], cwd: Path, scenario: Scenario, out: str) -> None:
    assert argv[-1] == DUMP_ROOT, argv
    root = cwd / DUMP_ROOT
    index = root / ".tcmp" / "index.sqlite"
    on_disk = [p for p in root.rglob("*") if p.is_file() and ".tcmp" not in p.relative_to(root).parts]
    with sqlite3.connect(f"file:{index}?mode=ro", uri=True) as db:
        states = dict(db.execute("SELECT state, count(*) FROM files GROUP BY state").fetchall())
    assert states == {"summarized": len(on_disk)}


def check_status(argv: list[str], cwd: Path, scenario: Scenario, out: str) -> None:
    assert argv[-1] == DUMP_ROOT, argv
    root = cwd / DUMP_ROOT
    dump_files = [
        p
        for p in root.rglob("*")
        if p.is_file() and ".tcmp" not in p.relative_to(root).parts and not p.name.endswith(".txt")
    ]
    assert re.search(rf"files indexed\s+{len(dump_files)}\b", out), out
    assert re.search(r"failed\s+0 files", out), out


def checker(argv: list[str]):
    """The check for one README command, by what it is."""
    sub, options = argv[1], set(argv[2:])
    if sub == "demo":
        return check_demo
    if sub == "parse" and options >= {"--info"} and "-o" not in options:
        return check_parse_info
    if sub == "parse" and "-o" in options and "--info" not in options:
        return check_parse_out
    if sub == "compare" and {"-tp", "-gp", "-o"} <= options:
        return check_compare
    if sub == "watch" and "--once" in options:
        return check_watch_once
    if sub == "status":
        return check_status
    return None


def test_readme_commands_run_as_documented(workdir):
    cwd, scenario = workdir
    argvs = [argv for block in marked_blocks(README.read_text(encoding="utf-8")) for argv in commands(block)]
    assert argvs
    unchecked = [shlex.join(argv) for argv in argvs if checker(argv) is None]
    assert not unchecked, f"README commands this test has no check for (add one): {unchecked}"
    for argv in argvs:
        result = run(argv, cwd)
        assert result.returncode == 0, (
            shlex.join(argv),
            result.returncode,
            result.stdout[-2000:],
            result.stderr[-2000:],
        )
        checker(argv)(argv, cwd, scenario, result.stdout)
