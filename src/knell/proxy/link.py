"""A link: one direction of one proxied connection, and its toxic pipeline.

Every proxied connection has two links, ``upstream`` (client to server) and
``downstream`` (server to client), as in Toxiproxy. A link reads chunks from
its source socket and writes them to its sink socket.

**The fast path.** Every store operation of a knell run crosses this proxy,
almost always with no toxic on the link. Then a chunk goes from the source
protocol's ``data_received`` straight into the sink transport's ``write``:
no task, no queue, no copy, no per-byte work, and TCP back-pressure is
passed on by pausing the source while the sink's buffer is full. Only a
link with stages (or one still draining what its last stage held) takes the
slow path: chunks wait in a queue that one task per link walks through the
stages, and the source is paused once a megabyte is queued, so a slow toxic
throttles the sender instead of filling memory.

Toxics can come and go while the link carries data; chunks keep their order
across the switch, because the fast path is taken only when the queue is
empty and no chunk is inside the pipeline.

Half-closes pass through: an EOF from the source travels through the
stages (``slow_close`` delays it) and becomes ``write_eof`` on the sink; the
connection closes when both directions have ended.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Protocol

from knell.proxy.toxics import Chunk, Stage, Toxic

__all__ = ["Carrier", "Link", "Socket"]

log = logging.getLogger("knell.proxy")

PAUSE_QUEUED = 1 << 20
RESUME_QUEUED = 1 << 18
_EOF = None


class Socket(Protocol):
    """What a link needs of the sockets it joins (a connection's
    :class:`~knell.proxy.connection.Side`): the connection builds its links,
    so a link knows its ends by what it does with them, not by their class."""

    @property
    def transport(self) -> asyncio.Transport | None: ...

    def write(self, data: bytes | memoryview) -> None: ...

    def set_reading(self, on: bool) -> None: ...


class _Named(Protocol):
    @property
    def name(self) -> str: ...


class Carrier(Protocol):
    """What a link needs of the connection it is one direction of
    (:class:`~knell.proxy.connection.Connection`)."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    @property
    def closed(self) -> bool: ...

    @property
    def proxy(self) -> _Named: ...

    def close(self, *, reset: bool = False) -> None: ...

    def link_ended(self, link: Link) -> None: ...


class Link:
    """One direction of a connection: source side -> stages -> sink side."""

    def __init__(
        self, conn: Carrier, direction: str, source: Socket, sink: Socket, toxics: list[Toxic]
    ) -> None:
        self.conn = conn
        self.loop = conn.loop
        self.direction = direction
        self.source = source
        self.sink = sink
        self.stages: list[Stage] = []
        self.fast = True
        self.eof_sent = False
        self._queue: deque[Chunk | None] = deque()
        self._queued = 0
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Future[None] | None = None
        self._sink_ready: asyncio.Future[None] | None = None
        self._sink_full = False
        self._queue_full = False
        for toxic in toxics:
            self.add(toxic)

    # -- toxics ---------------------------------------------------------
    def add(self, toxic: Toxic) -> None:
        self.stages.append(Stage(toxic, self))
        self.fast = False

    def update(self, toxic: Toxic) -> None:
        for stage in self.stages:
            if stage.toxic is toxic:
                stage.interrupt()
                stage.roll()

    def remove(self, toxic: Toxic) -> None:
        for stage in list(self.stages):
            if stage.toxic is toxic:
                self.stages.remove(stage)
                stage.remove()
        if self._task is None and not self._queue and not self.stages:
            self.fast = True
        self._poke()

    def close_connection(self, *, reset: bool = False) -> None:
        self.conn.close(reset=reset)

    # -- data in --------------------------------------------------------
    def feed(self, data: bytes) -> None:
        """A chunk from the source socket."""
        if self.fast:
            self.sink.write(data)
            return
        self._queue.append(Chunk(data, self.loop.time()))
        self._queued += len(data)
        if self._queued >= PAUSE_QUEUED and not self._queue_full:
            self._queue_full = True
            self._update_reading()
        self._poke()

    def feed_eof(self) -> None:
        """The source half-closed."""
        if self.fast:
            self._send_eof()
            return
        self._queue.append(_EOF)
        self._poke()

    def stop(self) -> None:
        """The connection is closing: drop the queue, stop the pipeline."""
        for stage in self.stages:
            stage.removed = True
            stage.interrupt()
            stage.stop_timer()
        self._queue.clear()
        if self._task is not None:
            self._task.cancel()
            self._task = None

    # -- flow control ---------------------------------------------------
    def sink_paused(self) -> None:
        self._sink_full = True
        self._update_reading()

    def sink_resumed(self) -> None:
        self._sink_full = False
        if self._sink_ready is not None and not self._sink_ready.done():
            self._sink_ready.set_result(None)
        self._update_reading()

    def _update_reading(self) -> None:
        self.source.set_reading(not (self._sink_full or self._queue_full))

    # -- the slow path --------------------------------------------------
    def _poke(self) -> None:
        if self._task is None:
            if self._queue or self.stages:
                self._task = self.loop.create_task(self._run())
        elif self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    async def _run(self) -> None:
        try:
            await self._pipeline()
        except asyncio.CancelledError:
            raise
        except Exception:  # a toxic failed: the connection cannot be trusted
            name = self.conn.proxy.name
            log.exception("proxy %s: %s link failed; resetting", name, self.direction)
            self._task = None
            self.conn.close(reset=True)

    async def _pipeline(self) -> None:
        queue = self._queue
        while True:
            if not queue:
                if not self.stages:
                    self.fast = True
                    self._task = None
                    return
                self._wake = self.loop.create_future()
                await self._wake
                self._wake = None
                continue
            item = queue.popleft()
            stages = tuple(self.stages)
            if item is _EOF:
                await self._push_eof(stages, 0)
                continue
            self._queued -= len(item.data)
            if self._queue_full and self._queued <= RESUME_QUEUED:
                self._queue_full = False
                self._update_reading()
            await self._push(stages, 0, item)

    async def _push(self, stages: tuple[Stage, ...], index: int, chunk: Chunk) -> None:
        while index < len(stages) and not stages[index].active:
            index += 1
        if index == len(stages):
            await self._write(chunk)
            return
        nxt = index + 1

        async def emit(out: Chunk) -> None:
            await self._push(stages, nxt, out)

        stage = stages[index]
        await stage.toxic.toxic_type.chunk(stage, chunk, emit)

    async def _push_eof(self, stages: tuple[Stage, ...], index: int) -> None:
        while index < len(stages) and not stages[index].active:
            index += 1
        if index == len(stages):
            self._send_eof()
            return
        nxt = index + 1

        async def emit_eof() -> None:
            await self._push_eof(stages, nxt)

        stage = stages[index]
        await stage.toxic.toxic_type.eof(stage, emit_eof)

    async def _write(self, chunk: Chunk) -> None:
        if self.conn.closed:
            return
        self.sink.write(chunk.data)
        while self._sink_full and not self.conn.closed:
            self._sink_ready = self.loop.create_future()
            await self._sink_ready
            self._sink_ready = None

    def _send_eof(self) -> None:
        if not self.eof_sent:
            self.eof_sent = True
            self.conn.link_ended(self)
