"""Fixtures of the cluster tests; the Ray cluster itself is ray_nodes.RayCluster (this directory is put on
sys.path). A test module's cluster runs in a network namespace of its own with only the loopback interface."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import netns


@pytest.fixture(scope="module")
def cluster_dirs(tmp_path_factory):
    work = tmp_path_factory.mktemp("cluster")
    view = work / "view"
    view.mkdir()
    node_dirs = []
    for k in range(2):
        node_dir = work / f"node{k}"
        node_dir.mkdir()
        (node_dir / "node.json").write_text(json.dumps({"node": k}))
        node_dirs.append(node_dir)
    return work, view, node_dirs


@pytest.fixture(scope="module")
def loopback_only_network():
    """The module's tests, their Ray driver and every node in a network with only the loopback interface: no test
    traffic can reach another address, whatever Ray binds."""
    with netns.loopback_only():
        assert netns.interfaces() == ["lo"]
        yield
