"""tcmp: torchair accuracy compare. CANN-free GE/FX dump readers, a watch-and-summarize daemon, an op-by-op
compare of a GE graph-mode dump against its golden."""

__version__ = "0.1.0"
