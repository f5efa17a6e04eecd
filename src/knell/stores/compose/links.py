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

__all__ = ["API_PORT", "LINKS", "STORE_PORTS", "Link", "create_link"]

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
