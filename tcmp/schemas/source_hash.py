"""The hash of this installation's tcmp sources: a cluster compare runs only where every node has the same code
(one version number can be two codes: an edited checkout)."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
from pathlib import Path

# every package whose directory is its own (pyproject's package-dir); their sub-packages are below them
PACKAGES = ("tcmp", "tcmp.schemas", "tcmp.summaries", "tcmp.compare", "tcmp.daemon")
SOURCE_SUFFIXES = frozenset({".py", ".pyi", ".c", ".js", ".css", ".html", ".proto"})


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)  # imports the parents only, never the package itself
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"tcmp package {name} not found")
    return Path(next(iter(spec.submodule_search_locations)))


def source_files() -> list[tuple[str, Path]]:
    """(name to hash, path) of every source file of tcmp: Python, the C extension's source, the page's files."""
    files = []
    for package in PACKAGES:
        root = _package_dir(package)
        for path in sorted(root.rglob("*")):
            if path.suffix in SOURCE_SUFFIXES and "__pycache__" not in path.parts and path.is_file():
                files.append((f"{package}/{path.relative_to(root).as_posix()}", path))
    return files


@functools.lru_cache(maxsize=1)
def code_hash() -> str:
    digest = hashlib.sha256()
    for name, path in source_files():
        digest.update(name.encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]
