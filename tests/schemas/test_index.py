"""The SQLite index: what goes in comes back out (summaries, DumpFiles, graphs), counters and states follow the
upsert rules, the tree can move with its index, and a read-only directory can still be read."""

from __future__ import annotations

import math
import os
import shutil
import sqlite3
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Optional

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tcmp.schemas.dump_outline import discover
from tcmp.schemas.dump_records import IO, FileSummary, Summary, TensorKind, TensorSummary
from tcmp.schemas.dump_tree import INDEX_DIR, DumpFile, GraphFile, locate
from tcmp.schemas.graph import Graph, GraphOp, InputEdge, OutputDesc
from tcmp.schemas.graph_reader import read_graph
from tcmp.schemas.index import (
    INDEX_FILE,
    SCHEMA_VERSION,
    SLICES_AND_ELEMENTS_VERSION,
    FileKey,
    FileState,
    ForgetRow,
    GraphRow,
    IndexUnusable,
    IndexWriter,
    ProblemRow,
    RawFlagRow,
    SummaryRow,
    default_index_path,
    find_index,
    open_index,
)
from tcmp.schemas.synth.graph_writer import GraphOpSpec, OutputSpec, graph_file_name, write_graph
from tcmp.schemas.synth.scenario import ScenarioConfig, write_scenario
from tcmp.schemas.synth.subgraph_model import subgraph_model_text

GE_DIR = "msprobe_ge_dump/worldsize1_global_rank0/20261129083000/0/graph_1_0/1/0"
FX_DIR = "msprobe_fx_dump/worldsize1_global_rank0/gm_20261129083000000000_dump/0"


def _key(path: Path) -> FileKey:
    return FileKey.of(os.stat(path))


