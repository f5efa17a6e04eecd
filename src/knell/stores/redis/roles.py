"""At-most-once role delivery on the Redis bus, with stranded listing.

A role inbox is a channel of kind ``role``: messages addressed to the role
are ordinary ``log:<role>`` entries. Its read-state is four keys::

    hold:<role>      hash   run, until (server microseconds): the hold, a lease
    runroles:<run>   set    the roles run claimed (each checked against its hold)
    deliv:<role>     hash   top (highest seq delivered), <seq> -> the run it went to
    unread:<role>    zset   unread deliveries, scored by delivered_at (microseconds),
                            member the seq zero-padded to 20 digits (ties: by seq)

Where the promises live:

* **At most once.** ``receive`` is one Lua script that takes the messages
  above the role's ``top`` and, for each, writes its delivery record with
  ``HSETNX deliv:<role> <seq> <run>`` before handing it out, then moves
  ``top``. The record is written once and never moved or deleted, and
  ``top`` only grows: no message can be delivered twice, to this run or any
  later one. ``receive`` always takes the oldest undelivered message, so
  the undelivered are exactly those above ``top`` (no scan).
* **One holder.** ``claim_role`` reads the hold and writes it in the same
  script: a live hold of another run (``until`` above the server's
  ``TIME``) refuses it with a status and no write; the holder claiming
  again renews. Holds are judged on the server's clock inside the script
  that acts on them, to the microsecond, rather than left to key expiry
  (whose millisecond rounding would make the returned ``expires_at`` a
  little off from the moment the hold really ends).
* **Receive finds its roles without a scan.** ``runroles:<run>`` lists the
  roles a run claimed; each is kept only while ``hold:<role>`` names that
  run live (a takeover or a release removes it, a lapsed member is checked
  and skipped), so a run never receives for a role it lost.
* **Read by its recipient only.** ``read`` compares ``deliv:<role> <seq>``
  with the caller's run before it removes the seq from ``unread``.
* **Stranded is derived, never written.** A stranded message is an
  ``unread`` entry whose run is not the role's live holder: one read-only
  script (one atomic view) reads the hold and walks ``unread`` oldest
  delivery first, skipping the holder's, up to :data:`STRANDED_CAP`.
  Releasing, dying and taking over write nothing extra, so none of them
  can forget to.

Ids are ``ROLE/SEQ``, as on queue channels.
"""

from __future__ import annotations

from typing import Any

from knell.buses.contract import (
    STRANDED_CAP,
    DefiniteError,
    Delivery,
    NotDeliveredTo,
    NotHolder,
    RoleHeld,
    RoleHold,
    Stranded,
)
from knell.buses.leases import check_lease, message_id, split_id
from knell.stores.redis.expiry import EXPIRY_LUA
from knell.stores.redis.kinds import (
    RedisHost,
    Script,
    from_us,
    kind_script,
    raise_wrong_kind,
    to_us,
)

__all__ = [
    "CLAIM_ROLE",
    "READ",
    "RECEIVE",
    "RECEIVE_LUA",
    "RELEASE_ROLE",
    "STRANDED",
    "RedisRoles",
    "deliveries_of",
    "receive_script",
]

_FIELDS = """
local function body_sender(log, seq)
  local entry = redis.call('XRANGE', log, seq .. '-0', seq .. '-0')[1]
  local body, sender = '', ''
  if entry then
    local f = entry[2]
    for i = 1, #f, 2 do
      if f[i] == 'b' then body = f[i + 1] elseif f[i] == 's' then sender = f[i + 1] end
    end
  end
  return body, sender
end
"""

CLAIM_ROLE = kind_script(
    """
-- KEYS: kinds, hold:<role>, runroles:<run>
-- ARGV: role, run, lease_us, prefix
local other, known = other_kind(KEYS[1], ARGV[1], 'role')
if other then return {'wrong-kind', other} end
local now = now_us()
local held = redis.call('HMGET', KEYS[2], 'run', 'until')
if held[1] and held[1] ~= ARGV[2] and tonumber(held[2]) > now then
  return {'role-held', held[1], tonumber(held[2])}
end
if not known then redis.call('HSET', KEYS[1], ARGV[1], 'role') end
if held[1] and held[1] ~= ARGV[2] then
  redis.call('SREM', ARGV[4] .. 'runroles:' .. held[1], ARGV[1])
end
local expires = now + tonumber(ARGV[3])
redis.call('HSET', KEYS[2], 'run', ARGV[2], 'until', expires)
redis.call('SADD', KEYS[3], ARGV[1])
return {'ok', expires}
"""
)
"""Take or renew a role unless another run holds it live, atomically."""

