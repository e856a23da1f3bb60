"""tcmp: torchair accuracy compare. CANN-free GE/FX dump readers, a watch-and-summarize daemon, an op-by-op
compare of a GE graph-mode dump against its golden."""

import os

from .cpus import usable_cpus

__version__ = "0.1.0"


def one_blas_thread() -> None:
    """tcmp parallelizes with processes; BLAS threads on top only spin against them (a 32K-element dot ran 10x
    slower on busy cores, measured). Takes effect in processes started afterwards, and in this one when numpy is
    not loaded yet; a value the user set is kept."""
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(variable, "1")


# Summarizing is bound by memory bandwidth and the CRC, ~4-7 GB/s per worker: four outrun any disk a dump is
# written to. One per core would start 192 processes on a 192-core NPU host, ~40 MB each, to compete with the
# inference the dump comes from.
MAX_DEFAULT_WATCH_WORKERS = 4


def default_watch_workers() -> int:
    return min(MAX_DEFAULT_WATCH_WORKERS, usable_cpus())


# A compare works token by token (per rank and graph): a few to a few dozen units. Its workers are all forked at
# the start, before the dump is collected and the units are counted, so the default stops short of a big host's
# core count; --jobs takes any number.
MAX_DEFAULT_COMPARE_JOBS = 8


def default_compare_jobs() -> int:
    return min(MAX_DEFAULT_COMPARE_JOBS, usable_cpus())
