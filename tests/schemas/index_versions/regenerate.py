"""Regenerate the index files of earlier schema versions that tests/schemas/test_index_migrations.py opens.

    # versions 1-3: the tables as the code of those versions created them (from this repository's history; the
    # historic schema module runs under a Python with sqlite-utils, which created the tables then)
    python tests/schemas/index_versions/regenerate.py history REPO
    # version 4: an index written by `tcmp watch --once` of a release (run with that release's Python: a
    # throwaway venv with `pip install <checkout>`, e.g. of d499fe7 extracted by `git archive d499fe7 | tar -x`)
    /tmp/old-venv/bin/python tests/schemas/index_versions/regenerate.py release

`history` writes v1.sql, v2.sql, v3.sql: the schema only (sqlite_master's statements and the user_version).
`release` writes v4.sql (the whole file, as the sqlite3 shell's `.dump` gives it) and v4_summaries.json: what
that release's own reader returns for every dump file of it (floats as repr text: NaN and -0.0 survive), the
expected values.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
# the commit of each version's schema module: the last before original_op (1), the one adding it (2), the merge
# that made files.dev version 3
HISTORY = {1: "dfa0502^", 2: "dfa0502", 3: "7ba2716"}
ROOT = Path("/tmp/tcmp-index-v4-fixture/root")  # a fixed path: the file's stored paths do not vary per run


def _schema_sql(conn: sqlite3.Connection) -> str:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    statements = [sql for (sql,) in conn.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid")]
    return "".join(f"{sql};\n" for sql in statements) + f"PRAGMA user_version = {version};\n"


def history(repo: Path) -> None:
    for version, rev in HISTORY.items():
        source = subprocess.run(
            ["git", "-C", str(repo), "show", f"{rev}:schemas/index/schema.py"], check=True, capture_output=True,
            text=True,
        ).stdout  # fmt: skip
        source = source.replace("from ..layout import INDEX_DIR", 'INDEX_DIR = ".tcmp"')
        module = type(sys)(f"schema_v{version}")
        sys.modules[module.__name__] = module  # dataclasses look their module up
        exec(compile(source, f"{rev}:schemas/index/schema.py", "exec"), module.__dict__)
        assert version == module.SCHEMA_VERSION, (rev, module.SCHEMA_VERSION)
        conn = sqlite3.connect(":memory:")
        module.create_schema(conn)
        header = f"-- the tables of index schema {version}: create_schema of {rev}:schemas/index/schema.py\n"
        (HERE / f"v{version}.sql").write_text(header + _schema_sql(conn))


def _float_text(value):
    return None if value is None else repr(value)


def _summary_json(summary):
    if summary is None:
        return None
    return {
        "numel": summary.numel, "min": _float_text(summary.min), "max": _float_text(summary.max),
        "mean": _float_text(summary.mean), "l2norm": _float_text(summary.l2norm), "nan_count": summary.nan_count,
        "inf_count": summary.inf_count, "crc32": summary.crc32,
    }  # fmt: skip


def release() -> None:
    import shutil

    from tcmp.schemas.index import IndexWriter, SummaryRow, default_index_path, open_index
    from tcmp.schemas.synth.model import ModelConfig
    from tcmp.schemas.synth.scenario import Fault, FaultKind, ScenarioConfig, write_scenario

    try:
        from tcmp.schemas.dump_records import IO, FileSummary, Summary, TensorKind, TensorSummary
    except ImportError:  # the release before the modules were renamed
        from tcmp.schemas.records import IO, FileSummary, Summary, TensorKind, TensorSummary
    shutil.rmtree(ROOT.parent, ignore_errors=True)
    config = ScenarioConfig(
        model=ModelConfig(layers=1, pow_norm=True), tokens=1, ffts_ops=("Gelu_0", "MatMul_0"),
        faults=(Fault("SoftmaxV2_0", FaultKind.NAN),),
    )  # fmt: skip
    write_scenario(ROOT, config)
    subprocess.run([sys.executable, "-m", "tcmp", "watch", "--once", str(ROOT)], check=True)
    index = default_index_path(ROOT)
    # one summary holding what SQLite cannot store as is (NaN, -0.0, inf), written by the release's own writer:
    # its float_flags bits are the release's layout
    with open_index(index) as reader:
        some = next(f for f in reader.files_under(ROOT) if f.state.value == "summarized" and "golden_ge" in str(f.path))
    odd = Summary(numel=4, min=float("nan"), max=-0.0, mean=float("-inf"), l2norm=-0.0, nan_count=1, inf_count=1,
                  crc32=7)  # fmt: skip
    tensor = TensorSummary(io=IO.OUTPUT, index=0, sub_index=None, kind=TensorKind.TENSOR, dtype="float32",
                           shape=(2, 2), summary=odd, notes=("a note",))  # fmt: skip
    with IndexWriter(index) as writer:
        summary = FileSummary(path=some.path, op_name="odd/values", dump_time=1, tensors=(tensor,))
        writer.write([SummaryRow(file=some.file, key=some.key, summary=summary)])
        writer.checkpoint()
    conn = sqlite3.connect(index)
    conn.execute("UPDATE daemon_state SET host = 'fixture-host', pid = 1")
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    header = f"-- an index of schema {version} written by `tcmp watch --once` of a release (see regenerate.py)\n"
    conn.close()
    # the sqlite3 shell's dump, not Python's iterdump: that writes an infinity as `Inf`, which no SQL reads back
    dump = subprocess.run(["sqlite3", str(index), ".dump"], check=True, capture_output=True, text=True).stdout
    (HERE / f"v{version}.sql").write_text(header + dump + f"PRAGMA user_version = {version};\n")
    expected = {}
    with open_index(index) as reader:
        files = reader.files_under(ROOT)
        for file, summary in zip(files, reader.summaries_of(files)):
            expected[os.path.relpath(file.path, ROOT)] = {
                "state": file.state.value, "op_name": summary.op_name, "dump_time": summary.dump_time,
                "slicing": getattr(summary, "slicing", None),
                "tensors": [
                    {
                        "io": t.io.value, "index": t.index, "sub_index": t.sub_index, "kind": t.kind.value,
                        "dtype": t.dtype, "shape": None if t.shape is None else list(t.shape),
                        "device_format": t.device_format,
                        "device_shape": None if t.device_shape is None else list(t.device_shape),
                        "notes": list(t.notes), "original_op": None if t.original_op is None else list(t.original_op),
                        "summary": _summary_json(t.summary),
                        "elements": [_summary_json(e) for e in getattr(t, "elements", ())],
                    }
                    for t in summary.tensors
                ],
            }  # fmt: skip
    (HERE / f"v{version}_summaries.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    shutil.rmtree(ROOT.parent)


if __name__ == "__main__":
    if sys.argv[1:2] == ["history"]:
        history(Path(sys.argv[2]))
    elif sys.argv[1:2] == ["release"]:
        with tempfile.TemporaryDirectory():
            release()
    else:
        sys.exit(__doc__)
