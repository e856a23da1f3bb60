"""One pairing, whatever the source: the same dumps compared from their raw files (tensor and statistics mode),
from `tcmp watch`'s index after it deleted them (`--drop-raw`), and from the index with the raw files kept give
the same rows (token, API Name, Data Name, the pairing's notes), the same unmatched items and the same Result,
against an FX golden and a fusion-off golden.

The dump holds what made the routes disagree (issue 22, "what was seen" 1): fused RMS norms with Const inputs
(a float eps from a float scalar argument, a float32 Pow exponent from `aten.pow.Tensor_Scalar(x, 2)`'s int),
empty tensors (an empty KV cache read by a cat and a Mul), a re-executed op (a task run twice in one token), and
two FFTS+ ops (each execution two slice files, merged from their summaries when only the index holds them).
How the re-executed op is paired is not asserted here, only that every route pairs it alike. A stacked list
output (an FX `OUTPUT.1` file holding the list whose elements GE outputs name `OUTPUT.1.0`, `OUTPUT.1.1`) needs a
hand-built pair: the synthetic model has none.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from fx_dumps import DumpPair, data, op, out, values

from tcmp.compare.execute.run import run_compare
from tcmp.compare.judge.metrics import EMPTY_BOTH
from tcmp.compare.judge.verdict import Result
from tcmp.compare.match.fx_side import FileShape, FxSide
from tcmp.compare.report.outcome import CompareOptions, DataMode
from tcmp.daemon.retention import RetentionPolicy
from tcmp.daemon.service import WatchConfig, run_watch
from tcmp.schemas.dump_records import IO
from tcmp.schemas.dump_tree import DumpFile, locate
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario
from tcmp.summaries.summarize import summarize_file

RERUN = "layers.1/MatMul_1"
FFTS_OPS = ("Gelu_0", "MatMul_0")
CONFIG = ScenarioConfig(model=ModelConfig(layers=2, pow_norm=True, empty_cache=True), tokens=2, reruns=(RERUN,),
                        ffts_ops=FFTS_OPS)  # fmt: skip
GOLDENS = ("golden_fx", "golden_ge")


@dataclass(frozen=True)
class Route:
    """One way of comparing: which copy of the dump tree, and the data mode asked for."""

    name: str
    tree: str
    mode: DataMode


ROUTES = (
    Route("raw tensor", "raw", DataMode.TENSOR),
    Route("raw statistics", "raw", DataMode.STATISTICS),
    Route("index, raw deleted", "dropped", DataMode.AUTO),
    Route("index, raw kept", "kept", DataMode.AUTO),
    Route("index, some raw kept", "mixed", DataMode.AUTO),
)
# --keep-raw-ops for the mixed tree: the fused norms' GE files and two FX nodes stay raw, their partners do not
KEEP_RAW = ("*Pow_*", "mul_kv", "cat_kv", "add_0")


@dataclass(frozen=True)
class Outcome:
    """A compare's rows and unmatched items, with the tree's root taken out of every path and reason."""

    mode: str
    rows: dict  # (token, API Name, Data Name) -> (pairing notes, Result)
    messages: dict  # (token, API Name) -> Err_message parts
    unmatched: frozenset  # (side, token, op, io, index, file name, kind, reason)


def _watch(root: Path, drop_raw: bool, keep: tuple[str, ...] = ()) -> None:
    config = WatchConfig(roots=(root,), retention=RetentionPolicy(drop_raw, 0, keep), workers=0, once=True)
    report = run_watch(config)
    assert report.error is None and report.summarized > 0


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("every_source")
    written = write_scenario(base / "raw", CONFIG)
    assert written.golden_fx is not None and written.golden_ge is not None
    trees = {"raw": base / "raw"}
    for name, drop, keep in (("dropped", True, ()), ("kept", False, ()), ("mixed", True, KEEP_RAW)):
        shutil.copytree(base / "raw", base / name, symlinks=True)
        _watch(base / name, drop_raw=drop, keep=keep)
        trees[name] = base / name
    gone = [p for p in (base / "dropped").rglob("*.npy")]
    assert not gone, "tcmp watch --drop-raw left raw FX files"
    assert any((base / "kept").rglob("*.npy"))
    mixed = {p.name.split("-")[0] for p in (base / "mixed").rglob("*.npy")}
    assert mixed == {"mul_kv", "cat_kv", "add_0"} and any((base / "mixed").rglob("*.Pow_0*"))
    return trees


def _compare(root: Path, golden: str, mode: DataMode) -> Outcome:
    golden_root = root / golden / ("msprobe_fx_dump" if golden == "golden_fx" else "msprobe_ge_dump")
    result, _ = run_compare(CompareOptions(root / "target" / "msprobe_ge_dump", golden_root, mode=mode),
                            keep_rows=True)  # fmt: skip
    (rank,) = result.ranks
    text = str(root)

    def plain(value: str) -> str:
        return value.replace(text, "<root>")

    rows, messages = {}, {}
    for r in rank.rows:
        key = (r.pair.token, r.pair.api_name, r.pair.npu.label, r.pair.bench.label)
        assert key not in rows, f"two rows for {key}"
        rows[key] = (tuple(plain(n) for n in r.pair.notes), r.result)
        messages[(r.pair.token, r.pair.api_name)] = r.messages
    unmatched = frozenset(
        (u.role.value, u.token, u.op_name, u.io, u.index, Path(u.path).name, u.kind.value, plain(u.reason))
        for u in rank.unmatched
    )
    return Outcome(result.mode.value, rows, messages, unmatched)


@pytest.fixture(scope="module")
def outcomes(trees) -> dict[tuple[str, str], Outcome]:
    return {(golden, route.name): _compare(trees[route.tree], golden, route.mode) for golden in GOLDENS
            for route in ROUTES}  # fmt: skip


@pytest.mark.parametrize("golden", GOLDENS)
def test_every_route_pairs_alike_and_judges_alike(outcomes, golden):
    reference = outcomes[(golden, ROUTES[0].name)]
    assert reference.mode == "tensor" and reference.rows
    for route in ("index, raw deleted", "index, some raw kept"):
        assert outcomes[(golden, route)].mode == "statistics"  # some data is only in the index
    for route in ROUTES[1:]:
        other = outcomes[(golden, route.name)]
        assert set(other.rows) == set(reference.rows), route.name
        differing = {
            k: (reference.rows[k], other.rows[k]) for k in reference.rows if other.rows[k] != reference.rows[k]
        }
        assert not differing, f"{route.name}: {differing}"
        assert other.unmatched == reference.unmatched, route.name


def _fused_rms(layer: int) -> str:
    p = "layers.1/" if layer == 1 else ""
    return "".join(f"{p}{n}_{layer}" for n in ("Pow", "ReduceMean", "Add", "Rsqrt", "Mul", "Mul_1"))


@pytest.mark.parametrize("route", [r.name for r in ROUTES])
def test_fx_constants_paired_only_with_float_scalar_arguments(outcomes, route):
    """The fused RMS norm's inputs are x, the Pow exponent (Const float32 2.0), ReduceMean's axes (Const int64),
    eps (Const 1e-6) and the weight.
    FX has `pow(x, 2)`, an int argument (no float scalar: the constant is listed by design), and `add(mean, 1e-6)`,
    a float argument: eps is compared with it."""
    outcome = outcomes[("golden_fx", route)]
    apis = {(k[0], k[1]): v for k, v in outcome.rows.items()}
    for token in range(CONFIG.tokens):
        for layer in (0, 1):
            fused = _fused_rms(layer)
            assert (token, f"{fused}.input.1") not in apis  # the exponent
            assert any(u[1] == token and u[2] == fused and u[3] is IO.INPUT and u[4] == 1 and u[6] == "by design"
                       for u in outcome.unmatched)  # fmt: skip
            eps = apis[(token, f"{fused}.input.3")]
            assert eps[1] is Result.PASS and "add_" in eps[0][0]


@pytest.mark.parametrize("golden", GOLDENS)
@pytest.mark.parametrize("route", [r.name for r in ROUTES])
def test_empty_tensors_pass_with_the_empty_data_message_from_every_source(outcomes, golden, route):
    """The cache is [0, 32] on both sides: a cat reads it (input 0), a Mul reads it twice and writes an empty
    output. Nothing to compare is nothing wrong, in every mode and from every source."""
    outcome = outcomes[(golden, route)]
    apis = {(k[0], k[1]): v for k, v in outcome.rows.items()}
    for token in range(CONFIG.tokens):
        for api in ("ConcatV2_kv.input.0", "Mul_kv.input.0", "Mul_kv.input.1", "Mul_kv.output.0"):
            assert apis[(token, api)][1] is Result.PASS, (api, outcome.messages[(token, api)])
            assert EMPTY_BOTH in outcome.messages[(token, api)]
            assert not any("stats CSV" in m for m in outcome.messages[(token, api)])


@pytest.mark.parametrize("golden", GOLDENS)
def test_both_executions_of_the_rerun_op_are_accounted_for_alike(outcomes, golden):
    """The target ran layers.1/MatMul_1 twice per token (two files), the golden once: every tensor of both target
    files (2 inputs, 1 output each) is a row or an unmatched item, the same in every route."""
    seen = []
    for route in ROUTES:
        outcome = outcomes[(golden, route.name)]
        found = set()
        for token, api, npu_label, _ in outcome.rows:
            if api.startswith(f"{RERUN}."):
                name, io, index = npu_label.split(" ")[:3]  # "{GE file} {io} {index}"
                found.add((token, name, io, int(index)))
        for u in outcome.unmatched:
            if u[0] == "target" and u[2] == RERUN and u[3] is not None:
                found.add((u[1], u[5], u[3].value, u[4]))
        assert len(found) == 3 * 2 * CONFIG.tokens, (route.name, sorted(found))
        seen.append(found)
    assert all(s == seen[0] for s in seen)


@pytest.mark.parametrize("golden", GOLDENS)
@pytest.mark.parametrize("route", [r.name for r in ROUTES])
def test_ffts_ops_are_compared_whole_from_every_source(outcomes, golden, route):
    """Every tensor of the two FFTS+ ops (two slices along axis 0, no fault) is a row labelled with its slices and
    PASSes: from the index the slices' summaries are merged, where slice 0's alone made false FAILs."""
    rows = {k: v for k, v in outcomes[(golden, route)].rows.items() if k[1].split(".")[0] in FFTS_OPS}
    for token in range(CONFIG.tokens):
        for name in FFTS_OPS:
            assert any(k[0] == token and k[1] == f"{name}.output.0" for k in rows), (name, token)
    assert rows and all("(+1 FFTS+ slices)" in k[2] for k in rows)
    failing = {k[:2]: v for k, v in rows.items() if v[1] is not Result.PASS}
    assert not failing, failing


def _ffts_md5(root: Path, golden: str) -> dict:
    golden_root = root / golden / ("msprobe_fx_dump" if golden == "golden_fx" else "msprobe_ge_dump")
    result, _ = run_compare(CompareOptions(root / "target" / "msprobe_ge_dump", golden_root, mode=DataMode.MD5),
                            keep_rows=True)  # fmt: skip
    (rank,) = result.ranks
    return {(r.pair.token, r.pair.api_name): (r.result, r.npu.crc32, r.bench.crc32) for r in rank.rows
            if r.pair.op_name in FFTS_OPS}  # fmt: skip


def test_ffts_crc_from_the_index_is_the_crc_of_the_whole_tensor(trees):
    """Slices cut along axis 0 follow each other in C order: their CRCs combine into the whole tensor's, so md5
    mode gives from the index (raw deleted) what it gives from the raw slice files."""
    raw = _ffts_md5(trees["raw"], "golden_ge")
    dropped = _ffts_md5(trees["dropped"], "golden_ge")
    assert raw and all(v[0] is Result.PASS and v[1] is not None for v in raw.values())
    assert dropped == raw


FX_STEP = "msprobe_fx_dump/worldsize1_global_rank0/gm_20261129083000000000_dump/0"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (np.array(2.5), FileShape((), "f")),  # a float argument
        (np.array(2), FileShape((), "i")),  # `pow(x, 2)`: an int, no float a constant could be made from
        (np.array(True), FileShape((), "b")),  # `keepdim=True`
        (np.array(2.5, dtype=object), FileShape((), "f")),  # a number the dumper pickled: what it holds
        (np.array(None), FileShape((), "O")),
        (np.array("tanh"), FileShape((), "U")),
        (np.zeros((0, 32), np.float16), FileShape((0, 32), "f")),
    ],
)
def test_an_fx_file_looks_the_same_raw_and_from_its_index_record(tmp_path, value, expected):
    """What the GE → FX matcher learns of an FX file (shape, dtype kind) is the same from the raw file and from the
    summary `tcmp watch` stores of it, so the pairing cannot depend on which one is there."""
    path = tmp_path / FX_STEP / "add_0-aten.add.Tensor.INPUT.1.20261129083000000017.npy"
    path.parent.mkdir(parents=True)
    np.save(path, value, allow_pickle=True)
    file = locate(path, mapping={})
    assert isinstance(file, DumpFile)
    record = summarize_file(file).tensors[0]
    assert FxSide({}, {}).shape(file) == expected
    assert FxSide({}, {path: record}).shape(file) == expected


# --- a stacked list output: hand-built, the synthetic model has none --------------------------------------------

LIST_OP = "f-my.op.default"


def _stacked_pair(root: Path) -> None:
    """`y, [a, b] = my.op(x)`: GE's SplitV names its outputs OUTPUT.0, OUTPUT.1.0 and OUTPUT.1.1; the FX dumper
    stacks the list into one OUTPUT.1 file of shape (2, 2, 3). The target's b is off by half: element 1 fails,
    element 0 passes, and a route that judged an element by the whole file's summary would say otherwise."""
    d = DumpPair(root)
    x = values(4, 3, start=1.0)
    a, b = x[:2] * 2, x[2:] * 3
    d.graph(
        data("x", (4, 3)),
        op("SplitV", "SplitV", ("x:0",), (
            out(f"{LIST_OP}.OUTPUT.0", (4, 3)), out(f"{LIST_OP}.OUTPUT.1.0", (2, 3)),
            out(f"{LIST_OP}.OUTPUT.1.1", (2, 3)),
        )),
    )  # fmt: skip
    d.ge("SplitV", "SplitV", [x], [x, a, b * 1.5])
    d.fx(LIST_OP, [x], [x, np.stack([a, b])])
    d.write_graph()