def _touch(path: Path, data: bytes = b"x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _dump_file(path: Path) -> DumpFile:
    found = locate(path, mapping={})
    assert isinstance(found, DumpFile), found
    return found


def _tensor(io: IO, index: int, summary: Optional[Summary], **kw) -> TensorSummary:
    return TensorSummary(io, index, kw.pop("sub_index", None), kw.pop("kind", TensorKind.TENSOR),
                         kw.pop("dtype", "DT_FLOAT16"), kw.pop("shape", (2, 3)), summary, **kw)  # fmt: skip


@pytest.fixture
def root(tmp_path) -> Path:
    directory = tmp_path / "dumps"
    directory.mkdir()
    return Path(os.path.realpath(directory))


def test_hand_made_summaries_come_back_exactly(root):
    """Every field, including NaN/inf floats (SQLite stores NaN as NULL), None summaries, 0-d shapes, notes."""
    ge = _touch(root / GE_DIR / "MatMul.layer_0_MatMul.12.2.1764400000000037")
    fx = _touch(root / FX_DIR / "mm_1-aten.mm.default.INPUT.1.2.20261129083000000017.npy")
    ge_summary = FileSummary(
        ge,
        "layer.0/MatMul",  # the header's unsanitized name
        1764400000000099,
        (
            _tensor(IO.INPUT, 0, Summary(6, -1.5, math.inf, math.nan, math.inf, 0, 2, 123),
                    device_format="FRACTAL_NZ", device_shape=(1, 1, 16, 16), notes=("padding ignored", "ünïcode")),
            _tensor(IO.OUTPUT, 0, Summary(6, None, None, None, None, 6, 0, 0), dtype="DT_FLOAT",
                    original_op=("layer.0/Add", 1)),  # the header's OpOutput.original_op
            _tensor(IO.OUTPUT, 1, Summary(None, None, None, crc32=0xFFFFFFFF), kind=TensorKind.RAW, shape=(7,)),
            _tensor(IO.OUTPUT, 2, Summary(2, -0.0, 0.0, -0.0, 0.0, 0, 0, 1)),  # SQLite drops the sign of zero
        ),
    )  # fmt: skip
    fx_summary = FileSummary(
        fx,
        "mm_1",
        20261129083000000017,  # 20 digits: more than SQLite's int64
        (
            _tensor(IO.INPUT, 1, None, sub_index=2, kind=TensorKind.NONE, dtype=None, shape=None),
            _tensor(IO.INPUT, 1, Summary(1, 3.0, 3.0, 3.0, 3.0, 0, 0, 7), sub_index=3, shape=(), dtype="int64"),
        ),
    )
    with IndexWriter(default_index_path(root)) as writer:
        writer.add_root(root)
        writer.write(
            [SummaryRow(_dump_file(ge), _key(ge), ge_summary), SummaryRow(_dump_file(fx), _key(fx), fx_summary)]
        )
    with open_index(root) as reader:
        files = reader.files_under(root)
        assert [f.path for f in files] == sorted([ge, fx], key=str)
        back = dict(zip([f.path for f in files], reader.summaries_of(files)))
    assert _same(back[ge], ge_summary) and _same(back[fx], fx_summary)
    assert {f.path: f.header_op_name for f in files}[ge] == "layer.0/MatMul"


def _same(a: FileSummary, b: FileSummary) -> bool:
    """Equality with NaN == NaN (dataclass equality says NaN != NaN)."""
    return repr(a) == repr(b)


def test_rebuilt_dump_files_equal_what_locate_gives_for_every_name_form(root):
    names = [
        GE_DIR + "/MatMul.layer_0_MatMul.12.2.1764400000000037",  # standard
        GE_DIR + "/Add.layer.1.Add.5.7.3.1764400000000040",  # capture mode (dots kept)
        GE_DIR + "/Conv2D.conv_1.9.2.1764400000000041.4.0.1.0",  # FFTS+ slice
        GE_DIR + "/Mul.mul_3.12.2.1764400000000050.csv",  # stats mode
        GE_DIR + "/Mul.mul_3.12.2.1764400000000050_min_max.npz",  # appendix script
        "msprobe_ge_dump/20261129083000/0/graph_2_0/4/3/Cast.cast_9.1.1764400000000060",  # old form, no rank dir
        FX_DIR + "/mm_1-aten.mm.default.OUTPUT.0.20261129083000000017.npy",
        FX_DIR + "/cat_2-aten.cat.default.INPUT.0.3.20261129083000000018.npy",
        "data_dump/1/gm_20261129083000000000_dump/add_1-aten.add.Tensor.OUTPUT.0.20261129083000000019.npy",
    ]
    hashed = root / GE_DIR / "123456789"
    long_name = "MatMul." + "x" * 300 + ".12.2.1764400000000070"
    _touch(hashed.parent / "mapping.csv", f"123456789,{long_name}\n".encode())
    paths = [_touch(root / n) for n in names] + [_touch(hashed)]
    expected = {p: locate(p) for p in paths}
    assert all(isinstance(e, DumpFile) for e in expected.values()), expected
    with IndexWriter(default_index_path(root)) as writer:
        writer.add_root(root)
        rows = [SummaryRow(e, _key(p), FileSummary(p, e.op_name, None, ()), mapped_name=long_name if p == hashed
                           else None) for p, e in expected.items()]  # fmt: skip
        writer.write(rows)
    with open_index(root) as reader:
        rebuilt = {f.path: f.file for f in reader.files_under(root)}
    assert rebuilt == expected
    assert rebuilt[hashed].name.hashed_as == "123456789" and rebuilt[hashed].op_name == "x" * 300


def test_a_whole_synthetic_dump_round_trips(tmp_path):
    from tcmp.summaries.summarize import summarize_file

    scenario = write_scenario(tmp_path / "run", ScenarioConfig())
    root = Path(os.path.realpath(scenario.target))
    tree = discover(root)
    summaries = {f.path: summarize_file(f) for f in tree.files}
    with IndexWriter(default_index_path(root)) as writer:
        writer.add_root(root)
        writer.write([SummaryRow(f, _key(f.path), summaries[f.path]) for f in tree.files])
        writer.write([GraphRow(g, _key(g.path), read_graph(g.path)) for g in tree.graphs])
    with open_index(root) as reader:
        files = reader.files_under(root)
        assert tuple(f.file for f in files) == tuple(sorted(tree.files, key=lambda f: str(f.path)))
        for file, summary in zip(files, reader.summaries_of(files)):
            assert _same(summary, summaries[file.path])
        assert reader.graph_files_under(root) == tuple(sorted(tree.graphs, key=lambda g: str(g.path)))
        for graph_file in tree.graphs:
            assert reader.graph(graph_file.path) == read_graph(graph_file.path)


def test_graph_is_served_only_while_the_file_is_unchanged_or_gone(root):
    ops = [
        GraphOpSpec("x", "Data", (), (OutputSpec("arg0_1-placeholder.OUTPUT.0", 1, (2, 3)),)),
        GraphOpSpec(
            "mm", "MatMul", ("x:0", "x:0", "ctl:-1"), (OutputSpec(None, 1, (2, 2), origin_name="mm_orig"),), ("a", "b")
        ),
    ]
    path = write_graph(root, graph_file_name(1, 0, 42, "20261129083000000000"), "graph_1", ops)
    graph = read_graph(path)
    mm = graph.op("mm")
    assert mm.control_inputs == ("ctl",) and mm.original_op_names == ("a", "b") and mm.outputs[0].origin_name
    with IndexWriter(default_index_path(root)) as writer:
        writer.add_root(root)
        writer.write([GraphRow(GraphFile(path, _graph_name(path)), _key(path), graph)])
    with open_index(root) as reader:
        assert reader.graph(path) == graph
        os.utime(path, ns=(1, 1))  # same content, new mtime: the stored parse may not describe it any more
        assert reader.graph(path) is None
        path.unlink()  # gone: the stored parse is all there is
        assert reader.graph(path) == graph
        assert reader.graph(root / "dynamo_original_graph_9_rank_0_pid_1_ts_1.txt") is None


def test_a_graph_with_subgraphs_is_not_served_without_them(root):
    """The index has no column for an op's subgraph: such a graph is left out, so the compare parses its file
    (a stored root graph alone would bind nothing of a model whose compute lives in subgraphs)."""
    path = root / "dynamo_original_graph_1_rank_0_pid_1_ts_1.txt"
    path.write_text(subgraph_model_text())
    graph = read_graph(path)
    assert graph.has_subgraphs
    with IndexWriter(default_index_path(root)) as writer:
        writer.add_root(root)
        writer.write([GraphRow(GraphFile(path, _graph_name(path)), _key(path), graph)])
    with open_index(root) as reader:
        assert reader.graph(path) is None


def _graph_name(path: Path):
    from tcmp.schemas.graph_names import parse_graph_file_name

    return parse_graph_file_name(path.name)


def test_counters_states_and_corrections_follow_the_upsert_rules(root):
    path = _touch(root / FX_DIR / "mm_1-aten.mm.default.OUTPUT.0.20261129083000000017.npy")
    other = _touch(root / FX_DIR / "mm_2-aten.mm.default.OUTPUT.0.20261129083000000018.npy")
    file = _dump_file(path)
    summary = FileSummary(path, "mm_1", None, (_tensor(IO.OUTPUT, 0, Summary(1, 1.0, 1.0, 1.0, 1.0, 0, 0, 5)),))
    db = default_index_path(root)
    with IndexWriter(db) as writer:
        writer.add_root(root)
        first = writer.write([ProblemRow(path, FileState.INCOMPLETE, "still short", _key(path), file)])
        second = writer.write([SummaryRow(file, _key(path), summary, raw_deleted=True),
                               ProblemRow(other, FileState.INCOMPLETE, "short", None, None)])  # fmt: skip
        assert (first.seq, second.seq) == (1, 2) and second.raw_deleted == 1 and second.bytes == path.stat().st_size
        writer.write([RawFlagRow(path, deleted=False), ForgetRow(other)])
    conn = sqlite3.connect(db)
    row = conn.execute("SELECT state, attempts, summaries, raw_deleted, commit_seq, error FROM files").fetchall()
    assert row == [("summarized", 2, 1, 0, 2, None)]  # `other` forgotten: it never completed
    with IndexWriter(db) as writer:  # a rewrite that is not complete any more replaces the summary
        writer.write([ProblemRow(path, FileState.ERROR, "corrupt now", _key(path), file)])
        writer.write([ForgetRow(path)])  # only 'incomplete' rows are forgotten
    assert conn.execute("SELECT state, summaries, error FROM files").fetchall() == [("error", 1, "corrupt now")]
    assert conn.execute("SELECT count(*) FROM tensors").fetchone() == (0,)
    with open_index(db) as reader:
        status = reader.status()
        [indexed] = reader.files_under(root)
        assert reader.summaries(indexed).tensors == ()
    assert (status.summarized, status.failed, status.incomplete, status.tensors) == (0, 1, 0, 0)
    assert [e.error for e in status.recent_errors] == ["corrupt now"]


def test_a_raw_flag_correction_for_older_content_leaves_the_summary_of_the_new_content_alone(root):
    """A deletion that failed because the file changed (a copy tool set its mtime after the first summary) must
    not mark the raw file of the second summary, committed first, as kept: the daemon deleted it."""
    path = _touch(root / FX_DIR / "mm_1-aten.mm.default.OUTPUT.0.20261129083000000017.npy")
    summary = FileSummary(path, "mm_1", None, ())
    first = _key(path)
    os.utime(path, ns=(10**18, 10**18))
    second = _key(path)
    with IndexWriter(default_index_path(root)) as writer:
        writer.write([SummaryRow(_dump_file(path), first, summary, raw_deleted=True)])
        writer.write([SummaryRow(_dump_file(path), second, summary, raw_deleted=True)])
        writer.write([RawFlagRow(path, deleted=False, key=first)])  # the first deletion's failure, late
        conn = sqlite3.connect(default_index_path(root))
        assert conn.execute("SELECT raw_deleted, mtime_ns FROM files").fetchall() == [(1, 10**18)]
        writer.write([RawFlagRow(path, deleted=False, key=second)])  # a failure of the current content's
        assert conn.execute("SELECT raw_deleted FROM files").fetchall() == [(0,)]
        conn.close()


def test_a_path_summarized_twice_in_one_batch_keeps_the_later_summary(root):
    """Two summaries of one path in one transaction (its file changed between two reads) once broke the commit
    (UNIQUE tensors.file_id, position) and with it every later commit of the daemon."""
    path = _touch(root / FX_DIR / "mm_1-aten.mm.default.OUTPUT.0.20261129083000000017.npy")
    first = FileSummary(path, "mm_1", None, (_tensor(IO.OUTPUT, 0, Summary(1, 1.0, 1.0, 1.0, 1.0, 0, 0, 5)),))
    later = FileSummary(path, "mm_1", None, (_tensor(IO.OUTPUT, 0, Summary(1, 2.0, 2.0, 2.0, 2.0, 0, 0, 6)),))
    db = default_index_path(root)
    with IndexWriter(db) as writer:
        result = writer.write([SummaryRow(_dump_file(path), _key(path), first),
                               SummaryRow(_dump_file(path), _key(path), later)])  # fmt: skip
    assert result.files == 1
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT summaries FROM files").fetchall() == [(2,)]
    assert conn.execute("SELECT min, crc32 FROM tensors").fetchall() == [(2.0, 6)]
    conn.close()


def test_status_counts_bytes_freed_and_the_last_minute(root):
    paths = [_touch(root / FX_DIR / f"n_{i}-aten.add.Tensor.OUTPUT.0.2026112908300000001{i}.npy", b"ab" * (i + 1))
             for i in range(4)]  # fmt: skip
    rows = [SummaryRow(_dump_file(p), _key(p), FileSummary(p, "n", None, ()), raw_deleted=i % 2 == 1)
            for i, p in enumerate(paths)]  # fmt: skip
    with IndexWriter(default_index_path(root)) as writer:
        writer.add_root(root)
        writer.write(rows)
        assert writer.kept_raw_bytes(root) == 2 + 6
    with open_index(root) as reader:
        status = reader.status()
    assert (status.summarized, status.bytes_read, status.bytes_freed) == (4, 2 + 4 + 6 + 8, 4 + 8)
    assert (status.files_last_minute, status.bytes_last_minute) == (4, 20) and status.daemon is None


def test_a_tree_moved_with_its_index_still_resolves(root, tmp_path):
    path = _touch(root / FX_DIR / "mm_1-aten.mm.default.OUTPUT.0.20261129083000000017.npy")
    with IndexWriter(default_index_path(root)) as writer:
        writer.add_root(root)
        writer.write([SummaryRow(_dump_file(path), _key(path), FileSummary(path, "mm_1", None, ()))])
    moved = Path(os.path.realpath(tmp_path)) / "elsewhere"
    shutil.move(str(root), str(moved))
    with open_index(moved / FX_DIR) as reader:  # found from a directory inside the tree
        [file] = reader.files_under(moved)
        assert file.path == moved / FX_DIR / path.name and file.file == locate(file.path)
        assert reader.files_under(moved / "msprobe_fx_dump") == (file,) and reader.files_under(moved / "x") == ()


def test_find_index_walks_up_and_open_index_refuses_what_it_cannot_read(root, tmp_path):
    nested = root / FX_DIR
    nested.mkdir(parents=True)
    assert find_index(nested) is None
    with pytest.raises(IndexUnusable, match=r"no \.tcmp/index\.sqlite"):
        open_index(nested)
    IndexWriter(default_index_path(root)).close()
    assert find_index(nested) == root / INDEX_DIR / INDEX_FILE
    assert find_index(nested / "some-file.npy") == root / INDEX_DIR / INDEX_FILE
    conn = sqlite3.connect(default_index_path(root))
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(IndexUnusable, match="schema"):
        open_index(root)
    with pytest.raises(IndexUnusable, match="newer tcmp"):
        IndexWriter(default_index_path(root))


def _as_version_3(path: Path) -> None:
    """Make a current index what version 3 (tcmp before the FFTS+ slicing attribute and stacked elements) wrote:
    the same tables without files.ffts_attr and tensors.element, user_version 3."""
    conn = sqlite3.connect(path)
    assert [row[1] for row in conn.execute("PRAGMA table_info(files)")][-1] == "ffts_attr"
    assert [row[1] for row in conn.execute("PRAGMA table_info(tensors)")][-1] == "element"
    conn.execute("ALTER TABLE files DROP COLUMN ffts_attr")
    conn.execute("ALTER TABLE tensors DROP COLUMN element")
    conn.execute(f"PRAGMA user_version = {SLICES_AND_ELEMENTS_VERSION - 1}")
    conn.commit()
    conn.close()


def _as_version_1(path: Path) -> None:
    """Make a current index what version 1 (tcmp before the original_op columns and files.dev) wrote: the same
    tables without those columns, user_version 1."""
    _as_version_3(path)
    conn = sqlite3.connect(path)
    columns = [row[1] for row in conn.execute("PRAGMA table_info(tensors)")]
    assert columns[-2:] == ["original_op", "original_op_index"]
    assert [row[1] for row in conn.execute("PRAGMA table_info(files)")][-1] == "dev"
    conn.execute("ALTER TABLE tensors DROP COLUMN original_op")
    conn.execute("ALTER TABLE tensors DROP COLUMN original_op_index")
    conn.execute("ALTER TABLE files DROP COLUMN dev")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()


def test_an_index_of_schema_3_is_read_and_upgraded_in_place(root):
    """An index written before the slicing attribute and the stacked elements opens: its summaries read back
    without them (not recorded); the first writer adds the columns, keeps every row, and records both from then on:
    an FFTS+ slice file's attribute text, and an FX output's element summaries, in order, apart from its tensors."""
    old = _touch(root / GE_DIR / "Add.Add_0.12.2.1764400000000037")
    new = _touch(root / GE_DIR / "Add.Add_1.13.2.1764400000000074")
    output = _tensor(IO.OUTPUT, 0, Summary(6, -1.0, 2.0, 0.5, 3.0, 0, 0, 9), original_op=("Add_0", 0))
    elements = (Summary(3, -1.0, 0.5, -0.25, 1.5, 0, 0, 7), Summary(3, math.nan, 2.0, 1.25, 2.5, 1, 0, 8))
    path = default_index_path(root)
    with IndexWriter(path) as writer:
        writer.add_root(root)
        writer.write([SummaryRow(_dump_file(old), _key(old),
                                 FileSummary(old, "Add_0", None, (output,), slicing='{"threadMode": 1}'))])  # fmt: skip
    _as_version_3(path)
    with open_index(root) as reader:
        assert reader.schema_version == SLICES_AND_ELEMENTS_VERSION - 1
        (back,) = reader.summaries_of(reader.files_under(root))
    assert back.tensors == (output,) and back.slicing is None
    with IndexWriter(path) as writer:
        summary = FileSummary(new, "Add_1", None, (replace(output, elements=elements), output), slicing="{}")
        writer.write([SummaryRow(_dump_file(new), _key(new), summary)])
    with open_index(root) as reader:
        assert reader.schema_version == SCHEMA_VERSION
        files = reader.files_under(root)
        back = {f.path: s for f, s in zip(files, reader.summaries_of(files))}
        assert reader.status().tensors == 3  # the element rows are not tensors of their own
    assert back[old].tensors == (output,) and back[old].slicing is None
    assert back[new].slicing == "{}" and len(back[new].tensors) == 2
    first, second = back[new].tensors
    assert first.elements[0] == elements[0] and math.isnan(first.elements[1].min)
    assert first.elements[1].crc32 == 8 and second.elements == ()


def test_an_index_of_schema_1_is_read_and_upgraded_in_place(root):
    """An index written before the original_op columns opens: its summaries read back with original_op None (not
    recorded); the first writer adds the columns, keeps every row, and records original_op from then on."""
    old = _touch(root / GE_DIR / "Add.Add_0.12.2.1764400000000037")
    new = _touch(root / GE_DIR / "Add.Add_1.13.2.1764400000000074")
    output = _tensor(IO.OUTPUT, 0, Summary(6, -1.0, 2.0, 0.5, 3.0, 0, 0, 9), original_op=("Add_0", 0))
    path = default_index_path(root)
    with IndexWriter(path) as writer:
        writer.add_root(root)
        writer.write([SummaryRow(_dump_file(old), _key(old), FileSummary(old, "Add_0", None, (output,)))])
    _as_version_1(path)
    with open_index(root) as reader:
        assert reader.schema_version == 1
        (back,) = reader.summaries_of(reader.files_under(root))
    assert back.tensors == (replace(output, original_op=None),)
    with IndexWriter(path) as writer:
        summary = FileSummary(new, "Add_1", None, (replace(output, original_op=("Add_1", 0)),))
        writer.write([SummaryRow(_dump_file(new), _key(new), summary)])
    with open_index(root) as reader:
        assert reader.schema_version == SCHEMA_VERSION == 4
        files = reader.files_under(root)
        back = {f.path: s.tensors[0].original_op for f, s in zip(files, reader.summaries_of(files))}
    assert back == {old: None, new: ("Add_1", 0)}


def test_writer_never_creates_a_missing_root(tmp_path):
    with pytest.raises(IndexUnusable):
        IndexWriter(default_index_path(tmp_path / "deleted-root"))
    assert not (tmp_path / "deleted-root").exists()


def test_reading_from_a_read_only_directory_after_the_daemon_exited(root):
    """The notes' WAL trap: with -wal/-shm gone, mode=ro cannot create -shm in a read-only directory; the reader
    falls back to immutable=1. Run in a process whose file permissions apply (as root: capabilities dropped)."""
    path = _touch(root / FX_DIR / "mm_1-aten.mm.default.OUTPUT.0.20261129083000000017.npy")
    with IndexWriter(default_index_path(root)) as writer:
        writer.add_root(root)
        writer.write([SummaryRow(_dump_file(path), _key(path), FileSummary(path, "mm_1", None, ()))])
    index_dir = root / INDEX_DIR
    assert sorted(p.name for p in index_dir.iterdir()) == [INDEX_FILE]  # clean close removed -wal and -shm
    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root without setpriv")
        prefix = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--"]
    script = (
        "import sys, sqlite3\n"
        "from tcmp.schemas.index import open_index\n"
        "try:\n"
        "    c = sqlite3.connect(f'file:{sys.argv[1]}?mode=ro', uri=True); c.execute('select 1 from files')\n"
        "    print('plain-ro-ok')\n"
        "except sqlite3.OperationalError as e:\n"
        "    print('plain-ro-failed', e)\n"
        "r = open_index(sys.argv[1])\n"
        "print(r.immutable, r.status().summarized, [f.path.name for f in r.files_under(sys.argv[2])])\n"
    )
    index_dir.chmod(0o555)
    (index_dir / INDEX_FILE).chmod(0o444)
    try:
        result = subprocess.run([*prefix, sys.executable, "-c", script, str(index_dir / INDEX_FILE), str(root)],
                                capture_output=True, text=True, timeout=60, cwd=root)  # fmt: skip
    finally:
        index_dir.chmod(0o755)
        (index_dir / INDEX_FILE).chmod(0o644)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("plain-ro-failed")  # the trap is real here
    assert lines[1] == f"True 1 ['{path.name}']"


FLOATS = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True, width=64))
COUNTS = st.one_of(st.none(), st.integers(0, 2**62))


