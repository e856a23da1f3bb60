"""What `tcmp … --help` tells a new user (issue 27): arguments named for what they take, what `--workers 0` and
`--raw-budget` mean, the commands in the order of their use, and `-m` answered in one line of tcmp's own."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

COMMANDS = ("compare", "watch", "status", "parse", "demo", "version")


def tcmp(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tcmp", *args], capture_output=True, text=True, timeout=120)


def _option_help(help_text: str, option: str) -> str:
    """The help of `option`, its lines joined: from its line to the next option's."""
    lines = help_text.splitlines()
    start = next(k for k, line in enumerate(lines) if re.match(rf"\s+{re.escape(option)}\b", line))
    end = next((k for k in range(start + 1, len(lines)) if re.match(r"\s+-", lines[k])), len(lines))
    return " ".join(" ".join(lines[start:end]).split())


@pytest.mark.parametrize("command", COMMANDS)
def test_no_metavar_names_a_python_type(command):
    done = tcmp(command, "--help")
    assert done.returncode == 0, done.stderr
    usage = done.stdout.splitlines()[0]
    assert "<list[" not in done.stdout and "{" not in usage, done.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_is_named_for_what_it_takes(command):
    """typer names a value by its Python type (`--db <path>`, `--rank <int range>`): each option says what it takes
    instead (`--db FILE`, `--rank N`, `-tp DIR`, `--cosine X`)."""
    text = tcmp(command, "--help").stdout
    typed = re.findall(r"^\s+-.*?(<[a-z ]+>)", text, re.MULTILINE)
    assert typed == [], text


def test_compare_options_take_what_they_say():
    text = tcmp("compare", "--help").stdout
    for option, metavar in (("--target-path", "DIR"), ("--rank", "N"), ("--db", "FILE"), ("--graph", "PATH"),
                            ("--cosine", "X"), ("--fx-token-base", "0|1"), ("--target-stage", "STAGE")):  # fmt: skip
        assert re.search(rf"^\s+(-\S+, )*{re.escape(option)} {re.escape(metavar)}\s", text, re.MULTILINE), option


@pytest.mark.parametrize(("command", "shown"), [("parse", "PATH..."), ("watch", "DIR..."), ("status", "[DIR]")])
def test_arguments_are_named_for_what_they_take(command, shown):
    text = tcmp(command, "--help").stdout
    assert text.splitlines()[0].endswith(f"[OPTIONS] {shown}"), text
    assert re.search(rf"^  {re.escape(shown.strip('[]'))}  ", text, re.MULTILINE), text


def test_watch_options_say_what_they_take_and_what_0_means():
    text = tcmp("watch", "--help").stdout
    assert re.search(r"^\s+--keep-raw-ops GLOB\b", text, re.MULTILINE), text
    workers = _option_help(text, "--workers")
    assert workers.startswith("--workers N ") and "0: none" in workers and "fastest on small trees" in workers
    budget = _option_help(text, "--raw-budget")
    assert budget.startswith("--raw-budget SIZE ") and "K, M, G, T" in budget and "2^30 bytes" in budget


def test_the_commands_are_listed_by_use():
    text = tcmp("--help").stdout
    listed = text.split("Commands:")[1].split()
    assert [word for word in listed if word in COMMANDS] == list(COMMANDS)


def test_a_mode_other_than_torchair_is_one_line_of_tcmp(tmp_path):
    done = tcmp("compare", "-tp", str(tmp_path), "-gp", str(tmp_path), "-m", "pytorch")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: --mode pytorch: tcmp compares torchair dumps only (--mode torchair, the default)"
    ]
