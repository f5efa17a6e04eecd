"""Message expiry on the Redis bus: one Lua helper for every read path.

A message posted with ``expires_at`` carries it in its stream entry (field
``x``, whole microseconds of Unix time). Every liveness read judges it
inside its own script by ``TIME``, the Redis server's clock, the clock its
leases and holds are judged by, so a clock fault on the server moves
expiry and leases alike, and no client clock takes part. Expiry hides a
message, it never deletes it: the entry stays in the log and the forensic
``fetch(..., include_expired=True)`` returns it.

The scripts that use it: the fetch scripts and the doorbell's arming
(:mod:`knell.stores.redis.bus`), the claim, release and dead-letter scripts
(:mod:`knell.stores.redis.queue`) and the receive script
(:mod:`knell.stores.redis.roles`). ``wait``'s blocking ``XREAD`` is not a
script: it asks ``TIME`` when a post it woke for carries an expiry.
"""

from __future__ import annotations

__all__ = ["EXPIRY_LUA", "expires_field", "expires_us"]

EXPIRY_LUA = """
-- The expiry of stream entry fields `f` in microseconds, or nil (never).
local function expiry_of(f)
  for i = 1, #f, 2 do
    if f[i] == 'x' then return tonumber(f[i + 1]) end
  end
  return nil
end
-- Whether entry fields `f` are expired at `now` (microseconds, by TIME).
local function expired_at(f, now)
  local x = expiry_of(f)
  return x ~= nil and x <= now
end
-- The server's clock in microseconds.
local function server_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
"""
"""Lua helpers every expiry-aware script puts in front of its body."""


def expires_us(expires_at: float | None) -> str:
    """``expires_at`` (Unix seconds) as a script argument: whole
    microseconds, or ``''`` for a message that never expires."""
    return "" if expires_at is None else str(round(expires_at * 1_000_000))


def expires_field(fields: dict[str, str]) -> float | None:
    """The expiry of a stream entry's fields in Unix seconds (``None``:
    never)."""
    x = fields.get("x")
    return None if x is None else int(x) / 1_000_000