@settings(max_examples=60, deadline=None)
@given(
    summaries=st.lists(
        st.one_of(
            st.none(),
            st.builds(
                Summary,
                COUNTS,
                FLOATS,
                FLOATS,
                FLOATS,
                FLOATS,
                COUNTS,
                COUNTS,
                st.one_of(st.none(), st.integers(0, 2**32 - 1)),
            ),
        ),
        min_size=0,
        max_size=5,
    ),
    shape=st.one_of(st.none(), st.lists(st.integers(0, 2**40), max_size=5).map(tuple)),
    notes=st.lists(st.text(max_size=20), max_size=3).map(tuple),
)
def test_property_any_summary_round_trips(tmp_path_factory, summaries, shape, notes):
    root = Path(os.path.realpath(tmp_path_factory.mktemp("prop")))
    path = _touch(root / FX_DIR / "x_1-aten.add.Tensor.OUTPUT.0.20261129083000000017.npy")
    tensors = tuple(
        TensorSummary(IO.OUTPUT, i, None, TensorKind.TENSOR, "float32", shape, s, notes=notes)
        for i, s in enumerate(summaries)
    )
    written = FileSummary(path, "x_1", None, tensors)
    with IndexWriter(default_index_path(root)) as writer:
        writer.write([SummaryRow(_dump_file(path), _key(path), written)])
    with open_index(root) as reader:
        [file] = reader.files_under(root)
        back = reader.summaries(file)
    assert _same(back, FileSummary(path, "x_1", 20261129083000000017, tensors))


