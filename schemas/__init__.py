"""tcmp.schemas: the dump formats, names, layouts and records every other layer builds on."""

# The dump readers read files below this size whole, in one read; bigger ones are memory-mapped, so a big tensor
# costs no copy (for small files mapping costs more than it saves).
MMAP_THRESHOLD = 1 << 20
