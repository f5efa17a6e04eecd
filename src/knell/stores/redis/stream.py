"""Stream channels on the Redis bus: a ring of the newest messages.

A stream's messages are the ordinary ``log:<channel>`` entries (a Redis
Stream, ids ``<seq>-0``, seqs from the ``heads`` counter like every
post's); its kind is ``stream`` in the ``kinds`` hash, and two keys
keep the ring::

    ring:<ch>    hash   len (max_len, '' for none), age (max_age in server
                        microseconds, '' for none), age_s (as declared)
    stamps:<ch>  zset   each seq the ring holds, scored by the server's TIME
                        (microseconds) when it was posted

Why the log itself and not ``XADD ... MAXLEN``: a stream channel is the
same log every read path addresses by seq (``XRANGE <seq>-0``), and
``MAXLEN`` bounds a count only. The count cut is exact with ``XTRIM
MINID <cut + 1>-0`` (never the ``~`` approximation: the ring must hold
*at most* its bound once a post completes). The age cannot come from
the entry ids (they are seqs, not times), hence ``stamps``: a sorted set
by time, so the messages older than the bound are one
``ZRANGEBYSCORE -inf (now - age``, and only those are looked at.

Where the promises live (:mod:`knell.buses.rings` says what the ring is,
the same on every store):

* **Trimmed by the post itself.** ``post`` is one Lua script on every
  channel (:mod:`.bus`); after the append it reads the channel's kind
  (one ``HGET``) and, on a stream, stamps the seq with ``TIME`` and runs
  :data:`RING_LUA`'s ``trim_ring``: the cut is the larger of ``seq -
  max_len`` and the highest seq stamped before ``now - max_age``; every
  entry at or below it goes (``XTRIM MINID``), with its stamp and its
  idempotency key. Redis runs the script to its end before any other
  command, so no client ever sees the ring over its bound, and concurrent
  posters are serialized by the server: seqs stay dense (``HINCRBY``).
* **The store clock is Redis ``TIME``**, read inside the script that acts
  on it (Redis 7 replicates a script's effects, so the reading is not
  replayed on a replica).
* **Expiry at read time.** A liveness ``tail`` judges each entry's
  ``x`` field (:mod:`.expiry`) by the same ``TIME`` reading as the cut,
  and names the seqs it hid (the page's ``expired``; ``limit`` counts
  shown and hidden together).
* **Read-time bound.** ``tail`` is one read-only script: the head, the
  same cut on the server's clock at this moment, and a page above it, in
  one atomic view; a ring nobody posts to still ages, and ``first`` says so.
* **An idempotency key lives as long as its message**: a trimmed
  message's key is forgotten with it, so a retry of a post the ring has
  already dropped appends anew (as on Postgres, whose unique index row
  goes with the message).

Entries a channel held before it was declared a stream carry no stamp:
the count bound drops them, the age bound cannot judge them.
"""

from __future__ import annotations

from typing import Any

from knell.buses.contract import (
    DefiniteError,
    Message,
    StreamInfo,
    StreamPage,
    WrongChannelKind,
)
from knell.buses.rings import check_ring
from knell.stores.redis.expiry import EXPIRY_LUA
from knell.stores.redis.kinds import RedisHost, kind_script, raise_wrong_kind, to_us

__all__ = ["DECLARE_STREAM", "RING_LUA", "TAIL", "RedisStream"]

RING_LUA = """
-- The ring's cut at time `now` (server microseconds): the highest seq it
-- no longer holds. `head` is the channel's head, `low` the oldest seq
-- the log holds (nil when it holds none).
local function ring_cut(conf, stamps, head, low, now)
  local cut = 0
  local most = tonumber(redis.call('HGET', conf, 'len') or '')
  if most then cut = head - most end
  local age = tonumber(redis.call('HGET', conf, 'age') or '')
  if age then
    local old = redis.call('ZRANGEBYSCORE', stamps, '-inf', string.format('(%d', now - age))
    for _, s in ipairs(old) do
      if tonumber(s) > cut then cut = tonumber(s) end
    end
  end
  if low == nil then
    if head > cut then cut = head end
  elseif low - 1 > cut then
    cut = low - 1
  end
  return cut
end
local function low_seq(log)
  local first = redis.call('XRANGE', log, '-', '+', 'COUNT', 1)[1]
  if first then return tonumber(string.match(first[1], '^(%d+)')) end
  return nil
end
-- After appending `seq` to a stream: stamp it, then drop every entry at or
-- below the cut, with its stamp and its idempotency key.
local function trim_ring(conf, stamps, log, idem, seq)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  redis.call('ZADD', stamps, now, seq)
  local low = low_seq(log)
  local cut = ring_cut(conf, stamps, seq, low, now)
  if low == nil or cut < low then return 0 end
  local gone = redis.call('XRANGE', log, '-', string.format('%d-0', cut))
  for _, e in ipairs(gone) do
    local f = e[2]
    for i = 1, #f, 2 do
      if f[i] == 'k' then redis.call('HDEL', idem, f[i + 1]) end
    end
    redis.call('ZREM', stamps, string.match(e[1], '^(%d+)'))
  end
  redis.call('XTRIM', log, 'MINID', string.format('%d-0', cut + 1))
  return #gone
end
"""
"""Lua the post script (and :data:`TAIL`) carry: where the ring is cut,
and the trim of a stream after a post."""

