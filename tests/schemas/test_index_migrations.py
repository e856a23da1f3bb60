"""An index of every earlier schema version opens, is migrated by its next writer, and reads back what its release
stored; each migration step alone gives the schema of a fresh index of its version.

The files come from index_versions/ (regenerate.py there says how each was made): v1-v3.sql are the tables as the
code of those versions created them; v4.sql is a whole index written by `tcmp watch --once` of the release before
the column spec (d499fe7), and v4_summaries.json what that release's own reader returned for it: the expected
values below are the old code's, not this reader's.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from pathlib import Path

import pytest

from tcmp.schemas.index import SCHEMA_VERSION, IndexUnusable, IndexWriter, columns, default_index_path, open_index
from tcmp.schemas.index import schema as index_schema

VERSIONS = Path(__file__).parent / "index_versions"
EARLIER = tuple(range(1, SCHEMA_VERSION))
FIXTURE_ROOT = "/tmp/tcmp-index-v4-fixture/root"  # where regenerate.py wrote the v4 index's tree


def _load(path: Path, version: int) -> None:
    """An index file of `version`: v4.sql as it is; an earlier version's tables filled with the v4 file's rows,
    as far as that version had their columns (and without the rows it could not have: stacked elements)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.executescript((VERSIONS / f"v{version}.sql").read_text())
    if version < SCHEMA_VERSION:
        release = sqlite3.connect(":memory:")
        release.executescript((VERSIONS / f"v{SCHEMA_VERSION}.sql").read_text())
        for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
            names = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
            where = " WHERE element IS NULL" if table == "tensors" else ""
            rows = release.execute(f"SELECT {', '.join(names)} FROM {table}{where}").fetchall()
            conn.executemany(f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})", rows)
        release.close()
    conn.commit()
    assert conn.execute("PRAGMA user_version").fetchone()[0] == version
    conn.close()


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


def _read_back(index: Path, root: Path) -> dict:
    """Every dump file's summary as this tcmp reads it, in the form of v4_summaries.json."""
    found = {}
    with open_index(index) as reader:
        files = reader.files_under(root)
        for file, summary in zip(files, reader.summaries_of(files)):
            found[str(file.path.relative_to(root))] = {
                "state": file.state.value, "op_name": summary.op_name, "dump_time": summary.dump_time,
                "slicing": summary.slicing,
                "tensors": [
                    {
                        "io": t.io.value, "index": t.index, "sub_index": t.sub_index, "kind": t.kind.value,
                        "dtype": t.dtype, "shape": None if t.shape is None else list(t.shape),
                        "device_format": t.device_format,
                        "device_shape": None if t.device_shape is None else list(t.device_shape),
                        "notes": list(t.notes), "original_op": None if t.original_op is None else list(t.original_op),
                        "summary": _summary_json(t.summary), "elements": [_summary_json(e) for e in t.elements],
                    }
                    for t in summary.tensors
                ],
            }  # fmt: skip
    return found


def _expected(version: int) -> dict:
    """What the release stored, less what an index of `version` could not hold (NULL there: not recorded)."""
    expected = json.loads((VERSIONS / f"v{SCHEMA_VERSION}_summaries.json").read_text())
    for file in expected.values():
        if version < columns.SLICES_AND_ELEMENTS_VERSION:
            file["slicing"] = None
        for tensor in file["tensors"]:
            if version < columns.SLICES_AND_ELEMENTS_VERSION:
                tensor["elements"] = []
            if version < columns.TENSORS.column("original_op").since:
                tensor["original_op"] = None
    return expected


def _schema(conn: sqlite3.Connection) -> dict:
    """The schema as SQLite sees it, whatever the text it was created with: each table's columns, keys and
    indexes (ALTER TABLE edits a table's CREATE text, so that text alone differs between equal schemas)."""
    shape = {}
    for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").fetchall():
        shape[table] = (
            conn.execute(f"PRAGMA table_info({table})").fetchall(),
            conn.execute(f"PRAGMA foreign_key_list({table})").fetchall(),
            sorted(conn.execute(f"PRAGMA index_list({table})").fetchall()),
        )
    indexes = conn.execute("SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
    shape["indexes"] = sorted((n, t, re.sub(r"\s+", " ", sql)) for n, t, sql in indexes)
    return shape


@pytest.fixture
def root(tmp_path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    return root


def test_the_v4_fixture_holds_what_the_migration_test_relies_on():
    """The release's file has tensors of every kind of row the test reads back: values SQLite cannot store,
    FFTS+ slices, stacked elements, original ops."""
    expected = json.loads((VERSIONS / "v4_summaries.json").read_text())
    tensors = [t for f in expected.values() for t in f["tensors"]]
    assert any(f["slicing"] for f in expected.values())
    assert any(t["elements"] for t in tensors)
    assert any(t["original_op"] for t in tensors)
    floats = {v for t in tensors if t["summary"] for v in (t["summary"]["min"], t["summary"]["max"])}
    assert {"nan", "-0.0"} <= floats


@pytest.mark.parametrize("version", (*EARLIER, SCHEMA_VERSION))
def test_an_index_of_every_version_is_read_as_it_is_then_migrated_keeping_what_its_release_stored(root, version):
    index = default_index_path(root)
    _load(index, version)
    expected = _expected(version)
    assert len(expected) > 20
    with open_index(index) as reader:
        assert reader.schema_version == version  # a reader never writes: it reads the old columns as they are
    assert _read_back(index, root) == expected
    with IndexWriter(index):  # the next writer migrates it in place
        pass
    conn = sqlite3.connect(index)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    fresh = sqlite3.connect(":memory:")
    index_schema.create_schema(fresh)
    assert _schema(conn) == _schema(fresh)
    conn.close()
    assert _read_back(index, root) == expected


@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION + 1))
def test_the_column_spec_creates_exactly_the_tables_each_version_created(version):
    """Byte for byte: a fresh index's CREATE statements are those the code of each version wrote (version 4's
    taken from the release's file), so `since` says truly which version added what."""
    conn = sqlite3.connect(":memory:")
    conn.executescript((VERSIONS / f"v{version}.sql").read_text())
    fresh = sqlite3.connect(":memory:")
    for statement in columns.create_statements(version):
        fresh.execute(statement)
    query = "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
    assert fresh.execute(query).fetchall() == conn.execute(query).fetchall()


