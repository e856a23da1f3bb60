"""The package's import graph, built from the sources with `ast`: no import cycle, no upward import between the
layers, no import of another module's private names.

Every import counts, wherever it is written: at module level, inside a function (a deferred import that closes a
cycle is still a cycle) and under `if TYPE_CHECKING:` (a dependency on a later layer even when only for types).
Imports of modules outside the package (numpy, ray, torch, ...) are not edges.

The layers, lowest first (a module may import its own layer's modules and any lower layer's):

    tcmp.schemas (with synth, index, proto) < tcmp.summaries < tcmp.compare < tcmp.daemon < tcmp.cli, tcmp.__main__

and inside tcmp.compare, the pipeline's stages:

    rules  <  records  <  collect  <  match  <  judge  <  report  <  execute  <  cluster

`rules` below `records` because the records carry a rule's result (`records.CastCheck` is `rules.cast_check`'s) and
no rule needs a record. The packages `tcmp` and `tcmp.compare` themselves hold only docstrings and the version:
they rank lowest in their layer.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

PACKAGE_ROOT = Path(__file__).resolve().parent.parent / "tcmp"

LAYERS = (("tcmp.schemas",), ("tcmp.summaries",), ("tcmp.compare",), ("tcmp.daemon",), ("tcmp.cli", "tcmp.__main__"))
COMPARE_STAGES = ("rules", "records", "collect", "match", "judge", "report", "execute", "cluster")


@dataclass(frozen=True)
class Edge:
    importer: str
    imported: str
    line: int


@dataclass(frozen=True)
class PrivateUse:
    importer: str
    owner: str  # the module the private name belongs to
    name: str
    line: int


@dataclass(frozen=True)
class ImportGraph:
    modules: frozenset[str]
    edges: tuple[Edge, ...]
    private_uses: tuple[PrivateUse, ...]


def module_sources(root: Path, package: str = "tcmp") -> dict[str, str]:
    """Module name -> source text for every .py under `root` (the directory of package `package`)."""
    sources = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        sources[".".join((package, *parts))] = path.read_text(encoding="utf-8")
    return sources


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _resolve_from(module: str, node: ast.ImportFrom, modules: frozenset[str]) -> str:
    """The absolute name of what `from ... import` in `module` imports from; a package's `__init__` is its own base."""
    if not node.level:
        return node.module or ""
    is_package = any(other.startswith(module + ".") for other in modules)
    base = module if is_package else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        base = base.rpartition(".")[0]
    return f"{base}.{node.module}" if node.module else base