def _list_outcome(root: Path, mode: DataMode) -> tuple:
    result, _ = run_compare(CompareOptions(root / "msprobe_ge_dump", root / "msprobe_fx_dump", mode=mode),
                            keep_rows=True)  # fmt: skip
    (rank,) = result.ranks
    notes = {r: tuple(n.replace(str(root), "<root>") for n in r.pair.notes) for r in rank.rows}
    rows = {(r.pair.api_name, r.pair.npu.label, r.pair.bench.label): (notes[r], r.result) for r in rank.rows}
    unmatched = frozenset((u.role.value, u.op_name, u.io, u.index, u.kind.value) for u in rank.unmatched)
    return result.mode.value, rows, unmatched


def test_a_stacked_list_output_pairs_and_judges_alike_from_every_source(tmp_path):
    _stacked_pair(tmp_path / "raw")
    trees = {"raw": tmp_path / "raw"}
    for name, drop in (("dropped", True), ("kept", False)):
        shutil.copytree(tmp_path / "raw", tmp_path / name, symlinks=True)
        _watch(tmp_path / name, drop_raw=drop)
        trees[name] = tmp_path / name
    assert not any((tmp_path / "dropped").rglob("*.npy"))
    outcomes = {route.name: _list_outcome(trees[route.tree], route.mode) for route in ROUTES if route.tree in trees}
    mode, reference, unmatched = outcomes["raw tensor"]
    assert mode == "tensor" and outcomes["index, raw deleted"][0] == "statistics"
    stacked = next(k[2] for k in reference if k[0] == "SplitV.output.0").replace("OUTPUT.0", "OUTPUT.1")
    results = {k[0]: v[1] for k, v in reference.items()}
    assert results["SplitV.output.1"] is Result.PASS and results["SplitV.output.2"] is Result.FAIL
    assert {k[2] for k in reference if k[0] in ("SplitV.output.1", "SplitV.output.2")} == {
        f"{stacked}[0]", f"{stacked}[1]"}  # fmt: skip
    for route, (_, rows, other_unmatched) in outcomes.items():
        assert rows == reference, route
        assert other_unmatched == unmatched, route
