"""``redis+sentinel://`` URLs: a bus that finds the primary through Sentinel.

redis-py follows a Sentinel-managed primary (``redis.sentinel``) but has
no URL for it, so knell uses the form other clients settled on (the
``Redis-Sentinel-Url`` package, Prefect's and RedisVL's parsers)::

    redis+sentinel://[:password@]host:port[,host:port...]/service[/db][?options]

The hosts are the Sentinels; ``service`` is the name they monitor the
primary under (knell's private stores use ``knell``); the password is the
data nodes' (knell's Sentinels take none); the query carries redis-py's
client options and knell's own (``prefix``, ``poll_interval``,
``op_timeout``), which :func:`knell.buses._netopts.split_url` takes out
first.

:func:`primary_connection` is one connection to whichever node the
Sentinels name as primary *when it connects*: after a failover the bus's
next connect asks them again, so it follows the new primary. One thing
differs from redis-py's own: a demoted primary's ``READONLY`` reply stays
a refusal (the write was not applied, a definite failure) instead of
becoming a connection error (which a bus must call indeterminate); the
connection drops either way, so the next call rediscovers the primary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from redis.connection import Connection
from redis.exceptions import ReadOnlyError
from redis.sentinel import Sentinel, SentinelConnectionPool, SentinelManagedConnection

from knell.redact import redact_url

__all__ = ["SCHEME", "SentinelTarget", "parse", "primary_connection"]

SCHEME = "redis+sentinel"


@dataclass(frozen=True)
class SentinelTarget:
    """What a ``redis+sentinel://`` URL names."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    client_url: str
    """``redis://[:password@]localhost/db?options``: the data nodes'
    options in the form redis-py parses (its host is a placeholder: the
    Sentinels name the real one)."""


def parse(url: str) -> SentinelTarget:
    """Split a ``redis+sentinel://`` URL (knell's own options already
    taken out); a ``ValueError`` names what is wrong."""
    parts = urlsplit(url)
    if parts.scheme != SCHEME:
        raise ValueError(f"expected a {SCHEME}:// URL, got {redact_url(url)}")
    userinfo, _, hosts = parts.netloc.rpartition("@")
    sentinels = []
    for item in hosts.split(","):
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(
                f"sentinel {item!r} is not host:port in {redact_url(url)}"
                " (redis+sentinel://host:port[,host:port...]/service[/db])"
            )
        sentinels.append((host.strip("[]"), int(port)))
    path = [unquote(p) for p in parts.path.split("/") if p]
    if not path or len(path) > 2:
        raise ValueError(f"{redact_url(url)} names no /service[/db] after its sentinels")
    db = path[1] if len(path) == 2 else "0"
    if not db.isdigit():
        raise ValueError(f"db must be a number, got {db!r} in {redact_url(url)}")
    netloc = f"{userinfo}@localhost" if userinfo else "localhost"
    client = urlunsplit(("redis", netloc, f"/{db}", parts.query, ""))
    return SentinelTarget(tuple(sentinels), path[0], client)


class _PrimaryConnection(SentinelManagedConnection):
    """A connection to the current primary whose ``READONLY`` replies stay
    refusals (see the module docstring)."""

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return Connection.read_response(self, *args, **kwargs)
        except ReadOnlyError:
            self.disconnect()  # a demoted primary: ask the Sentinels again
            raise


def primary_connection(target: SentinelTarget, **kwargs: Any) -> Connection:
    """One connection (not yet connected) to the primary the Sentinels
    name, with redis-py ``Connection`` keywords (timeouts, retry,
    password...); the Sentinels are asked with the same timeouts."""
    sentinel_kwargs = {
        k: v for k, v in kwargs.items() if k in ("socket_timeout", "socket_connect_timeout")
    }
    manager = Sentinel(list(target.sentinels), sentinel_kwargs=sentinel_kwargs)
    kwargs.pop("connection_class", None)
    for key in ("host", "port"):
        kwargs.pop(key, None)
    pool = SentinelConnectionPool(
        target.service, manager, connection_class=_PrimaryConnection, **kwargs
    )
    connection = pool.make_connection()
    assert isinstance(connection, Connection)
    return connection
