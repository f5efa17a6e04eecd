"""Channel kinds on the Redis bus, and the Lua every kind-specific script shares.

Every contract appends to the same stream (``log:<channel>``); what a
channel is *for* (broadcast cursors, queue leases, role deliveries, a
stream's ring) is one field of the ``kinds`` hash, written by the first
kind-specific operation (``subscribe``, ``declare_queue`` or ``claim``,
``claim_role``, ``declare_stream``) and never
changed. Where the promises live:

* **Fixed once, atomically with the operation.** Each kind-specific
  operation is one Lua script whose first step is :data:`KIND_LUA`'s
  check: read the channel's kind, return ``{'wrong-kind', kind}`` (before
  any write) when it is another one, and, in the scripts that fix a kind,
  write it in the same script as the operation itself. Redis runs a script
  to its end before any other command, so two first uses of different
  kinds cannot both win: the second sees the first's kind. This is the
  ``HSETNX kinds <channel> <kind>`` of the design notes, done as read,
  compare, write inside the one atomic step.
* **Checked where it is used, not cached.** The check is one ``HGET`` on
  the server, inside the script the operation runs anyway, so it costs no
  round trip and can never act on a stale view; the broadcast paths that
  used a plain command (``fetch`` after a seq, ``cursor``) run a read-only
  script instead. ``post`` refuses no kind; it looks (one ``HGET`` in
  its script) only to trim a stream's ring (:mod:`.stream`).
* **One clock.** :data:`KIND_LUA` also defines ``now_us()``: the server's
  ``TIME`` in integer microseconds. Every lease and hold is judged against
  it inside the script that acts on the judgement (Redis 7 replicates a
  script's effects, not the script, so a non-deterministic ``TIME`` before
  a write is allowed). Microsecond integers stay exact in Lua's doubles and
  as sorted-set scores (up to 2**53, year 2255).

A refusal travels back as a reply whose first element names it
(``'wrong-kind'``, ``'lease-lost'`` ...): the script wrote nothing, and
Python raises the contract's :class:`~knell.buses.contract.Refused`
subclass (:func:`raise_wrong_kind` for the kind).

:class:`Script` (a script run by its SHA1) lives here too, so the queue and
role mixins build their scripts without importing the bus module that
mixes them in; :mod:`knell.stores.redis.bus` re-exports it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from knell.buses.contract import ChannelKind
from knell.buses.sqlite_kinds import wrong_kind

__all__ = [
    "KIND_LUA",
    "WRONG_KIND",
    "RedisHost",
    "Script",
    "from_us",
    "kind_script",
    "raise_wrong_kind",
    "to_us",
]


class RedisHost:
    """What the queue and role mixins use of the bus that mixes them in: the
    key prefix, the shared key names and ``script`` (one round trip, its
    failure classified definite or indeterminate)."""

    if TYPE_CHECKING:
        prefix: str
        heads_key: str
        kinds_key: str

        def log_key(self, channel: str) -> str: ...

        def script(
            self, what: str, write: bool, script: Script, keys: list[str], args: list[Any]
        ) -> Any: ...


class Script:
    """A Lua script, run by its SHA1 (``EVALSHA``) and re-sent whole when
    the server has forgotten it (``NOSCRIPT`` after a restart)."""

    def __init__(self, source: str) -> None:
        import hashlib

        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()


WRONG_KIND = "wrong-kind"
"""The first element of a script's reply that refuses a channel of another kind."""

KIND_LUA = """
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
-- The channel's kind when it is another than `wanted` (a refusal), else
-- false; and whether it has any kind yet.
local function other_kind(kinds, channel, wanted)
  local kind = redis.call('HGET', kinds, channel)
  if kind and kind ~= wanted then return kind, true end
  return false, kind ~= false
end
"""
"""Lua helpers prepended to every script that checks kinds or reads the clock."""


def kind_script(body: str, *, writes: bool = True) -> Script:
    """A script with :data:`KIND_LUA` in front (``no-writes`` when it only reads)."""
    return Script(("#!lua\n" if writes else "#!lua flags=no-writes\n") + KIND_LUA + body)


def raise_wrong_kind(reply: Any, channel: str, wanted: ChannelKind, op: str) -> None:
    """Raise :class:`WrongChannelKind` when a script refused ``channel`` for
    being of another kind than ``wanted`` (``{'wrong-kind', kind}``)."""
    if isinstance(reply, list) and reply and reply[0] == WRONG_KIND:
        raise wrong_kind(channel, str(reply[1]), wanted, op)


def to_us(seconds: float) -> int:
    """A duration in whole microseconds, rounded up (a lease is never
    shorter than asked) and at least one."""
    return max(1, math.ceil(round(seconds * 1_000_000, 3)))


def from_us(us: Any) -> float:
    """Server microseconds (a script's integer reply) as Unix seconds."""
    return int(us) / 1_000_000
