"""The host a process runs on: how many CPUs it may use, and how tcmp sizes its process pools by them. Below
compare and daemon, which both size pools. NPU hosts bind processes to NUMA nodes (numactl, taskset) and run tools in
containers with a CPU quota (`docker --cpus`), where `os.cpu_count()` still reports the host's 192 cores: sizing
process pools by it would start more processes than there are CPUs to run them."""

from __future__ import annotations

import gc
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")


def usable_cpus(cgroup_root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> int:
    """The CPUs in this process's affinity mask, capped by its cgroup's CPU quota (rounded up), at least 1."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = os.cpu_count() or 1
    quota = cpu_quota(cgroup_root, proc_cgroup)
    return max(1, min(cpus, quota) if quota is not None else cpus)


def cpu_quota(cgroup_root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> Optional[int]:
    """CPUs the quota of this process's cgroup allows (cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us` over
    `cpu.cfs_period_us`), rounded up; None without a quota or where it cannot be read."""
    for directory, v2 in _cgroup_dirs(cgroup_root, proc_cgroup):
        try:
            if v2:
                quota, period = (directory / "cpu.max").read_text().split()[:2]
                if quota == "max":
                    return None
            else:
                quota = (directory / "cpu.cfs_quota_us").read_text().strip()
                period = (directory / "cpu.cfs_period_us").read_text().strip()
                if int(quota) < 0:
                    return None
            return max(1, math.ceil(int(quota) / int(period)))
        except (OSError, ValueError, ZeroDivisionError):
            continue
    return None


def _cgroup_dirs(cgroup_root: Path, proc_cgroup: Path) -> list[tuple[Path, bool]]:
    """Where this process's CPU controller files may be, v2 first: under its own cgroup's path, then at the root
    (inside a container's cgroup namespace its path is "/" anyway)."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        lines = []
    own: list[tuple[Path, bool]] = []
    for line in lines:
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        controllers, relative = fields[1], fields[2].lstrip("/")
        if controllers == "":  # cgroup v2's single hierarchy
            own.append((cgroup_root / relative, True))
        elif "cpu" in controllers.split(","):
            own += [(cgroup_root / mount / relative, False) for mount in (controllers, "cpu", "cpu,cpuacct")]
    roots = [(cgroup_root, True)] + [(cgroup_root / mount, False) for mount in ("cpu", "cpu,cpuacct")]
    return list(dict.fromkeys(own + roots))


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


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(parent: int) -> None:
    """Make this process (a pool's worker) end when `parent` does, even by kill -9, which gives the parent no
    chance to stop its workers: the kernel sends SIGKILL to the worker when the thread that started it ends
    (PR_SET_PDEATHSIG). If the parent is already gone, the worker ends now. Without prctl (not Linux) it does
    nothing; the pool's own pipes then end an idle worker at its next read."""
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return
    if prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
        return
    if os.getppid() != parent:  # it died before the signal was asked for
        os._exit(1)


# The cyclic collector's thresholds while a compare runs (Python's are 700, 10, 10). A compare makes millions of
# small records that live as long as their token (the pairs, the headers, the files listed), and almost no cycles:
# at the default thresholds every 700 of them start a collection and the heap's growth starts full ones, 2,400
# collections and a quarter of the CPU time of a 10K-node graph's compare (2.1 s of 9.2 s), a larger share the larger
# the heap. With these, 12 collections and 0.3 s, the same peak RSS within 2 MB.
COMPARE_GC_THRESHOLDS = (100_000, 50, 100)


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Run the block with the collector at COMPARE_GC_THRESHOLDS, and then as it was."""
    before = gc.get_threshold()
    gc.set_threshold(*COMPARE_GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)
