"""Same reports before and after a change that must not change behaviour (a refactoring, a move).

Writes the benchmark dumps once under --work (the 98,200-row dump of bench_html.py, the ~2 GB GE vs FX dump of
bench_compare.py, a fusion-off GE pair, and a small dump summarized by `tcmp watch --once --drop-raw` so that its
compare reads the index), runs `tcmp compare` (the installed CLI of the tree being checked) on each into
--work/reports/LABEL, and with --against LABEL compares every report file byte for byte (`cmp`) with those of an
earlier run. The reports' time stamp (in file names and in the summary's and page's text) is the only thing
normalized: it is replaced by a fixed one, and so are the page's time of writing and the report directory
(it holds the label).

    python bench/same_reports.py --work /data/same --label before      # on the old tree
    python bench/same_reports.py --work /data/same --label after --against before   # on the new tree
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
import zlib
from pathlib import Path

from tcmp.schemas.synth.faults import Fault, FaultKind
from tcmp.schemas.synth.model import ModelConfig
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario

_STAMP = re.compile(rb"(?<=tcmp_compare_rank)(\d+)_(\d{14})")
_FIXED = b"\\1_00000000000000"
_WRITTEN_AT = re.compile(rb"(?<=Written by tcmp )(\S+) at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d")  # the page's footer


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
    """Fixed time stamps, and the report directory (which names the run's label) replaced by `REPORTS`."""
    for path in sorted(directory.iterdir()):
        fixed = path.with_name(_STAMP.sub(_FIXED, path.name.encode()).decode())
        content = _STAMP.sub(_FIXED, path.read_bytes().replace(str(directory).encode(), b"REPORTS"))
        fixed.write_bytes(_WRITTEN_AT.sub(b"\\1 at 2000-01-01 00:00:00", content))
        if fixed != path:
            path.unlink()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--label", required=True, help="name of this run's reports")
    parser.add_argument("--against", help="an earlier run's label: cmp every report file with it")
    parser.add_argument("--cmp-only", action="store_true", help="compare the reports already written under --label")
    args = parser.parse_args()
    os.environ["XDG_CACHE_HOME"] = str(args.work / "cache")
    reports = args.work / "reports" / args.label
    if not args.cmp_only:
        _compare_all(args.work, reports)
    if not args.against:
        return 0
    return _cmp_reports(args.work / "reports" / args.against, reports)


def _compare_all(work: Path, reports: Path) -> None:
    shutil.rmtree(reports, ignore_errors=True)
    for label, (target, golden, extra) in _dumps(work).items():
        out = reports / label
        out.mkdir(parents=True)
        command = ["tcmp", "compare", "-tp", str(target), "-gp", str(golden), "-o", str(out), "-hl", *extra]
        started = time.monotonic()
        done = subprocess.run(command, capture_output=True, cwd=work)
        (out / "console.txt").write_bytes(done.stdout + done.stderr + f"exit {done.returncode}\n".encode())
        _normalize(out)
        print(f"{label}: compared in {time.monotonic() - started:.1f} s, exit {done.returncode}", flush=True)


def _cmp_reports(before: Path, reports: Path) -> int:
    differ = 0
    for label in sorted(p.name for p in before.iterdir()):
        names = sorted({p.name for p in (before / label).iterdir()} | {p.name for p in (reports / label).iterdir()})
        for name in names:
            old, new = before / label / name, reports / label / name
            if name.endswith(".html"):  # the rows are gzip in base64: compare them inflated, paths normalized
                same = old.exists() and new.exists() and _page_text(old, before) == _page_text(new, reports)
            elif name.endswith(".xlsx"):  # xlsxwriter stamps the workbook's creation time: compare its cells
                same = old.exists() and new.exists() and _xlsx_cells(old) == _xlsx_cells(new)
            else:
                same = old.exists() and new.exists() and subprocess.run(["cmp", "-s", old, new]).returncode == 0
            size = new.stat().st_size if new.exists() else 0
            print(f"{'same' if same else 'DIFFERENT'}  {label}/{name}  ({size:,} bytes)")
            differ += not same
    return 1 if differ else 0


_BASE64_BLOCK = re.compile(rb'(<script type="application/x-tcmp-base64"[^>]*>)([^<]*)(</script>)')


def _page_text(path: Path, reports: Path) -> bytes:
    """The page with each base64 block of gzip replaced by its inflated text, the report directory normalized."""

    def inflated(match: re.Match) -> bytes:
        data = base64.b64decode(match.group(2))
        with contextlib.suppress(zlib.error):  # a block that is not gzip (a library) is compared as decoded
            data = zlib.decompress(data, 31)
        return match.group(1) + data + match.group(3)

    text = _BASE64_BLOCK.sub(inflated, path.read_bytes())
    return _STAMP.sub(_FIXED, text.replace(str(path.parent).encode(), b"REPORTS"))


def _xlsx_cells(path: Path) -> bytes:
    """The workbook's sheet and shared-string parts: its cells and their styles, without the document's time."""
    import zipfile

    with zipfile.ZipFile(path) as book:
        return b"".join(book.read(n) for n in sorted(book.namelist()) if not n.startswith("docProps/"))


if __name__ == "__main__":
    sys.exit(main())
