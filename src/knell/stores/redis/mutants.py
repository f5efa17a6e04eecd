"""Redis mutants: the Redis bus with one seeded bug each.

Each is a failure mode Redis *invites*: Redis makes single commands atomic
and fast, which tempts a client to compose several of them as if the
composition were atomic too, and its streams come with conveniences
(capped length, consumer groups) whose semantics are not a durable
per-handle cursor. Each subclass of :class:`~knell.stores.redis.bus.RedisBus`
overrides one method and otherwise relies on the reference's ``call`` /
``script`` (so error classification and reconnects stay the reference's).
A mutant that changes the data layout keeps its keys under a prefix of its
own (``<prefix>loose:``). The queue and role mutants break the other two
contracts (:mod:`knell.stores.redis.queue`, :mod:`knell.stores.redis.roles`)
the same way: a step the reference runs inside one script, split in two.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, ClassVar, TypeVar

from knell.buses.contract import (
    AckBeyondHead,
    Claim,
    DefiniteError,
    Delivery,
    IndeterminateError,
    Message,
)
from knell.buses.leases import check_lease
from knell.buses.mutants.registry import mutant, no_expiry
from knell.stores.redis.bus import POST, RedisBus, Script, open_redis
from knell.stores.redis.kinds import kind_script, raise_wrong_kind, to_us
from knell.stores.redis.queue import CLAIM, claim_of
from knell.stores.redis.roles import deliveries_of, receive_script

__all__ = [
    "AckGetThenSetBus",
    "AutoclaimPendingBus",
    "CappedStreamBus",
    "ClaimGetThenSetBus",
    "ConsumerGroupFetchBus",
    "LostReplyAsFailureBus",
    "SeqGetThenSetBus",
]

_M = TypeVar("_M", bound="_RedisMutant")

KILL_CONSUMERS = "redis-kill-consumers"
STORE_CRASH = "redis-store-crash-aof-always"
PARTITION = "redis-partition"


class _RedisMutant(RedisBus):
    """A Redis mutant opens from the same URL as the reference bus."""

    features: frozenset[str] = frozenset()
    """None: the expiry mutants are the SQLite bus's (:mod:`knell.buses.mutants.expiry`),
    and a mutant that writes messages its own way does not store ``expires_at``,
    so knell refuses a ttl scenario on these before anything starts."""

    suffix: ClassVar[str] = ""
    """Non-empty: the mutant's keys live under ``<prefix><suffix>:``."""

    @classmethod
    def from_url(cls: type[_M], url: str) -> _M:
        if not url.startswith(("redis://", "rediss://", "unix://", "redis+sentinel://")):
            raise ValueError(f"a Redis mutant needs a redis:// store URL, got {url!r}")
        base = open_redis(url)  # validates the URL exactly as the reference does
        base.close()
        prefix = base.prefix + (f"{cls.suffix}:" if cls.suffix else "")
        return cls(
            base.client_url,
            prefix=prefix,
            poll_interval=base.poll_interval,
            op_timeout=base.op_timeout,
            display=base.display,
            max_deliveries=base.max_deliveries,
        )


# -- seq assignment -------------------------------------------------------------


@mutant(
    "redis-seq-get-then-set",
    failure_mode="Seq read with HGET and written back with HSET from the client",
    killed_by=("no-duplicate-seq",),
    scenarios=(KILL_CONSUMERS, STORE_CRASH),
    rule="Seq assignment, the key lookup and the append run in one Lua script",
    store="redis",
)
class SeqGetThenSetBus(_RedisMutant):
    """Failure mode: the seq is read with ``HGET`` and written back with
    ``HSET`` from the client.

    ``post`` reads the channel's head, adds one in Python, writes it back,
    then appends the message (``XADD <seq>-*``: the stream's own sequence
    part keeps two entries of one seq apart, as an append-only list would).
    Each command is atomic; their composition is not: two producers read
    the same head and both append at the same seq. Proven by
    ``no-duplicate-seq``.
    """

    suffix = "loose"

    def post(
        self,
        channel: str,
        body: str,
        sender: str,
        idempotency_key: str | None = None,
        expires_at: float | None = None,
    ) -> Message:
        no_expiry(expires_at)
        log, idem = self.log_key(channel), self.idem_key(channel)
        if idempotency_key is not None:
            seq = self.call("post", True, "HGET", idem, idempotency_key)
            if seq is not None:
                entries = self.call("post", True, "XRANGE", log, f"{seq}-0", "+", "COUNT", 1)
                if entries:
                    original = self._message(channel, entries[0])
                    return replace(original, idempotency_key=idempotency_key)
        head = int(self.call("post", True, "HGET", self.heads_key, channel) or 0)
        seq = head + 1  # the bug: decided on a value another producer may be deciding on too
        self.call("post", True, "HSET", self.heads_key, channel, seq)
        fields = ["b", body, "s", sender] + (["k", idempotency_key] if idempotency_key else [])
        self.call("post", True, "XADD", log, f"{seq}-*", *fields)
        if idempotency_key is not None:
            self.call("post", True, "HSET", idem, idempotency_key, seq)
        return Message(channel, seq, body, sender, idempotency_key)


