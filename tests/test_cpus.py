"""usable_cpus: the CPUs of the process's affinity mask, capped by its cgroup's CPU quota (v2 `cpu.max`, v1
`cpu.cfs_quota_us` / `cpu.cfs_period_us`), rounded up. The cgroup trees here are written by the tests."""

from __future__ import annotations

import os

import pytest

from tcmp.schemas import host
from tcmp.schemas.host import cpu_quota, usable_cpus


def _cgroup_v2(base, own_path: str, cpu_max: str):
    root = base / "cgroup"
    directory = root / own_path.lstrip("/")
    directory.mkdir(parents=True)
    (directory / "cpu.max").write_text(cpu_max + "\n")
    proc = base / "proc_self_cgroup"
    proc.write_text(f"0::{own_path}\n")
    return root, proc


@pytest.mark.parametrize(
    ("cpu_max", "quota"), [("400000 100000", 4), ("150000 100000", 2), ("50000 100000", 1), ("max 100000", None)]
)
def test_cgroup_v2_quota_in_the_process_own_cgroup(tmp_path, cpu_max, quota):
    root, proc = _cgroup_v2(tmp_path, "/system.slice/npu-job.service", cpu_max)
    assert cpu_quota(root, proc) == quota


def test_cgroup_v1_quota_of_the_cpu_controller(tmp_path):
    root = tmp_path / "cgroup"
    directory = root / "cpu,cpuacct" / "docker" / "abc"
    directory.mkdir(parents=True)
    (directory / "cpu.cfs_quota_us").write_text("300000\n")
    (directory / "cpu.cfs_period_us").write_text("100000\n")
    proc = tmp_path / "proc_self_cgroup"
    proc.write_text("12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n")  # a hybrid host: v1 holds the cpu
    assert cpu_quota(root, proc) == 3
    (directory / "cpu.cfs_quota_us").write_text("-1\n")
    assert cpu_quota(root, proc) is None


def test_no_cgroup_to_read_means_no_quota(tmp_path):
    assert cpu_quota(tmp_path / "no_cgroup", tmp_path / "no_proc_file") is None
    garbled = tmp_path / "garbled"
    garbled.mkdir()
    (garbled / "cpu.max").write_text("lots\n")
    assert cpu_quota(garbled, tmp_path / "no_proc_file") is None


def test_usable_cpus_are_the_affinity_mask_capped_by_the_quota(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 192)  # what the host has
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(48)), raising=False)  # numactl: one node
    root, proc = _cgroup_v2(tmp_path / "quota", "/", "400000 100000")  # docker --cpus 4
    assert usable_cpus(root, proc) == 4
    root, proc = _cgroup_v2(tmp_path / "none", "/", "max 100000")
    assert usable_cpus(root, proc) == 48


@pytest.mark.parametrize(("cpus", "jobs", "workers"), [(1, 1, 1), (2, 2, 2), (4, 4, 4), (48, 8, 4)])
def test_defaults_follow_the_usable_cpus(monkeypatch, cpus, jobs, workers):
    monkeypatch.setattr(host, "usable_cpus", lambda: cpus)
    assert host.default_compare_jobs() == jobs and host.default_watch_workers() == workers
