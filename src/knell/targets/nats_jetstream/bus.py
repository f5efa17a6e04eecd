"""The broadcast contract on JetStream, as a careful nats-py user writes it.

The mapping, promise by promise:

* **a channel is a stream** (``<prefix>_<hex>``, one subject, file
  storage, one replica, limits retention: nothing is ever removed), so
  JetStream's stream sequence is the channel's dense ``seq``;
* **post** is a JetStream publish that waits for the server's PubAck; the
  sender and the idempotency key travel as headers; the key is also the
  ``Nats-Msg-Id``, so a repeated key within the stream's **duplicate
  window** is answered with the original's seq (``duplicate: true``) and
  the original is read back;
* **a handle is a durable pull consumer** on each stream it subscribed to
  (``AckAll``), made with deliver policy ``new`` (join at head) or ``all``
  (at start); subscribing again finds the consumer and changes nothing;
* **the cursor is the consumer's ack floor**; ``ack(up_to)`` pulls from
  the consumer until the delivery of ``up_to`` arrives and acknowledges
  it with a double ack (``ack_sync``: the server confirms), which under
  ``AckAll`` acknowledges everything below too;
* **fetch is a peek**: it reads the stream by sequence (``STREAM.MSG.GET``)
  and never touches the consumer;
* **wait** polls: it lists the streams whose consumer is the handle's,
  rings at once for a message above the ack floor by someone else, then
  for the first new one.

Promises JetStream cannot keep, and what follows:

* **idempotency is finite**: the duplicate window (two minutes unless the
  URL's ``duplicate_window`` says otherwise) bounds it; a post retried
  after the window appends a second copy. A retry within the window
  after a server restart is still caught (the window is rebuilt from the
  stored messages);
* **ack moves by deliveries**: a consumer can only acknowledge what it was
  delivered. A worker killed between the pull and the ack (or whose pull's
  reply a partition held) leaves those messages pending, and the next
  ``ack`` at or below them, by any process of the handle, waits for their
  redelivery: ``ack_wait``, half of ``op_timeout`` up to 2 s by default
  here (30 s as NATS ships it); an ack that cannot get them within its
  bound is unknown, not refused. JetStream 2.14's consumer reset (ADR-60)
  could set the floor directly, but it moves the floor either way: two
  acks racing would need a read-then-reset, and the later reset could
  move a cursor back. Acknowledging a delivery under ``AckAll`` is the
  only forward-only move the server makes itself;
* **an ack is durable only as the consumer's state is**: JetStream writes
  a consumer's ack floor to its own file on the same ``sync_interval`` as
  messages.

Definite and unknown failures: :mod:`.errors`. The event loop:
:mod:`.loop`.
"""

from __future__ import annotations

import asyncio
import time

import nats.errors
import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, ConsumerInfo, DeliverPolicy

from knell.buses.contract import (
    BROADCAST,
    AckBeyondHead,
    DefiniteError,
    JoinAt,
    Message,
    NotSubscribed,
    Wake,
)
from knell.targets.nats_jetstream.session import JetStreamSession, driver_options

__all__ = ["JetStreamBus", "connect"]

_OPTIONS = ("poll_interval", "op_timeout", "ack_wait", "duplicate_window")


