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

**Links.** A run puts a fault proxy link in front of every address a
client dials, the Sentinels' and each data node's, so a partition cuts a
client's way to all of them. The Sentinels still name each node by the
address they know it under, so the URL carries a translation, the
``nodes`` option: ``nodes=<as named>><dial>,...`` (each a ``host:port``;
``>`` reads "reach it through"), for example::

    redis+sentinel://127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003/knell/0
        ?nodes=127.0.0.1:6001>127.0.0.1:7101,127.0.0.1:6002>127.0.0.1:7102

A node the Sentinels name that is not in ``nodes`` is dialled as named.

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
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from redis.connection import Connection
from redis.exceptions import ReadOnlyError
from redis.sentinel import Sentinel, SentinelConnectionPool, SentinelManagedConnection

from knell.redact import redact_url

__all__ = ["NODES", "SCHEME", "SentinelTarget", "parse", "primary_connection"]

SCHEME = "redis+sentinel"

NODES = "nodes"
"""The query option that translates the nodes' addresses (module docstring)."""

Address = tuple[str, int]


@dataclass(frozen=True)
class SentinelTarget:
    """What a ``redis+sentinel://`` URL names."""

    sentinels: tuple[Address, ...]
    service: str
    client_url: str
    """``redis://[:password@]localhost/db?options``: the data nodes'
    options in the form redis-py parses (its host is a placeholder: the
    Sentinels name the real one)."""
    nodes: tuple[tuple[Address, Address], ...] = ()
    """(as the Sentinels name a node, where to dial it instead)."""

    def dial(self, named: Address) -> Address:
        """Where to dial the node the Sentinels name ``named``."""
        for known, through in self.nodes:
            if known == named:
                return through
        return named


def _address(item: str, what: str, url: str, form: str) -> Address:
    host, sep, port = item.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{what} {item!r} is not host:port in {redact_url(url)} ({form})")
    return host.strip("[]"), int(port)


def _nodes(value: str, url: str) -> tuple[tuple[Address, Address], ...]:
    form = f"{NODES}=host:port>host:port[,...]"
    out = []
    for item in value.split(","):
        named, sep, through = item.partition(">")
        if not sep:
            raise ValueError(f"{NODES} item {item!r} has no '>' in {redact_url(url)} ({form})")
        out.append(
            (
                _address(named, f"{NODES} node", url, form),
                _address(through, f"{NODES} link", url, form),
            )
        )
    return tuple(out)


def parse(url: str) -> SentinelTarget:
    """Split a ``redis+sentinel://`` URL (knell's own options already
    taken out); a ``ValueError`` names what is wrong."""
    parts = urlsplit(url)
    if parts.scheme != SCHEME:
        raise ValueError(f"expected a {SCHEME}:// URL, got {redact_url(url)}")
    userinfo, _, hosts = parts.netloc.rpartition("@")
    form = "redis+sentinel://host:port[,host:port...]/service[/db]"
    sentinels = [_address(item, "sentinel", url, form) for item in hosts.split(",")]
    path = [unquote(p) for p in parts.path.split("/") if p]
    if not path or len(path) > 2:
        raise ValueError(f"{redact_url(url)} names no /service[/db] after its sentinels")
    db = path[1] if len(path) == 2 else "0"
    if not db.isdigit():
        raise ValueError(f"db must be a number, got {db!r} in {redact_url(url)}")
    query = parse_qsl(parts.query, keep_blank_values=True)
    found = [value for key, value in query if key == NODES]
    if len(found) > 1:
        raise ValueError(f"{NODES} is given {len(found)} times in {redact_url(url)}")
    nodes = _nodes(found[0], url) if found else ()
    rest = urlencode([(key, value) for key, value in query if key != NODES])
    netloc = f"{userinfo}@localhost" if userinfo else "localhost"
    client = urlunsplit(("redis", netloc, f"/{db}", rest, ""))
    return SentinelTarget(tuple(sentinels), path[0], client, nodes)


class _PrimaryConnection(SentinelManagedConnection):
    """A connection to the current primary whose ``READONLY`` replies stay
    refusals, dialled through the URL's ``nodes`` translation (see the
    module docstring)."""

    target: SentinelTarget | None = None

    def connect_to(self, address: Address) -> None:
        super().connect_to(address if self.target is None else self.target.dial(address))

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
    assert isinstance(connection, _PrimaryConnection)
    connection.target = target
    return connection
