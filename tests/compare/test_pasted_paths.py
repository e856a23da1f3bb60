"""Paths on the console can be pasted into a shell (issue 27): quoted when they need it (shlex), so a report
directory with a space and a non-ASCII name comes back whole from `shlex.split`."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from tcmp.schemas.synth.faults import Fault, FaultKind
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario


def test_report_paths_are_printed_as_a_shell_reads_them(tmp_path):
    config = ScenarioConfig(model=ModelConfig(layers=1), tokens=1, faults=(Fault("MatMul_0", FaultKind.NAN),))
    scenario = write_scenario(tmp_path / "dump", config)
    reports = tmp_path / "uni" / "报告 out"
    done = subprocess.run([sys.executable, "-m", "tcmp", "compare", "-tp", str(scenario.target), "-gp",
                           str(scenario.golden_fx), "-o", str(reports), "-j", "1", "-hl"],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = {}
    for line in done.stdout.splitlines():
        words = shlex.split(line) if line.strip().split(":")[0] in {"report", "unmatched", "summary", "page"} else []
        if words:
            said[words[0]] = words[1:]
    assert sorted(said) == ["page:", "report:", "summary:", "unmatched:"], done.stdout
    written = sorted(p.name for p in reports.iterdir())
    for label, words in said.items():
        path = Path(words[0])
        assert path.parent == reports and path.name in written, (label, words)
    xlsx = said["report:"][1:]  # `(+ NAME.xlsx)`
    assert xlsx[0] == "(+" and xlsx[1].rstrip(")") in written


def test_parse_says_where_it_wrote_in_a_pasteable_form(tmp_path):
    scenario = write_scenario(tmp_path / "dump", ScenarioConfig(model=ModelConfig(layers=1), tokens=1))
    into = tmp_path / "npy 报告"
    done = subprocess.run([sys.executable, "-m", "tcmp", "parse", str(scenario.target), "-o", str(into)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    last = shlex.split(done.stderr.splitlines()[-1])
    assert last[-3:-1] == ["converted", "into"] and Path(last[-1]) == into and any(into.glob("*.npy"))
