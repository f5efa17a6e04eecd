"""The queue contract over a Redis Stream and one consumer group (redis-py only).

A queue channel is one stream, ``<prefix>stream:<channel>``, read by one
consumer group, ``workers``; a knell consumer (``claimer-2.3``) is a
consumer of that group. Each verb is the command a careful Streams user
writes, and the mapping is all this module is:

======================  ====================================================
contract                Redis Streams
======================  ====================================================
``post``                ``XADD stream 0-* b <body> s <sender>``: Redis picks
                        the entry's sequence number (last + 1, atomically),
                        so the channel's seq *is* the entry id ``0-<seq>``
``declare_queue``       ``XGROUP CREATE stream workers 0 MKSTREAM`` (an
                        existing group is kept); ``max_deliveries`` is not a
                        Streams setting: the first declaration is kept with
                        ``HSETNX <prefix>queues <channel> <max>``
``claim``               first ``XAUTOCLAIM stream workers <consumer>
                        <lease_ms> <cursor> COUNT 1`` (the oldest pending
                        entry idle for at least the lease: a lapsed lease),
                        then ``XREADGROUP ... COUNT 1 STREAMS stream >`` (the
                        oldest never delivered); the delivery count is the
                        group's own (``XPENDING``)
lease expiry            the entry's idle time in the group reaching
                        ``min-idle-time`` (set by every delivery, on the
                        server's clock)
``renew``               ``XPENDING`` (is the caller the owner?), then
                        ``XCLAIM ... 0 <id> JUSTID``: resets the idle time
                        without counting a delivery
``done``                ``XACK stream workers <id>``
``release``             ``XPENDING`` (owner?), then ``XCLAIM ... IDLE
                        <ten years> JUSTID``: the entry stays pending but
                        is at once idle past any lease, so the next claim
                        takes it; with its deliveries used up, dead instead
dead letter             an entry ``XAUTOCLAIM`` hands over with more than
                        ``max_deliveries`` deliveries (so it lapsed on its
                        last) is copied to ``<prefix>dead:<channel>`` and
                        acknowledged, in one ``MULTI``/``EXEC``
``dead``                ``XRANGE`` of the dead-letter stream, by seq
======================  ====================================================

What Streams cannot promise, and this driver therefore does not:

* **No fencing of a stale consumer's XACK.** ``XACK`` names no consumer:
  it removes the entry from the group's pending list whoever owns it. A
  consumer whose lease lapsed (paused, slow) and whose entry another
  consumer has since claimed still acknowledges it, and so may any other
  consumer. ``done`` is refused (``LeaseLost``) only when the entry is not
  pending at all (already acknowledged or dead). The queue contract's
  ``lease-holder`` check reports it (``stale-holder-accepted``); the client
  pattern that avoids it, the holder checked inside a Lua script, is
  :mod:`knell.targets.redis_streams_fenced`.
* **A lapse is not a state.** An entry whose idle time passed the lease is
  still its owner's until another consumer's ``XAUTOCLAIM`` moves it:
  ``renew`` and ``release`` by the lapsed owner are accepted until then.
* **Ownership checks are not atomic with their action.** ``XCLAIM`` takes
  the entry for the caller whoever owns it, so ``renew`` and ``release``
  read the owner with ``XPENDING`` first; a claim by another consumer
  between the two reads is overwritten (a narrow window; only a Lua script
  could close it, and that would be a driver's invention, not Streams).
* **The lease length is the reclaimer's, not the holder's.** ``XAUTOCLAIM``
  takes an entry idle longer than *its caller's* ``min-idle-time``: a
  claimer with a shorter lease takes entries from a holder with a longer
  one while that holder's lease is live. Every claimer of a group must use
  one lease; knell's scenarios for this target do.
* **No idempotent append.** ``XADD`` (Redis 7) has no idempotency key: a
  post retried after a lost reply appends a second entry. The key is kept
  in the entry (field ``k``) but nothing deduplicates on it.
* **A dead letter appears when a claim sweeps it.** An entry that lapsed on
  its last delivery stays pending until a claim's ``XAUTOCLAIM`` reaches it:
  ``dead`` lists it only from then (the final phase's claims do). A release
  of the last delivery dead-letters at once.
* **No channel kinds.** The driver implements the queue contract only; a
  stream is whatever reads it, so there is nothing to refuse a broadcast
  read of a queue with (knell never asks, since the driver declares the
  queue contract alone).

Failures: an error reply (``ResponseError``: ``NOGROUP``, ``WRONGTYPE``,
``EXECABORT``...) is definite, nothing was applied. A lost connection or a
reply not read within ``op_timeout`` is indeterminate for a write
(``post``, ``claim``, ``renew``, ``done``, ``release``, ``declare_queue``:
each changes the stream or its group) and definite for ``dead``, a read.
redis-py's retries are off: a retried ``XADD`` appends twice.

URL: the run's ``redis://host:port/db?prefix=knell:&op_timeout=5`` store URL
(``poll_interval`` is accepted and unused; ``max_deliveries`` is the default
for a queue claimed before it was declared).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any, TypeVar

import redis
from redis.backoff import NoBackoff
from redis.exceptions import RedisError, ResponseError
from redis.retry import Retry

from knell.buses._netopts import redact, split_url
from knell.buses.contract import (
    QUEUE,
    Claim,
    DeadLetter,
    DefiniteError,
    IndeterminateError,
    LeaseLost,
    Message,
    QueueInfo,
)
from knell.buses.leases import check_lease, check_max_deliveries, message_id, split_id

__all__ = ["GROUP", "RELEASE_IDLE_MS", "StreamsQueue", "connect", "open_queue"]

GROUP = "workers"
"""The one consumer group every claimer of a channel belongs to."""

RELEASE_IDLE_MS = 10 * 365 * 24 * 3600 * 1000
"""The idle time a release sets: past any lease, so the next claim takes it."""

PREFIX = re.compile(r"[A-Za-z0-9_.:{}\-]{1,64}")
"""A key prefix (no spaces or glob characters)."""

_T = TypeVar("_T")


class StreamsQueue:
    """A :class:`~knell.buses.contract.QueueBus` on Redis Streams consumer
    groups (see the module docstring for the mapping and its limits)."""

    contracts = frozenset({QUEUE})

    def __init__(
        self,
        client: redis.Redis,
        *,
        prefix: str = "knell:",
        max_deliveries: int = 5,
        display: str = "redis",
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.max_deliveries = max_deliveries
        self.display = display
        self.settings_key = f"{prefix}queues"
        self._limits: dict[str, int] = {}
        """max_deliveries per channel, once read (the first declaration
        wins, so it never changes)."""

    # -- keys ---------------------------------------------------------------

    def stream_key(self, channel: str) -> str:
        return f"{self.prefix}stream:{channel}"

    def dead_key(self, channel: str) -> str:
        return f"{self.prefix}dead:{channel}"

    # -- calls --------------------------------------------------------------

    def _call(self, what: str, write: bool, call: Callable[[], _T]) -> _T:
        """Run one redis-py call, classifying its failure (module docstring)."""
        try:
            return call()
        except ResponseError as exc:
            raise DefiniteError(f"redis-streams {what}: refused: {_one_line(exc)}") from exc
        except (RedisError, OSError) as exc:
            if write:
                raise IndeterminateError(
                    f"redis-streams {what}: outcome unknown: {_one_line(exc)}"
                ) from exc
            raise DefiniteError(f"redis-streams {what}: {_one_line(exc)}") from exc

    # -- the contract -------------------------------------------------------

    def post(
        self, channel: str, body: str, sender: str, idempotency_key: str | None = None
    ) -> Message:
        fields: dict[Any, Any] = {"b": body, "s": sender}
        if idempotency_key is not None:
            fields["k"] = idempotency_key  # kept, never deduplicated on (module docstring)
        entry = self._call(
            "post", True, lambda: self.client.xadd(self.stream_key(channel), fields, id="0-*")
        )
        return Message(channel, _seq(entry), body, sender, idempotency_key)

    def declare_queue(self, channel: str, max_deliveries: int) -> QueueInfo:
        check_max_deliveries(max_deliveries)
        return QueueInfo(channel, self._declare(channel, max_deliveries), 0.0)

    def _declare(self, channel: str, max_deliveries: int) -> int:
        """Create the group (if absent) and keep the first max_deliveries."""
        known = self._limits.get(channel)
        if known is not None:
            return known

        def create() -> None:
            try:
                self.client.xgroup_create(self.stream_key(channel), GROUP, id="0", mkstream=True)
            except ResponseError as exc:
                if not str(exc).startswith("BUSYGROUP"):
                    raise

        self._call("declare_queue", True, create)

        def settle() -> Any:
            pipe = self.client.pipeline(transaction=True)
            pipe.hsetnx(self.settings_key, channel, max_deliveries)
            pipe.hget(self.settings_key, channel)
            return pipe.execute()[1]

        limit = int(self._call("declare_queue", True, settle))
        self._limits[channel] = limit
        return limit

    def claim(self, channel: str, consumer: str, lease_s: float) -> Claim | None:
        check_lease(lease_s)
        limit = self._declare(channel, self.max_deliveries)
        lease_ms = max(1, math.ceil(lease_s * 1000))
        stream = self.stream_key(channel)
        cursor = "0-0"
        while True:
            found, now = self._autoclaim(stream, consumer, lease_ms, cursor)
            cursor = str(found[0])
            for entry_id, fields in _entries(found[1]):
                deliveries = self._deliveries(channel, entry_id)
                if deliveries == 0:
                    continue  # acknowledged since XAUTOCLAIM moved it here: not ours
                if deliveries > limit:
                    # It lapsed on its last delivery: dead, not claimed.
                    self._bury(channel, entry_id, fields, deliveries - 1)
                    continue
                return self._claim(channel, entry_id, fields, consumer, deliveries, now, lease_s)
            if cursor == "0-0":
                break
        fresh, now = self._call(
            "claim",
            True,
            lambda: self._with_time(
                lambda p: p.xreadgroup(GROUP, consumer, {stream: ">"}, count=1)
            ),
        )
        for _key, entries in fresh or []:
            for entry_id, fields in _entries(entries):
                return self._claim(channel, entry_id, fields, consumer, 1, now, lease_s)
        return None

    def renew(self, id: str, consumer: str, lease_s: float) -> Claim:
        check_lease(lease_s)
        channel, seq = split_id(id)
        deliveries = self._owned(channel, seq, consumer, "renew")
        stream, entry_id = self.stream_key(channel), f"0-{seq}"

        def touch(p: Any) -> None:
            p.xclaim(stream, GROUP, consumer, 0, [entry_id], justid=True)
            p.xrange(stream, entry_id, entry_id)

        (claimed, found), now = self._call("renew", True, lambda: self._with_time(touch, 2))
        rows = _entries(found)
        if not claimed or not rows:
            raise LeaseLost(f"renew {id}: no longer pending in group {GROUP!r}")
        return self._claim(channel, entry_id, rows[0][1], consumer, deliveries, now, lease_s)

    def done(self, id: str, consumer: str) -> None:
        channel, seq = split_id(id)
        acked = self._call(
            "done", True, lambda: self.client.xack(self.stream_key(channel), GROUP, f"0-{seq}")
        )
        if not int(acked):
            raise LeaseLost(f"done {id}: not pending in group {GROUP!r} (done or dead)")

    def release(self, id: str, consumer: str) -> None:
        channel, seq = split_id(id)
        deliveries = self._owned(channel, seq, consumer, "release")
        stream, entry_id = self.stream_key(channel), f"0-{seq}"
        if deliveries >= self._declare(channel, self.max_deliveries):
            rows = _entries(
                self._call("release", True, lambda: self.client.xrange(stream, entry_id, entry_id))
            )
            if not rows:
                raise LeaseLost(f"release {id}: the entry is gone from the stream")
            self._bury(channel, entry_id, rows[0][1], deliveries)
            return
        claimed = self._call(
            "release",
            True,
            lambda: self.client.xclaim(
                stream, GROUP, consumer, 0, [entry_id], idle=RELEASE_IDLE_MS, justid=True
            ),
        )
        if not claimed:
            raise LeaseLost(f"release {id}: no longer pending in group {GROUP!r}")

    def dead(self, channel: str, after: int = 0, limit: int = 100) -> list[DeadLetter]:
        if limit <= 0:
            raise DefiniteError(f"dead limit must be > 0, got {limit}")
        rows = _entries(
            self._call("dead", False, lambda: self.client.xrange(self.dead_key(channel)))
        )
        letters: dict[int, DeadLetter] = {}
        for dead_id, fields in rows:
            seq = int(fields["seq"])
            if seq > after and seq not in letters:  # a race may bury one twice: list it once
                letters[seq] = DeadLetter(
                    message_id(channel, seq),
                    channel,
                    seq,
                    fields.get("b", ""),
                    fields.get("s", ""),
                    int(fields["n"]),
                    int(dead_id.split("-", 1)[0]) / 1000,
                )
        return [letters[seq] for seq in sorted(letters)[:limit]]

    def close(self) -> None:
        self.client.close()

    # -- helpers ------------------------------------------------------------

    def _with_time(self, commands: Callable[[Any], Any], n: int = 1) -> tuple[Any, float]:
        """``commands`` and the server's ``TIME`` in one ``MULTI``/``EXEC``:
        the replies, and the server's clock at the moment they ran."""
        pipe = self.client.pipeline(transaction=True)
        commands(pipe)
        pipe.time()
        replies = pipe.execute()
        seconds, micros = replies[-1]
        now = int(seconds) + int(micros) / 1e6
        return (replies[0] if n == 1 else tuple(replies[:n])), now

    def _autoclaim(
        self, stream: str, consumer: str, lease_ms: int, cursor: str
    ) -> tuple[Any, float]:
        """One ``XAUTOCLAIM ... COUNT 1`` from ``cursor``, with the server's time."""

        def lapsed(p: Any) -> None:
            p.xautoclaim(stream, GROUP, consumer, lease_ms, cursor, count=1)

        return self._call("claim", True, lambda: self._with_time(lapsed))

    def _deliveries(self, channel: str, entry_id: str) -> int:
        """The group's delivery count of a pending entry (0 if not pending)."""
        rows = self._call(
            "claim",
            True,
            lambda: self.client.xpending_range(
                self.stream_key(channel), GROUP, entry_id, entry_id, 1
            ),
        )
        return int(rows[0]["times_delivered"]) if rows else 0

    def _owned(self, channel: str, seq: int, consumer: str, what: str) -> int:
        """The delivery count of an entry ``consumer`` owns; ``LeaseLost``
        if it is not pending or another consumer owns it."""
        entry_id = f"0-{seq}"
        rows = self._call(
            what,
            False,
            lambda: self.client.xpending_range(
                self.stream_key(channel), GROUP, entry_id, entry_id, 1
            ),
        )
        if not rows:
            raise LeaseLost(f"{what} {channel}/{seq}: not pending in group {GROUP!r}")
        owner = str(rows[0]["consumer"])
        if owner != consumer:
            raise LeaseLost(f"{what} {channel}/{seq}: owned by {owner!r}, not {consumer!r}")
        return int(rows[0]["times_delivered"])

    def _bury(self, channel: str, entry_id: str, fields: dict[str, str], deliveries: int) -> None:
        """Copy an entry to the dead-letter stream and acknowledge it, atomically."""
        letter: dict[Any, Any] = {
            "seq": str(_seq(entry_id)),
            "b": fields.get("b", ""),
            "s": fields.get("s", ""),
            "n": str(deliveries),
        }

        def bury() -> None:
            pipe = self.client.pipeline(transaction=True)
            pipe.xadd(self.dead_key(channel), letter)
            pipe.xack(self.stream_key(channel), GROUP, entry_id)
            pipe.execute()

        self._call("dead-letter", True, bury)

    def _claim(
        self,
        channel: str,
        entry_id: str,
        fields: dict[str, str],
        consumer: str,
        deliveries: int,
        now: float,
        lease_s: float,
    ) -> Claim:
        return Claim(
            message_id(channel, _seq(entry_id)),
            channel,
            _seq(entry_id),
            fields.get("b", ""),
            fields.get("s", ""),
            consumer,
            deliveries,
            now + lease_s,
        )


