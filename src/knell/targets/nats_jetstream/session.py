"""What every JetStream driver shares: the connection, its loop, the
channel's stream and the post.

Both contracts on JetStream (:mod:`.bus`, broadcast; :mod:`.queue`, queue)
store a channel the same way, as one stream with one subject, and post to
it the same way, so a message's seq is the stream sequence whichever
contract reads it. A :class:`JetStreamSession` is one nats-py connection
driven from one event loop thread (:mod:`.loop`), dialled on first use.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import nats
import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import RetentionPolicy, StorageType, StreamConfig

from knell.buses.contract import DefiniteError, Message
from knell.targets.nats_jetstream.errors import classify
from knell.targets.nats_jetstream.loop import LoopThread
from knell.targets.nats_jetstream.names import Names, from_header, header_value

__all__ = ["KEY", "MSG_ID", "SENDER", "JetStreamSession", "driver_options"]

T = TypeVar("T")

SENDER = "Knell-Sender"
KEY = "Knell-Key"
MSG_ID = "Nats-Msg-Id"


class JetStreamSession:
    """One connection to a JetStream server, and the channel's stream."""

    def __init__(
        self,
        server: str,
        *,
        prefix: str = "knell",
        poll_interval: float = 0.1,
        op_timeout: float = 5.0,
        duplicate_window: float = 120.0,
    ) -> None:
        self.server = server
        self.names = Names(prefix)
        self.poll_interval = poll_interval
        self.op_timeout = op_timeout
        self.duplicate_window = duplicate_window
        self._loop = LoopThread()
        self._nc: Client | None = None
        self._js: JetStreamContext | None = None
        self._streams: set[str] = set()
        """Streams this bus made or saw (``add_stream`` once each)."""

    # -- the loop and the connection -----------------------------------------

    def _call(self, doing: str, body: Callable[[JetStreamContext], Awaitable[T]]) -> T:
        async def attempt() -> T:
            try:
                return await body(await self._connected(doing))
            except BaseException as exc:
                if isinstance(exc, asyncio.CancelledError):
                    raise
                raise classify(exc, doing) from exc

        if self._loop.loop.is_closed():
            raise DefiniteError(f"{doing}: the bus is closed")
        # The loop's bound is a backstop: each request has its own timeout.
        return self._loop.run(attempt(), 2 * self.op_timeout + 1, doing)

    async def _connected(self, doing: str) -> JetStreamContext:
        """The JetStream context, dialling on first use. Refused (definite)
        while the connection is down: a request written then would wait in
        nats-py's reconnect buffer and might reach the server long after
        the call gave up."""
        if self._nc is None:
            try:
                self._nc = await nats.connect(
                    self.server,
                    connect_timeout=self.op_timeout,
                    allow_reconnect=True,
                    max_reconnect_attempts=-1,
                    reconnect_time_wait=0.1,
                    error_cb=_quiet,
                    name="knell",
                )
            except Exception as exc:
                raise DefiniteError(f"{doing}: cannot connect to {self.server}: {exc}") from None
            self._js = self._nc.jetstream(timeout=self.op_timeout)
        if not self._nc.is_connected:
            raise DefiniteError(f"{doing}: not connected to {self.server} (nothing sent)")
        assert self._js is not None
        return self._js

    async def _stream(self, js: JetStreamContext, channel: str) -> str:
        """The channel's stream, made on first use (``add_stream`` with the
        same config is idempotent on the server)."""
        name = self.names.stream(channel)
        if name not in self._streams:
            await js.add_stream(
                StreamConfig(
                    name=name,
                    description=channel,
                    subjects=[self.names.subject(channel)],
                    retention=RetentionPolicy.LIMITS,
                    storage=StorageType.FILE,
                    num_replicas=1,
                    duplicate_window=self.duplicate_window,
                )
            )
            self._streams.add(name)
        return name

    # -- what every contract shares ------------------------------------------

    def post(
        self, channel: str, body: str, sender: str, idempotency_key: str | None = None
    ) -> Message:
        async def run(js: JetStreamContext) -> Message:
            stream = await self._stream(js, channel)
            headers = {SENDER: header_value(sender)}
            if idempotency_key is not None:
                headers[KEY] = headers[MSG_ID] = header_value(idempotency_key)
            ack = await js.publish(
                self.names.subject(channel), body.encode(), stream=stream, headers=headers
            )
            if ack.duplicate:
                return await self._read(js, channel, stream, ack.seq)
            return Message(channel, ack.seq, body, sender, idempotency_key)

        return self._call(f"post to {channel!r}", run)

    def close(self) -> None:
        """Close the connection and stop the loop; closing again does nothing."""
        if self._loop.loop.is_closed():
            return

        async def shut() -> None:
            if self._nc is not None and not self._nc.is_closed:
                await self._nc.close()

        try:
            self._loop.run(shut(), self.op_timeout + 1, "close")
        finally:
            self._loop.stop()

    async def _last_seq(self, js: JetStreamContext, stream: str) -> int:
        try:
            return int((await js.stream_info(stream)).state.last_seq)
        except nats.js.errors.NotFoundError:
            return 0

    async def _read(self, js: JetStreamContext, channel: str, stream: str, seq: int) -> Message:
        raw = await js.get_msg(stream, seq)
        headers: dict[str, Any] = dict(raw.headers or {})
        key = headers.get(KEY)
        return Message(
            channel,
            seq,
            (raw.data or b"").decode(),
            from_header(str(headers.get(SENDER, ""))),
            None if key is None else from_header(str(key)),
        )


async def _quiet(exc: Exception) -> None:
    """nats-py prints every connection error by default; the driver reports
    what matters through its calls' errors instead."""


def driver_options(url: str, numbers: tuple[str, ...]) -> tuple[str, str, dict[str, float]]:
    """(server, prefix, {option: seconds or count}) of ``nats://host:port?..``;
    ``numbers`` are the numeric options the driver accepts (``prefix``
    besides). A bad URL is a ``ValueError`` naming it."""
    from urllib.parse import parse_qs, urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.scheme != "nats":
        raise ValueError(f"expected a nats:// URL, got {url.split('?')[0]!r}")
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    unknown = sorted(set(query) - {"prefix", *numbers})
    if unknown:
        raise ValueError(f"nats URL has unknown option(s) {unknown}: {url.split('?')[0]!r}")
    values = {k: float(query[k]) for k in numbers if k in query}
    server = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
    return server, query.get("prefix", "knell"), values
