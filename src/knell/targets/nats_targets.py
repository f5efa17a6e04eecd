"""The targets built on NATS: JetStream streams and durable consumers.

Declared as data (:class:`~knell.targets.target.Target`); the driver
(:mod:`.nats_jetstream`) imports nats-py only when a run opens it.
"""

from __future__ import annotations

from knell.targets.target import Target

__all__ = ["TARGETS"]

TARGETS = (
    Target(
        "nats-jetstream",
        "knell.targets.nats_jetstream:connect",
        "nats",
        ("broadcast",),
        ("nats",),
        "pip install 'knell[nats]'",
    ),
    Target(
        "nats-jetstream-queue",
        "knell.targets.nats_jetstream.queue:connect",
        "nats",
        ("queue",),
        ("nats",),
        "pip install 'knell[nats]'",
    ),
)
"""JetStream as a careful user drives it: for broadcast channels (a stream
per channel, a durable consumer per handle, its ack floor as the cursor),
and for queues (one shared durable consumer per channel, AckWait as the
lease, the max-deliveries advisory as the dead letter). Two targets, not
one driver with both contracts: a bus with both must refuse a channel's
other kind, and JetStream keeps no channel kind to refuse with."""
