"""A proxy: one listening address forwarding to one upstream, its open
connections, and the toxics that act on them.

The life cycle is Toxiproxy's (``proxy.go``): a proxy created enabled binds
its ``listen`` address at once (port 0 picks a free port, and ``listen`` then
reports the real one); disabling it closes the listener, so new connections
are refused, and closes every open connection; enabling binds the same
address again. Changing ``listen`` or ``upstream`` restarts it, dropping its
connections. Toxics live on the proxy, in one ordered chain per direction,
and every change reaches the open connections at once.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from knell.proxy.addr import AddressError, format_hostport, resolve_listen
from knell.proxy.connection import ClientSide, Connection
from knell.proxy.errors import server_error, toxic_not_found
from knell.proxy.toxics import STREAMS, Toxic

__all__ = ["Proxy", "ToxicChains"]

BACKLOG = 512


class ToxicChains:
    """A proxy's toxics: an ordered chain per direction, names unique
    across both."""

    def __init__(self, proxy: Proxy) -> None:
        self._proxy = proxy
        self._chains: dict[str, list[Toxic]] = {stream: [] for stream in STREAMS}

    def chain(self, stream: str) -> list[Toxic]:
        return list(self._chains[stream])

    def all(self) -> list[Toxic]:
        """Upstream chain first, as Toxiproxy lists them."""
        return [toxic for stream in STREAMS for toxic in self._chains[stream]]

    def find(self, name: str) -> Toxic | None:
        for toxic in self.all():
            if toxic.name == name:
                return toxic
        return None

    def get(self, name: str) -> Toxic:
        toxic = self.find(name)
        if toxic is None:
            raise toxic_not_found()
        return toxic

    def add(self, toxic: Toxic) -> None:
        self._chains[toxic.stream].append(toxic)
        for conn in list(self._proxy.connections):
            link = conn.link(toxic.stream)
            if link is not None:
                link.add(toxic)

    def update(self, toxic: Toxic, toxicity: float, attributes: dict[str, int]) -> None:
        toxic.toxicity = toxicity
        toxic.attributes = attributes
        for conn in list(self._proxy.connections):
            link = conn.link(toxic.stream)
            if link is not None:
                link.update(toxic)

    def remove(self, name: str) -> None:
        toxic = self.get(name)
        self._chains[toxic.stream].remove(toxic)
        for conn in list(self._proxy.connections):
            link = conn.link(toxic.stream)
            if link is not None:
                link.remove(toxic)

    def reset(self) -> None:
        for toxic in self.all():
            self.remove(toxic.name)


class Proxy:
    """A named listener forwarding every connection to ``upstream``."""

    def __init__(self, name: str, listen: str, upstream: str) -> None:
        self.name = name
        self.listen = listen
        self.upstream = upstream
        self.enabled = False
        self.toxics = ToxicChains(self)
        self.connections: set[Connection] = set()
        self._server: asyncio.Server | None = None

    def to_json(self) -> dict[str, Any]:
        """Toxiproxy's ``proxyToxics``: the proxy's fields, then its toxics."""
        return {
            "name": self.name,
            "listen": self.listen,
            "upstream": self.upstream,
            "enabled": self.enabled,
            "toxics": [toxic.to_json() for toxic in self.toxics.all()],
        }

    async def start(self) -> None:
        """Bind ``listen`` and accept; a failure is a 500 with Go's words."""
        if self.enabled:
            return
        try:
            host, port = await asyncio.to_thread(resolve_listen, self.listen)
        except AddressError as exc:
            raise server_error(f"listen tcp: {exc}") from None
        loop = asyncio.get_running_loop()
        try:
            server = await loop.create_server(
                lambda: ClientSide(self), host, port, backlog=BACKLOG, reuse_address=True
            )
        except OSError as exc:
            reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
            where = format_hostport(host, port)
            raise server_error(f"listen tcp {where}: bind: {reason}") from None
        bound = server.sockets[0].getsockname()
        self._server = server
        self.listen = format_hostport(bound[0], bound[1])
        self.enabled = True

    def stop(self) -> None:
        """Stop listening and close every open connection."""
        if not self.enabled:
            return
        self.enabled = False
        if self._server is not None:
            self._server.close()
            self._server = None
        for conn in list(self.connections):
            conn.close()

    async def differs(self, listen: str, upstream: str) -> bool:
        """Whether ``listen`` (resolved) or ``upstream`` differ from ours."""
        try:
            host, port = await asyncio.to_thread(resolve_listen, listen)
        except AddressError as exc:
            raise server_error(str(exc)) from None
        return format_hostport(host, port) != self.listen or upstream != self.upstream

    async def update(self, listen: str, upstream: str, enabled: bool) -> None:
        """Toxiproxy's ``Update``: restart on a new address, then follow
        ``enabled``."""
        if await self.differs(listen, upstream):
            self.stop()
            self.listen = listen
            self.upstream = upstream
        if enabled != self.enabled:
            if enabled:
                await self.start()
            else:
                self.stop()
