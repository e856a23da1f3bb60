"""End to end: synthetic dump pairs with injected faults, compared; expectations come from the writer's manifest.

For every layout the golden can come in: exactly the ops with an injected value fault FAIL (their output rows) and
every other row PASSes; unreadable target files are listed as unmatched; the first divergence of each token is
the first faulty op in execution order; every target op execution is either in the table or in the unmatched list.
"""

from __future__ import annotations

import gc
import math
import re
import shutil
import threading
from collections import Counter, defaultdict

import openpyxl
import pytest
from e2e_faults import FAULTS

from tcmp.compare.collect.inputs import collect
from tcmp.compare.execute import local_pool
from tcmp.compare.execute.run import run_compare
from tcmp.compare.judge import metrics
from tcmp.compare.judge.verdict import Result
from tcmp.compare.records import CompareError, Role, UnmatchedKind
from tcmp.compare.report.outcome import CompareOptions, DataMode
from tcmp.compare.report.writers import ReportChoice, chosen_formats
from tcmp.schemas import proto
from tcmp.schemas.dump_outline import DumpDir
from tcmp.schemas.dump_records import IO
from tcmp.schemas.dump_tree import DumpFile
from tcmp.schemas.ge_header import LENGTH_PREFIX
from tcmp.schemas.ge_names import sanitize
from tcmp.schemas.graph import Graph
from tcmp.schemas.synth.faults import VALUE_FAULTS, Fault, FaultKind
from tcmp.schemas.synth.fx_writer import FxEra
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import Scenario, ScenarioConfig, write_scenario
from tcmp.schemas.synth.stats_csv import CONFIG_NAMES, DEFAULT_SELECTION, AdumpStatsWriter
from tcmp.schemas.synth.summaries import to_appendix_min_max, to_stats_csv


def check_against_manifest(scenario: Scenario, result) -> None:
    ranks = {r.rank: r for r in result.ranks}
    for rank_result in result.ranks:
        rank = rank_result.rank if rank_result.rank is not None else 0
        manifest = [op for op in scenario.target_ops if op.rank == rank]
        value_faulty = {(op.token, op.op_name) for op in manifest if op.fault in VALUE_FAULTS}
        unreadable = {(op.token, op.op_name) for op in manifest if op.fault and op.fault not in VALUE_FAULTS}
        failing = defaultdict(set)
        for row in rank_result.rows:
            key = (row.pair.token, row.pair.op_name)
            if row.result is Result.FAIL:
                failing[key].add(row.pair.io.value)
            else:
                assert row.result is Result.PASS, (row.pair.api_name, row.messages)
        assert set(failing) == value_faulty, set(failing) ^ value_faulty
        assert all(ios == {"output"} for ios in failing.values()), failing  # inputs of a faulty op still pass
        # unreadable files: never in the table, always in the unmatched list with the reason
        in_rows = {(r.pair.token, r.pair.op_name, r.pair.execution) for r in rank_result.rows}
        # an unreadable file's op is only known by its (sanitized) file name
        target_unmatched = {(u.token, sanitize(u.op_name)) for u in rank_result.unmatched if u.role is Role.TARGET}
        for token, name in unreadable:
            assert (token, name) not in {(t, n) for t, n, _ in in_rows}
            assert (token, sanitize(name)) in target_unmatched
        # count check: every target op execution of the manifest is accounted for
        for op in manifest:
            key = (op.token, sanitize(op.op_name))
            assert (op.token, op.op_name, op.execution) in in_rows or key in target_unmatched, op
        assert rank_result.target_ops == len(manifest)
        # kinds: the writer's dumps map completely, so the target's unmatched items are its unreadable files and
        # the tensors nothing can pair with (converter inner ops, GE-inserted ops' extra tensors), never "no
        # partner"; on the golden side only the partners of unreadable target files lack one
        target_kinds = defaultdict(set)
        for u in rank_result.unmatched:
            if u.role is Role.TARGET:
                target_kinds[u.kind].add((u.token, sanitize(u.op_name)))
        assert target_kinds[UnmatchedKind.UNREADABLE] == {(t, sanitize(n)) for t, n in unreadable}
        assert set(target_kinds) <= {UnmatchedKind.UNREADABLE, UnmatchedKind.BY_DESIGN}, dict(target_kinds)
        golden_without = {(u.token, sanitize(u.op_name)) for u in rank_result.unmatched
                          if u.role is Role.GOLDEN and u.kind is UnmatchedKind.NO_PARTNER}  # fmt: skip
        assert golden_without <= {(t, sanitize(n)) for t, n in unreadable}
        c = rank_result.counts
        by_kind = (c.unmatched_by_design, c.unmatched_out_of_scope, c.unmatched_no_partner, c.unmatched_unreadable)
        assert by_kind == tuple(sum(u.kind is k for u in rank_result.unmatched) for k in UnmatchedKind)
        assert sum(by_kind) == c.unmatched_target + c.unmatched_golden == len(rank_result.unmatched)
        # first divergence: the first value-faulty op of the token, in execution order
        for token in {op.token for op in manifest}:
            faulty = [op.op_name for op in manifest if op.token == token and op.fault in VALUE_FAULTS]
            found = [d for d in ranks[rank_result.rank].divergences if d.token == token]
            if faulty:
                assert found and found[0].op_name == faulty[0], (token, faulty, found)
            else:
                assert not found