def _entries(raw: object) -> list[tuple[str, dict[str, str]]]:
    """Stream entries as redis-py parses them (``decode_responses``: text),
    typed: ``[(id, {field: value})]``; an entry without fields gets none."""
    out: list[tuple[str, dict[str, str]]] = []
    for entry_id, fields in raw or []:  # type: ignore[attr-defined]
        out.append((str(entry_id), {str(k): str(v) for k, v in (fields or {}).items()}))
    return out


def _seq(entry_id: object) -> int:
    """The seq of entry id ``0-<seq>``."""
    return int(str(entry_id).rsplit("-", 1)[1])


def _one_line(exc: BaseException) -> str:
    return " ".join((str(exc).strip() or type(exc).__name__).split())


def connect(url: str) -> StreamsQueue:
    """The driver's factory: a :class:`StreamsQueue` over the run's
    ``redis://`` store URL (knell's options taken out, see the module
    docstring). A bad URL is a ``ValueError`` naming it."""
    return open_queue(url, StreamsQueue)


_Q = TypeVar("_Q", bound=StreamsQueue)


def open_queue(url: str, cls: type[_Q]) -> _Q:
    """A ``cls`` over a ``redis://`` driver URL (see :func:`connect`)."""
    client_url, options = split_url(
        url, namespace_key="prefix", namespace_check=PREFIX, schemes=("redis", "rediss", "unix")
    )
    client = redis.Redis.from_url(
        client_url,
        socket_timeout=options.op_timeout,
        socket_connect_timeout=options.op_timeout,
        retry=Retry(NoBackoff(), 0),
        retry_on_timeout=False,
        decode_responses=True,
        health_check_interval=0,
        protocol=2,
    )
    return cls(
        client,
        prefix=options.namespace or "knell:",
        max_deliveries=options.max_deliveries,
        display=redact(url),
    )