# -- cursors ----------------------------------------------------------------------


@mutant(
    "redis-ack-get-then-set",
    failure_mode="Cursor clamp done as GET-then-SET from the client",
    killed_by=("no-cursor-regression",),
    scenarios=(KILL_CONSUMERS, STORE_CRASH, "contract-tour"),
    rule="The forward-only clamp runs inside one Lua script",
    store="redis",
)
class AckGetThenSetBus(_RedisMutant):
    """Failure mode: the cursor clamp is a GET-then-SET from the client.

    ``ack`` reads the head and the cursor (``HGET``), takes ``max(cursor,
    up_to)`` in Python and writes it back (``HSET``). Sequential acks are
    forward-only, so single-client tests pass; twin consumers acking at
    once (above all when a paused store releases the acks queued behind
    it) read the same cursor and the smaller write can land last, moving
    the cursor back. Proven by ``no-cursor-regression``.
    """

    def ack(self, handle: str, channel: str, up_to: int) -> int:
        head = int(self.call("ack", True, "HGET", self.heads_key, channel) or 0)
        if up_to > head:
            raise AckBeyondHead(f"ack {up_to} is beyond head {head} of {channel!r}")
        key = self.cursors_key(handle)
        current = self.call("ack", True, "HGET", key, channel)
        if current is None:
            raise DefiniteError(f"{handle!r} is not subscribed to {channel!r}")
        acked = max(int(current), up_to)  # the bug: decided on a value already stale
        self.call("ack", True, "HSET", key, channel, acked)
        return acked


# -- reading ------------------------------------------------------------------------

_FETCH_AND_ADVANCE = Script(
    """#!lua
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then return {-1} end
local first = (tonumber(cur) + 1) .. '-0'
local entries = redis.call('XRANGE', KEYS[2], first, '+', 'COUNT', ARGV[2])
if #entries > 0 then
  local last = tonumber(string.match(entries[#entries][1], '^(%d+)'))
  redis.call('HSET', KEYS[1], ARGV[1], last)
end
return {tonumber(cur), entries}
"""
)


@mutant(
    "redis-consumer-group-fetch",
    failure_mode="Stream consumer-group read (XREADGROUP >) moves the cursor on delivery",
    killed_by=("no-loss",),
    scenarios=(KILL_CONSUMERS,),
    rule="Fetch is a peek; the cursor moves only when the handler acks",
    store="redis",
)
class ConsumerGroupFetchBus(_RedisMutant):
    """Failure mode: reading the way a stream consumer group does
    (``XREADGROUP ... >``), which moves the cursor on delivery.

    A consumer group's ``last-delivered-id`` advances as entries are handed
    out; the ack (``XACK``) only clears a pending list that a restarted
    consumer asking for ``>`` never looks at. Modelled here as a ``fetch``
    from the durable cursor that advances the cursor to the last entry it
    returns, in the same script: a consumer SIGKILLed while handling that
    page leaves its successor a cursor past messages nobody handled.
    Proven by ``no-loss``.
    """

    def fetch(
        self,
        handle: str,
        channel: str,
        after: int | None = None,
        limit: int = 100,
        include_expired: bool = False,
    ) -> list[Message]:
        if after is not None or limit <= 0 or include_expired:
            return super().fetch(handle, channel, after, limit, include_expired)
        reply = self.script(
            "fetch",
            True,
            _FETCH_AND_ADVANCE,
            [self.cursors_key(handle), self.log_key(channel)],
            [channel, limit],
        )
        if int(reply[0]) < 0:
            raise DefiniteError(f"{handle!r} is not subscribed to {channel!r}")
        return [self._message(channel, entry) for entry in reply[1] or []]


_CAPPED_POST = Script(
    POST.source.replace(
        "redis.call('XADD', log, seq .. '-0',",
        "redis.call('XADD', log, 'MAXLEN', '~', ARGV[6], seq .. '-0',",
    )
)
assert _CAPPED_POST.source.count("'MAXLEN'") == 2