class JetStreamBus(JetStreamSession):
    """A broadcast bus on a NATS JetStream server (see the module docstring)."""

    contracts = frozenset({BROADCAST})

    def __init__(
        self,
        server: str,
        *,
        prefix: str = "knell",
        poll_interval: float = 0.1,
        op_timeout: float = 5.0,
        ack_wait: float | None = None,
        duplicate_window: float = 120.0,
    ) -> None:
        super().__init__(
            server,
            prefix=prefix,
            poll_interval=poll_interval,
            op_timeout=op_timeout,
            duplicate_window=duplicate_window,
        )
        self.ack_wait = ack_wait if ack_wait is not None else max(0.2, min(2.0, op_timeout / 2))
        """How long a delivery stays pending before JetStream redelivers it.
        Short, and at most half an operation's bound, because an ``ack``
        whose message was delivered to a puller that died (or whose
        pull's reply was cut) can only wait for the redelivery."""
        self._pulls: dict[tuple[str, str], JetStreamContext.PullSubscription] = {}

    # -- broadcast ------------------------------------------------------------

    def subscribe(self, handle: str, channel: str, at: JoinAt = "head") -> int:
        if at not in ("head", "start"):
            raise DefiniteError(f"subscribe at={at!r}: must be 'head' or 'start'")

        async def run(js: JetStreamContext) -> int:
            stream = await self._stream(js, channel)
            durable = self.names.consumer(handle)
            try:
                return _acked(await js.consumer_info(stream, durable))
            except nats.js.errors.NotFoundError:
                pass
            config = ConsumerConfig(
                durable_name=durable,
                ack_policy=AckPolicy.ALL,
                deliver_policy=DeliverPolicy.NEW if at == "head" else DeliverPolicy.ALL,
                ack_wait=self.ack_wait,
                max_ack_pending=-1,
            )
            try:
                info = await js.add_consumer(stream, config)
            except nats.js.errors.BadRequestError:
                # Made meanwhile by another process with the same handle.
                info = await js.consumer_info(stream, durable)
            return _acked(info)

        return self._call(f"subscribe {handle!r} to {channel!r}", run)

    def fetch(
        self, handle: str, channel: str, after: int | None = None, limit: int = 100
    ) -> list[Message]:
        if limit <= 0:
            raise DefiniteError(f"fetch limit must be > 0, got {limit}")

        async def run(js: JetStreamContext) -> list[Message]:
            stream = self.names.stream(channel)
            start = await self._floor(js, handle, channel) if after is None else after
            head = await self._last_seq(js, stream)
            seqs = range(start + 1, min(head, start + limit) + 1)
            return list(await asyncio.gather(*(self._read(js, channel, stream, s) for s in seqs)))

        return self._call(f"fetch {channel!r} for {handle!r}", run)

    def ack(self, handle: str, channel: str, up_to: int) -> int:
        async def run(js: JetStreamContext) -> int:
            stream = self.names.stream(channel)
            floor = await self._floor(js, handle, channel)
            if up_to <= floor:
                return floor
            head = await self._last_seq(js, stream)
            if up_to > head:
                raise AckBeyondHead(f"ack {up_to} beyond head {head} of {channel!r}")
            await self._deliver_and_ack(js, handle, stream, up_to)
            return up_to

        return self._call(f"ack {channel!r} up to {up_to} for {handle!r}", run)

    def cursor(self, handle: str, channel: str) -> int:
        async def run(js: JetStreamContext) -> int:
            return await self._floor(js, handle, channel)

        return self._call(f"cursor of {handle!r} on {channel!r}", run)

    def head(self, channel: str) -> int:
        async def run(js: JetStreamContext) -> int:
            return await self._last_seq(js, self.names.stream(channel))

        return self._call(f"head of {channel!r}", run)

    def wait(self, handle: str, timeout: float) -> Wake | None:
        deadline = time.monotonic() + timeout
        armed = self._call(f"arm the doorbell of {handle!r}", lambda js: self._arm(js, handle))
        if isinstance(armed, Wake):
            return armed
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            time.sleep(min(self.poll_interval, remaining))
            ring = self._call(
                f"watch the doorbell of {handle!r}", lambda js: self._rings(js, handle, armed)
            )
            if ring is not None:
                return ring

    # -- what the operations share -------------------------------------------

    async def _floor(self, js: JetStreamContext, handle: str, channel: str) -> int:
        """The handle's cursor: its consumer's ack floor."""
        try:
            info = await js.consumer_info(self.names.stream(channel), self.names.consumer(handle))
        except nats.js.errors.NotFoundError:
            raise NotSubscribed(f"{handle!r} is not subscribed to {channel!r}") from None
        return _acked(info)

    async def _deliver_and_ack(
        self, js: JetStreamContext, handle: str, stream: str, up_to: int
    ) -> None:
        """Pull until the delivery of ``up_to`` arrives, then double-ack it
        (AckAll: everything below goes with it). Deliveries above it are
        left unacknowledged: they come again after ``ack_wait``."""
        durable = self.names.consumer(handle)
        pull = self._pulls.get((stream, durable))
        if pull is None:
            pull = await js.pull_subscribe_bind(durable=durable, stream=stream)
            self._pulls[(stream, durable)] = pull
        deadline = time.monotonic() + self.op_timeout
        while True:
            info = await js.consumer_info(stream, durable)
            if _acked(info) >= up_to:
                return  # acknowledged meanwhile (by another incarnation of the handle)
            delivered = 0 if info.delivered is None else int(info.delivered.stream_seq)
            batch = max(1, min(256, up_to - delivered))
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"message {up_to} was not delivered again in time")
            try:
                msgs = await pull.fetch(batch, timeout=min(remaining, self.ack_wait + 0.5))
            except nats.errors.TimeoutError:
                continue
            for msg in msgs:
                if msg.metadata.sequence.stream == up_to:
                    await msg.ack_sync(timeout=self.op_timeout)
                    return

    async def _channels(self, js: JetStreamContext, handle: str) -> dict[str, str]:
        """The handle's channels (stream -> channel): this run's streams
        that have the handle's consumer."""
        durable = self.names.consumer(handle)
        out: dict[str, str] = {}
        for info in await js.streams_info():
            channel = self.names.channel_of(info.config.name or "")
            if channel is None:
                continue
            try:
                await js.consumer_info(info.config.name or "", durable)
            except nats.js.errors.NotFoundError:
                continue
            out[info.config.name or ""] = channel
        return out

    async def _arm(self, js: JetStreamContext, handle: str) -> Wake | dict[str, tuple[str, int]]:
        """A backlog ring (a message above the handle's floor by someone
        else), or the head of each of its channels, to watch."""
        armed: dict[str, tuple[str, int]] = {}
        for stream, channel in (await self._channels(js, handle)).items():
            floor = await self._floor(js, handle, channel)
            head = await self._last_seq(js, stream)
            found = await self._first_by_other(js, handle, channel, stream, floor, head)
            if found is not None:
                return Wake(channel, found.seq, found.sender, "backlog")
            armed[stream] = (channel, head)
        return armed

    async def _rings(
        self, js: JetStreamContext, handle: str, armed: dict[str, tuple[str, int]]
    ) -> Wake | None:
        for stream, (channel, head) in armed.items():
            now = await self._last_seq(js, stream)
            found = await self._first_by_other(js, handle, channel, stream, head, now)
            if found is not None:
                return Wake(channel, found.seq, found.sender, "post")
        return None

    async def _first_by_other(
        self, js: JetStreamContext, handle: str, channel: str, stream: str, after: int, to: int
    ) -> Message | None:
        for seq in range(after + 1, to + 1):
            msg = await self._read(js, channel, stream, seq)
            if msg.sender != handle:
                return msg
        return None


def _acked(info: ConsumerInfo) -> int:
    """A consumer's ack floor: the stream seq below which all is acked."""
    return 0 if info.ack_floor is None else int(info.ack_floor.stream_seq)


def connect(url: str) -> JetStreamBus:
    """A :class:`JetStreamBus` from ``nats://host:port?prefix=..&poll_interval=..
    &op_timeout=..&ack_wait=..&duplicate_window=..`` (seconds)."""
    server, prefix, numbers = driver_options(url, _OPTIONS)
    return JetStreamBus(server, prefix=prefix, **numbers)
