"""The clean-dump matrix (issue 22): the verdict depends on the tensors, never on the route they took. Every cell
— golden FX (in each of the three FX layout eras) or fusion-off GE × fp16/bf16/fp32 × the data source (raw tensor
mode, raw statistics mode, the index a real `tcmp watch --once --drop-raw` left) — compares a clean run and must
give 0 FAIL rows and no first divergence; the same cell with faults injected must still catch every fault and name
it the first divergence of its token.

"Clean" is what a real device gives for a correct model: the synthetic writer's `ulp_noise` moves every float
output of a computing op by up to 2 units in the last place of its dtype (another summation order, another kernel),
rounding noise a verdict must not call an error; a Cast casts the (noisy) value it is given, the data moves GE
inserts copy it, graph inputs and constants are exact.
Each dump is written once per (dtype, era) and shared by the cells; all index cells share one `tcmp watch` run over
copies of the dumps.
"""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest

from tcmp.compare.execute.run import run_compare
from tcmp.compare.judge.verdict import Result
from tcmp.compare.report.outcome import CompareOptions, DataMode
from tcmp.schemas.dtypes import DataType
from tcmp.schemas.synth.faults import Fault, FaultKind
from tcmp.schemas.synth.fx_writer import FxEra
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import Scenario, ScenarioConfig, write_scenario

pytestmark = pytest.mark.slow

DTYPES = {"fp16": DataType.DT_FLOAT16, "bf16": DataType.DT_BF16, "fp32": DataType.DT_FLOAT}
# three of the FX layout eras of tcmp/schemas/dump_places.py: rank directories (>= 2025-08), data_dump/{step}/gm_*
# (2024-03 … 2025-05), gm_*/{step} (2023-10 … 2024-02); the GE tree has rank directories only in the newest
ERAS = {"ranked": FxEra.RANKED, "data_dump": FxEra.MSPROBE_DATA_DUMP, "gm_step": FxEra.GM_STEP}
SOURCES = ("tensor", "statistics", "index")
ULP_NOISE = 2
# one fault per token, so that each is its token's first divergence; they spread downstream, as real errors do
FAULTS = (
    Fault("layers.1/MatMul_1", FaultKind.REL_ERROR, magnitude=0.05, tokens=(0,)),
    Fault("SoftmaxV2_0", FaultKind.NAN, tokens=(1,)),
)
MODEL = ModelConfig(layers=2, hidden=32, seq=12)


@dataclass(frozen=True)
class Cell:
    golden: str  # "fx" | "fusion_off"
    dtype: str
    era: Optional[str]  # FX goldens only
    source: str

    @property
    def id(self) -> str:
        return "-".join(p for p in (self.golden, self.dtype, self.era, self.source) if p is not None)


CELLS = [Cell("fx", d, e, s) for d in DTYPES for e in ERAS for s in SOURCES] + [
    Cell("fusion_off", d, None, s) for d in DTYPES for s in SOURCES
]


