"""Queue channels on the Redis bus: leases, requeue, dead-letter.

raven's design, on the bus's shared streams. A queue channel's messages
are the ordinary ``log:<channel>`` entries; its read-state is four keys::

    queue:<ch>   hash   max (max_deliveries), top (highest seq ever claimed),
                        n:<seq> deliveries, c:<seq> consumer of the lease,
                        x:<seq> when it died (dead only)
    leases:<ch>  zset   seq scored by the lease's expiry (server microseconds)
    ready:<ch>   zset   released (or lapsed) seqs with deliveries left, by seq
    dead:<ch>    zset   dead seqs, by seq

A claimed message is in exactly one of leases, ready and dead, or in none
(done: its fields are dropped; ``top`` alone remembers it was claimed).

Where the promises live:

* **One winner.** ``claim`` is one Lua script: Redis runs it to its end
  before any other command, so choosing the oldest claimable seq and
  leasing it is one atomic step, and no client ever reads a seq to lease
  it with a later command (the ``redis-claim-get-then-set`` mutant does,
  and two consumers win one message).
* **Every lookup is a range, never a scan.** The lapsed leases are
  ``ZRANGEBYSCORE leases -inf now``: only those, never the leases still
  running, however many. Each claim first sweeps them (to ``ready`` with
  deliveries left, else to ``dead`` at the moment they lapsed), so the
  oldest released-or-lapsed message is ``ZRANGE ready 0 0``.
* **Never-claimed messages need no state.** Seqs are dense and a claim
  always takes the oldest claimable message, so the messages never claimed
  are exactly those above ``top``: the next one is ``top + 1`` if it is at
  most the channel's head. Every ``ready`` seq is at or below ``top``, so
  the oldest claimable message is ``min(ready)`` if any, else ``top + 1``.
* **Lapse is judged at claim time, on the server's clock.** A lease lives
  while its score is above ``now_us()`` (``TIME`` inside the script):
  ``renew``, ``done`` and ``release`` match only a live lease of the
  caller (score above now *and* ``c:<seq>`` is the caller), so a holder
  whose lease lapsed is refused even before any claim swept it. Nothing
  waits for a sweeper: the declared ``sweep_interval`` is 0.
* **Dead is a state, never a delete.** A lapse or a release with
  ``max_deliveries`` used moves the seq to ``dead`` (its deliveries kept);
  ``dead()`` also lists the lapsed-and-used-up leases no claim has swept
  yet, in the same read-only script (one atomic view), so a dead message is
  listed from the moment its last lease lapses.
* **Checks before writes.** Every script reads and checks everything
  (kind, lease, the entry it will return) before its first write, so an
  error reply never leaves half an operation behind.

Ids are ``CHANNEL/SEQ`` (:func:`~knell.buses.leases.message_id`), as
on the SQLite bus; callers treat them as opaque.
"""

from __future__ import annotations

from typing import Any

from knell.buses.contract import Claim, DeadLetter, DefiniteError, LeaseLost, QueueInfo
from knell.buses.leases import (
    DEFAULT_MAX_DELIVERIES,
    check_lease,
    check_max_deliveries,
    message_id,
    split_id,
)
from knell.stores.redis.expiry import EXPIRY_LUA
from knell.stores.redis.kinds import RedisHost, from_us, kind_script, raise_wrong_kind, to_us

__all__ = [
    "CLAIM",
    "DEAD",
    "DECLARE",
    "HOLDER",
    "RedisQueue",
    "claim_of",
]


DECLARE = kind_script(
    """
local other, known = other_kind(KEYS[1], ARGV[1], 'queue')
if other then return {'wrong-kind', other} end
if not known then
  redis.call('HSET', KEYS[1], ARGV[1], 'queue')
  redis.call('HSET', KEYS[2], 'max', ARGV[2])
  return {'ok', tonumber(ARGV[2])}
end
return {'ok', tonumber(redis.call('HGET', KEYS[2], 'max'))}
"""
)
"""Fix the kind and max_deliveries of a queue, unless it has them: the first wins."""

