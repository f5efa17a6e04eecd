"""Redis Streams with the holder checked by the server: the client pattern
that avoids the stale ``XACK``.

:mod:`knell.targets.redis_streams` maps ``done`` to a plain ``XACK``, and
Streams accepts it from any consumer, including one whose lease lapsed and
whose entry another consumer has since reclaimed (docs/findings.md). A
user who needs the lease to mean something checks it where nothing can
come between the check and the act: in a Lua script, which Redis runs to
its end before any other command. This driver is that pattern and nothing
more: ``done``, ``renew`` and ``release`` are each one script that reads
the entry's pending row (``XPENDING``: owner, idle time, deliveries) and
acts only if the caller owns it and its idle time is below the caller's
lease, else answers ``LeaseLost``. Claims are the plain driver's
(``XAUTOCLAIM`` then ``XREADGROUP``): a lease lapses on the same clock
(the group's idle time, on the server) that the scripts judge it by.

The lease a holder was given is known only to the process that claimed
(Streams does not record it): this driver remembers it per message and
consumer, from ``claim`` and ``renew``. A consumer is one process
incarnation in knell, so that memory is the consumer's own; a call for a
message this driver never leased to the caller checks the owner alone.

What it still cannot promise: everything else in the plain driver's list
(the lease is the reclaimer's ``min-idle-time``, a dead letter appears
when a claim sweeps it, no idempotent append).
"""

from __future__ import annotations

import math
from typing import Any

from knell.buses.contract import Claim, LeaseLost
from knell.buses.leases import check_lease, split_id
from knell.targets.redis_streams import GROUP, RELEASE_IDLE_MS, StreamsQueue, open_queue

__all__ = ["HOLDER", "FencedStreamsQueue", "connect"]

HOLDER = """
-- KEYS: stream, dead-letter stream
-- ARGV: group, entry id, consumer, lease_ms (0: not known), op, release idle_ms,
--       max_deliveries
local row = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)[1]
if not row then return {'lost', 'not pending'} end
if row[2] ~= ARGV[3] then return {'lost', 'owned by ' .. row[2]} end
local lease = tonumber(ARGV[4])
if lease > 0 and tonumber(row[3]) >= lease then
  return {'lost', 'idle ' .. row[3] .. ' ms, past its ' .. lease .. ' ms lease'}
end
local n, op = tonumber(row[4]), ARGV[5]
if op == 'done' then
  redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
  return {'ok', n}
end
if op == 'renew' then
  redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[3], 0, ARGV[2], 'JUSTID')
  local entry = redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2])[1]
  local f, body, sender = entry[2], '', ''
  for i = 1, #f, 2 do
    if f[i] == 'b' then body = f[i + 1] elseif f[i] == 's' then sender = f[i + 1] end
  end
  local t = redis.call('TIME')
  return {'ok', n, body, sender, t[1], t[2]}
end
if n >= tonumber(ARGV[7]) then
  local entry = redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2])[1]
  local f, body, sender = entry[2], '', ''
  for i = 1, #f, 2 do
    if f[i] == 'b' then body = f[i + 1] elseif f[i] == 's' then sender = f[i + 1] end
  end
  local seq = string.match(ARGV[2], '-(%d+)$')
  redis.call('XADD', KEYS[2], '*', 'seq', seq, 'b', body, 's', sender, 'n', n)
  redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
  return {'ok', n}
end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[3], 0, ARGV[2], 'IDLE', ARGV[6], 'JUSTID')
return {'ok', n}
"""
"""done, renew or release, only for the owner of a pending entry within its lease."""


class FencedStreamsQueue(StreamsQueue):
    """:class:`~knell.targets.redis_streams.StreamsQueue` whose holder's
    verbs are checked and applied in one server-side script."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._holder = self.client.register_script(HOLDER)
        self._leases: dict[tuple[str, str], int] = {}
        """(message id, consumer) -> the lease (ms) this driver gave it."""

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
        held = super()._claim(channel, entry_id, fields, consumer, deliveries, now, lease_s)
        self._leases[held.id, consumer] = _ms(lease_s)
        return held

    def _run(self, op: str, id: str, consumer: str) -> list[Any]:
        channel, seq = split_id(id)
        limit = self._declare(channel, self.max_deliveries)
        args: list[str | int] = [
            GROUP,
            f"0-{seq}",
            consumer,
            self._leases.get((id, consumer), 0),
            op,
            RELEASE_IDLE_MS,
            limit,
        ]
        keys = [self.stream_key(channel), self.dead_key(channel)]
        reply: list[Any] = self._call(op, True, lambda: self._holder(keys=keys, args=args))
        if reply[0] != "ok":
            raise LeaseLost(f"{op} {id}: {consumer!r} holds no live lease on it ({reply[1]})")
        return reply

    def renew(self, id: str, consumer: str, lease_s: float) -> Claim:
        check_lease(lease_s)
        reply = self._run("renew", id, consumer)
        channel, seq = split_id(id)
        now = int(reply[4]) + int(reply[5]) / 1e6
        fields = {"b": str(reply[2]), "s": str(reply[3])}
        return self._claim(channel, f"0-{seq}", fields, consumer, int(reply[1]), now, lease_s)

    def done(self, id: str, consumer: str) -> None:
        self._run("done", id, consumer)
        self._leases.pop((id, consumer), None)

    def release(self, id: str, consumer: str) -> None:
        self._run("release", id, consumer)
        self._leases.pop((id, consumer), None)


def _ms(lease_s: float) -> int:
    return max(1, math.ceil(lease_s * 1000))


def connect(url: str) -> FencedStreamsQueue:
    """The driver's factory, over the run's ``redis://`` store URL."""
    return open_queue(url, FencedStreamsQueue)
