"""The highlighted report (`--highlight`): the CSV's rows in an .xlsx, each row filled by its colour
(docs/decisions.md, "Colours"), numbers stored as numbers (Excel sorts and filters them as numbers), the
header frozen and filterable, columns as wide as what they hold. Statistics-mode relative errors are shown as
percentages (a tensor-mode MaxRelativeErr is not); the stored value is the fraction the CSV holds.

xlsxwriter in constant-memory mode: rows go to disk as they are written, so a report of a million rows takes no
more memory than one of ten (its own temporaries: `tempfile.mkstemp`, private). It writes the .xlsx into the file
object it is given, never to a name: the caller's temporary, created by `schemas.files`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any, BinaryIO

from tcmp.compare.judge.metrics import Mode
from tcmp.compare.judge.verdict import Colour
from tcmp.compare.report.table import columns, percent_columns, typed

FILLS = {Colour.RED: "#FF0000", Colour.YELLOW: "#FFFF00", Colour.GREEN: "#C6EFCE"}
PERCENT = "0.00####%"
WIDTH_LIMIT = 80  # characters: a long Data Name or Err_message shows its start, the rest is in the cell
WIDTH_SAMPLE = 2000  # rows measured per sheet for the column widths


class XlsxStream:
    """Rows in, an .xlsx out; a sheet holds at most `LIMIT` rows, the rest go to further sheets."""

    LIMIT = 1_048_575  # data rows per sheet

    def __init__(self, out: BinaryIO, mode: Mode) -> None:
        import xlsxwriter

        self.book = xlsxwriter.Workbook(
            out, {"constant_memory": True, "strings_to_numbers": False, "strings_to_formulas": False}
        )
        self.header = columns(mode)
        self.percent = percent_columns(mode)
        self.bold = self.book.add_format({"bold": True})
        self.fills = {c: self.book.add_format({"bg_color": rgb, "pattern": 1}) for c, rgb in FILLS.items()}
        self.percent_fills = {
            c: self.book.add_format({"bg_color": rgb, "pattern": 1, "num_format": PERCENT}) for c, rgb in FILLS.items()
        }
        self.sheet: Any = None  # an xlsxwriter Worksheet (xlsxwriter has no type hints)
        self.row, self.part = 0, 0
        self.widths: list[int] = []
        self._new_sheet()

    def _new_sheet(self) -> None:
        if self.sheet is not None:
            self._finish_sheet()
        self.sheet = self.book.add_worksheet("Sheet1" if self.part == 0 else f"part_{self.part}")
        self.sheet.write_row(0, 0, self.header, self.bold)
        self.sheet.freeze_panes(1, 0)
        self.widths = [len(name) + 3 for name in self.header]  # room for the filter button
        self.row = 0
        self.part += 1

    def add(self, cells: Sequence[str], colour: Colour) -> None:
        if self.row >= self.LIMIT:
            self._new_sheet()
        self.row += 1
        fill, percent_fill = self.fills[colour], self.percent_fills[colour]
        for column, value in enumerate(typed(self.header, cells)):
            if isinstance(value, (int, float)):
                self.sheet.write_number(self.row, column, value, percent_fill if column in self.percent else fill)
            else:  # text, `N/A`, `NaN`, `inf`: as the CSV writes them
                self.sheet.write_string(self.row, column, "N/A" if value is None else value, fill)
        if self.row <= WIDTH_SAMPLE:
            self.widths = [max(w, len(cell) + 1) for w, cell in zip(self.widths, cells)]

    def _finish_sheet(self) -> None:
        for column, width in enumerate(self.widths):
            self.sheet.set_column(column, column, min(width, WIDTH_LIMIT))
        self.sheet.autofilter(0, 0, max(self.row, 1), len(self.header) - 1)

    def close(self) -> None:
        """Write the workbook; an OSError (a full disk) as itself, not xlsxwriter's FileCreateError."""
        from xlsxwriter.exceptions import FileCreateError

        self._finish_sheet()
        try:
            self.book.close()
        except FileCreateError as exc:
            cause = exc.args[0] if exc.args and isinstance(exc.args[0], OSError) else exc.__context__
            raise cause if isinstance(cause, OSError) else OSError(str(exc)) from exc
        finally:
            self.discard()

    def discard(self) -> None:
        """Drop the workbook unwritten: its sheets' temporaries closed, and no warning from its destructor."""
        self.book.fileclosed = True
        for sheet in self.book.worksheets():
            with contextlib.suppress(OSError, AttributeError):
                sheet._opt_close()
