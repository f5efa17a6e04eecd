"""A proxied connection: the client's socket, a fresh socket to the upstream,
and the two links between them.

As in Toxiproxy, the proxy accepts first and dials the upstream for each
client; if the upstream cannot be reached the client's connection is closed
(the client sees a connection that opens and ends, not a refusal: only a
disabled proxy refuses). Reading from either socket starts only once both
links exist, so no byte arrives before its toxics are in place.

Closing is Toxiproxy's: a FIN on both sockets when a link ends the
connection (``timeout``, ``limit_data``, an upstream that went away), a TCP
RST on both (linger 0, then close) for ``reset_peer``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
import sys
from typing import Protocol

from knell.proxy.addr import AddressError, split_hostport
from knell.proxy.link import Link
from knell.proxy.toxics import Toxic

__all__ = ["ClientSide", "Connection", "ProxyView", "Side"]

log = logging.getLogger("knell.proxy")

WRITE_HIGH = 1 << 20
CLOSE_GRACE = 5.0
_LINGER_ZERO = struct.pack("HH" if sys.platform == "win32" else "ii", 1, 0)


class _Chains(Protocol):
    def chain(self, stream: str) -> list[Toxic]: ...


class ProxyView(Protocol):
    """What a connection reads of the proxy that accepted it
    (:class:`~knell.proxy.proxy.Proxy`, which builds connections and so
    sits above this module)."""

    @property
    def name(self) -> str: ...

    @property
    def upstream(self) -> str: ...

    @property
    def connections(self) -> set[Connection]: ...

    @property
    def toxics(self) -> _Chains: ...


class Side(asyncio.Protocol):
    """One socket of a proxied connection."""

    def __init__(self, conn: Connection | None) -> None:
        self.conn = conn
        self.transport: asyncio.Transport | None = None
        self.out: Link | None = None  # the link this socket's bytes go into
        self.inbound: Link | None = None  # the link that writes to this socket
        self._reading = True
        # Bytes (and an EOF) that arrived before the links existed. Reading
        # is paused until then, but some Pythons (3.11 before 3.11.3, as in
        # Debian bookworm) start reading a new transport even when
        # connection_made paused it: hold what comes, hand it on later.
        self._early: list[bytes] = []
        self._early_eof = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.set_write_buffer_limits(high=WRITE_HIGH)
        self.set_reading(False)  # until both links exist

    def data_received(self, data: bytes) -> None:
        if self.out is None:
            self._early.append(bytes(data))
            return
        self.out.feed(data)

    def eof_received(self) -> bool:
        if self.out is None:
            self._early_eof = True
            return True
        self.out.feed_eof()
        return True  # keep the other direction open (half-close)

    def linked(self, out: Link, inbound: Link) -> None:
        """Both links exist: pass on what arrived early, then read."""
        self.out, self.inbound = out, inbound
        early, self._early = self._early, []
        for data in early:
            out.feed(data)
        if self._early_eof:
            out.feed_eof()
        else:
            self.set_reading(True)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.conn is not None:
            self.conn.close()

    def pause_writing(self) -> None:
        if self.inbound is not None:
            self.inbound.sink_paused()

    def resume_writing(self) -> None:
        if self.inbound is not None:
            self.inbound.sink_resumed()

    def write(self, data: bytes | memoryview) -> None:
        assert self.transport is not None
        self.transport.write(data)

    def set_reading(self, on: bool) -> None:
        if on == self._reading or self.transport is None or self.transport.is_closing():
            return
        self._reading = on
        if on:
            self.transport.resume_reading()
        else:
            self.transport.pause_reading()

    def end(self, *, reset: bool) -> None:
        """Close this socket: FIN after the buffered bytes, or an RST now."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if reset:
            sock = transport.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_ZERO)
            transport.abort()
            return
        transport.close()
        # a peer that never reads would hold the close forever
        asyncio.get_running_loop().call_later(CLOSE_GRACE, transport.abort)


class ClientSide(Side):
    """The accepted socket: starts a :class:`Connection` for its proxy."""

    def __init__(self, proxy: ProxyView) -> None:
        super().__init__(None)
        self.proxy = proxy

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.conn = Connection(self.proxy, self)


class Connection:
    """A client, its upstream, and the two links between them."""

    def __init__(self, proxy: ProxyView, client: Side) -> None:
        self.proxy = proxy
        self.loop = asyncio.get_running_loop()
        self.client = client
        self.upstream: Side | None = None
        self.up: Link | None = None
        self.down: Link | None = None
        self.closed = False
        self._ended = 0
        proxy.connections.add(self)
        self._opening: asyncio.Task[None] | None = self.loop.create_task(self._open())

    async def _open(self) -> None:
        try:
            host, port = split_hostport(self.proxy.upstream)
            host = host or "127.0.0.1"
            _, side = await self.loop.create_connection(lambda: Side(self), host, port)
        except (OSError, AddressError) as exc:
            proxy = self.proxy
            log.info("proxy %s: upstream %s unreachable: %s", proxy.name, proxy.upstream, exc)
            self._opening = None
            self.close()
            return
        self._opening = None
        if self.closed:
            side.end(reset=False)
            return
        assert isinstance(side, Side)
        self.upstream = side
        toxics = self.proxy.toxics
        self.up = Link(self, "upstream", self.client, side, toxics.chain("upstream"))
        self.down = Link(self, "downstream", side, self.client, toxics.chain("downstream"))
        self.client.linked(self.up, self.down)
        side.linked(self.down, self.up)

    def link(self, direction: str) -> Link | None:
        return self.up if direction == "upstream" else self.down

    def link_ended(self, link: Link) -> None:
        """``link`` passed its source's EOF on: half-close its sink; when
        both directions have ended, the connection is done."""
        self._ended += 1
        if self._ended >= 2:
            self.close()
            return
        transport = link.sink.transport
        if transport is not None and transport.can_write_eof():
            transport.write_eof()
        else:
            self.close()

    def close(self, *, reset: bool = False) -> None:
        if self.closed:
            return
        self.closed = True
        if self._opening is not None:
            self._opening.cancel()
            self._opening = None
        for link in (self.up, self.down):
            if link is not None:
                link.stop()
        for side in (self.client, self.upstream):
            if side is not None:
                side.end(reset=reset)
        self.proxy.connections.discard(self)