@pytest.fixture(scope="module")
def fx_scenarios(tmp_path_factory) -> dict[FxEra, Scenario]:
    scenarios = {}
    for era in FxEra:
        root = tmp_path_factory.mktemp(f"era_{era.value}")
        config = ScenarioConfig(model=ModelConfig(layers=2), tokens=2, fx_era=era, faults=FAULTS,
                                ge_rank_dirs=era is FxEra.RANKED, write_fusion_off=era is FxEra.RANKED)  # fmt: skip
        scenarios[era] = write_scenario(root, config)
    return scenarios


@pytest.mark.parametrize("era", list(FxEra), ids=lambda e: e.value)
def test_ge_vs_fx_every_layout_era(fx_scenarios, era):
    scenario = fx_scenarios[era]
    result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx), keep_rows=True)
    assert result.golden_kind.value == "fx" and result.mode.value == "tensor"
    assert sorted({r.pair.token for rank in result.ranks for r in rank.rows}) == [0, 1]  # 0-based in every era
    check_against_manifest(scenario, result)


def test_without_the_compiled_loop_rows_are_the_same_and_a_note_says_so(fx_scenarios, monkeypatch):
    scenario = fx_scenarios[FxEra.RANKED]
    compiled, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx), keep_rows=True)
    monkeypatch.setattr(metrics, "c_loops", None)
    plain, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx), keep_rows=True)
    assert not any("not built" in n for n in compiled.notes)
    assert any("tcmp.summaries.compiled not built" in n for n in plain.notes)
    check_against_manifest(scenario, plain)
    rows = [[r for rank in result.ranks for r in rank.rows] for result in (compiled, plain)]
    assert len(rows[0]) == len(rows[1])
    for a, b in zip(*rows):
        assert a.result == b.result and (a.tensor is None) == (b.tensor is None)
        for x, y in zip(a.tensor.cells if a.tensor else (), b.tensor.cells if b.tensor else ()):
            same = x is y or (math.isnan(x) and math.isnan(y)) or x == pytest.approx(y, rel=1e-9, abs=1e-12)
            assert same, (a.pair, x, y)


def test_ge_vs_fusion_off_ge(fx_scenarios):
    scenario = fx_scenarios[FxEra.RANKED]
    result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_ge), keep_rows=True)
    assert result.golden_kind.value == "ge"
    check_against_manifest(scenario, result)


def test_repeated_executions_pair_in_order(fx_scenarios):
    scenario = fx_scenarios[FxEra.RANKED]
    result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx), keep_rows=True)
    rows = [r for r in result.ranks[0].rows if r.pair.op_name == "Mul_rep_0" and r.pair.io.value == "output"]
    # the two executions hold different values (x1, x2): paired the wrong way round they would fail
    assert sorted(r.pair.execution for r in rows) == [0, 0, 1, 1]
    assert all(r.result is Result.PASS for r in rows)


def test_outputs_paired_by_their_fx_output_index(fx_scenarios):
    scenario = fx_scenarios[FxEra.RANKED]
    result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx), keep_rows=True)
    rows = {r.pair.api_name: r for r in result.ranks[0].rows if r.pair.token == 0}
    # ArgMaxWithValue returns (indices, values); FX max.dim returns (values, indices)
    assert "OUTPUT.1" in rows["ArgMaxWithValue_0.output.0"].pair.bench.label
    assert "OUTPUT.0" in rows["ArgMaxWithValue_0.output.1"].pair.bench.label
    # the reversed 12-way cat: GE input k is FX split output 11 - k, INPUT.10 and INPUT.2 not confused
    for k in range(12):
        assert f"OUTPUT.{11 - k}." in rows[f"ConcatV2_big.input.{k}"].pair.bench.label
    # the GE-inserted TransData is checked against itself, not against FX
    assert "self check" in " ".join(rows["TransData_0.output.0"].messages)


@pytest.fixture(scope="module")
def multi_rank(tmp_path_factory) -> Scenario:
    faults = (Fault("MatMul_0", FaultKind.REL_ERROR, ranks=(1,)), Fault("SoftmaxV2_0", FaultKind.INF, ranks=(1,)))
    config = ScenarioConfig(ranks=2, tokens=2, graphs=(2, 10), faults=faults)
    return write_scenario(tmp_path_factory.mktemp("ranks"), config)


def test_multi_rank_and_multi_graph(multi_rank):
    result, inputs = run_compare(CompareOptions(multi_rank.target, multi_rank.golden_fx), keep_rows=True)
    assert [r.rank for r in result.ranks] == [0, 1]
    assert {(b.rank, b.model) for b in inputs.bindings} == {(r, f"graph_{n}_0") for r in (0, 1) for n in (2, 10)}
    # graph 2 is bound to graph 2's file and FX directory, graph 10 to graph 10's: never by position
    for binding in inputs.bindings:
        assert binding.graph.name == binding.model[: -len("_0")]
    check_against_manifest(multi_rank, result)
    assert all(r.result is Result.PASS for r in result.ranks[0].rows)
    assert not result.ranks[0].divergences and result.ranks[1].divergences