CLAIM = kind_script(
    EXPIRY_LUA
    + """
-- KEYS: kinds, queue, leases, ready, dead, heads, log
-- ARGV: channel, consumer, lease_us, default max_deliveries
local other, known = other_kind(KEYS[1], ARGV[1], 'queue')
if other then return {'wrong-kind', other} end
local now = now_us()
local most = tonumber(redis.call('HGET', KEYS[2], 'max') or ARGV[4])
-- Reads only: the lapsed leases (by expiry), then the oldest claimable seq.
-- Expiry (by the same TIME): a lapsed lease whose message expired is
-- retired (`gone`: neither requeued nor dead; used up, it is dead only if
-- its message outlived the lease), and so is an expired ready or
-- never-claimed message the claim passes on its way to the oldest live one.
local lapsed = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'WITHSCORES')
local requeue, kill, gone, best, fresh = {}, {}, {}, nil, false
local function fields_of(seq)
  local e = redis.call('XRANGE', KEYS[7], seq .. '-0', seq .. '-0')[1]
  if not e then return redis.error_reply('ERR message ' .. seq .. ' is missing from the log') end
  return e
end
for i = 1, #lapsed, 2 do
  local seq = lapsed[i]
  local e = fields_of(seq)
  if e.err then return e end
  local x = expiry_of(e[2])
  if tonumber(redis.call('HGET', KEYS[2], 'n:' .. seq)) >= most then
    if x ~= nil and x <= tonumber(lapsed[i + 1]) then
      table.insert(gone, seq)
    else
      table.insert(kill, {seq, lapsed[i + 1]})
    end
  elseif x ~= nil and x <= now then
    table.insert(gone, seq)
  else
    table.insert(requeue, seq)
    if best == nil or tonumber(seq) < best then best = tonumber(seq) end
  end
end
local stale, entry, off, chosen = {}, nil, 0, false
while not chosen do
  local readies = redis.call('ZRANGE', KEYS[4], off, off + 31)
  if #readies == 0 then break end
  for _, r in ipairs(readies) do
    if best ~= nil and tonumber(r) >= best then chosen = true break end
    local e = fields_of(r)
    if e.err then return e end
    if expired_at(e[2], now) then
      table.insert(stale, r)
    else
      best, entry, chosen = tonumber(r), e, true
      break
    end
  end
  off = off + 32
end
local top = tonumber(redis.call('HGET', KEYS[2], 'top') or '0')
local passed = top
if best == nil then
  local head = tonumber(redis.call('HGET', KEYS[6], ARGV[1]) or '0')
  while passed < head do
    local e = fields_of(passed + 1)
    if e.err then return e end
    if not expired_at(e[2], now) then
      best, fresh, entry = passed + 1, true, e
      break
    end
    passed = passed + 1
  end
end
if best ~= nil and entry == nil then
  entry = fields_of(best)
  if entry.err then return entry end
end
-- Writes: fix the kind, sweep the lapsed, lease the oldest.
if not known then
  redis.call('HSET', KEYS[1], ARGV[1], 'queue')
  redis.call('HSET', KEYS[2], 'max', most)
end
for _, dead in ipairs(kill) do
  redis.call('ZADD', KEYS[5], dead[1], dead[1])
  redis.call('HSET', KEYS[2], 'x:' .. dead[1], dead[2])
  redis.call('HDEL', KEYS[2], 'c:' .. dead[1])
end
for _, seq in ipairs(requeue) do redis.call('ZADD', KEYS[4], seq, seq) end
for _, seq in ipairs(gone) do redis.call('HDEL', KEYS[2], 'c:' .. seq) end
if #stale > 0 then redis.call('ZREM', KEYS[4], unpack(stale)) end
if passed > top then redis.call('HSET', KEYS[2], 'top', passed) end
if #lapsed > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now) end
if best == nil then return {'none'} end
local n = 1
if fresh then
  redis.call('HSET', KEYS[2], 'top', best, 'n:' .. best, 1)
else
  redis.call('ZREM', KEYS[4], best)
  n = redis.call('HINCRBY', KEYS[2], 'n:' .. best, 1)
end
local expires = now + tonumber(ARGV[3])
redis.call('HSET', KEYS[2], 'c:' .. best, ARGV[2])
redis.call('ZADD', KEYS[3], expires, best)
local f, body, sender = entry[2], nil, nil
for i = 1, #f, 2 do
  if f[i] == 'b' then body = f[i + 1] elseif f[i] == 's' then sender = f[i + 1] end
end
return {'ok', best, body, sender, n, expires}
"""
)
"""Sweep the lapsed leases and lease the oldest claimable message, atomically."""

