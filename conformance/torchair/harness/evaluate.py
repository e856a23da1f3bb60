"""`tcmp compare` on one model's dumps (a subprocess: tcmp from the repository's own venv), judged against the truth.

The checks (each an acceptance criterion of the conformance harness):
- false FAIL: a FAIL row on a GE tensor the harness did not fault;
- fault: in every step, a row on the faulted op's outputs FAILs, and the summary names that op as the token's
  first divergence;
- missing op: a GE op with a dump file that is neither in the table nor in the unmatched file;
- unexplained "no partner": an item tcmp says has no partner while the other side holds its value;
- by design without its reason: a "by design" item whose reason does not name the torchair behaviour behind it.
- Stack Info: a row of a GE op named after an FX node must name in Stack Info the lines of harness/models.py the
  model ran that node's op from (truth.expected_stack_lines; at least one row per model is checked).
- clean run: the same GE dump without the fault, compared again: no FAIL row and no first divergence.
- wrong pair: a row whose two tensors are not the same tensor (PASS or FAIL), other than a GE-inserted conversion
  checked against its own input (truth.self_check_is_right).
One more count informs without failing: named GE outputs whose FX file exists but that no row compares.
"""

from __future__ import annotations

import ast
import csv
import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .truth import ModelTruth

_API = re.compile(r"^(?P<op>.+)\.(?P<io>input|output)\.(?P<index>\d+)(?: #(?P<execution>\d+))?$")


@dataclass(frozen=True)
class CompareOutput:
    refused: Optional[str]  # tcmp stopped without a report: its message
    table: tuple = ()
    unmatched: tuple = ()
    summary: Optional[dict] = None


def run_tcmp(tcmp: Path, target: Path, golden: Path, out: Path, extra: tuple[str, ...] = ()) -> CompareOutput:
    out.mkdir(parents=True, exist_ok=True)
    command = [str(tcmp), "compare", "--mode", "torchair", "--target_path", str(target), "--golden_path",
               str(golden), "--output_path", str(out), *extra]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    (out / "console.txt").write_text(proc.stdout + proc.stderr)
    summaries = sorted(out.glob("*_summary.json"))
    if proc.returncode not in (0, 1) or len(summaries) != 1:
        message = (proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}").splitlines()[-1]
        return CompareOutput(refused=message)
    stem = summaries[0].name[: -len("_summary.json")]
    with open(out / f"{stem}.csv", newline="", encoding="utf-8") as fh:
        table = tuple(csv.DictReader(fh))
    with open(out / f"{stem}_unmatched.csv", newline="", encoding="utf-8") as fh:
        unmatched = tuple(csv.DictReader(fh))
    return CompareOutput(None, table, unmatched, json.loads(summaries[0].read_text()))


GE_MODE = "ge max-autotune"

# aclgraph runs tcmp does not compare fully yet, each with the reason (model, mode) -> why. Such a run still gets
# its counts in the table; when it fails, its verdict is "known gap: …" and it does not fail the harness; when it
# passes, it passes (and the entry should go).
KNOWN_GAPS = {
    ("add_rms_norm_dynamic_quant_flatten", "npugraph_ex optimized"):
        "the optimized stage saves the fused node only through getitems, and npugraph_ex's options have no graph "
        "dump (torchair's debug.graph_dump is none of the options it maps), so which node and output a getitem "
        "takes is in no file: listed, not paired (docs/formats.md, aclgraph dumps)",
    ("add_rms_norm_dynamic_quant_flatten", "optimized vs original"):
        "the golden's getitems: torchair writes no graph dump of the graph the original stage runs, so which "
        "node and output a golden getitem takes is in no file: listed, not paired (docs/formats.md, aclgraph dumps)",
}  # fmt: skip


def known_gap(result: ModelResult) -> Optional[str]:
    """Why a failing run is a known gap of tcmp's (KNOWN_GAPS), None for a run that passes or is not one."""
    return None if result.passed else KNOWN_GAPS.get((result.model, result.mode))