def _reachable(root) -> Counter:
    """Objects reachable from `root` by type (the graphs, per graph and not per file, are not walked)."""
    seen, found, stack = set(), Counter(), [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (str, bytes, int, float, type, Graph)):
            continue
        seen.add(id(obj))
        found[type(obj)] += 1
        stack.extend(gc.get_referents(obj))
    return found


def test_what_a_compare_holds_before_its_units_grows_with_directories_not_files(multi_rank):
    """Memory flat in the number of files: the plan (`collect`) keeps one record per dump directory, and the
    units list their directories' files where they are compared."""
    inputs = collect(multi_rank.target, multi_rank.golden_fx)
    held = _reachable(inputs)
    assert held[DumpFile] == 0
    directories = {p.parent for root in (multi_rank.target, multi_rank.golden_fx) for p in root.rglob("*.npy")}
    directories |= {p.parent for op in multi_rank.target_ops for p in op.paths}
    assert held[DumpDir] == len(directories) == 16  # 2 ranks x 2 graphs x 2 tokens, per side
    files = sum(1 for root in (multi_rank.target, multi_rank.golden_fx) for p in root.rglob("*") if p.is_file())
    assert files > 40 * held[DumpDir]


@pytest.mark.parametrize("jobs", [2, 3])
def test_worker_processes_write_the_same_reports_in_the_same_order(multi_rank, jobs, tmp_path):
    """2 ranks x 2 graphs x 2 tokens: 8 units shared between the main process and `jobs` - 1 workers."""
    one, _ = run_compare(CompareOptions(multi_rank.target, multi_rank.golden_fx, jobs=1), tmp_path / "one")
    many, _ = run_compare(CompareOptions(multi_rank.target, multi_rank.golden_fx, jobs=jobs), tmp_path / "many")
    for a, b in zip(one.ranks, many.ranks):
        assert a.counts == b.counts and a.divergences == b.divergences
        assert a.report.csv.read_bytes() == b.report.csv.read_bytes()
        assert a.report.unmatched.read_bytes() == b.report.unmatched.read_bytes()


@pytest.fixture(scope="module")
def one_token(tmp_path_factory) -> Scenario:
    faults = (
        Fault("layers.1/MatMul_1", FaultKind.REL_ERROR),
        Fault("SoftmaxV2_0", FaultKind.NAN),
        Fault("layers.1/Add_1_1", FaultKind.INF),
    )
    config = ScenarioConfig(tokens=1, model=ModelConfig(layers=3), faults=faults)
    return write_scenario(tmp_path_factory.mktemp("one_token"), config)


@pytest.mark.parametrize("golden", ["golden_fx", "golden_ge"])
def test_a_token_is_split_over_the_processes_when_tokens_are_fewer(one_token, golden, tmp_path, monkeypatch):
    """One token (the usual one-step dump) with 3 processes: the main process plans it and compares its pairs in
    3 parts of whole ops, 2 of them in the workers. The reports are byte for byte those of one process."""
    parts = []
    split = local_pool.split
    monkeypatch.setattr(local_pool, "split", lambda pairs, n: parts.append(split(pairs, n)) or parts[-1])
    golden_path = getattr(one_token, golden)
    one, many = (
        run_compare(CompareOptions(one_token.target, golden_path, jobs=jobs), tmp_path / str(jobs),
                    formats=chosen_formats(ReportChoice(highlight=True)), keep_rows=True)[0]
        for jobs in (1, 3)
    )  # fmt: skip
    assert [len(p) for p in parts] == [3]
    assert [pair for part in parts[0] for pair in part] == [row.pair for row in one.ranks[0].rows]
    cut_between_ops = [(a[-1].order, b[0].order) for a, b in zip(parts[0], parts[0][1:])]
    assert all(before < after for before, after in cut_between_ops)
    check_against_manifest(one_token, many)
    for a, b in zip(one.ranks, many.ranks):
        assert a.counts == b.counts and a.divergences == b.divergences and a.worst == b.worst and a.rows == b.rows
        assert a.divergences and a.divergences[0].op_name is not None
        assert a.report.csv.read_bytes() == b.report.csv.read_bytes()
        assert a.report.unmatched.read_bytes() == b.report.unmatched.read_bytes()
        assert _filled_rows(a.report.xlsx) == _filled_rows(b.report.xlsx)  # the parts' colours stay with their rows


def _filled_rows(xlsx) -> list[tuple]:
    sheet = openpyxl.load_workbook(xlsx).active
    return [(tuple(c.value for c in row), row[0].fill.fgColor.rgb) for row in sheet.iter_rows()]


def test_a_split_token_missing_in_the_golden_is_listed_as_out_of_scope(one_token, tmp_path):
    """The split path's planning ends early, as the one-process path does, for a token the golden lacks."""
    golden = tmp_path / "golden"
    shutil.copytree(one_token.golden_fx, golden)
    (step,) = [p for p in golden.rglob("*") if p.is_dir() and p.name.isdigit()]
    step.rename(step.with_name(str(int(step.name) + 5)))  # the golden's only token is now token 5
    one, split = (run_compare(CompareOptions(one_token.target, golden, jobs=jobs))[0].ranks[0] for jobs in (1, 3))
    assert one.counts == split.counts and split.counts.rows == 0
    assert split.counts.unmatched_target == len([op for op in one_token.target_ops if op.rank == 0])
    assert split.counts.unmatched_out_of_scope == split.counts.unmatched_target + split.counts.unmatched_golden