HOLDER = kind_script(
    EXPIRY_LUA
    + """
-- KEYS: kinds, queue, leases, ready, dead, log
-- ARGV: channel, seq, consumer, op (renew | done | release), lease_us
local other, known = other_kind(KEYS[1], ARGV[1], 'queue')
if other then return {'wrong-kind', other} end
local seq, op = ARGV[2], ARGV[4]
local now = now_us()
local expires = redis.call('ZSCORE', KEYS[3], seq)
if not known or not expires or tonumber(expires) <= now
    or redis.call('HGET', KEYS[2], 'c:' .. seq) ~= ARGV[3] then
  return {'lease-lost'}
end
if op == 'renew' then
  local entry = redis.call('XRANGE', KEYS[6], seq .. '-0', seq .. '-0')[1]
  if not entry then
    return redis.error_reply('ERR message ' .. seq .. ' is missing from the log')
  end
  local renewed = now + tonumber(ARGV[5])
  redis.call('ZADD', KEYS[3], renewed, seq)
  local f, body, sender = entry[2], nil, nil
  for i = 1, #f, 2 do
    if f[i] == 'b' then body = f[i + 1] elseif f[i] == 's' then sender = f[i + 1] end
  end
  return {'ok', body, sender, tonumber(redis.call('HGET', KEYS[2], 'n:' .. seq)), renewed}
end
redis.call('ZREM', KEYS[3], seq)
if op == 'done' then
  redis.call('HDEL', KEYS[2], 'n:' .. seq, 'c:' .. seq)
  return {'ok'}
end
local entry = redis.call('XRANGE', KEYS[6], seq .. '-0', seq .. '-0')[1]
redis.call('HDEL', KEYS[2], 'c:' .. seq)
local n = tonumber(redis.call('HGET', KEYS[2], 'n:' .. seq))
if entry and expired_at(entry[2], now) then
  return {'ok'}  -- released after its message expired: retired, never dead
end
if n >= tonumber(redis.call('HGET', KEYS[2], 'max')) then
  redis.call('ZADD', KEYS[5], seq, seq)
  redis.call('HSET', KEYS[2], 'x:' .. seq, now)
else
  redis.call('ZADD', KEYS[4], seq, seq)
end
return {'ok'}
"""
)
"""renew, done or release: only on a live lease of the caller."""

DEAD = kind_script(
    EXPIRY_LUA
    + """
-- KEYS: kinds, queue, leases, dead, log
-- ARGV: channel, after, limit
local other, known = other_kind(KEYS[1], ARGV[1], 'queue')
if other then return {'wrong-kind', other} end
if not known then return {'ok'} end
local after, limit = tonumber(ARGV[2]), tonumber(ARGV[3])
local most = tonumber(redis.call('HGET', KEYS[2], 'max'))
local found = {}
local swept = redis.call('ZRANGEBYSCORE', KEYS[4], '(' .. ARGV[2], '+inf', 'LIMIT', 0, limit)
for _, seq in ipairs(swept) do
  table.insert(found, {tonumber(seq), redis.call('HGET', KEYS[2], 'x:' .. seq)})
end
-- Lapsed leases with no delivery left that no claim has swept yet: dead
-- since their lease lapsed.
local lapsed = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now_us(), 'WITHSCORES')
for i = 1, #lapsed, 2 do
  local seq = tonumber(lapsed[i])
  if seq > after and tonumber(redis.call('HGET', KEYS[2], 'n:' .. lapsed[i])) >= most then
    local e = redis.call('XRANGE', KEYS[5], seq .. '-0', seq .. '-0')[1]
    local x = e and expiry_of(e[2])
    if x == nil or x > tonumber(lapsed[i + 1]) then  -- expired first: retired, not dead
      table.insert(found, {seq, lapsed[i + 1]})
    end
  end
end
table.sort(found, function(a, b) return a[1] < b[1] end)
local out = {'ok'}
for i = 1, math.min(#found, limit) do
  local seq, died = found[i][1], found[i][2]
  local entry = redis.call('XRANGE', KEYS[5], seq .. '-0', seq .. '-0')[1]
  local body, sender = '', ''
  if entry then
    local f = entry[2]
    for j = 1, #f, 2 do
      if f[j] == 'b' then body = f[j + 1] elseif f[j] == 's' then sender = f[j + 1] end
    end
  end
  table.insert(out, seq)
  table.insert(out, body)
  table.insert(out, sender)
  table.insert(out, tonumber(redis.call('HGET', KEYS[2], 'n:' .. seq)))
  table.insert(out, tonumber(died))
end
return out
""",
    writes=False,
)
"""The dead letters after a seq, swept or not, in one atomic view."""


