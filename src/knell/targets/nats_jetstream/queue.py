"""The queue contract on JetStream (``nats-jetstream-queue``), as a careful
nats-py user writes it.

A queue channel is the channel's ordinary stream (the one :mod:`.session`
posts to: limits retention, one subject), read by one shared durable pull
consumer, ``workers``, with explicit acks. Not a work-queue stream: a post
may come before ``declare_queue``, and a stream's retention cannot change
once it exists. The mapping:

======================  ====================================================
contract                JetStream
======================  ====================================================
``post``                a publish waiting for the PubAck (the stream
                        sequence is the seq; the key is the ``Nats-Msg-Id``)
``declare_queue``       ``add_consumer`` of ``workers`` with ``MaxDeliver``
                        = ``max_deliveries`` (an existing consumer is kept:
                        its ``MaxDeliver`` is what the call returns), and
                        the dead-letter stream
``claim``               a pull of one message (``fetch(1)``); the delivery
                        count is the message's ``num_delivered``
lease                   the consumer's ``AckWait``, set to the claim's
                        ``lease_s`` (an update of the consumer when it
                        differs)
``renew``               ``+WPI`` (work in progress: the server restarts the
                        delivery's AckWait)
``done``                ``+ACK``, confirmed by the server (double ack)
``release``             ``-NAK``: redelivered at once
dead letter             the server's ``MAX_DELIVERIES`` advisory for the
                        consumer, captured by a stream of its own
                        (``<prefix>-dead_<channel hex>``); ``dead`` reads it
                        and the message it names from the channel's stream
======================  ====================================================

A claim's lease lives as the ``Msg`` the pull returned, held by the bus
that pulled it: ``renew``, ``done`` and ``release`` answer through that
message's reply subject, and only the consumer that claimed it in this
process can name it (:class:`~knell.buses.contract.LeaseLost` otherwise,
nothing sent). That is how a nats-py user holds a message; it is not a
lease the server checks.

What JetStream cannot keep, and this driver therefore does not:

* **The lease is the consumer's, not the claim's.** ``AckWait`` is a
  setting of the consumer, so every delivery of the queue has the same
  lease: the one the latest claim with a different ``lease_s`` set.
  ``renew`` cannot choose its length (``+WPI`` restarts the AckWait).
  Every claimer of a queue must use one lease; knell's scenarios do.
* **No fencing of a stale holder.** The server takes a ``+ACK``, ``+WPI``
  or ``-NAK`` on the ack subject of any earlier delivery of a message that
  is still pending, whoever it has been redelivered to since: a holder
  whose lease lapsed still ends the message (``done``), extends the new
  holder's lease (``renew``) or requeues it under them (``release``).
  ``LeaseLost`` is raised only for what this process never claimed or
  already finished. The queue contract's ``lease-holder`` check reports
  it.
* **A dead letter is an advisory, and late.** JetStream does not move a
  message that used up ``MaxDeliver``: it stops delivering it and
  publishes the ``MAX_DELIVERIES`` advisory when it would have redelivered
  it, so ``dead`` lists it only from then (not at the lapse, nor at the
  ``-NAK`` of the last delivery). The advisory is a core NATS publish: one
  emitted while the dead-letter stream did not exist (or the server was
  down) is gone, and the message is then neither claimable nor listed.
* **A lapse is noticed late.** The server redelivers a lapsed delivery on
  its own timer, not at the next pull: measured here, up to one AckWait
  after the lease (4 of 8 deliveries with a 0.2 s lease came back about
  0.2 s late), while newer messages are delivered. ``declare_queue``
  says so: its ``sweep_interval`` is the consumer's AckWait (the contract
  suite's "declare" row, which expects 0, is an expected failure).
* **A pull can be answered after its claim gave up.** A claim waits
  ``poll_interval`` for its pull; the server may deliver just after. The
  driver then drops the pull's subscription, so that delivery is pending
  to no one until its AckWait lapses (a claimable message passed over
  meanwhile), rather than handed to a later claim with its AckWait partly
  spent (two live leases).
* **Idempotency is finite** (the stream's duplicate window), as for
  broadcast (:mod:`.bus`).
* **No channel kinds.** The target implements the queue contract only.

Failures: :mod:`.errors` (an API error is definite, a timeout unknown).

URL: the run's ``nats://host:port?prefix=..&op_timeout=..`` store URL;
``max_deliveries`` (default 5) is the limit of a queue claimed before it
was declared; ``ack_wait`` the AckWait a queue's consumer is made with
before a claim sets it (default 1 s; NATS ships 30 s), hence the
``sweep_interval`` a declaration before the first claim reports; ``poll_interval`` how long a claim
waits for a message before answering that none is claimable.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass

import nats.errors
import nats.js.errors
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    ConsumerInfo,
    DeliverPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)

from knell.buses.contract import (
    QUEUE,
    Claim,
    DeadLetter,
    DefiniteError,
    LeaseLost,
    QueueInfo,
)
from knell.buses.leases import (
    DEFAULT_MAX_DELIVERIES,
    check_lease,
    check_max_deliveries,
    message_id,
    split_id,
)
from knell.targets.nats_jetstream.names import from_header
from knell.targets.nats_jetstream.session import SENDER, JetStreamSession, driver_options

__all__ = ["ADVISORY", "CONSUMER", "JetStreamQueue", "connect"]

CONSUMER = "workers"
"""The one durable consumer every claimer of a queue pulls from."""

ADVISORY = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES"
"""The subject prefix of the server's max-deliveries advisories."""

