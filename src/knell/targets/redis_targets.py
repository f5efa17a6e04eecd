"""The targets built on Redis: Redis Streams with a consumer group.

Declared as data (:class:`~knell.targets.target.Target`); the drivers
themselves (:mod:`.redis_streams`, :mod:`.redis_streams_fenced`) import
redis-py only when a run opens them.
"""

from __future__ import annotations

from knell.targets.target import Target

__all__ = ["TARGETS"]

_INSTALL = "pip install 'knell[redis]'"

TARGETS = (
    Target(
        "redis-streams",
        "knell.targets.redis_streams:connect",
        "redis",
        ("queue",),
        ("redis",),
        _INSTALL,
    ),
    Target(
        "redis-streams-fenced",
        "knell.targets.redis_streams_fenced:connect",
        "redis",
        ("queue",),
        ("redis",),
        _INSTALL,
    ),
)
"""Redis Streams as a careful user drives it, and with the owner check
that fences a stale XACK (the client pattern that avoids that finding)."""
