"""Pickle payloads walked without executing them.

torchair saves a non-tensor FX argument with `np.save(np.array(x))`; for None, dtypes, lists holding None … that is
an object array whose payload is a pickle. Unpickling would run arbitrary code, so the payload is only walked with
`pickletools.genops`, which decodes opcodes, and a small symbolic stack machine builds inert placeholders instead
of objects; `describe` renders them as short Python-like text.
"""

from __future__ import annotations

import pickletools
from dataclasses import dataclass
from typing import Callable, Optional

from tcmp.schemas.dump_records import Completeness

TEXT_LIMIT = 200


class _BoundedReader:
    """File view that stops at `end` and remembers whether a read came up short, so a failing genops can be told
    apart: ran out of bytes (still being written) vs. met bytes that are no pickle (corrupt). Clamping also keeps
    a garbage length field from asking for gigabytes."""

    def __init__(self, fp, end: int) -> None:
        self._fp = fp
        self._end = end
        self.hit_end = False

    def read(self, n: int = -1) -> bytes:
        remaining = max(self._end - self._fp.tell(), 0)
        wanted = remaining if n is None or n < 0 else n
        data = self._fp.read(min(wanted, remaining))
        if len(data) < wanted:
            self.hit_end = True
        return data

    def readline(self) -> bytes:
        remaining = max(self._end - self._fp.tell(), 0)
        line = self._fp.readline(remaining)
        if not line.endswith(b"\n"):
            self.hit_end = True
        return line

    def tell(self) -> int:
        return self._fp.tell()


@dataclass(frozen=True)
class PickleScan:
    completeness: Completeness
    opcodes: tuple  # (opcode name, argument) pairs up to STOP, when kept
    truncated: bool  # more opcodes than _MAX_KEPT_OPCODES: not kept


_MAX_KEPT_OPCODES = 1_000_000


def scan_pickle(fp, offset: int, size: int, keep_opcodes: bool) -> PickleScan:
    fp.seek(offset)
    reader = _BoundedReader(fp, size)
    opcodes: list = []
    truncated = False
    try:
        # typeshed asks for IO[bytes]; genops calls only read, readline and tell, which _BoundedReader has
        for opcode, arg, _position in pickletools.genops(reader):  # type: ignore[arg-type]
            if keep_opcodes and not truncated:
                opcodes.append((opcode.name, arg))
                truncated = len(opcodes) > _MAX_KEPT_OPCODES
    except Exception:  # genops raises ValueError and friends on bad or short input; the reader says which
        state = Completeness.INCOMPLETE if reader.hit_end else Completeness.CORRUPT
        return PickleScan(state, (), False)
    # genops returns right after yielding STOP
    state = Completeness.COMPLETE if reader.tell() == size else Completeness.CORRUPT
    return PickleScan(state, tuple(opcodes) if not truncated else (), truncated)


@dataclass(frozen=True)
class _Global:
    """A reference to `module.name` that the pickle would have imported."""

    module: str
    name: str

    def __str__(self) -> str:
        return f"{self.module}.{self.name}"


@dataclass(eq=False)
class _Call:
    """What REDUCE/NEWOBJ/OBJ/INST would have called: func(*args)."""

    func: object
    args: object


@dataclass(eq=False)
class _Built:
    """BUILD: `obj` with `state` applied (numpy arrays and dtypes are rebuilt this way)."""

    obj: object
    state: object


@dataclass(eq=False)
class _Dict:
    items: list


@dataclass(eq=False)
class _Set:
    items: list


@dataclass(frozen=True)
class _Opaque:
    what: str


class Undescribable(Exception):
    pass


