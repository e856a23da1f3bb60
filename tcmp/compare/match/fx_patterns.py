"""The FX calls a pattern-fused GE node replaced (torchair_rules.PATTERNS): the anchor call, the call that consumed
its output 0 (directly or through a view, the pattern's view form) and the view calls the pattern folded in.

The FX dump has the replaced nodes, the GE graph only the fused one: the n-th fused node of a kind in the converted
graph's order is the n-th anchor call no GE tensor is named after."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

from tcmp.compare.match.executions import FxCall
from tcmp.compare.match.fx_side import FxSide
from tcmp.compare.rules.torchair import VIEW_TARGET, FusionPattern
from tcmp.schemas.dump_tree import DumpFile


@dataclass(frozen=True)
class Replaced:
    """The FX calls one execution of a pattern-fused node stands for."""

    anchor: FxCall
    consumer: Optional[FxCall]  # None: not in the dump, or not told apart
    view: Optional[FxCall] = None  # the view between anchor and consumer (the view form): consumer outputs reshaped
    views_after: tuple[FxCall, ...] = ()  # the view form's views of consumer outputs

    @property
    def calls(self) -> tuple[FxCall, ...]:
        found = (self.anchor, self.consumer, self.view, *self.views_after)
        return tuple(c for c in found if c is not None)


class PatternCalls:
    def __init__(self, fx: FxSide, named_keys: Mapping[str, int]) -> None:
        self.fx = fx
        self.named_keys = named_keys  # FX node key -> graph position of the first GE output named after it
        self.replaced_keys: dict[str, str] = {}  # FX node key -> the pattern-fused node that replaced it
        self._found: dict[tuple[str, int], Optional[Replaced]] = {}

    def of(self, fused_key: str, pattern: FusionPattern, execution: int) -> Optional[Replaced]:
        """What execution `execution` of fused node `fused_key` replaced, or None when the dump does not tell.
        Fused nodes are ordered by the graph, not by name: torch's replacement walks the graph from its end, so
        `npu_add_rms_norm_cast_default` is the last one."""
        cache_key = (fused_key, execution)
        if cache_key not in self._found:
            self._found[cache_key] = self._find(fused_key, pattern, execution)
        return self._found[cache_key]

    def _find(self, fused_key: str, pattern: FusionPattern, execution: int) -> Optional[Replaced]:
        fused = sorted((k for k in self.named_keys if k.endswith(f"-{pattern.fused}")), key=self.named_keys.__getitem__)
        anchors = [c for c in self.fx.by_target({pattern.anchor}) if c.key not in self.named_keys]
        if fused_key not in fused or not anchors or len(anchors) % len(fused):
            return None
        at = execution * len(fused) + fused.index(fused_key)
        if at >= len(anchors):
            return None
        anchor = anchors[at]
        consumer, view = self._consumer_of(anchor, pattern.consumer)
        after: tuple[FxCall, ...] = ()
        if consumer is not None and view is not None:
            after = tuple(v for k in pattern.viewed_after for v in self._views_of(consumer, consumer.output(k)))
        found = Replaced(anchor, consumer, view, after)
        for call in found.calls:
            self.replaced_keys[call.key] = fused_key
        return found

    def _consumer_of(self, anchor: FxCall, targets) -> tuple[Optional[FxCall], Optional[FxCall]]:
        """The one call of `targets` fed by the anchor's output 0, and the view it went through (None: directly)."""
        out = anchor.output(0)
        if not targets or out is None:
            return None, None
        later = [c for c in self.fx.by_target(set(targets)) if c.key not in self.named_keys and _after(c, anchor)]
        for view in (None, *self._views_of(anchor, out)):
            fed_by = out if view is None else view.output(0)
            fed = self._fed_by(later, fed_by)
            if fed is not None:
                return fed, view
        return None, None

    def _views_of(self, after: FxCall, file: Optional[DumpFile]) -> list[FxCall]:
        """The `aten.view.default` calls (named in no GE tensor) made on the tensor in `file`."""
        if file is None:
            return []
        views = [
            c
            for c in self.fx.by_target({VIEW_TARGET})
            if c.key not in self.named_keys and _after(c, after) and c.output(0) is not None
        ]
        return [v for v in views if self._fed_by([v], file) is not None]

    def _fed_by(self, calls: list[FxCall], file: Optional[DumpFile]) -> Optional[FxCall]:
        """The one call whose argument 0 is the tensor in `file` (same header; same bytes where several are)."""
        if file is None:
            return None
        arguments = [(c, _first_argument(c)) for c in calls]
        fed = [(c, a) for c, a in arguments if a is not None and self.fx.same_header(a, file)]
        if len(fed) > 1:
            fed = [(c, a) for c, a in fed if self.fx.same_content(a, file)]
        return fed[0][0] if len(fed) == 1 else None


def _first_argument(call: FxCall) -> Optional[DumpFile]:
    return next((f for i, j, f in call.inputs if i == 0 and j is None), None)


def _after(call: FxCall, other: FxCall) -> bool:
    return int(call.timestamp or 0) >= int(other.timestamp or 0)
