"""The repository documents itself: no file cites a document outside it, and every reference to a section of
docs/formats.md or docs/decisions.md names a heading those files have.

The patterns are spelled in pieces so that this file, which is scanned too, does not match itself."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCANNED_DIRS = ("tcmp", "tests", "bench", "conformance", "docs")
SCANNED_FILES = ("README.md", "Makefile", "pyproject.toml", "setup.py")
SKIPPED_PARTS = frozenset({"__pycache__", ".venv", "build", ".pytest_cache", ".hypothesis"})

SECTION = "\N{SECTION SIGN}"
OUTSIDE = (
    # the design notes the code was written from live outside the repository
    re.compile(r"\bspec" + "/"),
    re.compile(r"\bspec " + SECTION),
    re.compile(SECTION + r"\s?\d"),
    re.compile(r"\b(?:dump-formats|compare-decisions|msprobe-compare-semantics|ecosystem-notes|DESIGN)" + r"\.md\b"),
    # absolute paths of the machine the repository was written on
    re.compile("/" + r"work/"),
)
DOC_REFERENCE = re.compile(r"docs/(formats|decisions)\.md,((?:\s*\"[^\"\n]+\",?)+)")


def scanned_files(root: Path) -> list[Path]:
    files = [root / name for name in SCANNED_FILES if (root / name).is_file()]
    for directory in SCANNED_DIRS:
        for path in sorted((root / directory).rglob("*")):
            if path.is_file() and not SKIPPED_PARTS.intersection(path.relative_to(root).parts):
                files.append(path)
    return files


def text_of(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None  # a binary file (a compiled extension, an image) cites nothing


def outside_citations(root: Path) -> list[str]:
    found = []
    for path in scanned_files(root):
        text = text_of(path)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if any(pattern.search(line) for pattern in OUTSIDE):
                found.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    return found


def headings(doc: Path) -> set[str]:
    return {line.lstrip("#").strip() for line in doc.read_text(encoding="utf-8").splitlines() if line.startswith("#")}


def unknown_sections(root: Path) -> list[str]:
    known = {name: headings(root / "docs" / f"{name}.md") for name in ("formats", "decisions")}
    found = []
    for path in scanned_files(root):
        text = text_of(path)
        if text is None:
            continue
        for match in DOC_REFERENCE.finditer(text):
            for section in re.findall(r"\"([^\"\n]+)\"", match.group(2)):
                if section not in known[match.group(1)]:
                    found.append(f"{path.relative_to(root)}: docs/{match.group(1)}.md has no section {section!r}")
    return found


def test_no_file_cites_a_document_outside_the_repository():
    assert outside_citations(REPO) == []


def test_section_references_name_existing_headings():
    assert unknown_sections(REPO) == []


@pytest.mark.parametrize(
    "line",
    [
        '"""GE dump files (' + "spec" + "/dump-formats" + ".md " + SECTION + '1.1)."""',
        "# field numbers from spec " + SECTION + "4.4",
        "# see " + SECTION + "2.2",
        "# as in compare-decisions" + ".md",
        "# copied from /" + "work/shared/notes",
    ],
)
def test_the_patterns_catch_the_forms_that_were_used(tmp_path, line):
    (tmp_path / "tcmp").mkdir()
    (tmp_path / "tcmp" / "module.py").write_text(line + "\n")
    assert len(outside_citations(tmp_path)) == 1


def test_a_reference_to_a_missing_section_is_caught(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "formats.md").write_text("# Formats\n## GE dump files\n")
    (tmp_path / "docs" / "decisions.md").write_text("# Decisions\n")
    (tmp_path / "tcmp").mkdir()
    (tmp_path / "tcmp" / "a.py").write_text("# docs/" + 'formats.md, "GE dump files", "No such section"\n')
    assert unknown_sections(tmp_path) == ["tcmp/a.py: docs/formats.md has no section 'No such section'"]