_OPTIONS = ("poll_interval", "op_timeout", "duplicate_window", "ack_wait", "max_deliveries")


@dataclass
class _Held:
    """A claim of this process: the delivery and who claimed it."""

    consumer: str
    msg: Msg
    channel: str


class JetStreamQueue(JetStreamSession):
    """A :class:`~knell.buses.contract.QueueBus` on one JetStream durable
    consumer per channel (see the module docstring)."""

    contracts = frozenset({QUEUE})

    def __init__(
        self,
        server: str,
        *,
        prefix: str = "knell",
        poll_interval: float = 0.1,
        op_timeout: float = 5.0,
        duplicate_window: float = 120.0,
        ack_wait: float = 1.0,
        max_deliveries: int = DEFAULT_MAX_DELIVERIES,
    ) -> None:
        super().__init__(
            server,
            prefix=prefix,
            poll_interval=poll_interval,
            op_timeout=op_timeout,
            duplicate_window=duplicate_window,
        )
        self.ack_wait = ack_wait
        self.max_deliveries = check_max_deliveries(max_deliveries)
        self._consumers: dict[str, ConsumerInfo] = {}
        """The queue consumer per channel, as last seen (its MaxDeliver
        never changes; its AckWait as this bus last set it)."""
        self._pulls: dict[str, JetStreamContext.PullSubscription] = {}
        self._held: dict[str, _Held] = {}

    # -- names --------------------------------------------------------------

    def dead_stream(self, channel: str) -> str:
        return f"{self.names.prefix}-dead_{channel.encode().hex()}"

    def _advisories(self, channel: str) -> str:
        return f"{ADVISORY}.{self.names.stream(channel)}.{CONSUMER}"

    # -- the contract -------------------------------------------------------

    def declare_queue(self, channel: str, max_deliveries: int) -> QueueInfo:
        check_max_deliveries(max_deliveries)

        async def run(js: JetStreamContext) -> QueueInfo:
            info = await self._declare(js, channel, max_deliveries)
            # A lapsed delivery may come back up to one AckWait late: the
            # server's sweep interval (module docstring).
            sweep = float(info.config.ack_wait or self.ack_wait)
            return QueueInfo(channel, int(info.config.max_deliver or 0), sweep)

        return self._call(f"declare queue {channel!r}", run)

    def claim(self, channel: str, consumer: str, lease_s: float) -> Claim | None:
        check_lease(lease_s)

        async def run(js: JetStreamContext) -> Claim | None:
            info = await self._declare(js, channel, self.max_deliveries)
            if info.config.ack_wait != lease_s:
                info = await self._set_lease(js, channel, info, lease_s)
            pull = self._pulls.get(channel)
            if pull is None:
                pull = await js.pull_subscribe_bind(
                    durable=CONSUMER, stream=self.names.stream(channel)
                )
                self._pulls[channel] = pull
            try:
                [msg] = await pull.fetch(1, timeout=self.poll_interval)
            except Exception as exc:
                # The pull may still be answered: a delivery that arrives
                # after the fetch gave up would wait in this subscription
                # and be handed to a later claim with its AckWait partly
                # spent. So the subscription goes with the pull; such a
                # delivery is pending to nobody and comes back after AckWait.
                self._pulls.pop(channel, None)
                await _unsubscribe(pull)
                if isinstance(exc, nats.errors.TimeoutError):
                    return None
                raise
            seq = int(msg.metadata.sequence.stream)
            id = message_id(channel, seq)
            self._held[id] = _Held(consumer, msg, channel)
            return self._claim(channel, consumer, msg, lease_s)

        return self._call(f"claim from {channel!r} for {consumer!r}", run)

    def renew(self, id: str, consumer: str, lease_s: float) -> Claim:
        check_lease(lease_s)
        held = self._holding(id, consumer, "renew")

        async def run(js: JetStreamContext) -> Claim:
            await held.msg.in_progress()
            await self._flush()
            info = self._consumers.get(held.channel)
            lease = lease_s if info is None else float(info.config.ack_wait or lease_s)
            return self._claim(held.channel, consumer, held.msg, lease)

        return self._call(f"renew {id!r} for {consumer!r}", run)

    def done(self, id: str, consumer: str) -> None:
        held = self._holding(id, consumer, "done")

        async def run(js: JetStreamContext) -> None:
            await held.msg.ack_sync(timeout=self.op_timeout)
            self._held.pop(id, None)

        self._call(f"done {id!r} for {consumer!r}", run)

    def release(self, id: str, consumer: str) -> None:
        held = self._holding(id, consumer, "release")

        async def run(js: JetStreamContext) -> None:
            await held.msg.nak()
            await self._flush()
            self._held.pop(id, None)

        self._call(f"release {id!r} for {consumer!r}", run)

    def dead(self, channel: str, after: int = 0, limit: int = 100) -> list[DeadLetter]:
        if limit <= 0:
            raise DefiniteError(f"dead limit must be > 0, got {limit}")

        async def run(js: JetStreamContext) -> list[DeadLetter]:
            dead = self.dead_stream(channel)
            last = await self._last_seq(js, dead)
            letters: dict[int, DeadLetter] = {}
            for n in range(1, last + 1):
                raw = await js.get_msg(dead, n)
                advisory = json.loads(raw.data or b"{}")
                seq = int(advisory.get("stream_seq", 0))
                if seq <= after or seq in letters:
                    continue
                msg = await self._read(js, channel, self.names.stream(channel), seq)
                letters[seq] = DeadLetter(
                    message_id(channel, seq),
                    channel,
                    seq,
                    msg.body,
                    msg.sender,
                    int(advisory.get("deliveries", 0)),
                    _unix(str(advisory.get("timestamp", ""))),
                )
            return [letters[s] for s in sorted(letters)[:limit]]

        return self._call(f"dead letters of {channel!r}", run)

    # -- helpers ------------------------------------------------------------

    def _holding(self, id: str, consumer: str, what: str) -> _Held:
        """This process's claim of ``id`` by ``consumer``, or ``LeaseLost``."""
        split_id(id)
        held = self._held.get(id)
        if held is None:
            raise LeaseLost(f"{what} {id}: not a delivery this consumer holds (done or never)")
        if held.consumer != consumer:
            raise LeaseLost(f"{what} {id}: claimed by {held.consumer!r}, not {consumer!r}")
        return held

    async def _flush(self) -> None:
        """Wait until the server has read what was published (``+WPI`` and
        ``-NAK`` have no reply)."""
        assert self._nc is not None
        await self._nc.flush(timeout=max(1, round(self.op_timeout)))

    async def _declare(
        self, js: JetStreamContext, channel: str, max_deliveries: int
    ) -> ConsumerInfo:
        """The queue's consumer, made (with its dead-letter stream) if absent;
        an existing one is kept as it is."""
        known = self._consumers.get(channel)
        if known is not None:
            return known
        stream = await self._stream(js, channel)
        await js.add_stream(
            StreamConfig(
                name=self.dead_stream(channel),
                description=f"max-deliveries advisories of {channel}",
                subjects=[self._advisories(channel)],
                retention=RetentionPolicy.LIMITS,
                storage=StorageType.FILE,
                num_replicas=1,
            )
        )
        info: ConsumerInfo
        try:
            info = await js.consumer_info(stream, CONSUMER)
        except nats.js.errors.NotFoundError:
            config = ConsumerConfig(
                durable_name=CONSUMER,
                ack_policy=AckPolicy.EXPLICIT,
                deliver_policy=DeliverPolicy.ALL,
                ack_wait=self.ack_wait,
                max_deliver=max_deliveries,
                max_ack_pending=-1,
            )
            try:
                info = await js.add_consumer(stream, config)
            except nats.js.errors.BadRequestError:
                # Made meanwhile by another process with other settings.
                info = await js.consumer_info(stream, CONSUMER)
        self._consumers[channel] = info
        return info

    async def _set_lease(
        self, js: JetStreamContext, channel: str, info: ConsumerInfo, lease_s: float
    ) -> ConsumerInfo:
        """Update the consumer's AckWait to ``lease_s`` (its other settings kept)."""
        config = info.config
        config.ack_wait = lease_s
        updated = await js.add_consumer(self.names.stream(channel), config)
        self._consumers[channel] = updated
        return updated

    def _claim(self, channel: str, consumer: str, msg: Msg, lease_s: float) -> Claim:
        seq = int(msg.metadata.sequence.stream)
        headers = msg.headers or {}
        return Claim(
            message_id(channel, seq),
            channel,
            seq,
            (msg.data or b"").decode(),
            from_header(str(headers.get(SENDER, ""))),
            consumer,
            int(msg.metadata.num_delivered),
            time.time() + lease_s,
        )


async def _unsubscribe(pull: JetStreamContext.PullSubscription) -> None:
    """Drop a pull subscription; a connection already gone drops it anyway."""
    with contextlib.suppress(Exception):
        await pull.unsubscribe()


def _unix(stamp: str) -> float:
    """An advisory's RFC 3339 timestamp (nanoseconds) as Unix time; 0 if absent."""
    from datetime import datetime

    if not stamp:
        return 0.0
    head, _, frac = stamp.rstrip("Z").partition(".")
    whole = datetime.fromisoformat(head + "+00:00").timestamp()
    return whole + (float("0." + frac.split("+")[0].split("-")[0]) if frac else 0.0)


def connect(url: str) -> JetStreamQueue:
    """A :class:`JetStreamQueue` from the run's ``nats://`` URL (options: the
    module docstring). A bad URL is a ``ValueError`` naming it."""
    server, prefix, numbers = driver_options(url, _OPTIONS)
    limit = numbers.pop("max_deliveries", DEFAULT_MAX_DELIVERIES)
    if limit != int(limit):
        raise ValueError(f"nats URL option max_deliveries = {limit!r}: must be an integer")
    return JetStreamQueue(server, prefix=prefix, max_deliveries=int(limit), **numbers)
