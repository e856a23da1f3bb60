"""Units and their planning: a unit is one token of one graph of one rank, planned (its files listed, its GE
headers read, its tensors paired) where it is compared, so headers are read once and only rows travel back."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Optional, Union

from tcmp.compare.collect.binding import Binding, GoldenKind
from tcmp.compare.collect.fusion import GraphView
from tcmp.compare.collect.inputs import CompareInputs
from tcmp.compare.collect.scope import NOT_SELECTED, unselected_nodes
from tcmp.compare.collect.sources import DumpSource, by_token
from tcmp.compare.execute.prefetch import read_headers_ahead
from tcmp.compare.judge.rows import Row
from tcmp.compare.match.acl import acl_executions, calls_by_node, match_acl_acl, match_acl_fx
from tcmp.compare.match.context import MatchResult, TokenContext
from tcmp.compare.match.executions import fx_calls, ge_executions
from tcmp.compare.match.token import match_token
from tcmp.compare.records import FileHeader, Pair, Role, Unmatched, UnmatchedKind
from tcmp.compare.report.outcome import Counts, Divergence, UnmatchedBatch
from tcmp.compare.report.table import RenderedRows
from tcmp.schemas.acl_graph_dump import AclGraphDump
from tcmp.schemas.dump_outline import DumpDir
from tcmp.schemas.dump_records import IO, FileSummary, Side
from tcmp.schemas.dump_tree import DumpFile, FileKind
from tcmp.schemas.errors import DumpError, unreadable_reason
from tcmp.schemas.fx_dump import read_npy_header
from tcmp.schemas.ge_dump import NOT_DUMPED
from tcmp.schemas.graph import Graph


@dataclass(frozen=True)
class Unit:
    """One token of one graph of one rank: planned and compared in one worker, so headers are read once and only
    rows travel back."""

    rank: Optional[int]
    label: str
    model: str
    graph: Optional[Graph]
    token: int
    target: DumpSource
    golden: DumpSource
    target_dirs: tuple[DumpDir, ...]
    golden_dirs: Optional[tuple[DumpDir, ...]]  # None: this token is missing in the golden
    kind: GoldenKind
    dump_layers: Optional[frozenset[str]] = None  # the op names GE dumped (dump_layer); None: all of them
    acl_graph: Optional[AclGraphDump] = None  # an aclgraph target's graph dump (Binding.acl_graph)


@dataclass(frozen=True)
class UnitResult:
    """What a worker sends back: the rows already rendered (CSV text travels cheaper than records), the
    counts, its few worst rows and its divergence; the full rows only when they are to be kept."""

    table: RenderedRows  # in execution order
    counts: Counts
    worst: tuple[Row, ...]
    unmatched: UnmatchedBatch  # the token's target and golden files without a partner, and unusable files
    target_ops: int
    ops_in_rows: int
    divergence: Optional[Divergence]
    rows: tuple[Row, ...] = ()


NO_ROWS = RenderedRows("", ())


SCALAR_FILE_LIMIT = 1024  # an .npy holding a scalar, None or a short string is far smaller than this


def _small(path: Path) -> bool:
    try:
        return path.stat().st_size < SCALAR_FILE_LIMIT
    except OSError:
        return False  # gone (its raw data deleted by tcmp watch): nothing to read


def _golden_leftover_reason(
    f: DumpFile,
    fused_into: Mapping[str, str],
    partner_not_dumped: Mapping[Path, str],
    known: Mapping[Path, tuple[str, UnmatchedKind]] = MappingProxyType({}),
    unselected: frozenset[str] = frozenset(),
) -> tuple[str, UnmatchedKind]:
    partner = partner_not_dumped.get(f.path)
    if partner is not None:
        return f"its target tensor {partner} was {NOT_DUMPED}", UnmatchedKind.BY_DESIGN
    fused = fused_into.get(f"{f.op_name}-{f.op_type}") if f.io is not None else fused_into.get(f.op_name)
    if fused is not None:
        why = f"inside fused target op {fused}: GE dumps only the fused op's external inputs and outputs"
        return why, UnmatchedKind.BY_DESIGN
    if f.path in known:  # what the matcher learnt about the token (torchair's passes, copies, arguments)
        return known[f.path]
    if f.kind is FileKind.FX_NPY and f.io is IO.INPUT and _small(f.path):  # only a small file can be an argument
        try:
            header = read_npy_header(f.path)
        except DumpError as exc:
            return f"unreadable: {exc.message}", UnmatchedKind.UNREADABLE
        except OSError as exc:  # it could be opened when listed
            return unreadable_reason(exc), UnmatchedKind.UNREADABLE
        if header.dtype.kind not in "biufc":
            why = "non-tensor FX argument (None, string or object): no GE tensor to compare with"
            return why, UnmatchedKind.BY_DESIGN
        if header.shape == () and f.io is IO.INPUT:
            return "scalar FX argument without a GE input to compare with", UnmatchedKind.BY_DESIGN
    if f.io is IO.INPUT:
        why = (
            "FX input of a node: GE inputs are compared with their producers' FX outputs (the same tensor), "
            "not with this copy"
        )
        return why, UnmatchedKind.BY_DESIGN
    if f"{f.op_name}-{f.op_type}" in unselected:
        return NOT_SELECTED, UnmatchedKind.OUT_OF_SCOPE
    return "no target tensor pairs with this golden tensor (no readable GE dump names it)", UnmatchedKind.NO_PARTNER


def plan_units(binding: Binding, inputs: CompareInputs) -> tuple[list[Unit], list[DumpDir]]:
    """The binding's units, one per target token, and its golden directories of tokens the target lacks."""
    target_tokens, golden_tokens = by_token(binding.target_dirs), by_token(binding.golden_dirs)
    label = binding.graph.name if binding.graph is not None else binding.model
    selection = inputs.dump_scope.get(binding.rank)
    # GE matches a dump_list model by its root graph name (torchair's graph name) or its model name
    layers = selection.layers_for((label, binding.model)) if selection is not None else None
    units = []
    for token, dirs in sorted(target_tokens.items()):
        golden = tuple(golden_tokens[token]) if token in golden_tokens else None
        units.append(Unit(binding.rank, label, binding.model, binding.graph, token, inputs.target, inputs.golden,
                           tuple(dirs), golden, inputs.golden_kind, layers, binding.acl_graph))  # fmt: skip
    orphans = [d for token, dirs in sorted(golden_tokens.items()) if token not in target_tokens for d in dirs]
    return units, orphans


