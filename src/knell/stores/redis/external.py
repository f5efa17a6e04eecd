"""A run's key prefix on a Redis server someone else runs (``store_url``)."""

from __future__ import annotations

from typing import Any

from redis.connection import Connection, parse_url

__all__ = ["connect", "drop"]


def _connection(client_url: str, timeout: float) -> Any:
    kwargs: dict[str, Any] = parse_url(client_url)
    cls = kwargs.pop("connection_class", Connection)
    return cls(
        **kwargs,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        decode_responses=True,
    )


def connect(client_url: str, prefix: str, *, create: bool, timeout: float) -> None:
    """PING once (a prefix needs no creating)."""
    conn = _connection(client_url, timeout)
    try:
        conn.send_command("PING")
        conn.read_response()
    finally:
        conn.disconnect()


def drop(client_url: str, prefix: str, *, timeout: float) -> None:
    """UNLINK every key under the run's prefix."""
    conn = _connection(client_url, timeout)
    try:
        cursor = "0"
        while True:
            conn.send_command("SCAN", cursor, "MATCH", f"{prefix}*", "COUNT", 1000)
            cursor, keys = conn.read_response()
            if keys:
                conn.send_command("UNLINK", *keys)
                conn.read_response()
            if str(cursor) == "0":
                return
    finally:
        conn.disconnect()