@pytest.mark.parametrize(
    ("tokens", "processes", "split"),
    [(1, 1, False), (1, 2, True), (2, 2, False), (1, 8, True), (2, 8, True), (3, 8, False), (9, 8, False)],
)
def test_tokens_are_split_only_where_that_ends_sooner(tokens, processes, split):
    """With planning 35 % of a token's time: one token on 2 processes takes 0.35 + 0.65 / 2 = 0.675 of a token's
    time split, 1 whole; 2 tokens on 8 take 2 x (0.35 + 0.65 / 8) = 0.86 split, 1 whole; 3 on 8 take 1.29 split."""
    assert local_pool.split_tokens(tokens, processes) is split


def test_cli_starts_its_workers_while_it_runs_no_thread(multi_rank, cli, tmp_path, monkeypatch):
    """The CLI starts the compare's workers before its progress display runs a thread, so they can be forked (quick
    to start, sharing the main process's module pages) without copying a lock some other thread holds."""
    seen = []
    start_workers = local_pool.start_workers

    def spy(count):
        seen.append((count, set(threading.enumerate())))
        return start_workers(count)

    monkeypatch.setattr(local_pool, "start_workers", spy)
    before = set(threading.enumerate())  # threads other tests left behind may end meanwhile, none may start
    # --oversubscribe: three processes on any machine (the CLI caps --jobs at its CPUs)
    result = cli("compare", "-tp", multi_rank.target, "-gp", multi_rank.golden_fx, "-o", tmp_path, "--jobs", "3",
                 "--oversubscribe")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert [count for count, _ in seen] == [3] and seen[0][1] <= before


def test_forked_workers_never_walk_the_objects_they_inherit_and_the_main_process_collects_as_before():
    """gc.freeze() before the fork: a worker's collector would otherwise touch, and so copy, every inherited page
    holding a Python object; the main process unfreezes once its workers run. (Spawned workers, where a thread
    runs, inherit nothing.)"""
    forked = threading.active_count() == 1
    with local_pool.compare_workers(2) as workers:
        assert workers is not None and gc.get_freeze_count() == 0
        frozen_in_worker = workers.pool.submit(gc.get_freeze_count).result()
    assert (frozen_in_worker > 0) == forked


def test_devices_without_rank_directories_are_compared_as_ranks(tmp_path):
    """GE dumps from before the rank directories: two devices' files under one {time} directory. Each device is
    its own process; compared as one token, their executions of each op would pair across devices."""
    faults = (Fault("MatMul_0", FaultKind.REL_ERROR, ranks=(1,)),)
    config = ScenarioConfig(ranks=2, tokens=2, model=ModelConfig(layers=1), ge_rank_dirs=False, faults=faults)
    scenario = write_scenario(tmp_path, config)
    assert not list(scenario.target.rglob("worldsize*"))
    for golden in (scenario.golden_fx, scenario.golden_ge):
        result, _ = run_compare(CompareOptions(scenario.target, golden), keep_rows=True)
        assert [r.rank for r in result.ranks] == [0, 1]
        check_against_manifest(scenario, result)
        assert not result.ranks[0].divergences and result.ranks[1].divergences


def test_rank_option(multi_rank):
    result, _ = run_compare(CompareOptions(multi_rank.target, multi_rank.golden_fx, rank=1), keep_rows=True)
    assert [r.rank for r in result.ranks] == [1]
    # rank 0, left out on purpose, is said once: not its golden files one by one as "out of scope"
    assert "rank 0 not compared (--rank 1)" in result.notes
    assert not [u for u in result.ranks[0].unmatched if "rank0" in u.path]
    assert not [u for u in result.ranks[0].unmatched if u.kind is UnmatchedKind.OUT_OF_SCOPE]
    # rank 1 still has all its rows: the same as in a compare of every rank
    every, _ = run_compare(CompareOptions(multi_rank.target, multi_rank.golden_fx), keep_rows=True)
    assert [r.rank for r in every.ranks] == [0, 1]
    assert result.ranks[0].counts == every.ranks[1].counts
    # a rank the dump does not hold: named, with the ranks it does hold, once each
    with pytest.raises(CompareError, match=r"--rank 5: rank 5 is not in the target dump \(it holds ranks 0, 1\)$"):
        run_compare(CompareOptions(multi_rank.target, multi_rank.golden_fx, rank=5), keep_rows=True)


def test_fused_names_hashed_and_truncated(tmp_path):
    faults = (Fault("model/decoder/layers_3/self_attention/" + "x" * 80 + "/Square_3_ub_fusion", FaultKind.REL_ERROR),)
    config = ScenarioConfig(model=ModelConfig(layers=4, long_names=(2, 3)), tokens=1, faults=faults)
    scenario = write_scenario(tmp_path, config)
    for golden in (scenario.golden_fx, scenario.golden_ge):
        result, _ = run_compare(CompareOptions(scenario.target, golden), keep_rows=True)
        check_against_manifest(scenario, result)
        names = {r.pair.op_name for r in result.ranks[0].rows}
        assert any(n.startswith("model/decoder/layers_2") and "Mul_1_2" in n for n in names)  # the hashed file