def plan_bindings(bindings: Sequence[Binding], inputs: CompareInputs) -> tuple[list[Unit], dict[int, tuple]]:
    """The bindings' units in compare order, and each binding's golden directories of tokens the target lacks, by
    the number of the unit after which the compare lists them (the binding's last)."""
    units: list[Unit] = []
    orphans_after: dict[int, tuple] = {}
    for binding in bindings:
        binding_units, orphans = plan_units(binding, inputs)
        units += binding_units
        if binding_units:
            orphans_after[len(units) - 1] = tuple(orphans)
    return units, orphans_after


@dataclass(frozen=True)
class Plan:
    """A token ready to compare: its pairs in execution order, the GE headers read on the way, and what has no
    partner."""

    pairs: tuple[Pair, ...]
    headers: Mapping[Path, FileHeader]
    unmatched: UnmatchedBatch
    target_ops: int


def plan_unit(unit: Unit, keep_rows: bool) -> Union[Plan, UnitResult]:
    """List one token's files and plan it: headers, executions, pairs, and the target and golden files without a
    partner. A token with nothing to compare (missing in the golden, no graph) is its result already."""
    view = GraphView(unit.graph) if unit.graph is not None else None
    target = unit.target.listing(unit.target_dirs)
    golden = unit.golden.listing(unit.golden_dirs) if unit.golden_dirs is not None else None
    problems = target.unusable(Role.TARGET, unit.rank)
    problems += golden.unusable(Role.GOLDEN, unit.rank) if golden is not None else ()
    stored = {**target.stored, **(golden.stored if golden is not None else {})}
    if unit.target_dirs and unit.target_dirs[0].side is Side.ACL:
        return _plan_acl_unit(unit, target.files, golden.files if golden is not None else None, problems, stored,
                              keep_rows)  # fmt: skip
    read_headers_ahead((*target.files, *(golden.files if golden is not None else ())))
    executions = ge_executions(target.files, stored)
    if golden is None or (unit.kind is GoldenKind.FX and view is None):
        if golden is None:
            why, kind = f"token {unit.token} missing in the golden dump", UnmatchedKind.OUT_OF_SCOPE
        else:
            why, kind = f"no graph file for model {unit.model}", UnmatchedKind.NO_PARTNER
        unmatched = tuple(
            Unmatched(Role.TARGET, unit.rank, unit.token, e.op_name, e.op_type, None, None, str(e.files[0].path), why,
                      kind)
            for e in executions
        )  # fmt: skip
        leftovers = _golden_leftovers(golden.files, {}) if golden is not None else []
        batch = UnmatchedBatch.of((*problems, *_graph_names(unmatched, view), *leftovers), keep_rows)
        return UnitResult(NO_ROWS, Counts(), (), batch, len(executions), 0, None)
    golden_executions: tuple = ()
    if unit.kind is GoldenKind.FX:
        calls = fx_calls(golden.files)
        fx_stored = {path: summary.tensors[0] for path, summary in stored.items() if summary.tensors}
        result = match_token(
            unit.rank,
            unit.token,
            unit.label,
            view,
            executions,
            golden_calls=calls,
            fx_stored=fx_stored,
            golden_files=golden.files,
        )
    else:
        golden_executions = ge_executions(golden.files, stored)
        result = match_token(unit.rank, unit.token, unit.label, view, executions, golden_ge=golden_executions)
    used = result.used_golden
    leftovers = _golden_leftovers(
        [f for f in golden.files if f.path not in used],
        result.fused_into,
        result.partner_not_dumped,
        result.golden_reasons,
        unselected_nodes(view, unit.dump_layers) if unit.kind is GoldenKind.FX else frozenset(),
    )
    target_unmatched = _graph_names(result.unmatched, view)
    return Plan(
        pairs=tuple(result.pairs),
        headers={**{h.path: h for e in (*executions, *golden_executions) for h in e.headers}, **result.fx_headers},
        unmatched=UnmatchedBatch.of((*problems, *target_unmatched, *leftovers), keep_rows),
        target_ops=len(executions),
    )