class SymbolicUnpickler:
    """Replays pickle opcodes on a stack of inert placeholders (_Global, _Call, …) instead of real objects, so
    the structure of the payload can be inspected while nothing is imported or called."""

    def __init__(self) -> None:
        self.stack: list = []
        self.marks: list[list] = []
        self.memo: dict = {}

    def run(self, opcodes) -> object:
        for name, arg in opcodes:
            if name == "STOP":
                return self.stack.pop()
            handler = _HANDLERS.get(name)
            if handler is None:
                raise Undescribable(f"opcode {name}")
            handler(self, arg, name)
        raise Undescribable("no STOP")

    def pop_mark(self) -> list:
        items = self.stack
        self.stack = self.marks.pop()
        return items

    # handlers: (self, argument, opcode name)

    def ignore(self, arg, name) -> None:
        pass

    def literal(self, arg, name) -> None:
        self.stack.append(bytes(arg) if isinstance(arg, bytearray) else arg)

    def constant(self, arg, name) -> None:
        self.stack.append(_CONSTANTS[name])

    def empty(self, arg, name) -> None:
        self.stack.append(_EMPTY_CONTAINERS[name]())

    def mark(self, arg, name) -> None:
        self.marks.append(self.stack)
        self.stack = []

    def pop(self, arg, name) -> None:
        if name == "POP" and self.stack:
            self.stack.pop()
        else:  # POP_MARK, or POP on an empty stack (which discards the mark, as pickle does)
            self.pop_mark()

    def dup(self, arg, name) -> None:
        self.stack.append(self.stack[-1])

    def from_mark(self, arg, name) -> None:
        items = self.pop_mark()
        self.stack.append(_container(name, items))

    def small_tuple(self, arg, name) -> None:
        count = int(name[-1])
        items = tuple(self.stack[-count:])
        del self.stack[-count:]
        self.stack.append(items)

    def append(self, arg, name) -> None:
        value = self.stack.pop()
        _extend(self.stack[-1], [value])

    def appends(self, arg, name) -> None:  # APPENDS, ADDITEMS
        items = self.pop_mark()
        _extend(self.stack[-1], items)

    def setitem(self, arg, name) -> None:
        value = self.stack.pop()
        key = self.stack.pop()
        _extend(self.stack[-1], [(key, value)])

    def setitems(self, arg, name) -> None:
        items = self.pop_mark()
        _extend(self.stack[-1], list(zip(items[::2], items[1::2])))

    def global_(self, arg, name) -> None:
        module, _, attr = str(arg).partition(" ")
        self.stack.append(_Global(module, attr))

    def stack_global(self, arg, name) -> None:
        attr = self.stack.pop()
        module = self.stack.pop()
        self.stack.append(_Global(str(module), str(attr)))

    def reduce(self, arg, name) -> None:  # REDUCE, NEWOBJ, NEWOBJ_EX
        if name == "NEWOBJ_EX":
            self.stack.pop()  # kwargs
        args = self.stack.pop()
        self.stack.append(_Call(self.stack.pop(), args))

    def obj(self, arg, name) -> None:
        items = self.pop_mark()
        self.stack.append(_Call(items[0], tuple(items[1:])))

    def inst(self, arg, name) -> None:
        items = self.pop_mark()
        module, _, attr = str(arg).partition(" ")
        self.stack.append(_Call(_Global(module, attr), tuple(items)))

    def build(self, arg, name) -> None:
        state = self.stack.pop()
        self.stack[-1] = _Built(self.stack[-1], state)

    def put(self, arg, name) -> None:
        self.memo[arg] = self.stack[-1]

    def memoize(self, arg, name) -> None:
        self.memo[len(self.memo)] = self.stack[-1]

    def get(self, arg, name) -> None:
        self.stack.append(self.memo[arg])

    def opaque(self, arg, name) -> None:
        if name == "BINPERSID":
            self.stack.pop()
        self.stack.append(_Opaque(_OPAQUE_NAMES[name]))


# Opcodes whose genops argument already is the value (numbers, strings, bytes).
_LITERAL_OPCODES = (
    "INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4", "FLOAT", "BINFLOAT",
    "STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8",
    "BINBYTES", "SHORT_BINBYTES", "BINBYTES8", "BYTEARRAY8",
)  # fmt: skip
_CONSTANTS = {"NONE": None, "NEWTRUE": True, "NEWFALSE": False}
_EMPTY_CONTAINERS: dict[str, Callable[[], object]] = {
    "EMPTY_LIST": list,
    "EMPTY_TUPLE": tuple,
    "EMPTY_DICT": lambda: _Dict([]),
    "EMPTY_SET": lambda: _Set([]),
}
_OPAQUE_NAMES = {
    "PERSID": "persistent id",
    "BINPERSID": "persistent id",
    "EXT1": "extension",
    "EXT2": "extension",
    "EXT4": "extension",
    "NEXT_BUFFER": "out-of-band buffer",
}
_U = SymbolicUnpickler
_HANDLERS = {
    **dict.fromkeys(("PROTO", "FRAME", "READONLY_BUFFER"), _U.ignore),
    **dict.fromkeys(_LITERAL_OPCODES, _U.literal),
    **dict.fromkeys(_CONSTANTS, _U.constant),
    **dict.fromkeys(_EMPTY_CONTAINERS, _U.empty),
    "MARK": _U.mark,
    "POP": _U.pop,
    "POP_MARK": _U.pop,
    "DUP": _U.dup,
    **dict.fromkeys(("LIST", "TUPLE", "DICT", "FROZENSET"), _U.from_mark),
    **dict.fromkeys(("TUPLE1", "TUPLE2", "TUPLE3"), _U.small_tuple),
    "APPEND": _U.append,
    "APPENDS": _U.appends,
    "ADDITEMS": _U.appends,
    "SETITEM": _U.setitem,
    "SETITEMS": _U.setitems,
    "GLOBAL": _U.global_,
    "STACK_GLOBAL": _U.stack_global,
    **dict.fromkeys(("REDUCE", "NEWOBJ", "NEWOBJ_EX"), _U.reduce),
    "OBJ": _U.obj,
    "INST": _U.inst,
    "BUILD": _U.build,
    **dict.fromkeys(("PUT", "BINPUT", "LONG_BINPUT"), _U.put),
    "MEMOIZE": _U.memoize,
    **dict.fromkeys(("GET", "BINGET", "LONG_BINGET"), _U.get),
    **dict.fromkeys(_OPAQUE_NAMES, _U.opaque),
}
del _U


