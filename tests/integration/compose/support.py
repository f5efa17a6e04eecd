"""Helpers of the compose tests: a raw Redis
client (a few RESP commands over a socket), and what is left in the engine."""

from __future__ import annotations

import socket

from knell.stores.compose.engine import client


def resp(address: tuple[str, int], *args: str, timeout: float = 2.0) -> bytes:
    """Send one Redis command, return the raw reply (b"" if none came)."""
    parts = [f"*{len(args)}\r\n".encode()]
    for arg in args:
        data = arg.encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    try:
        with socket.create_connection(address, timeout=timeout) as sock:
            sock.sendall(b"".join(parts))
            return sock.recv(4096)
    except OSError:
        return b""


def leftovers(project: str | None = None) -> list[str]:
    """Containers, networks and volumes labelled knell=1 (of one project)."""
    engine = client()
    label = f"com.docker.compose.project={project}" if project else "knell=1"
    filters: dict[str, str | list[str] | bool] = {"label": label}
    found = [f"container {c.name}" for c in engine.containers.list(all=True, filters=filters)]
    found += [f"network {n.name}" for n in engine.networks.list(filters=filters)]
    found += [f"volume {v.name}" for v in engine.volumes.list(filters=filters)]
    return found
