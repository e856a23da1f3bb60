"""Same reports before and after a change that must not change behaviour (a refactoring, a move).

Writes the benchmark dumps once under --work (the 98,200-row dump of bench_html.py, the ~2 GB GE vs FX dump of
bench_compare.py, a fusion-off GE pair, and a small dump summarized by `tcmp watch --once --drop-raw` so that its
compare reads the index), runs `tcmp compare` (the installed CLI of the tree being checked) on each into
--work/reports/LABEL, and with --against LABEL compares every report file byte for byte (`cmp`) with those of an
earlier run. The reports' time stamp (in file names and in the summary's and page's text) is the only thing
normalized: it is replaced by a fixed one.

    python bench/same_reports.py --work /data/same --label before      # on the old tree
    python bench/same_reports.py --work /data/same --label after --against before   # on the new tree
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import Fault, FaultKind, ScenarioConfig, write_scenario

_STAMP = re.compile(rb"(?<=tcmp_compare_rank)(\d+)_(\d{14})")
_FIXED = b"\\1_00000000000000"


def _dumps(work: Path) -> dict[str, tuple[Path, Path, tuple[str, ...]]]:
    """The dumps, written once: label -> (target, golden, extra compare arguments)."""
    configs = {
        "rows98k": ScenarioConfig(
            model=ModelConfig(layers=160, hidden=32, seq=12),
            tokens=20,
            faults=(Fault("layers.1/MatMul_1", FaultKind.REL_ERROR, magnitude=0.03),),
            propagate_faults=True,
            write_fusion_off=False,
        ),
        "ge_fx_2gb": ScenarioConfig(
            model=ModelConfig(layers=160, hidden=512, seq=64),
            tokens=2,
            write_fusion_off=False,
            faults=(Fault("layers.1/MatMul_1", FaultKind.REL_ERROR), Fault("SoftmaxV2_7", FaultKind.NAN)),
        ),
        "fusion_off": ScenarioConfig(
            model=ModelConfig(layers=40, hidden=256, seq=32),
            tokens=2,
            faults=(Fault("layers.1/MatMul_1", FaultKind.REL_ERROR), Fault("SoftmaxV2_7", FaultKind.NAN)),
        ),
        "index": ScenarioConfig(
            model=ModelConfig(layers=8, hidden=64, seq=16),
            tokens=2,
            faults=(Fault("layers.1/MatMul_1", FaultKind.REL_ERROR),),
        ),
    }
    dumps = {}
    for label, config in configs.items():
        root = work / "dumps" / label
        if not (root / "written").exists():
            shutil.rmtree(root, ignore_errors=True)
            started = time.monotonic()
            write_scenario(root, config)
            if label == "index":
                for side in ("target", "golden_ge"):
                    subprocess.run(["tcmp", "watch", "--once", "--drop-raw", str(root / side)], check=True)
            (root / "written").write_text("")
            print(f"{label}: written in {time.monotonic() - started:.0f} s", flush=True)
        golden = "golden_ge/msprobe_ge_dump" if label in ("fusion_off", "index") else "golden_fx/msprobe_fx_dump"
        extra = ("--data-mode", "statistics") if label == "index" else ()
        dumps[label] = (root / "target" / "msprobe_ge_dump", root / golden, extra)
    return dumps


def _normalize(directory: Path) -> None:
    for path in sorted(directory.iterdir()):
        fixed = path.with_name(_STAMP.sub(_FIXED, path.name.encode()).decode())
        fixed.write_bytes(_STAMP.sub(_FIXED, path.read_bytes()))
        if fixed != path:
            path.unlink()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--label", required=True, help="name of this run's reports")
    parser.add_argument("--against", help="an earlier run's label: cmp every report file with it")
    args = parser.parse_args()
    os.environ["XDG_CACHE_HOME"] = str(args.work / "cache")
    reports = args.work / "reports" / args.label
    shutil.rmtree(reports, ignore_errors=True)
    for label, (target, golden, extra) in _dumps(args.work).items():
        out = reports / label
        out.mkdir(parents=True)
        command = ["tcmp", "compare", "-tp", str(target), "-gp", str(golden), "-o", str(out), "-hl", *extra]
        started = time.monotonic()
        done = subprocess.run(command, capture_output=True, cwd=args.work)
        (out / "console.txt").write_bytes(done.stdout + done.stderr + f"exit {done.returncode}\n".encode())
        _normalize(out)
        print(f"{label}: compared in {time.monotonic() - started:.1f} s, exit {done.returncode}", flush=True)
    if not args.against:
        return 0
    before = args.work / "reports" / args.against
    differ = 0
    for label in sorted(p.name for p in before.iterdir()):
        names = sorted({p.name for p in (before / label).iterdir()} | {p.name for p in (reports / label).iterdir()})
        for name in names:
            old, new = before / label / name, reports / label / name
            if name.endswith(".xlsx"):  # xlsxwriter stamps the workbook's creation time: compare its cells
                same = old.exists() and new.exists() and _xlsx_cells(old) == _xlsx_cells(new)
            else:
                same = old.exists() and new.exists() and subprocess.run(["cmp", "-s", old, new]).returncode == 0
            size = new.stat().st_size if new.exists() else 0
            print(f"{'same' if same else 'DIFFERENT'}  {label}/{name}  ({size:,} bytes)")
            differ += not same
    return 1 if differ else 0


def _xlsx_cells(path: Path) -> bytes:
    """The workbook's sheet and shared-string parts: its cells and their styles, without the document's time."""
    import zipfile

    with zipfile.ZipFile(path) as book:
        return b"".join(book.read(n) for n in sorted(book.namelist()) if not n.startswith("docProps/"))


if __name__ == "__main__":
    sys.exit(main())