@mutant(
    "redis-capped-stream",
    failure_mode="Stream capped with XADD MAXLEN: a lagging reader's backlog is trimmed away",
    killed_by=("no-loss",),
    scenarios=(KILL_CONSUMERS,),
    rule="A channel keeps every message until every handle has acked it",
    store="redis",
)
class CappedStreamBus(_RedisMutant):
    """Failure mode: the stream is capped (``XADD ... MAXLEN ~ 100``), the
    way stream examples bound memory.

    Every post trims the channel to about its last ``MAXLEN`` entries,
    whether or not every handle has read them. A handle that lags (a slow
    reviewer, a consumer paused or restarting) finds its backlog trimmed
    away: its next catch-up silently starts at the oldest entry left.
    Proven by ``no-loss``.
    """

    maxlen = 100

    def post(
        self,
        channel: str,
        body: str,
        sender: str,
        idempotency_key: str | None = None,
        expires_at: float | None = None,
    ) -> Message:
        no_expiry(expires_at)
        has_key = "0" if idempotency_key is None else "1"
        reply = self.script(
            "post",
            True,
            _CAPPED_POST,
            [self.heads_key, self.log_key(channel), self.idem_key(channel)],
            [channel, body, sender, has_key, idempotency_key or "", self.maxlen],
        )
        if int(reply[0]) == 0:
            return Message(channel, int(reply[1]), reply[2], reply[3], idempotency_key)
        return Message(channel, int(reply[1]), body, sender, idempotency_key)


# -- lost replies (only a network fault shows these) ---------------------------------


@mutant(
    "redis-lost-reply-as-failure",
    failure_mode="A write whose reply was lost (timeout, reset) is reported as not applied",
    killed_by=("post-outcome:failed-but-applied",),
    scenarios=(PARTITION,),
    rule="A lost reply after a write was sent is an unknown outcome, never a failure",
    store="redis",
)
class LostReplyAsFailureBus(_RedisMutant):
    """Failure mode: a write whose reply was lost is reported as failed.

    Redis runs a command as soon as all of it has arrived; the reply can be
    lost afterwards (a one-way partition, a reset, a timeout on a slow
    link). A client that maps every socket error to "failed" tells the
    producer the post did not land, the producer moves on, and every
    subscriber then handles the message it was told had failed. Nothing
    but a lost reply shows it: process kills never cut a reply off. Proven
    by ``post-outcome`` (``failed-but-applied``) under a partition of the
    replies.
    """

    def call(self, what: str, write: bool, *args: Any, timeout: float | None = None) -> Any:
        try:
            return super().call(what, write, *args, timeout=timeout)
        except IndeterminateError as exc:
            raise DefiniteError(f"redis {what}: connection lost: {exc}") from exc


# -- queue channels ---------------------------------------------------------------

_CHOSEN = "if best == nil then return {'none'} end\n"
_PEEK = Script(CLAIM.source.split(_CHOSEN, 1)[0] + _CHOSEN + "return {'ok', best}\n")
"""The reference claim up to its choice (kind fixed, lapsed leases swept,
the oldest claimable seq chosen), returning the choice instead of leasing it."""
assert CLAIM.source.count(_CHOSEN) == 1 and "ZREMRANGEBYSCORE" in _PEEK.source

_LEASE = kind_script(
    """
-- KEYS: kinds, queue, leases, ready, dead, heads, log
-- ARGV: channel, consumer, lease_us, default max_deliveries, seq
local seq = tonumber(ARGV[5])
local now = now_us()
local top = tonumber(redis.call('HGET', KEYS[2], 'top') or '0')
if seq > top then redis.call('HSET', KEYS[2], 'top', seq) end
redis.call('ZREM', KEYS[4], seq)
local n = redis.call('HINCRBY', KEYS[2], 'n:' .. seq, 1)
local expires = now + tonumber(ARGV[3])
redis.call('HSET', KEYS[2], 'c:' .. seq, ARGV[2])
redis.call('ZADD', KEYS[3], expires, seq)
local entry = redis.call('XRANGE', KEYS[7], seq .. '-0', seq .. '-0')[1]
local f, body, sender = entry[2], nil, nil
for i = 1, #f, 2 do
  if f[i] == 'b' then body = f[i + 1] elseif f[i] == 's' then sender = f[i + 1] end
end
return {'ok', seq, body, sender, n, expires}
"""
)
"""Lease a seq the client chose, whatever its state now (no guard)."""