DECLARE_STREAM = kind_script(
    """
-- KEYS: kinds, ring ; ARGV: channel, len, age_us, age_s ('' for none)
local other, known = other_kind(KEYS[1], ARGV[1], 'stream')
if other then return {'wrong-kind', other} end
if not known then
  redis.call('HSET', KEYS[1], ARGV[1], 'stream')
  redis.call('HSET', KEYS[2], 'len', ARGV[2], 'age', ARGV[3], 'age_s', ARGV[4])
end
return {'ok', redis.call('HGET', KEYS[2], 'len'), redis.call('HGET', KEYS[2], 'age_s')}
"""
)
"""Fix the kind and ring bound of a stream, unless it has them: the first wins."""

TAIL = kind_script(
    RING_LUA
    + EXPIRY_LUA
    + """
-- KEYS: kinds, heads, log, ring, stamps ; ARGV: channel, after, limit, forensic ('1'/'0')
local kind = redis.call('HGET', KEYS[1], ARGV[1])
if kind ~= 'stream' then return {'wrong-kind', kind or ''} end
local head = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
local now = now_us()
local cut = ring_cut(KEYS[4], KEYS[5], head, low_seq(KEYS[3]), now)
local from = math.max(tonumber(ARGV[2]), cut) + 1
local page = redis.call('XRANGE', KEYS[3], string.format('%d-0', from), '+', 'COUNT', ARGV[3])
local shown, hidden = {}, {}
for _, e in ipairs(page) do
  if ARGV[4] ~= '1' and expired_at(e[2], now) then
    table.insert(hidden, string.match(e[1], '^(%d+)'))
  else
    table.insert(shown, e)
  end
end
return {'ok', head, cut + 1, shown, hidden}
""",
    writes=False,
)
"""One tail page in one atomic view: head, where the ring starts now, and
up to ``limit`` entries above both ``after`` and the cut, each shown or
(a liveness tail, the entry expired by the same ``TIME`` reading as the
cut) hidden and named by its seq."""


def _fields(flat: list[str]) -> dict[str, str]:
    return dict(zip(flat[::2], flat[1::2], strict=True))


class RedisStream(RedisHost):
    """The :class:`~knell.buses.contract.StreamBus` half of the Redis bus
    (a mixin: the bus provides the prefix, the shared key names and
    ``script``)."""

    # -- keys ---------------------------------------------------------------

    def ring_keys(self, channel: str) -> list[str]:
        """``ring:`` (the bound) and ``stamps:`` (post times) of ``channel``."""
        return [f"{self.prefix}ring:{channel}", f"{self.prefix}stamps:{channel}"]

    # -- the contract -------------------------------------------------------

    def declare_stream(
        self, channel: str, max_len: int | None = None, max_age_s: float | None = None
    ) -> StreamInfo:
        most, age = check_ring(max_len, max_age_s)
        reply = self.script(
            "declare_stream",
            True,
            DECLARE_STREAM,
            [self.kinds_key, self.ring_keys(channel)[0]],
            [
                channel,
                "" if most is None else most,
                "" if age is None else to_us(age),
                "" if age is None else repr(age),
            ],
        )
        raise_wrong_kind(reply, channel, "stream", "declare_stream")
        held_len, held_age = reply[1], reply[2]
        return StreamInfo(
            channel,
            int(held_len) if held_len else None,
            float(held_age) if held_age else None,
        )

    def tail(
        self, channel: str, after: int = 0, limit: int = 100, include_expired: bool = False
    ) -> StreamPage:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
            raise DefiniteError(f"tail limit must be an int > 0, got {limit!r}")
        if isinstance(after, bool) or not isinstance(after, int):
            raise DefiniteError(f"tail after must be an int, got {after!r}")
        reply = self.script(
            "tail",
            False,
            TAIL,
            [self.kinds_key, self.heads_key, self.log_key(channel), *self.ring_keys(channel)],
            [channel, after, limit, "1" if include_expired else "0"],
        )
        if isinstance(reply, list) and reply and reply[0] == "wrong-kind" and not reply[1]:
            raise WrongChannelKind(f"tail on {channel!r}: it is not a stream (no kind yet)")
        raise_wrong_kind(reply, channel, "stream", "tail")
        entries: list[Any] = reply[3] or []
        messages = []
        for entry in entries:
            fields = _fields(entry[1])
            seq = int(str(entry[0]).split("-", 1)[0])
            messages.append(Message(channel, seq, fields["b"], fields["s"], fields.get("k")))
        hidden = tuple(int(seq) for seq in (reply[4] if len(reply) > 4 else None) or [])
        return StreamPage(channel, tuple(messages), int(reply[2]), int(reply[1]), hidden)