@pytest.mark.parametrize("version", EARLIER)
def test_each_migration_step_alone_gives_the_schema_of_a_fresh_index_of_the_next_version(version):
    migrated = sqlite3.connect(":memory:")
    migrated.executescript((VERSIONS / f"v{version}.sql").read_text())
    for statement in columns.migration(version + 1):
        assert statement.startswith("ALTER TABLE ") or statement.startswith("CREATE ")
        migrated.execute(statement)
    fresh = sqlite3.connect(":memory:")
    fresh.executescript((VERSIONS / f"v{version + 1}.sql").read_text())
    assert _schema(migrated) == _schema(fresh)


def test_the_migrations_are_the_alter_statements_each_version_ran():
    """The steps derived from the spec are the ones versions 2 to 4 ran on upgrading (their UPGRADES)."""
    assert columns.migration(2) == (
        "ALTER TABLE tensors ADD COLUMN original_op TEXT",
        "ALTER TABLE tensors ADD COLUMN original_op_index INTEGER",
    )
    assert columns.migration(3) == ("ALTER TABLE files ADD COLUMN dev INTEGER",)
    assert columns.migration(4) == (
        "ALTER TABLE files ADD COLUMN ffts_attr TEXT",
        "ALTER TABLE tensors ADD COLUMN element INTEGER",
    )


def test_a_migration_that_fails_leaves_the_file_as_it_was(root, monkeypatch):
    index = default_index_path(root)
    _load(index, 2)
    conn = sqlite3.connect(index)
    before = _schema(conn), conn.execute("SELECT count(*) FROM tensors").fetchone()
    conn.close()
    real = columns.migration
    # step 3 runs, then step 4 fails half-way: nothing of either may stay
    monkeypatch.setattr(index_schema, "migration", lambda v: real(v) + (("BAD SQL",) if v == 4 else ()))
    with pytest.raises(IndexUnusable):
        IndexWriter(index)
    conn = sqlite3.connect(index)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
    assert (_schema(conn), conn.execute("SELECT count(*) FROM tensors").fetchone()) == before
    conn.close()


def test_an_index_newer_than_this_tcmp_is_refused_by_writer_and_reader_and_left_alone(root):
    index = default_index_path(root)
    _load(index, SCHEMA_VERSION)
    conn = sqlite3.connect(index)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    before = _schema(conn)
    conn.close()
    with pytest.raises(IndexUnusable, match=rf"newer tcmp \(schema {SCHEMA_VERSION + 1} > {SCHEMA_VERSION}\)"):
        IndexWriter(index)
    with pytest.raises(IndexUnusable, match=f"index schema {SCHEMA_VERSION + 1}"):
        open_index(index)
    conn = sqlite3.connect(index)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1
    assert _schema(conn) == before
    conn.close()


def test_float_flags_keep_the_bits_the_release_wrote_by_field_name(root):
    """The release's odd row (min NaN, max -0.0, mean -inf, l2norm -0.0) has float_flags 1 | 1<<5 | 1<<7 = 161:
    bit 0 min was NaN, bits 4 + field number -0.0 (min 0, max 1, mean 2, l2norm 3). Its reading and the bits
    this tcmp writes for the same summary are that layout, declared per column."""
    release = sqlite3.connect(":memory:")
    release.executescript((VERSIONS / "v4.sql").read_text())
    (flags,) = release.execute("SELECT float_flags FROM tensors WHERE notes = '[\"a note\"]'").fetchone()
    assert flags == 1 | 1 << 5 | 1 << 7
    declared = {c.name: (c.flags.nan_bit, c.flags.negative_zero_bit) for c in columns.STATISTICS if c.flags}
    assert declared == {"min": (0, 4), "max": (1, 5), "mean": (2, 6), "l2norm": (3, 7)}

    from tcmp.schemas.dump_records import IO, Summary, TensorKind, TensorSummary
    from tcmp.schemas.index.codec import row_summary, tensor_rows

    odd = Summary(numel=4, min=math.nan, max=-0.0, mean=-math.inf, l2norm=-0.0, nan_count=1, inf_count=1, crc32=7)
    (row,) = tensor_rows(1, (TensorSummary(IO.OUTPUT, 0, None, TensorKind.TENSOR, "float32", (2, 2), odd),))
    assert row[columns.TENSORS.position("float_flags")] == flags
    read = row_summary(row)
    assert math.isnan(read.min) and math.copysign(1, read.max) < 0 and math.copysign(1, read.l2norm) < 0


def test_every_summary_statistic_has_its_column_and_every_statistic_column_its_field():
    """A statistic added to `Summary` without its column (or the reverse) would be dropped by the index."""
    from dataclasses import fields

    from tcmp.schemas.dump_records import Summary

    assert [c.statistic for c in columns.STATISTICS] == [f.name for f in fields(Summary)]