@dataclass
class ModelResult:
    version: str
    model: str
    refused: Optional[str] = None
    rows: int = 0
    fails: int = 0
    false_fails: list = field(default_factory=list)
    wrong_pairs: list = field(default_factory=list)
    fault_fails: bool = False
    fault_first: bool = False
    missing_ops: list = field(default_factory=list)
    unexplained_no_partner: list = field(default_factory=list)
    by_design_without_reason: list = field(default_factory=list)
    named_not_compared: list = field(default_factory=list)
    stacks_checked: int = 0
    stack_wrong: list = field(default_factory=list)
    clean_fails: list = field(default_factory=list)  # the clean run's FAIL rows (or why it has no report)
    clean_first: list = field(default_factory=list)  # the clean run's first divergences
    # dump scope (a model whose GE dump options select some ops): golden items of unselected nodes that are not
    # "out of scope: not selected for dump (dump_layer)", or a scoped model without one such item
    scope_wrong: list = field(default_factory=list)
    mode: str = "ge max-autotune"  # GE_MODE, or the aclgraph mode and dump stage of the target (acl_judge.PAIRS)
    by_design_with_partner: list = field(default_factory=list)  # aclgraph (info): "by design" yet the value is there

    @property
    def passed(self) -> bool:
        return (
            self.refused is None
            and not self.false_fails
            and not self.wrong_pairs
            and self.fault_fails
            and self.fault_first
            and not self.missing_ops
            and not self.unexplained_no_partner
            and not self.by_design_without_reason
            and (self.stacks_checked > 0 or not self.mode.startswith("ge"))  # aclgraph rows: no stack check
            and not self.stack_wrong
            and not self.clean_fails
            and not self.clean_first
            and not self.scope_wrong
        )


def _token(cell: str) -> Optional[int]:
    return int(cell) if cell.isdigit() else None


def _clean_run(result: ModelResult, clean: CompareOutput) -> None:
    """The clean run's acceptance: 0 FAIL rows, no first divergence (a compare that refused counts as a FAIL)."""
    if clean.refused is not None:
        result.clean_fails.append(f"tcmp refused the clean run: {clean.refused}")
        return
    for row in clean.table:
        if row["Result"] == "FAIL":
            result.clean_fails.append(
                f"{row['API Name']} (token {row['Token']}): cos {row.get('Cosine')}, MaxRelativeErr "
                f"{row.get('MaxRelativeErr')}, {row.get('Err_message', '')}"
            )
    for d in (clean.summary or {}).get("first_divergence", []):
        if d.get("op") is not None:
            result.clean_first.append(f"{d['op']} (token {d['token']})")


