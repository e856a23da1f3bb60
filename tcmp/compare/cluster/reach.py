"""Whether a Ray cluster can be reached at `--cluster ADDRESS`, said in tcmp's own options: Ray's message when it
finds none names its `--address` flag and RAY_ADDRESS, which are not tcmp's."""

from __future__ import annotations

import socket
from typing import Optional

PROBE_TIMEOUT_S = 5.0  # a head that listens answers a TCP connect at once; Ray itself waits a minute or more
_WAYS = (
    "give the address of a running cluster (--cluster HEAD:6379, --cluster ray://HEAD:10001, or TCMP_CLUSTER), "
    "start one (`ray start --head` on one node, `ray start --address=HEAD:6379` on the others), "
    "or try a Ray on this machine alone with --cluster local"
)


def no_cluster_line(address: str, why: str) -> str:
    """The one line for a cluster that is not there: what was tried, why it failed, and the ways on."""
    return f"--cluster {address}: {why}; {_WAYS}"


def not_found_line(address: str) -> str:
    """`--cluster auto` (or an address Ray could not connect to): no cluster."""
    where = "that this machine belongs to" if address == "auto" else "at that address"
    return no_cluster_line(address, f"no running Ray cluster {where}")


def _host_port(address: str) -> Optional[tuple[str, int]]:
    """`host:port` of `host:port` or `ray://host:port`; None for `auto`, `local` and what has no port."""
    rest = address[len("ray://") :] if address.startswith("ray://") else address
    host, _, port = rest.rpartition(":")
    if not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def unreachable(address: str) -> Optional[str]:
    """The line to fail with when nothing listens at `address` (before Ray, which retries for minutes), or None:
    something answers, or the address names no port to try."""
    target = _host_port(address)
    if target is None:
        return None
    try:
        socket.create_connection(target, timeout=PROBE_TIMEOUT_S).close()
    except OSError as exc:
        return no_cluster_line(address, f"nothing answers at {target[0]}:{target[1]} ({exc.strerror or exc})")
    return None
