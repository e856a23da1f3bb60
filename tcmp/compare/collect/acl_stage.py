"""Which token an aclgraph directory's files are, by the stage torchair saved them in (`AclStage`).

In the original stage (the graph run eagerly) a file's save counter is its token. In the optimized stage (the graph
captured as an aclgraph) torch_npu fixes each save's path when the graph is captured and every replay writes that
file again: one capture leaves one file per node holding the last replay, which is compared with the other dump's
last token; several captures (a graph captured again for other shapes) leave files whose tokens cannot be told, and
are listed, not compared.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from tcmp.compare.collect.sources import DumpSource
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
    source: DumpSource,
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
        why = (
            f"{role} aclgraph optimized stage with {len(counters)} captures: each file holds the last replay of its "
            "capture, and which token that was cannot be told; not compared"
        )
        notes.append(why)
        return [], [Unrecognized(f.path, why) for f in source.listing(dirs).files]
    last = other_tokens[-1] if other_stage is AclStage.ORIGINAL and other_tokens else 0
    notes.append(
        f"{role} aclgraph optimized stage: torch_npu fixes each save's path when the graph is captured and every "
        f"replay writes it again, so its files hold the last replay: compared as token {last}"
    )
    return [replace(d, token=last, counter=d.acl_counter) for d in dirs], []
