"""The hand-written copies of per-row and per-file records keep every other field, as `dataclasses.replace` does."""

from __future__ import annotations

import dataclasses

from tcmp.compare.judge.rows import Row
from tcmp.compare.judge.verdict import Colour
from tcmp.compare.match.executions import GeExecution


def _each_field_its_own(cls):
    """An instance whose every field holds an object of its own (told apart by identity)."""
    return cls(**{f.name: object() for f in dataclasses.fields(cls)})


def test_coloured_row_keeps_every_other_field() -> None:
    row = _each_field_its_own(Row)
    coloured = row.coloured(Colour.RED)
    assert coloured == dataclasses.replace(row, colour=Colour.RED)
    assert coloured.colour is Colour.RED and coloured != row


def test_numbered_execution_keeps_every_other_field() -> None:
    execution = _each_field_its_own(GeExecution)
    numbered = execution.numbered(7, 3)
    assert numbered == dataclasses.replace(execution, order=7, execution=3)
    assert (numbered.order, numbered.execution) == (7, 3) and numbered != execution