def _container(name: str, items: list) -> object:
    if name == "LIST":
        return list(items)
    if name == "TUPLE":
        return tuple(items)
    if name == "DICT":
        return _Dict(list(zip(items[::2], items[1::2])))
    return _Set(list(items))


def _extend(target: object, items: list) -> None:
    """APPEND(S)/SETITEM(S)/ADDITEMS on a placeholder; on anything else (a custom class) the items are dropped,
    as only the shape of the payload matters for a description."""
    if isinstance(target, list):
        target.extend(items)
    elif isinstance(target, (_Dict, _Set)):
        target.items.extend(items)


def numpy_array_parts(root: object) -> Optional[tuple[tuple, list]]:
    """(shape, element list) if `root` is how ndarray.__reduce__ pickles an object array:
    BUILD(_reconstruct(ndarray, (0,), b'b'), (version, shape, dtype, is_fortran, [elements]))."""
    if not (isinstance(root, _Built) and isinstance(root.obj, _Call)):
        return None
    func = root.obj.func
    if not (
        isinstance(func, _Global)
        and func.module.startswith("numpy")
        and func.module.endswith("multiarray")
        and func.name == "_reconstruct"
    ):
        return None
    state = root.state
    if not (isinstance(state, tuple) and len(state) == 5):
        return None
    shape, elements = state[1], state[4]
    if not (isinstance(shape, tuple) and all(isinstance(d, int) for d in shape) and isinstance(elements, list)):
        return None
    return shape, elements


_MAX_DESCRIBED_ITEMS = 8
_MAX_DESCRIBE_DEPTH = 6


def describe(value: object, depth: int = 0) -> str:
    """A short Python-like rendering of a placeholder tree (bounded in depth and width; cycles are cut)."""
    if depth > _MAX_DESCRIBE_DEPTH:
        return "…"
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return clip(repr(value), 60)
    if isinstance(value, _Global):
        return str(value)
    if isinstance(value, _Opaque):
        return f"<{value.what}>"
    if isinstance(value, _Built):
        return describe(value.obj, depth + 1)
    if isinstance(value, _Call):
        return f"{describe(value.func, depth + 1)}{_describe_items(_as_items(value.args), '(', ')', depth)}"
    if isinstance(value, list):
        return _describe_items(value, "[", "]", depth)
    if isinstance(value, tuple):
        return _describe_items(list(value), "(", ")", depth)
    if isinstance(value, _Dict):
        pairs = [_Pair(key, item) for key, item in value.items]
        return _describe_items(pairs, "{", "}", depth)
    if isinstance(value, _Set):
        return _describe_items(value.items, "{", "}", depth)
    if isinstance(value, _Pair):
        return f"{describe(value.key, depth + 1)}: {describe(value.value, depth + 1)}"
    return type(value).__name__


@dataclass(frozen=True)
class _Pair:
    key: object
    value: object


def _as_items(args: object) -> list:
    return list(args) if isinstance(args, (tuple, list)) else [args]


def _describe_items(items: list, opening: str, closing: str, depth: int) -> str:
    shown = [describe(item, depth + 1) for item in items[:_MAX_DESCRIBED_ITEMS]]
    if len(items) > _MAX_DESCRIBED_ITEMS:
        shown.append(f"… ({len(items)} items)")
    return opening + ", ".join(shown) + closing


def clip(text: str, limit: int = TEXT_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