def evaluate(
    version: str, model: str, truth: ModelTruth, compared: CompareOutput, clean: Optional[CompareOutput] = None
) -> ModelResult:
    result = ModelResult(version, model, refused=compared.refused)
    if clean is not None:
        _clean_run(result, clean)
    if compared.refused is not None:
        return result
    ge = truth.ge
    steps = sorted({t.step for t in ge.tensors})
    in_table: set = set()
    compared_tensors: set = set()
    fault_failed_steps: set = set()
    for row in compared.table:
        match = _API.match(row["API Name"])
        token = int(row["Token"])
        if match is None:
            raise ValueError(f"an API Name the harness cannot read: {row['API Name']}")
        key = (token, match["op"], match["io"], int(match["index"]))
        in_table.add((token, match["op"]))
        compared_tensors.add(key)
        result.rows += 1
        failed = row["Result"] == "FAIL"
        result.fails += failed
        tensor = truth.by_key.get(key)
        if tensor is None:
            result.wrong_pairs.append(f"{row['API Name']} (token {token}): no such GE tensor was written")
            continue
        bench = ast.literal_eval(row["Data Name"])[1]
        label = f"{row['API Name']} (token {token}) vs {bench}: {row['Result']}, cos {row.get('Cosine')}"
        if failed and not tensor.faulted:
            result.false_fails.append(label)
        if failed and tensor.faulted and tensor.op == ge.fault_op and tensor.io == "output":
            fault_failed_steps.add(token)
        if not (truth.pair_is_right(tensor, bench) or truth.self_check_is_right(tensor, bench)):
            result.wrong_pairs.append(label)
        lines = truth.expected_stack_lines(match["op"])
        if lines is not None:
            result.stacks_checked += 1
            stack = row.get("Stack Info", "")
            missing = [n for n in lines if f'models.py", line {n},' not in stack]
            if missing:
                shown = " / ".join(s.strip() for s in stack.strip().splitlines()[-2:]) or "N/A"
                result.stack_wrong.append(
                    f"{row['API Name']} (token {token}): lines {list(lines)} expected, {missing} not in its "
                    f"Stack Info ({shown})"
                )
    result.fault_fails = fault_failed_steps == set(steps)
    firsts = {(d["token"], d["op"]) for d in (compared.summary or {}).get("first_divergence", [])}
    result.fault_first = all((s, ge.fault_op) in firsts for s in steps)

    unmatched_ops: set = set()
    for item in compared.unmatched:
        token = _token(item["Token"])
        if item["Side"] == "target":
            unmatched_ops.add((token, item["Op Name"]))
            tensors = [
                t for t in ge.tensors
                if t.op == item["Op Name"] and (token is None or t.step == token)
                and (item["IO"] == "N/A" or t.io == item["IO"])
                and (item["Index"] == "N/A" or t.index == int(item["Index"]))
            ]  # fmt: skip
            label = f"target {item['Op Name']} {item['IO']} {item['Index']} (token {item['Token']}): {item['Reason']}"
            partnered = [t for t in tensors if truth.ge_has_partner(t)]
            categories = [truth.ge_category(t) for t in tensors]
        else:
            fx_file = truth.fx_by_name.get(Path(item["Path"]).name)
            label = f"golden {Path(item['Path']).name}: {item['Reason']}"
            partnered = [fx_file] if fx_file is not None and truth.fx_has_partner(fx_file) else []
            categories = [truth.fx_category(fx_file)] if fx_file is not None else []
        if item["Kind"] == "no partner" and partnered:
            result.unexplained_no_partner.append(label)
        if item["Kind"] == "by design":
            for category in categories:
                if category is not None and not category.named_by(item["Reason"]):
                    result.by_design_without_reason.append(f"{label} [expected: {category.name}]")
                    break

    _check_scope(result, ge, compared, in_table)
    for step, op, _type in ge.dumped_ops:
        if (step, op) not in in_table and (step, op) not in unmatched_ops and (None, op) not in unmatched_ops:
            result.missing_ops.append(f"{op} (token {step})")
    for t in ge.tensors:
        if t.io == "output" and t.from_fx and (t.step, t.op, t.io, t.index) not in compared_tensors:
            result.named_not_compared.append(f"{t.op}.output.{t.index} (token {t.step}) named {t.fx_name}")
    return result


NOT_SELECTED = "not selected for dump (dump_layer)"  # tcmp's reason (README, "Dump scope")


def _check_scope(result: ModelResult, ge, compared: CompareOutput, in_table: set) -> None:
    """Under dump options that select some ops: every golden output item of an FX node only unselected ops carry is
    out of scope with tcmp's reason (at least one exists), and every op GE wrote has rows."""
    if not ge.unselected_nodes:
        return
    seen = 0
    for item in compared.unmatched:
        name = Path(item["Path"]).name
        if item["Side"] != "golden" or ".OUTPUT." not in name:
            continue
        if name.split(".OUTPUT.", 1)[0] in ge.unselected_nodes:
            seen += 1
            if (item["Kind"], item["Reason"]) != ("out of scope", NOT_SELECTED):
                result.scope_wrong.append(f"golden {name}: {item['Kind']}: {item['Reason']} (GE did not dump it)")
    if not seen:
        result.scope_wrong.append(f"no golden output of the unselected nodes {sorted(ge.unselected_nodes)} listed")
    for step, op, _type in ge.dumped_ops:
        if (step, op) not in in_table:
            result.scope_wrong.append(f"{op} (token {step}) was dumped (selected) but has no row")