def test_ffts_slices_and_capture_names(tmp_path):
    config = ScenarioConfig(tokens=1, ffts_ops=("SoftmaxV2_0",), capture_names=True, faults=FAULTS[:2])
    scenario = write_scenario(tmp_path, config)
    result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx), keep_rows=True)
    check_against_manifest(scenario, result)
    softmax = [r for r in result.ranks[0].rows if r.pair.op_name == "SoftmaxV2_0"]
    assert softmax and "FFTS+" in softmax[0].pair.npu.label


@pytest.mark.parametrize("mode", [DataMode.STATISTICS, DataMode.MD5])
def test_statistics_and_md5_modes(fx_scenarios, mode):
    scenario = fx_scenarios[FxEra.RANKED]
    result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_ge, mode=mode), keep_rows=True)
    assert result.mode.value == mode.value
    check_against_manifest(scenario, result)


@pytest.mark.parametrize("mode", [DataMode.TENSOR, DataMode.STATISTICS])
def test_worst_rows_put_one_sided_nan_and_inf_first(fx_scenarios, mode):
    scenario = fx_scenarios[FxEra.RANKED]
    result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx, mode=mode), keep_rows=True)
    (rank,) = result.ranks
    nan_inf_ops = {f.op for f in FAULTS if f.kind in (FaultKind.NAN, FaultKind.INF)}
    one_sided = [r for r in rank.rows if r.nan_inf_one_side]
    assert one_sided and {r.pair.op_name for r in one_sided} == nan_inf_ops
    leading = rank.worst[: len(one_sided)]
    assert all(r.nan_inf_one_side for r in leading)
    assert {r.pair.op_name for r in rank.worst if not r.nan_inf_one_side} <= {"layers.1/MatMul_1", "ConcatV2_big"}


def test_unreadable_target_files_are_listed_under_their_graph_names(fx_scenarios):
    """A file whose header cannot be read is known by its file name, which spells the op sanitized
    (`layers_1_Cast_1`); the unmatched list names it as the table and the graph do (issue 18, item 19)."""
    scenario = fx_scenarios[FxEra.RANKED]
    result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx), keep_rows=True)
    (rank,) = result.ranks
    unreadable = {(u.token, u.op_name) for u in rank.unmatched if u.kind is UnmatchedKind.UNREADABLE}
    expected = {(t, f.op) for f in FAULTS if f.kind in (FaultKind.TRUNCATE, FaultKind.CORRUPT_HEADER) for t in f.tokens}
    assert unreadable == expected == {(0, "Gelu_0"), (1, "layers.1/Cast_1")}


@pytest.mark.parametrize("writer", ["aicpu", "adump", "adump_after_default"])
def test_summary_only_inputs_take_part_in_statistics_mode(tmp_path, writer):
    """Stats CSVs as each CANN writer writes them (the adump one after it wrote the default selection: a header
    one column longer than its rows) against appendix min/max goldens."""
    faults = (Fault("MatMul_0", FaultKind.REL_ERROR, magnitude=0.2), Fault("layers.1/SoftmaxV2_1", FaultKind.NAN))
    scenario = write_scenario(tmp_path, ScenarioConfig(tokens=2, faults=faults))
    raw, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx), keep_rows=True)

    def place(r):  # fused ops are named by their header raw, by their (sanitized) file name in a stats CSV
        return r.pair.token, r.pair.order, r.pair.io, r.pair.index

    raw_dtypes = {place(r): r.npu.dtype for r in raw.ranks[0].rows}
    adump = {"aicpu": None, "adump": AdumpStatsWriter(), "adump_after_default": AdumpStatsWriter(compatible=True)}
    selection = ("Max", "Min", "Nan", "Positive Inf", "Negative Inf") if writer == "adump_after_default" else None
    converted = to_stats_csv(scenario.target, adump[writer], selection or DEFAULT_SELECTION)
    assert to_appendix_min_max(scenario.golden_fx) > 0 and converted > 0
    result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx), keep_rows=True)
    assert result.mode.value == "statistics" and "summaries only" in result.mode_reason
    rows = result.ranks[0].rows
    # the AICPU writer names no bf16 and has no statistics for it ("-" and seven empty cells): N/A, not PASS
    unnamed = {place(r) for r in rows if writer == "aicpu" and raw_dtypes[place(r)] == "DT_BF16"}
    assert [r.npu.dtype for r in rows] == [None if place(r) in unnamed else raw_dtypes[place(r)] for r in rows]
    assert {place(r) for r in rows if r.result is Result.NA} == unnamed and (writer != "aicpu" or unnamed)
    assert all("no statistics recorded" in " ".join(r.messages) for r in rows if place(r) in unnamed)
    failing = {(r.pair.token, r.pair.op_name) for r in rows if r.result is Result.FAIL}
    assert failing == {(t, n) for t in (0, 1) for n in ("MatMul_0", "layers.1/SoftmaxV2_1")}
    others = [r for r in rows if (r.pair.token, r.pair.op_name) not in failing and place(r) not in unnamed]
    assert others and all(r.result is Result.PASS for r in others)


