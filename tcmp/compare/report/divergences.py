"""First divergences, read across tokens and across ranks: tokens whose first divergence is the same op grouped
(`0-39, 41`), and the earliest divergence of all ranks — by token, then execution order in the token, then dump
time — with the ranks whose first divergence in that token is the same op (in a collective-communication bug, the
rank to look at first). A local multi-rank compare and a cluster compare end with the same lines (`ranks_lines`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional, Protocol

from tcmp.compare.judge.verdict import Result
from tcmp.compare.report.outcome import Divergence, RankResult


def token_ranges(tokens: Sequence[int]) -> str:
    """`0-39, 41, 43-50`: sorted tokens, runs of consecutive ones as ranges."""
    runs: list[list[int]] = []
    for t in sorted(tokens):
        if runs and t == runs[-1][1] + 1:
            runs[-1][1] = t
        else:
            runs.append([t, t])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


@dataclass(frozen=True)
class DivergenceGroup:
    """Tokens whose first divergence is the same op with the same failing rows (or the same note)."""

    tokens: tuple[int, ...]
    first: Divergence

    @property
    def failing(self) -> tuple[str, ...]:
        return _failing(self.first)


def _failing(d: Divergence) -> tuple[str, ...]:
    return tuple(r.pair.api_name for r in d.rows if r.result is Result.FAIL)


def group_divergences(divergences: Sequence[Divergence]) -> list[DivergenceGroup]:
    """Divergences grouped by what they name, groups in the order of their first token."""
    groups: dict[tuple, list[Divergence]] = {}
    for d in sorted(divergences, key=lambda d: d.token):
        groups.setdefault((d.op_name, d.op_type, _failing(d), d.note), []).append(d)
    return [DivergenceGroup(tuple(d.token for d in members), members[0]) for members in groups.values()]


@dataclass(frozen=True)
class Earliest:
    divergence: Divergence
    same_op: tuple[Optional[int], ...]  # the ranks whose first divergence in that token is this op, itself too


def execution_order(d: Divergence) -> int:
    """The divergence's place in its token's execution order (its first row's)."""
    return min((r.pair.order for r in d.rows), default=2**62)


def earliest_divergence(ranks: Sequence[RankResult]) -> Optional[Earliest]:
    """The first divergence that comes first (token, execution order, dump time; then the lower rank)."""
    found = [d for rank in ranks for d in rank.divergences if d.op_name is not None]
    if not found:
        return None
    first = min(found, key=lambda d: (d.token, execution_order(d), d.timestamp, -1 if d.rank is None else d.rank))
    same = tuple(
        d.rank for d in found if d.token == first.token and (d.op_name, d.op_type) == (first.op_name, first.op_type)
    )
    return Earliest(first, same)


class Uncompared(Protocol):
    """A rank a compare could not do (None: what belongs to no rank), and why (execute.executor.NotCompared)."""

    @property
    def rank(self) -> Optional[int]: ...

    @property
    def why(self) -> str: ...


def ranks_lines(ranks: Sequence[RankResult], not_compared: Sequence[Uncompared] = ()) -> list[str]:
    """The lines that end a compare of several ranks, local or on a cluster: a line per rank with its counts and
    first divergences (tokens with the same one on one line's part, as each rank's block groups them), the ranks
    not compared, and the earliest divergence across ranks."""
    lines = ["ranks: rank  rows  PASS  FAIL  unmatched  first divergence per token"]
    for r in ranks:
        c = r.counts
        firsts = "; ".join(f"tokens {token_ranges(g.tokens)}: {g.first.op_name or g.first.note}"
                           for g in group_divergences(r.divergences)) or "none"  # fmt: skip
        unmatched = c.unmatched_target + c.unmatched_golden
        lines.append(f"  rank {r.rank}  {c.rows}  {c.passed}  {c.failed}  {unmatched}  {firsts}")
    for n in not_compared:
        lines.append(f"  rank {n.rank} NOT COMPARED: {n.why}")
    earliest = earliest_divergence(ranks)
    if earliest is None:
        lines.append("earliest divergence: none (no rank's op output FAILs)")
        return lines
    d = earliest.divergence
    same = ", ".join(str(r) for r in earliest.same_op)
    lines.append(f"earliest divergence: rank {d.rank}, token {d.token}, op {d.op_name} ({d.op_type}), "
                 f"execution order {execution_order(d)}; first divergence there on ranks {same}")  # fmt: skip
    return lines