def _plan_acl_unit(
    unit: Unit,
    target: Sequence[DumpFile],
    golden: Optional[Sequence[DumpFile]],
    problems: Sequence[Unmatched],
    stored: Mapping[Path, FileSummary],
    keep_rows: bool,
) -> Union[Plan, UnitResult]:
    """`plan_unit` for an aclgraph target: its files paired by node name (`match.acl`)."""
    calls = fx_calls(golden) if golden is not None and unit.kind is GoldenKind.FX else {}
    executions = acl_executions(target, stored, calls_by_node(calls))
    if golden is None:
        why = f"token {unit.token} missing in the golden dump"
        unmatched = tuple(
            Unmatched(Role.TARGET, unit.rank, unit.token, e.op_name, e.op_type, IO.OUTPUT, 0, str(e.files[0].path),
                      why, UnmatchedKind.OUT_OF_SCOPE)
            for e in executions
        )  # fmt: skip
        return UnitResult(NO_ROWS, Counts(), (), UnmatchedBatch.of((*problems, *unmatched), keep_rows),
                          len(executions), 0, None)  # fmt: skip
    fx_stored = {path: summary.tensors[0] for path, summary in stored.items() if summary.tensors}
    ctx = TokenContext(unit.rank, unit.token, unit.label, MatchResult(), fx_stored)
    if unit.kind is GoldenKind.FX:
        result = match_acl_fx(ctx, executions, calls, golden, fx_stored, unit.acl_graph)
    else:
        result = match_acl_acl(ctx, executions, acl_executions(golden, stored))
    leftovers = _golden_leftovers([f for f in golden if f.path not in result.used_golden], {}, {},
                                  result.golden_reasons)  # fmt: skip
    return Plan(
        pairs=tuple(result.pairs),
        headers={},
        unmatched=UnmatchedBatch.of((*problems, *result.unmatched, *leftovers), keep_rows),
        target_ops=len(executions),
    )


def _graph_names(items: Sequence[Unmatched], view: Optional[GraphView]) -> list[Unmatched]:
    """Target items named by the graph, as the table names ops: a file whose header could not be read is only
    known by its file name, which spells the op name sanitized (`layers_1_MatMul_1` for `layers.1/MatMul_1`)."""
    if view is None:
        return list(items)
    named = []
    for u in items:
        op = view.op(u.op_name) if u.role is Role.TARGET else None
        named.append(replace(u, op_name=op.name) if op is not None and op.name != u.op_name else u)
    return named


def _golden_leftovers(
    files: Iterable[DumpFile],
    fused_into: Mapping[str, str],
    partner_not_dumped: Mapping[Path, str] = MappingProxyType({}),
    known: Mapping[Path, tuple[str, UnmatchedKind]] = MappingProxyType({}),
    unselected: frozenset[str] = frozenset(),
) -> list[Unmatched]:
    """The golden files of a compared token that no target tensor pairs with, and why."""
    return [
        _golden_unmatched(f, *_golden_leftover_reason(f, fused_into, partner_not_dumped, known, unselected))
        for f in files
    ]


def _golden_unmatched(f: DumpFile, why: str, kind: UnmatchedKind) -> Unmatched:
    return Unmatched(Role.GOLDEN, f.rank, f.token, f.op_name, f.op_type or "", f.io, f.index, str(f.path), why, kind)


def out_of_scope(role: Role, d: DumpDir, source: DumpSource, why: str) -> list[Unmatched]:
    """A directory no unit compares: its golden files listed as out of scope, and either side's unusable files."""
    listing = source.listing((d,))
    items = listing.unusable(role, d.rank)
    if role is Role.GOLDEN:
        items += (_golden_unmatched(f, why, UnmatchedKind.OUT_OF_SCOPE) for f in listing.files)
    return items
