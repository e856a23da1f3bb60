"""Which addresses processes listen on, read from /proc: a process's TCP sockets in LISTEN state (its fds' socket
inodes, looked up in the TCP tables of its network namespace). Ray's servers are all TCP (gRPC, HTTP)."""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
from dataclasses import dataclass
from pathlib import Path

LISTEN = "0A"  # the TCP state column of /proc/net/tcp


@dataclass(frozen=True)
class Listener:
    pid: int
    command: str
    address: str
    port: int

    @property
    def on_loopback(self) -> bool:
        ip = ipaddress.ip_address(self.address)
        mapped = getattr(ip, "ipv4_mapped", None)
        return (mapped or ip).is_loopback


def _address(hex_address: str) -> tuple[str, int]:
    """/proc/net/tcp{,6}'s `ADDRESS:PORT`, both in hex."""
    address, port = hex_address.split(":")
    # each word printed as a number: its bytes in memory (the address in network order) in the host's byte order
    words = b"".join(struct.pack("=I", int(address[k : k + 8], 16)) for k in range(0, len(address), 8))
    family = socket.AF_INET if len(words) == 4 else socket.AF_INET6
    return socket.inet_ntop(family, words), int(port, 16)


def _listening_inodes(pid: int) -> dict[int, tuple[str, int]]:
    found = {}
    for table in ("tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{table}") as rows:
            next(rows)
            for row in rows:
                fields = row.split()
                if fields[3] == LISTEN:
                    found[int(fields[9])] = _address(fields[1])
    return found


def listeners(pids) -> list[Listener]:
    """The TCP sockets the processes `pids` listen on (a process gone meanwhile has none)."""
    found = []
    for pid in sorted(set(pids)):
        try:
            command = Path(f"/proc/{pid}/comm").read_text().strip()
            inodes = _listening_inodes(pid)
            links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except (FileNotFoundError, ProcessLookupError):
            continue
        for link in links:
            if link.startswith("socket:[") and int(link[8:-1]) in inodes:
                found.append(Listener(pid, command, *inodes[int(link[8:-1])]))
    return found


def descendants(roots) -> set[int]:
    """`roots` and every process below them."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat.rpartition(")")[2].split()[1]), []).append(int(entry))
    found, todo = set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    return found
