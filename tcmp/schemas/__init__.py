"""tcmp.schemas: the dump formats, names, layouts and records every other layer builds on."""

import sys

# The dump readers read files below this size whole, in one read; bigger ones are memory-mapped, so a big tensor
# costs no copy (for small files mapping costs more than it saves).
MMAP_THRESHOLD = 1 << 20

# For records there are one of per dump file (hundreds of thousands in a compare): `@dataclass(frozen=True,
# **SLOTS)` stores their fields in slots, not a per-object dict (~half the memory). Python 3.10 and later.
SLOTS = {"slots": True} if sys.version_info >= (3, 10) else {}
