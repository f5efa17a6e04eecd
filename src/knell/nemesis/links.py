"""Links: the TCP paths between workers and what they talk to, each behind a proxy.

A partition cuts real bytes, so every connection a network fault may touch
must pass through something that can hold, slow, reset or refuse it. For a
run with a network store (Postgres, Redis) or a bridge, the runner starts
one Toxiproxy-compatible server (a real ``toxiproxy-server`` or knell's own,
see :mod:`knell.nemesis.toxiproxy`) and creates one proxy per *link*: by
default one per process group and upstream (``consumer->store``), or one
per process instance (``consumer-1->store``) when the scenario asks for
``links = "instance"`` (partitioning half of a group needs that). Each
worker's bus URL is rewritten to its link's listen address, so it reaches
the store only through the proxy, and the network fault kinds
(:mod:`knell.nemesis.network`) act on proxies by name.

Proxy and toxic names carry a per-run prefix, so parallel runs (a matrix,
xdist workers) on one proxy server never touch each other's.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    from knell.nemesis.toxiproxy import ServerHandle, ToxiproxyClient
    from knell.owners import Owner

__all__ = ["Link", "LinkSet", "with_address"]


@dataclass(frozen=True)
class Link:
    """One proxied path: the processes that use it, where it leads."""

    name: str
    """``<group or instance>-><upstream name>`` (also the proxy's short name)."""
    upstream_name: str
    """What it leads to: ``store``, ``bridge-1``..."""
    upstream: str
    """``host:port`` of the real server."""
    listen: str
    """``host:port`` the proxy listens on: what the processes dial."""
    processes: frozenset[str]
    exchange: str
    """How a probe talks to the upstream (``postgres``, ``redis``, ``http``...)."""


def with_address(url: str, address: str) -> str:
    """``url`` with its host and port replaced by ``address`` (``host:port``),
    user, path and query kept: how a worker is pointed at its link."""
    parts = urlsplit(url)
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = f"{userinfo}@{address}" if userinfo else address
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def url_address(url: str) -> str:
    """The ``host:port`` a network URL dials."""
    parts = urlsplit(url)
    if parts.hostname is None or parts.port is None:
        raise ValueError(f"{url.split('?')[0]!r} names no host and port")
    host = parts.hostname
    return f"[{host}]:{parts.port}" if ":" in host else f"{host}:{parts.port}"


@dataclass
class LinkSet:
    """The links of one run, on one proxy server."""

    client: ToxiproxyClient
    server: ServerHandle | None
    links: dict[str, Link] = field(default_factory=dict)

    @classmethod
    def start(cls, parent_pid: int, owner: Owner | None) -> LinkSet:
        """Find or start a proxy server for the run (see
        :func:`knell.nemesis.toxiproxy.find_server`)."""
        from knell.nemesis.toxiproxy import ToxiproxyClient, find_server, unique_prefix

        server = find_server(parent_pid, owner=owner)
        return cls(ToxiproxyClient(server.api_url, prefix=unique_prefix()), server)

    def add(
        self, name: str, upstream_name: str, upstream: str, processes: Iterable[str], exchange: str
    ) -> Link:
        info = self.client.create_proxy(name, upstream)
        link = Link(name, upstream_name, upstream, info.listen, frozenset(processes), exchange)
        self.links[name] = link
        return link

    def of(self, process: str, upstream_name: str) -> Link | None:
        """The link ``process`` uses to reach ``upstream_name``."""
        for link in self.links.values():
            if process in link.processes and link.upstream_name == upstream_name:
                return link
        return None

    def touching(self, processes: Iterable[str]) -> list[Link]:
        """Every link used by any of ``processes``."""
        wanted = set(processes)
        return [link for link in self.links.values() if link.processes & wanted]

    def __iter__(self) -> Iterator[Link]:
        return iter(self.links.values())

    def describe(self) -> dict[str, Any]:
        return {
            "server": None if self.server is None else self.server.kind,
            "api": self.client.api_url,
            "links": {
                name: {
                    "upstream": link.upstream_name,
                    "listen": link.listen,
                    "processes": sorted(link.processes),
                }
                for name, link in self.links.items()
            },
        }

    def close(self) -> None:
        """Delete this run's proxies and stop the server if the run started it."""
        from contextlib import suppress

        from knell.nemesis.toxiproxy import ToxiproxyError

        with suppress(ToxiproxyError, OSError):
            self.client.delete_all()
        if self.server is not None:
            self.server.stop()
