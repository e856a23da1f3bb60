"""The attributes of graph text ops and output descs (AttrDef map entries), for graph_reader.GraphTextReader: the
entries whose keys tcmp reads, their values by protobuf's oneof rule, and which of them refuse the file when
unreadable."""

from __future__ import annotations

from typing import Any, Optional

from tcmp.schemas.graph import FX_TENSOR_NAME_ATTR, ORIGIN_NAME_ATTR, ORIGIN_OUTPUT_INDEX_ATTR, ORIGINAL_OP_NAMES_ATTR
from tcmp.schemas.graph_text import FIELD_CODES, int_value, string_value

__all__ = ["STRUCTURAL_ATTRS", "AttrReader", "Refused", "text"]


class Refused(Exception):
    """The op structure cannot be read at `offset`."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(reason)
        self.offset = offset
        self.reason = reason


# The attributes whose values are part of the op structure: an unreadable one refuses the file.
STRUCTURAL_ATTRS = frozenset(
    k.encode() for k in (FX_TENSOR_NAME_ATTR, ORIGINAL_OP_NAMES_ATTR, ORIGIN_NAME_ATTR, ORIGIN_OUTPUT_INDEX_ATTR)
)
_KEY, _VALUE, _LIST, _S, _I = (FIELD_CODES[name] for name in (b"key", b"value", b"list", b"s", b"i"))
# The members of AttrDef's `value` oneof: the last one given is the attribute's value.
_ATTR_VALUE_MEMBERS = frozenset(
    FIELD_CODES[name]
    for name in (b"s", b"i", b"f", b"b", b"bt", b"list", b"func", b"td", b"t", b"g", b"list_list_int", b"dt",
                 b"list_list_float", b"expression")
)  # fmt: skip


def text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


class AttrReader:
    """The attribute half of GraphTextReader (which gives `view`, `_note` and `_handled`)."""

    view: Any
    _handled: set

    def _note(self, offset: int, message: str) -> None:
        raise NotImplementedError

    def _attr_entry(self, is_block: bool, payload, offset: int, wanted: frozenset, into: dict) -> None:
        """One `attr { key: … value { … } }` map entry: kept in `into` when its key is one tcmp reads."""
        if not is_block:
            self._note(offset, "an attr entry that is not a block; skipped")
            return
        laid_out = self.view.attr_key(payload)  # the printers' layout, seen at once
        key: Optional[bytes]
        if laid_out is not None:
            key, value_block, value_at = laid_out
            if key in wanted:
                into[key] = ((value_block, value_at), key in STRUCTURAL_ATTRS)
            return
        key = b""
        value = None
        for code, nested, item, at in self.view.entries(payload):
            if code == _KEY:
                key = None if nested else string_value(item)
            elif code == _VALUE and nested:
                value = (item, at)
        damage = self.view.damage(payload)
        if key is None:
            self._note(offset, "an attr entry whose key is not a string; skipped")
            return
        if key not in wanted:
            return
        if damage is not None:
            self._damage_note(damage, offset, f"attribute {text(key)}", key in STRUCTURAL_ATTRS)
            return
        into[key] = (value, key in STRUCTURAL_ATTRS)

    def _damage_note(self, damage, offset: int, what: str, structural: bool) -> None:
        """Damage inside an attribute tcmp reads: refused when the attribute is part of the op structure."""
        if structural:
            raise Refused(damage.offset, f"{what} does not parse: {damage.reason}")
        self._handled.add(damage.offset)
        self._note(offset, f"{what} does not parse ({damage.reason}); ignored")

    def _member(self, attrs: dict, key: bytes) -> Optional[tuple]:
        """(member name, is block, payload, offset) of the attribute's value, or None if it has none."""
        entry = attrs.get(key)
        if entry is None or entry[0] is None:
            return None
        (block, offset), structural = entry
        damage = self.view.damage(block)
        if damage is not None:
            self._damage_note(damage, offset, f"the value of attribute {text(key)}", structural)
            return None
        member = None
        for code, nested, payload, at in self.view.entries(block):
            if code in _ATTR_VALUE_MEMBERS:
                member = (code, nested, payload, at)
        return member

    def _bad_value(self, key: bytes, at: int, what: str) -> None:
        if key in STRUCTURAL_ATTRS:
            raise Refused(at, f"attribute {text(key)}: {what}")
        self._note(at, f"attribute {text(key)}: {what}; ignored")

    def _attr_string(self, attrs: dict, key: bytes) -> Optional[str]:
        member = self._member(attrs, key)
        if member is None or member[0] != _S:
            return None
        value = None if member[1] else string_value(member[2])
        if value is None:
            self._bad_value(key, member[3], "`s` is not a string")
            return None
        return text(value)

    def _attr_int(self, attrs: dict, key: bytes) -> Optional[int]:
        member = self._member(attrs, key)
        if member is None or member[0] != _I:
            return None
        value = None if member[1] else int_value(member[2])
        if value is None:
            self._bad_value(key, member[3], "`i` is not a 64-bit integer")
        return value

    def _attr_strings(self, attrs: dict, key: bytes, structural: bool) -> tuple[str, ...]:
        """A string-list attr (`list { s: … }`); a single `s` is accepted as a one-element list."""
        member = self._member(attrs, key)
        if member is None:
            return ()
        name, nested, payload, at = member
        if name == _S:
            value = None if nested else string_value(payload)
            if value is None:
                self._bad_value(key, at, "`s` is not a string")
                return ()
            return (text(value),)
        if name != _LIST or not nested:
            return ()
        damage = self.view.damage(payload)
        if damage is not None:
            self._damage_note(damage, at, f"the list of attribute {text(key)}", structural)
            return ()
        items = []
        for item_code, item_nested, item, item_at in self.view.entries(payload):
            if item_code == _S:
                value = None if item_nested else string_value(item)
                if value is None:
                    self._bad_value(key, item_at, "a list item `s` is not a string")
                    return ()
                items.append(text(value))
        return tuple(items)
