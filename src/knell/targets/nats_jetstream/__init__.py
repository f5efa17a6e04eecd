"""``nats-jetstream``: knell's contracts on NATS JetStream, through nats-py.

``bus = "knell.targets.nats_jetstream:connect"`` (or any ``nats://`` store
URL) opens :class:`~.bus.JetStreamBus`; its docstring is the mapping of
each promise onto JetStream and the promises JetStream cannot keep.
nats-py is asyncio only: each bus runs one event loop in a thread of its
own (:mod:`.loop`), and a worker process opens one bus, so one loop per
worker.
"""

from __future__ import annotations

from knell.targets.nats_jetstream.bus import JetStreamBus, connect

__all__ = ["JetStreamBus", "connect"]