def claim_of(channel: str, seq: int, consumer: str, lease: list[Any]) -> Claim:
    """A :class:`Claim` from a script's ``body, sender, deliveries,
    expires_us`` reply."""
    body, sender, deliveries, expires = lease
    return Claim(
        message_id(channel, seq),
        channel,
        seq,
        body,
        sender,
        consumer,
        int(deliveries),
        from_us(expires),
    )


class RedisQueue(RedisHost):
    """The :class:`~knell.buses.contract.QueueBus` half of the Redis bus.

    A mixin: the bus provides the prefix, the key names it shares (heads,
    kinds, the streams) and ``script`` (one round trip, errors classified)."""

    max_deliveries: int = DEFAULT_MAX_DELIVERIES
    """Used by a claim on a channel that was never declared."""

    # -- keys ---------------------------------------------------------------

    def queue_keys(self, channel: str) -> list[str]:
        """``queue:``, ``leases:``, ``ready:``, ``dead:`` of ``channel``."""
        return [f"{self.prefix}{part}:{channel}" for part in ("queue", "leases", "ready", "dead")]

    # -- declaring ----------------------------------------------------------

    def declare_queue(self, channel: str, max_deliveries: int) -> QueueInfo:
        check_max_deliveries(max_deliveries)
        queue = self.queue_keys(channel)[0]
        reply = self.script(
            "declare_queue", True, DECLARE, [self.kinds_key, queue], [channel, max_deliveries]
        )
        raise_wrong_kind(reply, channel, "queue", "declare_queue")
        return QueueInfo(channel, int(reply[1]), 0.0)

    # -- claiming -----------------------------------------------------------

    def claim(self, channel: str, consumer: str, lease_s: float) -> Claim | None:
        check_lease(lease_s)
        reply = self.script(
            "claim",
            True,
            CLAIM,
            [self.kinds_key, *self.queue_keys(channel), self.heads_key, self.log_key(channel)],
            [channel, consumer, to_us(lease_s), self.max_deliveries],
        )
        raise_wrong_kind(reply, channel, "queue", "claim")
        if reply[0] != "ok":
            return None
        return claim_of(channel, int(reply[1]), consumer, reply[2:6])

    # -- the holder's verbs ---------------------------------------------------

    def _holder(self, op: str, message: str, consumer: str, lease_us: int = 0) -> list[Any]:
        """Run ``op`` on a lease ``consumer`` holds live; refuse with
        :class:`LeaseLost` when there is none."""
        channel, seq = split_id(message)
        queue, leases, ready, dead = self.queue_keys(channel)
        reply: list[Any] = self.script(
            op,
            True,
            HOLDER,
            [self.kinds_key, queue, leases, ready, dead, self.log_key(channel)],
            [channel, seq, consumer, op, lease_us],
        )
        raise_wrong_kind(reply, channel, "queue", op)
        if reply[0] != "ok":
            raise LeaseLost(f"{op} {message}: {consumer!r} holds no live lease on it")
        return reply

    def renew(self, id: str, consumer: str, lease_s: float) -> Claim:
        check_lease(lease_s)
        reply = self._holder("renew", id, consumer, to_us(lease_s))
        channel, seq = split_id(id)
        return claim_of(channel, seq, consumer, reply[1:5])

    def done(self, id: str, consumer: str) -> None:
        self._holder("done", id, consumer)

    def release(self, id: str, consumer: str) -> None:
        self._holder("release", id, consumer)

    # -- dead letters ---------------------------------------------------------

    def dead(self, channel: str, after: int = 0, limit: int = 100) -> list[DeadLetter]:
        if limit <= 0:
            raise DefiniteError(f"dead limit must be > 0, got {limit}")
        queue, leases, _, dead = self.queue_keys(channel)
        reply = self.script(
            "dead",
            False,
            DEAD,
            [self.kinds_key, queue, leases, dead, self.log_key(channel)],
            [channel, int(after), int(limit)],
        )
        raise_wrong_kind(reply, channel, "queue", "dead")
        rows = reply[1:]
        return [
            DeadLetter(
                message_id(channel, int(rows[i])),
                channel,
                int(rows[i]),
                rows[i + 1],
                rows[i + 2],
                int(rows[i + 3]),
                from_us(rows[i + 4]),
            )
            for i in range(0, len(rows), 5)
        ]