def test_a_stats_csvs_l2norm_takes_part_in_statistics_mode(tmp_path):
    """adump with every statistic selected, after the default selection (its header names Count twice and is one
    column longer than its rows), against the raw FX golden: the NPU's L2 norm comes from the CSV."""
    faults = (Fault("MatMul_0", FaultKind.REL_ERROR, magnitude=0.2),)
    scenario = write_scenario(tmp_path, ScenarioConfig(tokens=1, faults=faults))
    to_stats_csv(scenario.target, AdumpStatsWriter(compatible=True), CONFIG_NAMES)
    csv_file = next(scenario.target.rglob("MatMul*.csv"))
    header, first_row = csv_file.read_text().split("\n")[:2]
    assert header.count(",Count") == 2 and len(header.split(",")) == len(first_row.split(",")) + 1
    result, _ = run_compare(
        CompareOptions(scenario.target, scenario.golden_fx, mode=DataMode.STATISTICS), keep_rows=True
    )
    rows = result.ranks[0].rows
    assert rows and all(r.npu.l2norm is not None and r.bench.l2norm is not None for r in rows)
    assert not any("No L2 norm" in m for r in rows for m in r.messages)
    matmul = [r for r in rows if r.pair.op_name == "MatMul_0" and r.pair.io.value == "output"]
    # every output element 20 % off: the L2 norm is 20 % off, to fp16 and the CSV's 6 digits
    assert matmul and all(abs(r.statistics.l2norm.relative - 0.2) < 2e-3 for r in matmul)
    assert {r.pair.op_name for r in rows if r.result is Result.FAIL} == {"MatMul_0"}
    others = [r for r in rows if r.pair.op_name != "MatMul_0"]
    assert all(r.result is Result.PASS and r.statistics.l2norm.relative < 1e-3 for r in others)
    # the FRACTAL_NZ weight: the CSV's shape is the device shape, so there is no ND shape to pair the input by
    weights = [u for u in result.ranks[0].unmatched if u.op_name.endswith("MatMul_0") and u.io is IO.INPUT]
    assert [u.index for u in weights] == [1] and "FRACTAL_NZ device shape" in weights[0].reason


def test_propagated_fault_first_divergence(tmp_path):
    config = ScenarioConfig(tokens=2, faults=(Fault("MatMul_0", FaultKind.REL_ERROR),), propagate_faults=True)
    scenario = write_scenario(tmp_path, config)
    result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx), keep_rows=True)
    rank = result.ranks[0]
    assert sum(r.result is Result.FAIL for r in rank.rows) > 10  # everything downstream is off too
    assert [(d.token, d.op_name) for d in rank.divergences] == [(0, "MatMul_0"), (1, "MatMul_0")]


def test_two_runs_in_one_tree_are_refused(tmp_path):
    scenario = write_scenario(tmp_path, ScenarioConfig(tokens=1))
    rank_dir = next(scenario.target.glob("worldsize*"))
    run = next(rank_dir.iterdir())
    shutil.copytree(run, rank_dir / "20261129120000")
    with pytest.raises(CompareError, match="2 runs") as info:
        run_compare(CompareOptions(scenario.target, scenario.golden_fx), keep_rows=True)
    assert "--target-run" in str(info.value)
    result, _ = run_compare(
        CompareOptions(scenario.target, scenario.golden_fx, target_run="20261129120000"), keep_rows=True
    )
    assert result.ranks[0].rows and all(r.result is Result.PASS for r in result.ranks[0].rows)
    gm = next(scenario.golden_fx.glob("worldsize*/gm_*"))
    shutil.copytree(gm, gm.parent / "gm_20261129130000000000_dump")
    with pytest.raises(CompareError, match="runs of graph"):
        run_compare(CompareOptions(scenario.target, scenario.golden_fx, target_run="20261129120000"), keep_rows=True)
    result, _ = run_compare(
        CompareOptions(scenario.target, scenario.golden_fx, target_run="20261129120000", golden_run=gm.name),
        keep_rows=True,
    )
    assert result.ranks[0].rows


def _small(tmp_path) -> Scenario:
    return write_scenario(tmp_path / "s", ScenarioConfig(tokens=1, model=ModelConfig(layers=1)))


