"""The index's tables and columns, declared once: the CREATE statements, the migration of an older index, the
columns each version has, and the rows the codec writes and reads are all derived from TABLES.

Adding a column (a tensor statistic, say) is one `Column` appended at the end of its table with `since` = the
new SCHEMA_VERSION: a fresh index gets it in its CREATE TABLE, an older one gets it by the ALTER TABLE ... ADD
COLUMN that `migration` derives (the column lands last either way, so both have the same columns in the same
order), and a reader of an index from before it selects NULL in its place. A tensor statistic names its
`Summary` field (`statistic`); a float one declares the bits of `float_flags` that keep what SQLite would lose
(NaN is stored as NULL, -0.0 as 0.0), by field: a column added later never moves an old row's bits.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Optional

# 2: tensors.original_op / original_op_index (a GE output's `original_op`); 3: files.dev (st_dev of the file read);
# 4: files.ffts_attr (an FFTS+ slice file's slicing attribute, to merge slices' summaries as raw slices merge) and
# tensors.element (rows summarizing one element of an FX output that may stack a list).
SCHEMA_VERSION = 4


class SqlType(str, enum.Enum):
    TEXT = "TEXT"
    INTEGER = "INTEGER"
    REAL = "REAL"


@dataclass(frozen=True)
class FloatFlags:
    """Where a float statistic keeps, in `float_flags`, what SQLite cannot store: the bit set when the value was
    NaN (stored NULL) and the one set when it was -0.0 (stored 0.0)."""

    nan_bit: int
    negative_zero_bit: int


@dataclass(frozen=True)
class Column:
    """One column: its SQL type and constraint, the schema version that added it, and how the codec fills it
    (`statistic`: the `Summary` field it stores; `flags`: a float statistic's bits in `float_flags`)."""

    name: str
    type: SqlType
    not_null: bool = False
    default: Optional[int] = None
    since: int = 1
    statistic: Optional[str] = None
    flags: Optional[FloatFlags] = None
    references: Optional[tuple[str, str]] = None  # (table, column) of a foreign key

    def definition(self, *, primary_key: bool = False) -> str:
        """The column as CREATE TABLE writes it (the text sqlite-utils wrote for the tables of version 1 to 4)."""
        text = f'"{self.name}" {self.type.value}'
        if primary_key:
            text += " PRIMARY KEY"
        if self.not_null:
            text += " NOT NULL"
        if self.default is not None:
            text += f" DEFAULT {self.default}"
        if self.references is not None:
            table, column = self.references
            text += f' REFERENCES "{table}"("{column}")'
        return text


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]
    since: int = 1

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> Column:
        for column in self.columns:
            if column.name == name:
                return column
        raise KeyError(f"{self.name} has no column {name}")

    def position(self, name: str) -> int:
        """Where `name` is in a row of all the table's columns (in declaration order)."""
        return self.names.index(name)

    def has(self, name: str, version: int) -> bool:
        """Whether an index of `version` has this column."""
        return self.column(name).since <= version

    def select_list(self, names: tuple[str, ...], version: int) -> str:
        """`names` as a SELECT list for an index of `version`: NULL in place of a column it does not have yet."""
        return ", ".join(name if self.has(name, version) else "NULL" for name in names)

    def create_sql(self, version: int = SCHEMA_VERSION) -> str:
        single = self.primary_key[0] if len(self.primary_key) == 1 else None
        lines = [c.definition(primary_key=c.name == single) for c in self.columns if c.since <= version]
        if single is None:
            quoted = ", ".join('"' + name + '"' for name in self.primary_key)
            lines.append(f"PRIMARY KEY ({quoted})")
        body = ",\n   ".join(lines)
        return f'CREATE TABLE IF NOT EXISTS "{self.name}" (\n   {body}\n)'


@dataclass(frozen=True)
class Index:
    name: str
    sql: str
    since: int = 1


def _text(name: str, **options) -> Column:
    return Column(name, SqlType.TEXT, **options)


def _int(name: str, **options) -> Column:
    return Column(name, SqlType.INTEGER, **options)


def _float_statistic(name: str, nan_bit: int, negative_zero_bit: int) -> Column:
    return Column(name, SqlType.REAL, statistic=name, flags=FloatFlags(nan_bit, negative_zero_bit))


_FILE_ID = ("files", "id")