class Dumps:
    """The matrix's dumps, each written on first use: per (dtype, era) a clean run (target, FX golden and, in the
    newest era, the fusion-off golden) and the same run with FAULTS (its target only: the goldens are the clean
    run's, which faults do not touch); and one tree holding copies of all of them, indexed by one `tcmp watch`."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.written: dict[tuple[str, str, bool], Scenario] = {}
        self.indexed: Optional[Path] = None

    def scenario(self, dtype: str, era: str, faulted: bool) -> Scenario:
        key = (dtype, era, faulted)
        if key not in self.written:
            fx_era = ERAS[era]
            config = ScenarioConfig(
                model=ModelConfig(MODEL.layers, MODEL.hidden, MODEL.seq, dtype=int(DTYPES[dtype])),
                tokens=2,
                fx_era=fx_era,
                ge_rank_dirs=fx_era is FxEra.RANKED,
                write_fx=not faulted,
                write_fusion_off=not faulted and fx_era is FxEra.RANKED,
                ulp_noise=ULP_NOISE,
                faults=FAULTS if faulted else (),
                propagate_faults=True,
            )
            self.written[key] = write_scenario(self.base / "raw" / "-".join(map(str, key)), config)
        return self.written[key]

    def index_root(self) -> Path:
        """Copies of every dump of the matrix in one tree, summarized by a real `tcmp watch --once --drop-raw`:
        the raw files are gone, so a compare there can only read the index."""
        if self.indexed is None:
            for dtype in DTYPES:
                for era in ERAS:
                    for faulted in (False, True):
                        self.scenario(dtype, era, faulted)
            root = self.base / "indexed"
            shutil.copytree(self.base / "raw", root)
            command = [sys.executable, "-m", "tcmp", "watch", str(root), "--once", "--drop-raw", "--workers", "0"]
            done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
            assert done.returncode == 0, done.stderr
            left = [p for p in root.rglob("*") if p.is_file() and (p.suffix == ".npy" or p.name[0].isupper())]
            assert not left, f"raw dump files left after --drop-raw: {left[:5]}"
            self.indexed = root
        return self.indexed


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> Dumps:
    return Dumps(tmp_path_factory.mktemp("clean_matrix"))


def _compare(dumps: Dumps, cell: Cell, faulted: bool):
    era = cell.era or "ranked"  # the fusion-off golden is written with the newest era's run
    clean = dumps.scenario(cell.dtype, era, faulted=False)
    target = dumps.scenario(cell.dtype, era, faulted).target
    golden = clean.golden_fx if cell.golden == "fx" else clean.golden_ge
    assert golden is not None
    if cell.source == "index":
        raw, indexed = dumps.base / "raw", dumps.index_root()
        target, golden = (indexed / p.relative_to(raw) for p in (target, golden))
    mode = {"tensor": DataMode.TENSOR, "statistics": DataMode.STATISTICS, "index": DataMode.AUTO}[cell.source]
    result, _ = run_compare(CompareOptions(target, golden, mode=mode), keep_rows=True)
    assert result.golden_kind.value == ("fx" if cell.golden == "fx" else "ge")
    assert result.mode.value == ("tensor" if cell.source == "tensor" else "statistics")
    (rank,) = result.ranks
    assert rank.counts.rows > 0 and {r.pair.token for r in rank.rows} == {0, 1}  # 0-based in every era
    if cell.source == "index":
        assert rank.counts.rows_from_index == rank.counts.rows
    return rank


def _cell_text(value) -> str:
    return f"{value:.6g}" if isinstance(value, float) and not math.isnan(value) else str(value)


def describe(row) -> str:
    """A failing row as the report shows it: API Name, token, Result and the metrics that judged it."""
    if row.tensor is not None:
        m = row.tensor
        metrics = f"Cosine {_cell_text(m.cosine)}, MaxAbsErr {_cell_text(m.max_abs_err)}, "
        metrics += f"MaxRelativeErr {_cell_text(m.max_relative_err)}"
    elif row.statistics is not None:
        s = row.statistics
        named = zip(("Max", "Min", "Mean", "Norm"), s.diffs)
        metrics = ", ".join(f"{n}RelativeErr {_cell_text(d.relative)}" for n, d in named)
    else:
        metrics = "no metrics"
    notes = "; ".join((*row.pair.notes, *row.messages))
    return f"token {row.pair.token} {row.pair.api_name} {row.result.value} ({metrics}) [{notes}]"


@pytest.mark.parametrize("cell", CELLS, ids=lambda c: c.id)
def test_a_clean_run_gives_no_fail_and_no_divergence(dumps, cell):
    rank = _compare(dumps, cell, faulted=False)
    failing = [describe(r) for r in rank.rows if r.result is Result.FAIL]
    divergences = [(d.token, d.op_name) for d in rank.divergences if d.op_name is not None]
    assert not failing and not divergences, (
        f"{len(failing)} FAIL rows of {rank.counts.rows}, first divergences {divergences}:\n" + "\n".join(failing)
    )


@pytest.mark.parametrize("cell", CELLS, ids=lambda c: c.id)
def test_every_injected_fault_is_caught_and_is_its_tokens_first_divergence(dumps, cell):
    rank = _compare(dumps, cell, faulted=True)
    firsts = {d.token: d.op_name for d in rank.divergences}
    for fault in FAULTS:
        (token,) = fault.tokens
        caught = [r for r in rank.rows if r.pair.token == token and r.pair.op_name == fault.op]
        assert any(r.result is Result.FAIL and r.pair.io.value == "output" for r in caught), (fault, caught)
        assert firsts.get(token) == fault.op, f"token {token}: first divergence {firsts.get(token)}, fault {fault}"