def test_malformed_inputs_give_one_clear_message(tmp_path):
    scenario = _small(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = [
        (CompareOptions(scenario.target, scenario.target), "same dump"),
        (CompareOptions(empty, scenario.golden_fx), "no GE dump files"),
        (CompareOptions(scenario.target, empty), "no FX .npy files and no GE dump files"),
        (CompareOptions(tmp_path / "missing", scenario.golden_fx), "does not exist"),
        (CompareOptions(scenario.target, scenario.root), "contains the other"),
    ]
    for options, message in cases:
        with pytest.raises(CompareError, match=message):
            run_compare(options)
    # trees whose files look like dumps but whose names do not parse: nothing to compare, no report written
    garbled = tmp_path / "garbled"
    shutil.copytree(scenario.root, garbled)
    for side, root, message in (
        ("target", garbled / scenario.target.relative_to(scenario.root), "no GE dump files"),
        ("golden", garbled / scenario.golden_fx.relative_to(scenario.root), "no FX .npy files and no GE dump files"),
    ):
        for n, path in enumerate(p for p in sorted(root.rglob("*")) if p.is_file() and "graph" not in p.name):
            path.rename(path.with_name(f"x.y.z.{n}" if side == "target" else f"garbage_{n}.npy"))
        out = tmp_path / f"report_{side}"
        out.mkdir()
        target = garbled / scenario.target.relative_to(scenario.root)
        with pytest.raises(CompareError, match=message):
            run_compare(CompareOptions(target, garbled / scenario.golden_fx.relative_to(scenario.root)), out)
        assert list(out.iterdir()) == []
        shutil.rmtree(garbled)
        shutil.copytree(scenario.root, garbled)
    # mismatched ranks
    for rank_dir in scenario.golden_fx.glob("worldsize*"):
        rank_dir.rename(rank_dir.with_name("worldsize1_global_rank7"))
    with pytest.raises(CompareError, match="no common rank"):
        run_compare(CompareOptions(scenario.target, scenario.golden_fx), keep_rows=True)


def _row_cells(result) -> list[tuple]:
    return [(r.pair.api_name, r.result, r.tensor.cosine if r.tensor else None) for r in result.ranks[0].rows]


def test_missing_or_broken_graph_file(tmp_path):
    scenario = _small(tmp_path)
    for graph in scenario.target.glob("dynamo_original_graph_*"):
        graph.write_text('op { name: "unterminated')
    with pytest.raises(CompareError, match=r"graph file .* unusable"):
        run_compare(CompareOptions(scenario.target, scenario.golden_fx), keep_rows=True)
    # a fusion-off golden pairs ops by name: a broken graph only costs the graph's decompositions, as a missing one
    broken, _ = run_compare(CompareOptions(scenario.target, scenario.golden_ge), keep_rows=True)
    assert any("unusable" in note for note in broken.notes)
    for graph in scenario.target.glob("dynamo_*"):
        graph.unlink()
    with pytest.raises(CompareError, match=r"no torchair graph text file .*graph_dump\.type = \"txt\".*--graph PATH"):
        run_compare(CompareOptions(scenario.target, scenario.golden_fx), keep_rows=True)
    missing, _ = run_compare(CompareOptions(scenario.target, scenario.golden_ge), keep_rows=True)
    assert _row_cells(broken) == _row_cells(missing) and len(_row_cells(missing)) > 10
    assert [r.counts for r in broken.ranks] == [r.counts for r in missing.ranks]


def _rename_original_ops(path, name: str) -> int:
    """Rewrite a GE dump's header so every output's original_op names `name` (as after a graph pass renamed the
    op); the payloads stay as they are. Returns how many outputs carried one."""
    data = path.read_bytes()
    (length,) = LENGTH_PREFIX.unpack_from(data)
    header = proto.DumpData.FromString(data[LENGTH_PREFIX.size : LENGTH_PREFIX.size + length])
    renamed = 0
    for output in header.output:
        if output.HasField("original_op"):
            output.original_op.name = name
            renamed += 1
    new_header = header.SerializeToString()
    path.write_bytes(LENGTH_PREFIX.pack(len(new_header)) + new_header + data[LENGTH_PREFIX.size + length :])
    return renamed


def test_an_original_op_missing_from_the_graph_falls_back_to_the_fusion_outputs_for_both_goldens(tmp_path):
    """The header's original_op names an op the graph does not have: both goldens (FX, fusion-off GE) pair the
    fused op's outputs with the fusion's external outputs, and say so (the FX matcher used to drop them)."""
    config = ScenarioConfig(model=ModelConfig(layers=2), tokens=1, faults=(), write_fusion_off=True)
    scenario = write_scenario(tmp_path, config)
    fused = [op for op in scenario.target_ops if op.members and len(op.paths) == 1]
    renamed = {op.op_name: _rename_original_ops(op.paths[0], "renamed_by_a_later_pass") for op in fused}
    assert any(renamed.values())
    for golden in (scenario.golden_fx, scenario.golden_ge):
        result, _ = run_compare(CompareOptions(scenario.target, golden), keep_rows=True)
        rows = result.ranks[0].rows
        for op_name, count in renamed.items():
            if not count:
                continue
            outputs = [r for r in rows if r.pair.op_name == op_name and r.pair.io.value == "output"]
            assert len(outputs) == count, (golden, op_name)
            assert all(r.result is Result.PASS for r in outputs)
            assert all(any("renamed_by_a_later_pass is not in the graph" in m for m in r.messages) for r in outputs)
        target_unmatched = [u for u in result.ranks[0].unmatched if u.role is Role.TARGET and u.op_name in renamed]
        assert not [u for u in target_unmatched if u.io is not None and u.io.value == "output"]


def test_model_directories_not_named_after_their_graph_are_bound_by_the_ops_they_hold(tmp_path):
    """Model directories named otherwise than `graph_{N}`: each is bound to its graph file, and to its fusion-off
    model directory, by the ops its files name. Graph 10 has one layer more than graph 2, so graph 2's ops are a
    subset of graph 10's: a score that only asks "how many dumped ops does the graph name" cannot tell them apart."""
    faults = (Fault("layers.1/MatMul_1", FaultKind.REL_ERROR),)
    scenario = write_scenario(tmp_path, ScenarioConfig(tokens=2, graphs=(2, 10), faults=faults))
    renames = {
        scenario.target: {"graph_2_0": "decode", "graph_10_0": "prefill"},
        scenario.golden_ge: {"graph_2_0": "z_small", "graph_10_0": "a_large"},
    }
    for root, names in renames.items():
        for old, new in names.items():
            (model_dir,) = [p for p in root.rglob(old) if p.is_dir()]
            model_dir.rename(model_dir.with_name(new))
    goldens = ((scenario.golden_fx, None), (scenario.golden_ge, {"decode": "z_small", "prefill": "a_large"}))
    for golden, golden_labels in goldens:
        result, inputs = run_compare(CompareOptions(scenario.target, golden), keep_rows=True)
        assert {b.model: b.graph.name for b in inputs.bindings} == {"decode": "graph_2", "prefill": "graph_10"}
        if golden_labels is not None:
            assert {b.model: b.golden_label for b in inputs.bindings} == golden_labels
        check_against_manifest(scenario, result)


# --- graph files: every name torchair used, wherever torchair put them


@pytest.mark.parametrize("era", list(FxEra), ids=lambda e: e.value)
def test_each_era_names_its_graph_files_its_own_way_and_they_are_found(fx_scenarios, era):
    """The era fixture writes graph files in the form of its time (graph_names): no number and no rank before
    2025-05, `dynamo_{ts}.txt` before 2024-01. Such files are bound by content."""
    scenario = fx_scenarios[era]
    names = sorted(p.name for p in scenario.target.glob("dynamo_*.txt"))
    expected = {
        FxEra.RANKED: r"dynamo_(original|optimized)_graph_1_rank_0_pid_\d+_ts_\d{20}\.txt",
        FxEra.GM_STEP: r"dynamo_\d{20}\.txt",
    }.get(era, r"dynamo_(original|optimized)_graph_\d{20}\.txt")
    assert names and all(re.fullmatch(expected, name) for name in names), names
    inputs = collect(scenario.target, scenario.golden_fx)
    assert all(b.graph is not None and b.graph.name == "graph_1" for b in inputs.bindings)


def test_several_graphs_without_numbers_are_bound_by_content(tmp_path):
    faults = (Fault("layers.0/MatMul_0", FaultKind.REL_ERROR),)
    config = ScenarioConfig(model=ModelConfig(layers=1), tokens=1, graphs=(1, 2), fx_era=FxEra.MSPROBE_DATA_DUMP,
                            ge_rank_dirs=False, write_fusion_off=False, faults=faults)  # fmt: skip
    scenario = write_scenario(tmp_path, config)
    assert not list(scenario.target.glob("dynamo_*graph_[0-9]_*.txt"))  # no graph numbers in the names
    inputs = collect(scenario.target, scenario.golden_fx)
    assert sorted((b.model, b.graph.name) for b in inputs.bindings) == [
        ("graph_1_0", "graph_1"),
        ("graph_2_0", "graph_2"),
    ]
    result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx), keep_rows=True)
    check_against_manifest(scenario, result)


