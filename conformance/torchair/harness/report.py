"""The harness's table: one line per (torchair version, model), the counts of evaluate.py, and a verdict."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from .evaluate import ModelResult, known_gap

COLUMNS = (
    ("version", "torchair"),
    ("model", "model"),
    ("mode", "mode"),
    ("rows", "rows"),
    ("fails", "FAIL"),
    ("false_fails", "false FAIL"),
    ("fault_fails", "fault FAILs"),
    ("fault_first", "fault first"),
    ("missing_ops", "ops missing"),
    ("unexplained_no_partner", "no partner w/ partner"),
    ("by_design_without_reason", "by design w/o reason"),
    ("stacks_checked", "stacks checked"),
    ("stack_wrong", "stack wrong"),
    ("clean_fails", "clean FAIL"),
    ("clean_first", "clean first div."),
    ("scope_wrong", "scope wrong"),
    ("wrong_pairs", "wrong pairs"),
    ("named_not_compared", "named uncompared (info)"),
    ("by_design_with_partner", "by design w/ partner (info)"),
)


def _cell(result: ModelResult, field: str) -> str:
    value = getattr(result, field)
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, list):
        return str(len(value))
    return str(value)


def table(results: list[ModelResult], notes: dict) -> str:
    """A Markdown table (it reads as plain text too). `notes` maps (version, model, mode) to why a line has no
    counts."""
    header = [title for _, title in COLUMNS] + ["verdict"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in results:
        note = notes.get((r.version, r.model, r.mode))
        if note is not None:
            cells = [r.version, r.model, r.mode] + ["-"] * (len(COLUMNS) - 3) + [note]
        elif r.refused is not None:
            cells = [r.version, r.model, r.mode] + ["-"] * (len(COLUMNS) - 3) + [f"tcmp refused: {r.refused}"]
        else:
            gap = known_gap(r)
            verdict = "pass" if r.passed else (f"known gap: {gap}" if gap else "FAIL")
            cells = [_cell(r, f) for f, _ in COLUMNS] + [verdict]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def examples(results: list[ModelResult], per_kind: int = 1) -> str:
    """The first item of each failing kind per version: what a reader of the table looks at first."""
    out = []
    kinds = ("false_fails", "missing_ops", "unexplained_no_partner", "by_design_without_reason", "stack_wrong",
             "clean_fails", "clean_first", "scope_wrong", "wrong_pairs", "named_not_compared",
             "by_design_with_partner")  # fmt: skip
    for kind in kinds:
        for version in sorted({r.version for r in results}):
            items = [(r.model, r.mode, item) for r in results if r.version == version for item in getattr(r, kind)]
            for model, mode, item in items[:per_kind]:
                out.append(f"{kind} [{version} {model} {mode}] {item}")
    return "\n".join(out)


def write_details(path: Path, results: list[ModelResult]) -> None:
    path.write_text(json.dumps([asdict(r) | {"passed": r.passed} for r in results], indent=1))