RACE_WINDOW = 0.002
"""Seconds between reading the oldest claimable seq and leasing it: the
width of a client's round trip on a real network."""


@mutant(
    "redis-claim-get-then-set",
    failure_mode="Claim reads the oldest claimable seq with one command and leases it with "
    "another: two consumers win one message",
    killed_by=("lease-exclusive",),
    scenarios=("queue-kill-claimers",),
    rule="Choosing the oldest claimable message and leasing it is one Lua script",
    store="redis",
)
class ClaimGetThenSetBus(_RedisMutant):
    """Failure mode: the claim is a read, then a write, from the client.

    ``claim`` asks the server for the oldest claimable seq (a script of its
    own: the lapsed leases swept, the minimum of the released and the next
    never-claimed seq, all correct), then leases that seq with a second
    script that writes the lease whatever the message's state is by then.
    Each step is atomic; their composition is not: two consumers that ask
    in the same round trip are both told the same seq and both lease it
    (the second overwrites the first's lease, which the first still
    believes it holds). Proven by ``lease-exclusive``.
    """

    def claim(self, channel: str, consumer: str, lease_s: float) -> Claim | None:
        check_lease(lease_s)
        keys = [self.kinds_key, *self.queue_keys(channel), self.heads_key, self.log_key(channel)]
        args: list[Any] = [channel, consumer, to_us(lease_s), self.max_deliveries]
        peek = self.script("claim", True, _PEEK, keys, args)
        raise_wrong_kind(peek, channel, "queue", "claim")
        if peek[0] != "ok":
            return None
        time.sleep(RACE_WINDOW)  # the bug: another consumer may be told the same seq meanwhile
        reply = self.script("claim", True, _LEASE, keys, [*args, int(peek[1])])
        return claim_of(channel, int(reply[1]), consumer, reply[2:6])


# -- role inboxes -----------------------------------------------------------------

_AUTOCLAIM = receive_script(
    """
-- KEYS: runroles:<run>
-- ARGV: run, limit, prefix
local run, left, prefix = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local now = now_us()
local held = held_roles(KEYS[1], run, prefix, now)
if #held == 0 then return {'not-holder'} end
local out = {'ok'}
for _, role in ipairs(held) do
  local deliv, unread = prefix .. 'deliv:' .. role, prefix .. 'unread:' .. role
  for _, member in ipairs(redis.call('ZRANGE', unread, 0, -1)) do
    if left <= 0 then break end
    local seq = tostring(tonumber(member))
    if redis.call('HGET', deliv, seq) ~= run then
      redis.call('HSET', deliv, seq, run)
      redis.call('ZADD', unread, now, member)
      local entry = redis.call('XRANGE', prefix .. 'log:' .. role, seq .. '-0', seq .. '-0')[1]
      give(out, role, seq, entry[2])
      left = left - 1
    end
  end
end
return out
"""
)
"""XAUTOCLAIM, in the reference's layout: every unread delivery of another
run moves to the caller, which receives it (again)."""


@mutant(
    "redis-role-autoclaim-pending",
    failure_mode="The new holder takes over a departed run's pending (unread) deliveries, "
    "as XAUTOCLAIM does for a stream consumer group",
    killed_by=("at-most-once",),
    scenarios=("atmostonce-holder-churn",),
    rule="A delivery is written once, with its run, and never moved: a departed run's "
    "unread messages are listed as stranded, not claimed by the next run",
    store="redis",
)
class AutoclaimPendingBus(_RedisMutant):
    """Failure mode: the role inbox behaves like a stream consumer group.

    A consumer group keeps each delivered-but-unacknowledged entry in a
    pending list, and the usual recovery for a consumer that went away is
    ``XAUTOCLAIM``: the next consumer takes its pending entries over and
    processes them. Here ``receive`` does exactly that before delivering
    anything new: every unread delivery of a run that no longer holds the
    role is re-assigned to the caller and returned to it. The departed run
    may have acted on them without reading them (it crashed right after),
    so at-most-once is gone. Proven by ``at-most-once``.
    """

    def receive(self, run: str, limit: int = 50) -> list[Delivery]:
        if limit <= 0:
            raise DefiniteError(f"receive limit must be > 0, got {limit}")
        reply = self.script(
            "receive", True, _AUTOCLAIM, [self.runroles_key(run)], [run, int(limit), self.prefix]
        )
        taken = deliveries_of(reply, run)
        if len(taken) >= limit:
            return taken
        return taken + super().receive(run, limit - len(taken))
