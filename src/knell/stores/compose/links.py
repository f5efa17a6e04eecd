"""Links: every connection to a store goes through the stack's Toxiproxy.

A run's workers reach a store at the Toxiproxy service, never at the store's
own port, so that the network faults (disable a proxy, add a ``timeout`` or
``latency`` toxic) apply to every connection. Each store has one link, a
proxy named after the service, listening on a fixed port inside the
toxiproxy container (published on an ephemeral 127.0.0.1 port) and
forwarding to the service's name on the compose network. A proxy resolves
its upstream at each connection, so the link survives a store container
that restarts with a new address.

The proxies are created through Toxiproxy's HTTP API with the standard
library: one ``POST /proxies`` per link, the same call against the official
server and knell's own ``knell proxy``. Faults on links are the Toxiproxy
adapter's job (:mod:`knell.nemesis.toxiproxy`), given :attr:`Link.name` and
the API URL.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass

from knell.stores.compose.errors import StackFailed

__all__ = [
    "API_PORT",
    "LINKS",
    "STORE_PORTS",
    "Link",
    "add_toxic",
    "companion_links",
    "create_link",
    "remove_toxic",
    "replica_links",
    "set_enabled",
]

API_PORT = 8474


@dataclass(frozen=True)
class Link:
    """One proxy of the toxiproxy service in front of one store."""

    name: str
    """The Toxiproxy proxy name (the service's name)."""
    listen_port: int
    """Inside the toxiproxy container; published on an ephemeral host port."""
    upstream: str
    """``service:port`` on the compose network."""

    @property
    def listen(self) -> str:
        return f"0.0.0.0:{self.listen_port}"


def _from_kinds() -> tuple[dict[str, int], dict[str, Link]]:
    from knell.stores import registry

    ports: dict[str, int] = {}
    links: dict[str, Link] = {}
    for kind in registry.kinds().values():
        if kind.compose is not None:
            ports[kind.name] = kind.compose.port
            links[kind.name] = Link(
                kind.name, kind.compose.link_port, f"{kind.name}:{kind.compose.port}"
            )
    return ports, links


STORE_PORTS, LINKS = _from_kinds()
"""Each store service's port, and its link, as its kind declares them
(:class:`~knell.stores.kind.ComposeService`). The listen ports must match
the toxiproxy ports of docker-compose.yml."""


def replica_links(service: str, replicas: int) -> dict[str, Link]:
    """The links in front of ``service``'s replicas (``<service>-1`` ..):
    one per node, listening on the ports after the primary's link
    (15433, 15434 for Postgres), as docker-compose.replicated.yml
    publishes them, so a client of any node still goes through the proxy."""
    first = LINKS[service]
    port = STORE_PORTS[service]
    return {
        f"{service}-{i}": Link(f"{service}-{i}", first.listen_port + i, f"{service}-{i}:{port}")
        for i in range(1, replicas + 1)
    }


def companion_links(service: str) -> dict[str, Link]:
    """The links in front of the services that run beside ``service``'s
    replicas (:attr:`~knell.stores.kind.ComposeService.companions`), so a
    client's way to them goes through the proxy too."""
    from knell.stores import registry

    declared = registry.get(service).compose
    companions = declared.companions if declared is not None else ()
    return {name: Link(name, link_port, f"{name}:{port}") for name, port, link_port in companions}


def set_enabled(api: str, name: str, enabled: bool, *, timeout: float = 10) -> None:
    """Enable or disable the proxy ``name`` (a disabled proxy closes every
    connection through it and refuses new ones)."""
    try:
        status, _ = _call("POST", f"{api}/proxies/{name}", {"enabled": enabled}, timeout)
    except (OSError, ValueError) as exc:
        raise StackFailed(f"toxiproxy at {api}: setting link {name!r} failed: {exc}") from None
    if status not in (200, 201):
        raise StackFailed(f"toxiproxy at {api}: setting link {name!r} answered {status}")


def add_toxic(api: str, name: str, toxic: dict[str, object], *, timeout: float = 10) -> None:
    """Add ``toxic`` (Toxiproxy's JSON: ``name``, ``type``, ``stream``,
    ``attributes``) to the proxy ``name``: a store's own use of a link
    (holding its replication back), not a run's network fault."""
    try:
        status, _ = _call("POST", f"{api}/proxies/{name}/toxics", toxic, timeout)
    except (OSError, ValueError) as exc:
        raise StackFailed(f"toxiproxy at {api}: a toxic on link {name!r} failed: {exc}") from None
    if status not in (200, 201):
        raise StackFailed(f"toxiproxy at {api}: a toxic on link {name!r} answered {status}")


def remove_toxic(api: str, name: str, toxic: str, *, timeout: float = 10) -> None:
    """Remove the toxic ``toxic`` from the proxy ``name`` (gone already: fine)."""
    try:
        status, _ = _call("DELETE", f"{api}/proxies/{name}/toxics/{toxic}", None, timeout)
    except (OSError, ValueError) as exc:
        raise StackFailed(f"toxiproxy at {api}: removing {toxic!r} failed: {exc}") from None
    if status not in (200, 204, 404):
        raise StackFailed(f"toxiproxy at {api}: removing {toxic!r} answered {status}")


def _call(method: str, url: str, body: object | None, timeout: float) -> tuple[int, object]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            raw = reply.read()
            return reply.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        return exc.code, None


def create_link(api: str, link: Link, *, timeout: float = 10) -> None:
    """Create (or re-create, if one with the same name differs) the proxy of
    ``link`` on the Toxiproxy at ``api``."""
    body = {"name": link.name, "listen": link.listen, "upstream": link.upstream, "enabled": True}
    try:
        status, _ = _call("POST", f"{api}/proxies", body, timeout)
        if status == 409:
            status, existing = _call("GET", f"{api}/proxies/{link.name}", None, timeout)
            if isinstance(existing, dict) and existing.get("upstream") == link.upstream:
                return
            _call("DELETE", f"{api}/proxies/{link.name}", None, timeout)
            status, _ = _call("POST", f"{api}/proxies", body, timeout)
    except (OSError, ValueError) as exc:
        raise StackFailed(
            f"toxiproxy at {api}: creating link {link.name!r} failed: {exc}"
        ) from None
    if status not in (200, 201):
        raise StackFailed(f"toxiproxy at {api}: creating link {link.name!r} answered {status}")