def _known(name: str, modules: frozenset[str]) -> Optional[str]:
    """The package module `name` is, or the innermost package module it lies in (`tcmp.x.y.z` with `z` a class)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def build_graph(sources: Mapping[str, str]) -> ImportGraph:
    """The import edges and private-name uses among `sources` (module name -> source text)."""
    modules = frozenset(sources)
    edges: list[Edge] = []
    private: list[PrivateUse] = []
    for module, text in sorted(sources.items()):
        tree = ast.parse(text, filename=module)
        # local name -> the package module it is bound to (`import tcmp.a.b as m`, `from tcmp.a import b`)
        bound: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = _known(alias.name, modules)
                    if target is None:
                        continue
                    edges.append(Edge(module, target, node.lineno))
                    if alias.asname:
                        bound[alias.asname] = target
                    else:
                        top = alias.name.partition(".")[0]
                        if top in modules:
                            bound[top] = top
            elif isinstance(node, ast.ImportFrom):
                source = _resolve_from(module, node, modules)
                owner = _known(source, modules)
                if owner is None:
                    continue
                for alias in node.names:
                    submodule = f"{source}.{alias.name}"
                    if submodule in modules:
                        edges.append(Edge(module, submodule, node.lineno))
                        bound[alias.asname or alias.name] = submodule
                        continue
                    edges.append(Edge(module, owner, node.lineno))
                    if _is_private(alias.name) and owner != module:
                        private.append(PrivateUse(module, owner, alias.name, node.lineno))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _is_private(node.attr):
                owner = _attribute_module(node.value, bound, modules)
                if owner is not None and owner != module:
                    private.append(PrivateUse(module, owner, node.attr, node.lineno))
    return ImportGraph(modules, tuple(edges), tuple(private))


def _attribute_module(value: ast.expr, bound: Mapping[str, str], modules: frozenset[str]) -> Optional[str]:
    """The package module an expression like `m` or `tcmp.a.b` names, if it names one."""
    if isinstance(value, ast.Name):
        return bound.get(value.id)
    if isinstance(value, ast.Attribute):
        parent = _attribute_module(value.value, bound, modules)
        if parent is not None and f"{parent}.{value.attr}" in modules:
            return f"{parent}.{value.attr}"
    return None


def cycles(graph: ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative), each sorted."""
    successors: dict[str, set[str]] = {m: set() for m in graph.modules}
    for edge in graph.edges:
        if edge.importer != edge.imported:
            successors[edge.importer].add(edge.imported)
    index: dict[str, int] = {}
    lowlink: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(successors[start])))]
        index[start] = lowlink[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = lowlink[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(successors[child]))))
                elif child in on_stack:
                    lowlink[node] = min(lowlink[node], index[child])
                continue
            work.pop()
            if work:
                lowlink[work[-1][0]] = min(lowlink[work[-1][0]], lowlink[node])
            if lowlink[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def rank(module: str) -> tuple[int, int]:
    """(layer, compare stage) of a module; the package `tcmp` and `tcmp.compare` rank lowest in their layer."""
    if module == "tcmp":
        return (-1, -1)
    layers = [n for n, packages in enumerate(LAYERS) if any(_within(module, p) for p in packages)]
    assert layers, f"{module} is in no layer: add it to LAYERS in tests/test_layers.py"
    layer = layers[0]
    if layer != 2 or module == "tcmp.compare":
        return (layer, -1)
    stage = module.split(".")[2]
    assert stage in COMPARE_STAGES, f"{module} is in no compare stage: add it to COMPARE_STAGES"
    return (layer, COMPARE_STAGES.index(stage))


def upward(graph: ImportGraph) -> list[Edge]:
    return [edge for edge in graph.edges if rank(edge.importer) < rank(edge.imported)]


def _cycle_lines(graph: ImportGraph, component: Iterable[str]) -> str:
    members = set(component)
    inner = sorted({(e.importer, e.imported, e.line) for e in graph.edges if {e.importer, e.imported} <= members})
    return "\n".join(f"    {a}:{line} -> {b}" for a, b, line in inner if a != b)


def problems(graph: ImportGraph) -> list[str]:
    """Every violation, one readable entry each; empty when the graph keeps the rules."""
    found = [
        f"import cycle among {', '.join(component)}:\n{_cycle_lines(graph, component)}" for component in cycles(graph)
    ]
    found += [
        f"upward import: {e.importer}:{e.line} imports {e.imported} (a later layer or stage)"
        for e in sorted(set(upward(graph)), key=lambda e: (e.importer, e.line, e.imported))
    ]
    found += [
        f"private name: {p.importer}:{p.line} uses {p.owner}.{p.name}"
        for p in sorted(set(graph.private_uses), key=lambda p: (p.importer, p.line, p.name))
    ]
    return found


# --- the real package ----------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _real_graph() -> ImportGraph:
    return build_graph(module_sources(PACKAGE_ROOT))


def test_builder_sees_known_edges() -> None:
    """Not vacuous: the builder finds edges of each form the package writes, and every module is in a layer."""
    graph = _real_graph()
    pairs = {(e.importer, e.imported) for e in graph.edges}
    assert len(graph.modules) > 100
    assert len(pairs) > 300
    assert ("tcmp.compare.records", "tcmp.compare.rules.cast_check") in pairs  # module level
    assert ("tcmp.schemas.ge_dump", "tcmp.schemas.ge_nano") in pairs  # deferred, inside read_ge_dump
    assert any(a.startswith("tcmp.cli") and b.startswith("tcmp.daemon.") for a, b in pairs)  # deferred, in the commands
    for module in graph.modules:
        rank(module)


def test_no_import_cycle() -> None:
    graph = _real_graph()
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(f"  {', '.join(c)}:\n{_cycle_lines(graph, c)}" for c in found)


def test_no_upward_import() -> None:
    found = [p for p in problems(_real_graph()) if p.startswith("upward")]
    assert not found, "\n".join(found)


def test_no_private_cross_import() -> None:
    found = [p for p in problems(_real_graph()) if p.startswith("private")]
    assert not found, "\n".join(found)


def test_tests_use_no_private_name_of_the_package() -> None:
    """The tests too go through what a module makes public: a test of a private helper pins an implementation."""
    sources = {**module_sources(PACKAGE_ROOT), **module_sources(PACKAGE_ROOT.parent / "tests", "tests")}
    graph = build_graph(sources)
    found = sorted(
        f"{p.importer}:{p.line} uses {p.owner}.{p.name}"
        for p in graph.private_uses
        if _within(p.importer, "tests") and _within(p.owner, "tcmp")
    )
    assert any(_within(e.importer, "tests") for e in graph.edges), "the tests' imports were not seen"
    assert not found, "\n".join(found)


# --- the checker on a hand-built source set ------------------------------------------------------------------------

_SYNTHETIC = {
    "tcmp": '"""top"""',
    "tcmp.schemas": "",
    "tcmp.schemas.a": "def f():\n    from tcmp.schemas import b\n    return b.g()\n",
    "tcmp.schemas.b": "from . import a\n\ndef g():\n    return a\n",
    "tcmp.schemas.c": "import tcmp.schemas.a as alias\n\nX = alias._hidden\n",
    "tcmp.compare": "",
    "tcmp.compare.match": "",
    "tcmp.compare.match.m": "from tcmp.compare.report.r import Row\nfrom ..judge.j import _secret\n",
    "tcmp.compare.judge": "",
    "tcmp.compare.judge.j": "_secret = 1\n\ndef own():\n    from tcmp.compare.judge.j import _secret\n",
    "tcmp.compare.report": "",
    "tcmp.compare.report.r": "import numpy\nfrom tcmp.compare.judge import j\nRow = j\n",
    "tcmp.daemon": "",
    "tcmp.daemon.d": (
        "import tcmp.compare.judge.j\n\nY = tcmp.compare.judge.j._secret\nZ = tcmp.compare.judge.j.__name__\n"
    ),
    "tcmp.summaries": "",
    "tcmp.summaries.s": "from tcmp.daemon.d import Y\n",
}


def test_builder_forms_on_synthetic_sources() -> None:
    graph = build_graph(_SYNTHETIC)
    pairs = {(e.importer, e.imported) for e in graph.edges}
    assert ("tcmp.schemas.a", "tcmp.schemas.b") in pairs  # deferred, `from package import submodule`
    assert ("tcmp.schemas.b", "tcmp.schemas.a") in pairs  # relative `from . import submodule`
    assert ("tcmp.schemas.c", "tcmp.schemas.a") in pairs  # `import x.y as alias`
    assert ("tcmp.compare.match.m", "tcmp.compare.judge.j") in pairs  # relative `from ..x.y import name`
    assert not any(e.imported == "numpy" for e in graph.edges)


def test_checker_reports_cycle_upward_and_private() -> None:
    found = problems(build_graph(_SYNTHETIC))
    assert found == [
        "import cycle among tcmp.schemas.a, tcmp.schemas.b:\n"
        "    tcmp.schemas.a:2 -> tcmp.schemas.b\n"
        "    tcmp.schemas.b:1 -> tcmp.schemas.a",
        "upward import: tcmp.compare.match.m:1 imports tcmp.compare.report.r (a later layer or stage)",
        "upward import: tcmp.compare.match.m:2 imports tcmp.compare.judge.j (a later layer or stage)",
        "upward import: tcmp.summaries.s:1 imports tcmp.daemon.d (a later layer or stage)",
        "private name: tcmp.compare.match.m:2 uses tcmp.compare.judge.j._secret",
        "private name: tcmp.daemon.d:3 uses tcmp.compare.judge.j._secret",
        "private name: tcmp.schemas.c:3 uses tcmp.schemas.a._hidden",
    ]


def test_layer_order() -> None:
    assert rank("tcmp.schemas.synth.model") < rank("tcmp.summaries.merge") < rank("tcmp.compare")
    assert rank("tcmp.compare") < rank("tcmp.compare.rules.ulp") < rank("tcmp.compare.records")
    assert rank("tcmp.compare.records") < rank("tcmp.compare.collect.binding") < rank("tcmp.compare.match.fx")
    assert rank("tcmp.compare.match.fx") < rank("tcmp.compare.judge.metrics") < rank("tcmp.compare.report.page")
    assert rank("tcmp.compare.report.page") < rank("tcmp.compare.execute.run") < rank("tcmp.compare.cluster.run")
    assert rank("tcmp.compare.cluster.run") < rank("tcmp.daemon.service") < rank("tcmp.cli") == rank("tcmp.__main__")
