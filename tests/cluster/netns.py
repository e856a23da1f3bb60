"""Network namespaces for the cluster tests (we run as root): this process, or a command, where the network has
only the loopback interface, so no test traffic reaches another address; or loopback plus one address of another
network (a veth pair with nothing beyond it), where a server that binds this machine's address shows it."""

from __future__ import annotations

import ctypes
import os
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

CLONE_NEWNET, CLONE_NEWUTS = 0x40000000, 0x04000000
NAMESPACES = {CLONE_NEWNET: "net", CLONE_NEWUTS: "uts"}
# TEST-NET-2 (RFC 5737): never routed; the default route goes into the veth pair, where nothing answers
OTHER_ADDRESS = "198.51.100.7"
OTHER_NETWORK = (
    "ip link set lo up && ip link add tcmp0 type veth peer name tcmp1 && "
    f"ip addr add {OTHER_ADDRESS}/24 dev tcmp0 && ip link set tcmp0 up && ip link set tcmp1 up && "
    "ip route add default dev tcmp0 && "
)

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)} (the cluster tests run as root)")


@contextmanager
def loopback_only() -> Iterator[None]:
    """This thread (the tests' main thread), and every process and thread it starts meanwhile, in a new network
    namespace whose only interface is loopback, up; back in the one before at the end. The host name is
    `localhost` meanwhile (a UTS namespace of its own): Ray takes the address the host name resolves to where no
    route leads out, and this machine's would not be here."""
    before = {kind: os.open(f"/proc/thread-self/ns/{name}", os.O_RDONLY) for kind, name in NAMESPACES.items()}
    try:
        _check(_libc.unshare(CLONE_NEWNET | CLONE_NEWUTS), "unshare(CLONE_NEWNET | CLONE_NEWUTS)")
        try:
            socket.sethostname("localhost")
            subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
            yield
        finally:
            for kind, fd in before.items():
                _check(_libc.setns(fd, kind), "setns back")
    finally:
        for fd in before.values():
            os.close(fd)


def with_other_network(command: str) -> list[str]:
    """`command` (a shell line) run in a network namespace of its own with loopback and OTHER_ADDRESS."""
    return ["unshare", "-n", "sh", "-c", f"{OTHER_NETWORK}exec {command}"]


def interfaces() -> list[str]:
    """The network interfaces this thread's namespace has (sysfs would show the namespace that mounted it)."""
    return sorted(name for _, name in socket.if_nameindex())