def test_graph_ops_with_unknown_dtype_and_empty_lists_round_trip(root):
    graph = Graph(
        "graph_3",
        root / "dynamo_original_graph_3_rank_0_pid_1_ts_20261129083000000000.txt",
        (
            GraphOp(0, "a", "Data", (), (), (OutputDesc(0, None, None, (), "ND", None, None),), (), None),
            GraphOp(1, "b:c", "Add", (InputEdge("a", 0), InputEdge("ns::op", 3)), ("a",),
                    (OutputDesc(0, "b-aten.add.OUTPUT.0", 1, (-1, 4), "NCHW", "orig", 2),), ("x", "y"), "line\\n2"),
        ),
        warnings=("unknown enum value(s) read as unknown dtype: DT_NEW",),
    )  # fmt: skip
    _touch(graph.path)
    with IndexWriter(default_index_path(root)) as writer:
        writer.write([GraphRow(GraphFile(graph.path, _graph_name(graph.path)), _key(graph.path), graph)])
    with open_index(root) as reader:
        assert reader.graph(graph.path) == graph


def test_nan_in_min_max_from_a_stats_file_survives(root):
    path = _touch(root / GE_DIR / "Mul.mul_3.12.2.1764400000000050.csv")
    summary = FileSummary(path, "mul_3", None, (_tensor(IO.INPUT, 0, Summary(4, math.nan, math.nan, math.nan),
                                                        kind=TensorKind.STATS),))  # fmt: skip
    with IndexWriter(default_index_path(root)) as writer:
        writer.write([SummaryRow(_dump_file(path), _key(path), summary)])
    with open_index(root) as reader:
        [file] = reader.files_under(root)
        back = reader.summaries(file).tensors[0].summary
    assert back is not None and all(np.isnan([back.min, back.max, back.mean])) and back.l2norm is None


