"""Where a dump file's directory places it: the rank, token, model and run its path says, from the path alone.

GE has one layout, optionally below a `worldsize{W}_[global_]rank{R}` directory:

    {time: 14 digits}/{device}/{model name}/{model id}/{step}/{dump files, mapping.csv}

FX has had one layout per torchair era, declared in `FX_LAYOUT_ERAS`: adding an era is one entry there. Tokens are
0-based: the eras whose step directories count from 1 are shifted by their token base.
"""

from __future__ import annotations

import enum
import functools
import re
from dataclasses import dataclass
from typing import NamedTuple, Optional, Union

RANK_DIR = re.compile(r"^worldsize(\d+)_(?:global_)?rank(\d+)$")
_TIME_DIR = re.compile(r"^\d{14}$")
_DIGITS = re.compile(r"^\d+$")


@functools.lru_cache(maxsize=4096)  # called per file with its directory's parts
def rank_of(parts: tuple[str, ...]) -> Optional[int]:
    """R of the innermost `worldsize{W}_[global_]rank{R}` directory among a path's parts, None without one."""
    for part in reversed(parts):
        match = RANK_DIR.match(part)
        if match:
            return int(match.group(2))
    return None


class GePlace(NamedTuple):
    rank: Optional[int]
    step: Optional[int]
    model: Optional[str]
    run: Optional[str]
    device: Optional[int]
    model_id: Optional[int]


@functools.lru_cache(maxsize=4096)  # the same for every file of a directory
def ge_place(parts: tuple[str, ...]) -> GePlace:
    """Where a GE file's directory …/{time}/{device}/{model}/{model_id}/{step} puts it.

    Without a `worldsize{W}_[global_]rank{R}` directory (the layout before 2025-08) the device is the rank: each
    device's process dumps its own model executions, and comparing two devices' files as one token would pair
    executions across devices (the peer groups such trees by device too)."""
    up = list(reversed(parts))  # up[0] is the file's directory
    step = int(up[0]) if up and _DIGITS.match(up[0]) else None
    model_id = int(up[1]) if step is not None and len(up) > 1 and _DIGITS.match(up[1]) else None
    model = up[2] if model_id is not None and len(up) > 2 else None
    device = int(up[3]) if model is not None and len(up) > 3 and _DIGITS.match(up[3]) else None
    run = next((p for p in up if _TIME_DIR.match(p)), None)
    rank = rank_of(parts)
    return GePlace(rank if rank is not None else device, step, model, run, device, model_id)


class StepDir(enum.Enum):
    """Where an FX file's step directory lies, in the order they are tried: the first that is a number is the step.
    Either way the step and graph directories are two levels."""

    PARENT = "{graph}/{step}/"  # the file's own directory is the step
    GRANDPARENT = "{step}/{graph}/"  # the step holds one directory per graph


@dataclass(frozen=True)
class FxLayoutEra:
    """One FX dump layout: where its step directory lies, whether it is below a rank directory (its rank read from
    it; else the rank is None) and the number of its first step directory."""

    written: str  # by which torchair, when
    layout: str  # below the dump root
    step_dir: StepDir
    ranked: bool
    token_base: int
    wrapper: Optional[str] = None  # a directory the writer puts between the dump root and the step directories


FX_LAYOUT_ERAS = (
    FxLayoutEra(
        "torchair ≥ 2025-08 (_step counted after the run)",
        "worldsize{W}_global_rank{R}/{gm_{ts}_dump | graph_{N}}/{step}/*.npy",
        StepDir.PARENT,
        ranked=True,
        token_base=0,
    ),
    FxLayoutEra(
        "torchair 2024-03 … 2025-05 (msprobe's data_dump.path, or the working directory)",
        "data_dump/{step}/gm_{ts}_dump/*.npy",
        StepDir.GRANDPARENT,
        ranked=False,
        token_base=1,
        wrapper="data_dump",
    ),
    FxLayoutEra("torchair 2024-03-19", "{step}/gm_{ts}_dump/*.npy", StepDir.GRANDPARENT, ranked=False, token_base=1),
    FxLayoutEra("torchair 2023-10 … 2024-02", "gm_{ts}_dump/{step}/*.npy", StepDir.PARENT, ranked=False, token_base=1),
    # no writer: a step-major tree copied below a rank directory, numbered as the ranked era is
    FxLayoutEra("none", "worldsize{W}_[global_]rank{R}/{step}/{graph}/*.npy", StepDir.GRANDPARENT, True, 0),
)

# directories of no place that belong to the dump root
FX_WRAPPER_DIRS = frozenset(era.wrapper for era in FX_LAYOUT_ERAS if era.wrapper is not None)

_OUTSIDE_STEP_DIR = "FX file outside a step directory ({})".format(" or ".join(s.value for s in StepDir))


class FxPlace(NamedTuple):
    rank: Optional[int]
    token: int
    graph: Optional[str]


def _step_of(up: list[str], step_dir: StepDir) -> Optional[tuple[int, Optional[str]]]:
    """(step, graph directory) when the step directory lies where `step_dir` says, for a directory's parts
    innermost first."""
    if step_dir is StepDir.PARENT:
        return (int(up[0]), up[1] if len(up) > 1 else None) if up and _DIGITS.match(up[0]) else None
    return (int(up[1]), up[0]) if len(up) > 1 and _DIGITS.match(up[1]) else None


@functools.lru_cache(maxsize=4096)  # the same for every file of a directory
def fx_place(parts: tuple[str, ...], token_base: Optional[int]) -> Union[FxPlace, str]:
    """Where an FX file's directory puts it by its layout era, or why it has none; `token_base` overrides the era's."""
    up = list(reversed(parts))
    found = next(((d, s) for d in StepDir for s in (_step_of(up, d),) if s is not None), None)
    if found is None:
        return _OUTSIDE_STEP_DIR
    step_dir, (step, graph) = found
    rank = rank_of(parts)
    era = next((e for e in FX_LAYOUT_ERAS if e.step_dir is step_dir and e.ranked is (rank is not None)), None)
    if era is None:
        return _OUTSIDE_STEP_DIR
    base = token_base if token_base is not None else era.token_base
    if step - base < 0:
        return f"FX step directory {step} is below the token base {base}"
    return FxPlace(rank, step - base, graph)
