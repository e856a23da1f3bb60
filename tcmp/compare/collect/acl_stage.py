"""Which token an aclgraph directory's files are, by the stage torchair saved them in (`AclStage`).

In the original stage (the graph run eagerly) a file's save counter is its token. In the optimized stage (the graph
captured as an aclgraph) torch_npu fixes each save's path when the graph is captured and every replay writes that
file again: one capture leaves one file per node holding the last replay, which is compared with the other dump's
last token; several captures (a graph captured again for other shapes) are placed in tokens by their shapes
(`acl_captures`), against the other dump's tokens, and those no shape tells apart are listed, not compared.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from tcmp.compare.collect.acl_captures import place_captures, saved_nodes
from tcmp.compare.collect.sources import DumpSource, by_token
from tcmp.schemas.acl_dump import AclStage
from tcmp.schemas.dump_outline import DumpDir
from tcmp.schemas.dump_records import Side
from tcmp.schemas.dump_tree import Unrecognized

STAGE_OPTION = {"target": "--target-stage", "golden": "--golden-stage"}


def staged_tokens(
    role: str,
    dirs: Sequence[DumpDir],
    stage: AclStage,
    other: Sequence[DumpDir],
    other_stage: AclStage,
    sources: tuple[DumpSource, DumpSource],
    notes: list[str],
) -> tuple[list[DumpDir], list[Unrecognized]]:
    """`role`'s directories with the tokens their files are, and the files that cannot be placed in a token."""
    if not dirs or dirs[0].side is not Side.ACL:
        return list(dirs), []
    counters = sorted({d.acl_counter for d in dirs if d.acl_counter is not None})
    other_tokens = sorted({d.token for d in other if d.token is not None})
    if stage is AclStage.ORIGINAL:
        if counters == [0] and len(other_tokens) > 1:
            notes.append(
                f"the {role} aclgraph dump holds one save per node and the other dump {len(other_tokens)} tokens: if "
                f"it is torchair's optimized stage (a captured graph, whose files hold the last replay), pass "
                f"{STAGE_OPTION[role]} optimized"
            )
        return list(dirs), []
    if len(counters) > 1:
        return _several_captures(role, dirs, counters, other, other_stage, sources, notes)
    last = other_tokens[-1] if other_stage is AclStage.ORIGINAL and other_tokens else 0
    notes.append(
        f"{role} aclgraph optimized stage: torch_npu fixes each save's path when the graph is captured and every "
        f"replay writes it again, so its files hold the last replay: compared as token {last}"
    )
    return [replace(d, token=last, counter=d.acl_counter) for d in dirs], []


def _several_captures(
    role: str,
    dirs: Sequence[DumpDir],
    counters: list[int],
    other: Sequence[DumpDir],
    other_stage: AclStage,
    sources: tuple[DumpSource, DumpSource],
    notes: list[str],
) -> tuple[list[DumpDir], list[Unrecognized]]:
    """An optimized stage captured several times: each capture placed in the token its shapes say (against the
    other dump's tokens, when those are tokens: an FX dump or an original stage), the others listed."""
    source, other_source = sources
    listings = {c: source.listing([d for d in dirs if d.acl_counter == c]) for c in counters}
    placed: dict[int, int] = {}
    if other_stage is AclStage.ORIGINAL:
        theirs = {t: other_source.listing(ds) for t, ds in by_token(other).items()}
        placed = place_captures(
            {c: saved_nodes(listing.files) for c, listing in listings.items()},
            {p: s for listing in listings.values() for p, s in listing.stored.items()},
            {t: saved_nodes(listing.files) for t, listing in theirs.items()},
            {p: s for listing in theirs.values() for p, s in listing.stored.items()},
        )
    header = (
        f"{role} aclgraph optimized stage with {len(counters)} captures: each file holds the last replay of its capture"
    )
    if placed:
        where = ", ".join(f"capture {c} as token {t}" for c, t in sorted(placed.items()))
        notes.append(f"{header}, the last token of the capture's shapes in the other dump: {where}")
    left = [c for c in counters if c not in placed]
    unplaced: list[Unrecognized] = []
    if left:
        why = (
            f"{header}, and no saved shape tells which token capture{'s' if len(left) > 1 else ''} "
            f"{', '.join(map(str, left))} held; not compared"
        )
        notes.append(why)
        unplaced = [Unrecognized(f.path, why) for c in left for f in listings[c].files]
    staged = [replace(d, token=placed[d.acl_counter], counter=d.acl_counter) for d in dirs if d.acl_counter in placed]
    return staged, unplaced