def test_a_reader_never_sees_a_half_created_index(tmp_path, monkeypatch):
    """While the writer creates the schema, a second connection peeks at the file before every statement: it sees
    either no tables at all (and `open_index` says the index is empty) or, after the commit, all of them."""
    path = default_index_path(tmp_path)
    seen: list[tuple[int, int]] = []
    real_connect = sqlite3.connect

    def peek() -> None:
        reader = real_connect(path)
        tables = reader.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
        seen.append((tables, reader.execute("PRAGMA user_version").fetchone()[0]))
        reader.close()

    def traced_connect(*args, **kwargs):
        conn = real_connect(*args, **kwargs)
        conn.set_trace_callback(lambda sql: peek() if sql.lstrip().upper().startswith("CREATE") else None)
        return conn

    monkeypatch.setattr(sqlite3, "connect", traced_connect)
    with IndexWriter(path):
        pass
    monkeypatch.setattr(sqlite3, "connect", real_connect)
    assert len(seen) >= 5  # one peek per CREATE statement
    assert set(seen) == {(0, 0)}, seen
    with open_index(tmp_path) as reader:
        assert reader.schema_version == SCHEMA_VERSION
    empty = default_index_path(tmp_path / "empty")
    empty.parent.mkdir(parents=True)
    sqlite3.connect(empty).execute("PRAGMA journal_mode = WAL").fetchone()  # the file exists, its tables not yet
    with pytest.raises(IndexUnusable, match="an empty index"):
        open_index(empty.parent.parent)


