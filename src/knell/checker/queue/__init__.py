"""The queue contract's checks (work claiming with leases, raven's design).

One module per property: :mod:`.exclusive` (never two live leases on one
message), :mod:`.holder` (only a live lease's holder may renew, finish or
release), :mod:`.terminal` (done is final), :mod:`.loss` (every message
ends done or dead), :mod:`.expiry` (a lapsed lease comes back within
lease + sweep), :mod:`.dead` (dead after exactly max_deliveries) and
:mod:`.duplicates` (a metric: work a lapsed holder did anyway).
:mod:`.book` is what they share: how a lease's bounds are read off the
history. :mod:`.settle` decides when a done message may be forgotten, so a
long queue soak is checked at a flat cost.
"""

from __future__ import annotations

from knell.checker.queue.dead import DeadLetterCheck
from knell.checker.queue.duplicates import DuplicateWorkCheck
from knell.checker.queue.exclusive import LeaseExclusiveCheck
from knell.checker.queue.expiry import LeaseExpiryCheck
from knell.checker.queue.holder import LeaseHolderCheck
from knell.checker.queue.loss import QueueLossCheck
from knell.checker.queue.terminal import DoneTerminalCheck

__all__ = [
    "DeadLetterCheck",
    "DoneTerminalCheck",
    "DuplicateWorkCheck",
    "LeaseExclusiveCheck",
    "LeaseExpiryCheck",
    "LeaseHolderCheck",
    "QueueLossCheck",
]