RELEASE_ROLE = kind_script(
    """
-- KEYS: kinds, hold:<role>, runroles:<run>
-- ARGV: role, run
local other, known = other_kind(KEYS[1], ARGV[1], 'role')
if other then return {'wrong-kind', other} end
local held = redis.call('HMGET', KEYS[2], 'run', 'until')
if not known or held[1] ~= ARGV[2] or tonumber(held[2]) <= now_us() then
  return {'not-holder'}
end
redis.call('DEL', KEYS[2])
redis.call('SREM', KEYS[3], ARGV[1])
return {'ok'}
"""
)

RECEIVE_LUA = """
-- The roles `run` holds live (sorted), from its runroles set.
local function held_roles(runroles, run, prefix, now)
  local roles, held = redis.call('SMEMBERS', runroles), {}
  table.sort(roles)
  for _, role in ipairs(roles) do
    local hold = redis.call('HMGET', prefix .. 'hold:' .. role, 'run', 'until')
    if hold[1] == run and tonumber(hold[2]) > now then table.insert(held, role) end
  end
  return held
end
-- Append one delivery (role, seq, body, sender) of stream entry fields `f`.
local function give(out, role, seq, f)
  local body, sender = '', ''
  for i = 1, #f, 2 do
    if f[i] == 'b' then body = f[i + 1] elseif f[i] == 's' then sender = f[i + 1] end
  end
  table.insert(out, role)
  table.insert(out, tonumber(seq))
  table.insert(out, body)
  table.insert(out, sender)
end
"""
"""Lua helpers of every receive script (the reference's, and a mutant's)."""


def receive_script(body: str) -> Script:
    """A receive script: :data:`RECEIVE_LUA`'s helpers in front (and
    :data:`~knell.stores.redis.expiry.EXPIRY_LUA`'s)."""
    return kind_script(EXPIRY_LUA + RECEIVE_LUA + body)


RECEIVE = receive_script(
    """
-- KEYS: runroles:<run>, heads
-- ARGV: run, limit, prefix
local run, left, prefix = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local now = now_us()
local held = held_roles(KEYS[1], run, prefix, now)
if #held == 0 then return {'not-holder'} end
local out = {'ok'}
for _, role in ipairs(held) do
  if left <= 0 then break end
  local deliv, log = prefix .. 'deliv:' .. role, prefix .. 'log:' .. role
  local top = tonumber(redis.call('HGET', deliv, 'top') or '0')
  local head = tonumber(redis.call('HGET', KEYS[2], role) or '0')
  local moved = false
  while top < head and left > 0 do
    -- Expired messages (by TIME) are passed over, never delivered; the
    -- loop reads on so a receive is not short while live ones remain.
    local entries = redis.call('XRANGE', log, (top + 1) .. '-0', '+', 'COUNT', left)
    if #entries == 0 then break end
    for _, e in ipairs(entries) do
      local seq = string.match(e[1], '^(%d+)')
      if not expired_at(e[2], now) and redis.call('HSETNX', deliv, seq, run) == 1 then
        redis.call('ZADD', prefix .. 'unread:' .. role, now, string.format('%020d', tonumber(seq)))
        give(out, role, seq, e[2])
        left = left - 1
      end
      top = tonumber(seq)
    end
    moved = true
  end
  if moved then redis.call('HSET', deliv, 'top', top) end
end
return out
"""
)
"""Deliver the oldest undelivered messages of the run's live roles, each once ever."""

READ = kind_script(
    """
-- KEYS: kinds, deliv:<role>, unread:<role>
-- ARGV: role, seq, run, member
local other, known = other_kind(KEYS[1], ARGV[1], 'role')
if other then return {'wrong-kind', other} end
if not known or redis.call('HGET', KEYS[2], ARGV[2]) ~= ARGV[3] then
  return {'not-delivered-to'}
end
redis.call('ZREM', KEYS[3], ARGV[4])
return {'ok'}
"""
)

STRANDED = kind_script(
    _FIELDS
    + """
-- KEYS: kinds, hold:<role>, deliv:<role>, unread:<role>, log:<role>
-- ARGV: role, cap
local other, known = other_kind(KEYS[1], ARGV[1], 'role')
if other then return {'wrong-kind', other} end
if not known then return {'ok'} end
local cap = tonumber(ARGV[2])
local held = redis.call('HMGET', KEYS[2], 'run', 'until')
local holder = false
if held[1] and tonumber(held[2]) > now_us() then holder = held[1] end
local out, count, start = {'ok'}, 0, 0
while count < cap do
  local page = redis.call('ZRANGE', KEYS[4], start, start + 99, 'WITHSCORES')
  if #page == 0 then break end
  for i = 1, #page, 2 do
    local seq = tostring(tonumber(page[i]))
    local run = redis.call('HGET', KEYS[3], seq)
    if run ~= holder then
      local body, sender = body_sender(KEYS[5], seq)
      table.insert(out, tonumber(seq))
      table.insert(out, body)
      table.insert(out, sender)
      table.insert(out, run)
      table.insert(out, tonumber(page[i + 1]))
      count = count + 1
      if count >= cap then break end
    end
  end
  start = start + 100
end
return out
""",
    writes=False,
)
"""Unread deliveries to any run but the live holder, oldest delivery first:
one read-only script, one atomic view."""