def test_an_index_of_schema_1_is_read_as_it_is_and_upgraded_by_its_next_writer(root):
    """Schema 1 (before files.dev): what today's indexes are. Emulated by writing one and dropping the column."""
    fx = _touch(root / FX_DIR / "mm_1-aten.mm.default.OUTPUT.0.20261129083000000017.npy")
    summary = FileSummary(fx, "mm_1", None, ())
    index = default_index_path(root)
    with IndexWriter(index) as writer:
        writer.add_root(root)
        writer.write([SummaryRow(_dump_file(fx), _key(fx), summary)])
    _as_version_1(index)
    st = os.stat(fx)
    with open_index(root) as reader:
        [file] = reader.files_under(root)
        [known] = reader.lookup([str(fx)])
    # read as it is: the key without its device, so the daemon reads the file once more (never trusts it blindly)
    assert file.key == known.key == FileKey(st.st_ino, st.st_size, st.st_mtime_ns, None) != FileKey.of(st)
    with IndexWriter(index) as writer:  # the next writer upgrades it in place, keeping its rows
        writer.write([SummaryRow(_dump_file(fx), _key(fx), summary)])
    conn = sqlite3.connect(index)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 4
    assert conn.execute("SELECT count(*), max(dev) FROM files").fetchone() == (1, st.st_dev)
    conn.close()
    with open_index(root) as reader:
        assert reader.lookup([str(fx)])[0].key == FileKey.of(st)


