"""The SQLite index of a watched dump tree: its tables and columns, declared once (`columns`), their creation and
migration (`schema`), how rows encode tcmp's records (`codec`), the daemon's batched writes (`writer`) and the
reader API (`reader`).

One index per watched root (`<root>/.tcmp/index.sqlite`, or one shared `--db`). The daemon is its only writer;
`tcmp compare` and `tcmp status` read it while the daemon writes (WAL: readers and the writer never block each
other). Tables:

- `files`: one row per file the daemon looked at, keyed by path, with the (inode, size, mtime_ns) it read, what
  the path says (side, kind, rank, token, model, run, op type/name, io/index for FX), the GE header's unsanitized
  op name, a state (summarized | incomplete | error), the error text, how often it was examined and summarized,
  and whether the daemon deleted the raw file.
- `tensors`: the summary of each tensor of a summarized dump file (dtype, ND and device shape, device format,
  numel, min, max, mean, L2 norm, NaN/inf counts, CRC-32 of the canonical ND bytes, notes).
- `graphs` + `graph_ops`: each parsed graph text file, op by op, enough to rebuild a `Graph` without parsing
  the (slow to parse) text again.
- `roots`, `commits`, `daemon_state`: the watched roots (so a moved tree still resolves), one row per committed
  batch (rates, and the commit a deletion followed), and the daemon's last heartbeat for `tcmp status`.

The schema version is `PRAGMA user_version`; the first writer to open an older index migrates it (an ALTER TABLE
step per version, in one transaction). The hot batched writes use sqlite3's executemany directly. SQLite stores
NaN as NULL, so float columns that held NaN (or -0.0, which it stores as 0.0) are flagged in `float_flags`, at
bits each column declares.
"""

from tcmp.schemas.index.columns import SCHEMA_VERSION, SLICES_AND_ELEMENTS_VERSION
from tcmp.schemas.index.reader import IndexedFile, IndexedProblem, IndexReader, IndexStatus, KnownFile, open_index
from tcmp.schemas.index.schema import (
    INDEX_FILE,
    FileKey,
    FileState,
    IndexDamaged,
    IndexLocked,
    IndexReadOnly,
    IndexUnusable,
    default_index_path,
    find_index,
    unusable_because,
)
from tcmp.schemas.index.writer import (
    CommitResult,
    DaemonState,
    ForgetRow,
    GraphRow,
    IndexRecord,
    IndexWriter,
    ProblemRow,
    RawFlagRow,
    SummaryRow,
    daemon_state_now,
)

__all__ = [
    "INDEX_FILE",
    "SCHEMA_VERSION",
    "SLICES_AND_ELEMENTS_VERSION",
    "CommitResult",
    "DaemonState",
    "FileKey",
    "FileState",
    "ForgetRow",
    "GraphRow",
    "IndexDamaged",
    "IndexLocked",
    "IndexReadOnly",
    "IndexReader",
    "IndexRecord",
    "IndexStatus",
    "IndexUnusable",
    "IndexWriter",
    "IndexedFile",
    "IndexedProblem",
    "KnownFile",
    "ProblemRow",
    "RawFlagRow",
    "SummaryRow",
    "daemon_state_now",
    "default_index_path",
    "find_index",
    "open_index",
    "unusable_because",
]