def test_graph_files_in_the_working_directory_or_given_with_graph(tmp_path, monkeypatch):
    """torchair's graph_dump.path is independent of the dump path and defaults to the working directory."""
    config = ScenarioConfig(model=ModelConfig(layers=1), tokens=1, write_fusion_off=False, faults=FAULTS[:1],
                            graph_dir="run_dir")  # fmt: skip
    scenario = write_scenario(tmp_path / "s", config)
    run_dir = tmp_path / "s" / "run_dir" / "target"
    assert not list(scenario.target.rglob("dynamo_*")) and len(list(run_dir.glob("dynamo_*"))) == 2
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CompareError) as info:
        run_compare(CompareOptions(scenario.target, scenario.golden_fx))
    assert str(scenario.target) in str(info.value) and str(tmp_path) in str(info.value)
    (tmp_path / "dynamo_original_graph_1_rank_0_pid_3_ts_20261129083000000000.py").write_text("# graph code")
    with pytest.raises(CompareError, match=r"only graph dumps of type pbtxt or py.*\.py"):
        run_compare(CompareOptions(scenario.target, scenario.golden_fx))

    monkeypatch.chdir(run_dir)  # where the model ran
    from_cwd, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx), keep_rows=True)
    assert any("working directory" in note for note in from_cwd.notes)
    check_against_manifest(scenario, from_cwd)

    monkeypatch.chdir(tmp_path)
    original = next(run_dir.glob("dynamo_original_graph_*"))
    for given in (run_dir, original):
        result, _ = run_compare(CompareOptions(scenario.target, scenario.golden_fx, graph=given), keep_rows=True)
        assert _row_cells(result) == _row_cells(from_cwd)
    with pytest.raises(CompareError, match=r"--graph .*no such file"):
        run_compare(CompareOptions(scenario.target, scenario.golden_fx, graph=tmp_path / "nope"))
