"""Is a store answering? A protocol-level probe, no driver needed.

A TCP connect says little here: Docker's port proxy and Toxiproxy accept a
connection even when the store behind them is dead, paused or cut off. So
each probe speaks the first step of the store's own protocol and wants the
store's own answer: Redis ``PING`` -> ``+PONG``; for Postgres, a startup
message, which a server ready for queries answers with an authentication
request (``R``), and one still starting or recovering with an error (``E``).
This needs no client library and is the same through a link or direct.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable

__all__ = ["PROBES", "postgres_ready", "redis_ready"]


def _exchange(host: str, port: int, message: bytes, timeout: float) -> bytes:
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(message)
            return sock.recv(64)
    except OSError:
        return b""


def redis_ready(host: str, port: int, timeout: float = 1.0) -> bool:
    """Redis answers ``PING`` with ``+PONG``."""
    return _exchange(host, port, b"PING\r\n", timeout).startswith(b"+PONG")


def postgres_ready(
    host: str, port: int, timeout: float = 1.0, *, user: str = "knell", database: str = "knell"
) -> bool:
    """Postgres answers a startup message with an authentication request."""
    params = b"user\0" + user.encode() + b"\0database\0" + database.encode() + b"\0\0"
    startup = struct.pack("!ii", 8 + len(params), 196608) + params
    return _exchange(host, port, startup, timeout)[:1] == b"R"


PROBES: dict[str, Callable[[str, int, float], bool]] = {
    "postgres": postgres_ready,
    "redis": redis_ready,
}
