"""Where a path places an FX dump file, by the declared table of FX layout eras. Expected places are worked out by
hand from the layouts torchair wrote in each era (rank from the `worldsize…rank{R}` directory, the step directory
above or below the graph directory, steps counted from 0 with a rank directory and from 1 without)."""

from __future__ import annotations

import dataclasses

import pytest

from tcmp.schemas import dump_places
from tcmp.schemas.dump_places import FX_LAYOUT_ERAS, FX_WRAPPER_DIRS, FxPlace, StepDir, fx_place

OUTSIDE = "FX file outside a step directory ({graph}/{step}/ or {step}/{graph}/)"


@pytest.fixture(autouse=True)
def _fresh_cache():
    fx_place.cache_clear()
    yield
    fx_place.cache_clear()


@pytest.mark.parametrize(
    ("parts", "place"),
    [
        (("/", "d", "msprobe_fx_dump", "worldsize8_global_rank3", "gm_17_dump", "0"), FxPlace(3, 0, "gm_17_dump")),
        (("/", "d", "worldsize2_rank1", "graph_4", "5"), FxPlace(1, 5, "graph_4")),
        (("/", "d", "msprobe_fx_dump", "data_dump", "1", "gm_17_dump"), FxPlace(None, 0, "gm_17_dump")),
        (("/", "cwd", "data_dump", "3", "gm_17_dump"), FxPlace(None, 2, "gm_17_dump")),
        (("/", "d", "2", "gm_17_dump"), FxPlace(None, 1, "gm_17_dump")),
        (("/", "cwd", "gm_17_dump", "1"), FxPlace(None, 0, "gm_17_dump")),
        (("/", "d", "worldsize1_rank0", "3", "gm_17_dump"), FxPlace(0, 3, "gm_17_dump")),  # no writer: base 0
        (("/", "d", "gm_17_dump", "x"), OUTSIDE),
        (("/", "cwd", "gm_17_dump", "0"), "FX step directory 0 is below the token base 1"),
    ],
)
def test_each_era_places_its_files(parts, place):
    assert fx_place(parts, None) == place


def test_the_table_places_every_numbered_directory_once():
    combinations = [(era.step_dir, era.ranked) for era in FX_LAYOUT_ERAS]
    for step_dir in StepDir:
        for ranked in (True, False):
            assert (step_dir, ranked) in combinations
    assert {"data_dump"} == FX_WRAPPER_DIRS


def test_an_era_is_one_entry(monkeypatch):
    """Changing the table alone changes where files are placed: here the ranked era counted from 1."""
    ranked = dataclasses.replace(FX_LAYOUT_ERAS[0], token_base=1)
    monkeypatch.setattr(dump_places, "FX_LAYOUT_ERAS", (ranked, *FX_LAYOUT_ERAS[1:]))
    assert fx_place(("/", "worldsize1_rank0", "gm_17_dump", "1"), None) == FxPlace(0, 0, "gm_17_dump")
    monkeypatch.setattr(dump_places, "FX_LAYOUT_ERAS", FX_LAYOUT_ERAS[1:])  # no ranked era any more
    fx_place.cache_clear()
    assert fx_place(("/", "worldsize1_rank0", "gm_17_dump", "1"), None) == OUTSIDE


def test_the_token_base_given_overrides_the_era():
    assert fx_place(("/", "cwd", "gm_17_dump", "1"), 0) == FxPlace(None, 1, "gm_17_dump")