def _member(seq: int) -> str:
    """A seq as an ``unread`` member: zero-padded, so equal scores sort by seq."""
    return f"{seq:020d}"


def deliveries_of(reply: list[Any], run: str) -> list[Delivery]:
    """The deliveries of a receive script's ``ok, (role, seq, body,
    sender)...`` reply; ``not-holder`` refused."""
    if reply[0] != "ok":
        raise NotHolder(f"run {run!r} holds no role")
    rows = reply[1:]
    return [
        Delivery(
            message_id(rows[i], int(rows[i + 1])),
            rows[i],
            int(rows[i + 1]),
            rows[i + 2],
            rows[i + 3],
            run,
        )
        for i in range(0, len(rows), 4)
    ]


class RedisRoles(RedisHost):
    """The :class:`~knell.buses.contract.RoleBus` half of the Redis bus (a
    mixin: the bus provides the prefix, the shared key names and ``script``)."""

    # -- keys ---------------------------------------------------------------

    def hold_key(self, role: str) -> str:
        return f"{self.prefix}hold:{role}"

    def runroles_key(self, run: str) -> str:
        return f"{self.prefix}runroles:{run}"

    def deliv_key(self, role: str) -> str:
        return f"{self.prefix}deliv:{role}"

    def unread_key(self, role: str) -> str:
        return f"{self.prefix}unread:{role}"

    # -- holding --------------------------------------------------------------

    def claim_role(self, role: str, run: str, lease_s: float) -> RoleHold:
        check_lease(lease_s)
        reply = self.script(
            "claim_role",
            True,
            CLAIM_ROLE,
            [self.kinds_key, self.hold_key(role), self.runroles_key(run)],
            [role, run, to_us(lease_s), self.prefix],
        )
        raise_wrong_kind(reply, role, "role", "claim_role")
        if reply[0] != "ok":
            raise RoleHeld(
                f"role {role!r} is held by run {reply[1]!r} until {from_us(reply[2]):.3f}"
            )
        return RoleHold(role, run, from_us(reply[1]))

    def release_role(self, role: str, run: str) -> None:
        reply = self.script(
            "release_role",
            True,
            RELEASE_ROLE,
            [self.kinds_key, self.hold_key(role), self.runroles_key(run)],
            [role, run],
        )
        raise_wrong_kind(reply, role, "role", "release_role")
        if reply[0] != "ok":
            raise NotHolder(f"run {run!r} does not hold role {role!r}")

    # -- delivering -----------------------------------------------------------

    def receive(self, run: str, limit: int = 50) -> list[Delivery]:
        if limit <= 0:
            raise DefiniteError(f"receive limit must be > 0, got {limit}")
        reply = self.script(
            "receive",
            True,
            RECEIVE,
            [self.runroles_key(run), self.heads_key],
            [run, int(limit), self.prefix],
        )
        return deliveries_of(reply, run)

    def read(self, id: str, run: str) -> None:
        role, seq = split_id(id)
        reply = self.script(
            "read",
            True,
            READ,
            [self.kinds_key, self.deliv_key(role), self.unread_key(role)],
            [role, seq, run, _member(seq)],
        )
        raise_wrong_kind(reply, role, "role", "read")
        if reply[0] != "ok":
            raise NotDeliveredTo(f"{id} was not delivered to run {run!r}")

    def stranded(self, role: str) -> list[Stranded]:
        reply = self.script(
            "stranded",
            False,
            STRANDED,
            [
                self.kinds_key,
                self.hold_key(role),
                self.deliv_key(role),
                self.unread_key(role),
                self.log_key(role),
            ],
            [role, STRANDED_CAP],
        )
        raise_wrong_kind(reply, role, "role", "stranded")
        rows = reply[1:]
        return [
            Stranded(
                message_id(role, int(rows[i])),
                role,
                int(rows[i]),
                rows[i + 1],
                rows[i + 2],
                rows[i + 3],
                from_us(rows[i + 4]),
            )
            for i in range(0, len(rows), 5)
        ]