def test_an_index_of_schema_2_is_read_as_it_is_and_upgraded_by_its_next_writer(root):
    """Schema 2 (original_op, before files.dev): its tensors' original_op kept, files.dev added by the next writer."""
    ge = _touch(root / GE_DIR / "Add.Add_0.12.2.1764400000000037")
    output = _tensor(IO.OUTPUT, 0, Summary(6, -1.0, 2.0, 0.5, 3.0, 0, 0, 9), original_op=("Add_0", 0))
    index = default_index_path(root)
    with IndexWriter(index) as writer:
        writer.add_root(root)
        writer.write([SummaryRow(_dump_file(ge), _key(ge), FileSummary(ge, "Add_0", None, (output,)))])
    _as_version_3(index)
    conn = sqlite3.connect(index)
    conn.execute("ALTER TABLE files DROP COLUMN dev")
    conn.execute("PRAGMA user_version = 2")
    conn.commit()
    conn.close()
    st = os.stat(ge)
    with open_index(root) as reader:
        assert reader.schema_version == 2
        [file] = reader.files_under(root)
        assert file.key == FileKey(st.st_ino, st.st_size, st.st_mtime_ns, None)
        assert reader.summaries_of([file])[0].tensors == (output,)
    with IndexWriter(index) as writer:
        writer.write([SummaryRow(_dump_file(ge), _key(ge), FileSummary(ge, "Add_0", None, (output,)))])
    with open_index(root) as reader:
        assert reader.schema_version == SCHEMA_VERSION == 4
        [file] = reader.files_under(root)
        assert file.key == FileKey.of(st) and reader.summaries_of([file])[0].tensors == (output,)