ROOTS = Table("roots", (_text("path"), _int("added_ns")), primary_key=("path",))
FILES = Table(
    "files",
    (
        _int("id"), _text("path", not_null=True), _int("inode"), _int("size"), _int("mtime_ns"),
        _text("side"), _text("kind"), _int("rank"), _int("token"), _text("model"), _text("run"), _int("device"),
        _int("model_id"), _text("op_type"), _text("op_name"), _text("header_op_name"),
        _text("io"), _int("io_index"), _int("io_sub_index"),
        _text("timestamp"),  # FX timestamps have 20 digits: beyond SQLite's int64
        _text("dump_time"), _text("mapped_name"), _text("state", not_null=True), _text("error"),
        _int("attempts", not_null=True, default=0), _int("summaries", not_null=True, default=0),
        _int("raw_deleted", not_null=True, default=0), _int("bytes"), _int("commit_seq"),
        _int("indexed_ns", not_null=True),
        _int("dev", since=3),  # st_dev: an inode number names a file only on its device
        _text("ffts_attr", since=4),
    ),
    primary_key=("id",),
)  # fmt: skip
TENSORS = Table(
    "tensors",
    (
        _int("file_id", references=_FILE_ID), _int("position"),
        _text("io", not_null=True), _int("io_index", not_null=True), _int("io_sub_index"),
        _text("kind", not_null=True), _text("dtype"), _text("shape"), _text("device_format"), _text("device_shape"),
        _int("has_summary", not_null=True),
        _int("numel", statistic="numel"),
        # bits 0-3: the value was NaN, bits 4-7: it was -0.0, as schema 1 laid them out; a new float statistic
        # takes the next free bits
        _float_statistic("min", 0, 4), _float_statistic("max", 1, 5),
        _float_statistic("mean", 2, 6), _float_statistic("l2norm", 3, 7),
        _int("nan_count", statistic="nan_count"), _int("inf_count", statistic="inf_count"),
        _int("crc32", statistic="crc32"),
        _int("float_flags", not_null=True, default=0),
        _text("notes"),
        _text("original_op", since=2), _int("original_op_index", since=2),
        _int("element", since=4),  # which element of the tensor row before it this row summarizes
    ),
    primary_key=("file_id", "position"),
)  # fmt: skip
GRAPHS = Table(
    "graphs",
    (_int("file_id", references=_FILE_ID), _text("name"), _text("warnings"), _int("op_count")),
    primary_key=("file_id",),
)
GRAPH_OPS = Table(
    "graph_ops",
    (
        _int("file_id", references=_FILE_ID), _int("op_order"),
        _text("name", not_null=True), _text("type", not_null=True), _text("inputs", not_null=True),
        _text("control_inputs", not_null=True), _text("outputs", not_null=True),
        _text("original_op_names", not_null=True), _text("stack_info"),
    ),
    primary_key=("file_id", "op_order"),
)  # fmt: skip
COMMITS = Table(
    "commits",
    (_int("seq"), _int("committed_ns"), _int("files"), _int("bytes"), _int("raw_deleted"), _int("raw_deleted_bytes")),
    primary_key=("seq",),
)
DAEMON_STATE = Table(
    "daemon_state",
    (
        _int("id"), _int("pid"), _text("host"), _int("started_ns"), _int("heartbeat_ns"), _int("stopped_ns"),
        _text("roots"), _int("queued"), _int("in_flight"), _int("pending"),
    ),
    primary_key=("id",),
)  # fmt: skip

TABLES = (ROOTS, FILES, TENSORS, GRAPHS, GRAPH_OPS, COMMITS, DAEMON_STATE)
INDEXES = (
    Index("files_path", "CREATE UNIQUE INDEX IF NOT EXISTS files_path ON files(path)"),
    # status lists problems; a partial index keeps that cheap without slowing the common (summarized) writes
    Index(
        "files_problems",
        "CREATE INDEX IF NOT EXISTS files_problems ON files(state, indexed_ns) WHERE state != 'summarized'",
    ),
)
OLDEST_READABLE_VERSION = 1
SLICES_AND_ELEMENTS_VERSION = FILES.column("ffts_attr").since  # files.ffts_attr and tensors.element
STATISTICS = tuple(c for c in TENSORS.columns if c.statistic is not None)  # `Summary` fields, in table order


def create_statements(version: int = SCHEMA_VERSION) -> tuple[str, ...]:
    """Every table and index of a fresh index of `version` (the current one but in tests), in creation order."""
    tables = [table for table in TABLES if table.since <= version]
    indexes = {index.name: index.sql for index in INDEXES if index.since <= version}
    # the order versions 1 to 4 created them in: files_path right after files, the other indexes last
    statements = []
    for table in tables:
        statements.append(table.create_sql(version))
        if table is FILES:
            statements.append(indexes.pop("files_path"))
    return (*statements, *indexes.values())


def migration(version: int) -> tuple[str, ...]:
    """The statements that bring an index of `version - 1` up to `version`: the tables it added, then an ALTER
    TABLE ... ADD COLUMN per column it added to an older table, then its indexes."""
    statements = [table.create_sql(version) for table in TABLES if table.since == version]
    for table in TABLES:
        if table.since < version:
            statements.extend(
                f"ALTER TABLE {table.name} ADD COLUMN {c.definition()}".replace(f'"{c.name}"', c.name, 1)
                for c in table.columns
                if c.since == version
            )
    statements.extend(index.sql for index in INDEXES if index.since == version)
    return tuple(statements)


def _check() -> None:
    """What the derivations above rely on, checked once at import: a mistake in TABLES fails every test."""
    bits = [bit for c in STATISTICS if c.flags is not None for bit in (c.flags.nan_bit, c.flags.negative_zero_bit)]
    assert len(bits) == len(set(bits)), "two float statistics share a bit of float_flags"
    for table in TABLES:
        versions = [c.since for c in table.columns]
        # ALTER TABLE appends: a later column declared before an earlier one would give a migrated index
        # another column order than a fresh one
        assert versions == sorted(versions), f"{table.name}: columns not in the order of the versions adding them"
        assert all(table.since <= v <= SCHEMA_VERSION for v in versions), f"{table.name}: a column's version"
        for c in table.columns:
            # ALTER TABLE ... ADD COLUMN ... NOT NULL needs a default for the rows already there
            assert not (c.since > table.since and c.not_null and c.default is None), f"{table.name}.{c.name}"


_check()
