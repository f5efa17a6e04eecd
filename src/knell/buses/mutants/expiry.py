"""Expiry mutants: the reference SQLite bus with one seeded expiry bug each.

Each overrides the one hook every read path asks about expiry
(:meth:`knell.buses.sqlite_expiry.SqliteExpiry._unexpired`) or the
forensic read, so each breaks exactly one promise of the expiry feature
(:data:`knell.buses.contract.FEATURES`): a read path that forgets to
check, a store that deletes what expired, a clock read early.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from knell.buses.contract import Message
from knell.buses.mutants.registry import mutant
from knell.buses.mutants.sqlite import _Mutant
from knell.buses.sqlite_expiry import unexpired

__all__ = [
    "ExpiredDeadLetteredBus",
    "ExpiredDeletedBus",
    "ExpiredStillClaimedBus",
    "ExpiredStillRingsBus",
    "ExpiredStillTailedBus",
    "ExpiresEarlyBus",
]

SCENARIOS = ("expiry-tour",)

EARLY_S = 0.3
"""How much too early the early-expiring mutant hides a message (seconds)."""


@mutant(
    "expired-still-claimed",
    failure_mode="One read path forgets expiry: claim hands out a message that expired",
    killed_by=("expiry:expired-returned",),
    scenarios=SCENARIOS,
    rule="Every liveness read (fetch, wait, claim, receive) asks the same expiry "
    "condition of the store's clock, inside the read",
)
class ExpiredStillClaimedBus(_Mutant):
    """Failure mode: claim ignores expiry (the other read paths honour it).

    The queue's claim was written before expiry and never taught it, so an
    expired job is leased and worked as if it were live: the work a TTL
    exists to cancel is done anyway. Proven by ``expiry``
    (``expired-returned``).
    """

    def _unexpired(self, path: str, alias: str = "") -> str:
        if path == "claim":
            return "1"  # the bug: the claim path never checks expiry
        return unexpired(alias)


@mutant(
    "expired-deleted",
    failure_mode="Expired messages are deleted: the forensic read cannot find them",
    killed_by=("expiry:forensic-missing",),
    scenarios=SCENARIOS,
    rule="Expiry hides a message from liveness reads and never deletes it; "
    "fetch(include_expired=True) still returns it",
)
class ExpiredDeletedBus(_Mutant):
    """Failure mode: expiry deletes (the forensic read misses expired messages).

    A janitor that drops expired rows (or a TTL index) makes the log look
    dense to a reader but leaves nothing to audit: "what did we fail to
    deliver, and when?" has no answer. Proven by ``expiry``
    (``forensic-missing``).
    """

    def _forensic(self, handle: str, channel: str, after: int | None, limit: int) -> list[Message]:
        start = self._subscribed(handle, channel) if after is None else after
        return self._page(channel, start, limit)  # the bug: expired rows are gone


@mutant(
    "expires-early",
    failure_mode="Expiry judged early (a clock read ahead): live messages vanish",
    killed_by=("expiry:unexpired-dropped",),
    scenarios=SCENARIOS,
    rule="A message is expired only once the store's clock has passed expires_at",
)
class ExpiresEarlyBus(_Mutant):
    """Failure mode: messages expire early.

    Expiry compared against a clock that runs ahead (a cached "now" plus a
    margin, another host's clock, milliseconds read as a larger unit), so
    messages vanish while they should still be delivered. Proven by
    ``expiry`` (``unexpired-dropped``).
    """

    def _unexpired(self, path: str, alias: str = "") -> str:
        # the bug: the clock is read EARLY_S ahead
        return f"({alias}expires_at IS NULL OR {alias}expires_at > :now + {EARLY_S})"


@mutant(
    "expired-still-rings",
    failure_mode="The doorbell forgets expiry: a waiter is woken for a message that expired",
    killed_by=("expiry:expired-returned",),
    scenarios=SCENARIOS,
    rule="The doorbell rings only for a message that is live when it rings, by the same "
    "expiry condition as every other read",
)
class ExpiredStillRingsBus(_Mutant):
    """Failure mode: wait ignores expiry (fetch honours it).

    The doorbell's backlog and post queries were written before expiry, so
    an idle reader is woken for work that has already expired, fetches,
    finds nothing, and sleeps again: a wasted turn per expired message.
    Proven by ``expiry`` (``expired-returned``, judged from the arm).
    """

    def _unexpired(self, path: str, alias: str = "") -> str:
        if path == "wait":
            return "1"  # the bug: the doorbell never checks expiry
        return unexpired(alias)


@mutant(
    "expired-dead-lettered",
    failure_mode="An expired queue message is dead-lettered as if delivered to death",
    killed_by=("expiry:expired-dead-lettered",),
    scenarios=SCENARIOS,
    rule="A lease that lapses (or a release) after the message expired retires it as "
    "expired, never dead",
)
class ExpiredDeadLetteredBus(_Mutant):
    """Failure mode: the dead-letter sweep ignores expiry.

    A message whose last lease lapsed after it had expired is flipped to
    dead like any used-up message, so the dead-letter queue fills with work
    that simply ran out of time and an operator retries jobs the producer
    meant to cancel. Proven by ``expiry`` (``expired-dead-lettered``).
    """

    def _sweep(self, db: sqlite3.Connection, args: dict[str, Any]) -> None:
        db.execute(  # the bug: no look at the message's expiry
            "UPDATE claims SET state = 'dead', updated_at = expires_at"
            " WHERE channel = :channel AND state = 'leased' AND expires_at <= :now"
            " AND deliveries >= :max",
            args,
        )

    def _released_state(self) -> str:
        return "CASE WHEN deliveries >= :max THEN 'dead' ELSE 'ready' END"  # nor here


@mutant(
    "expired-still-tailed",
    failure_mode="A stream tail forgets expiry: it shows a message that expired",
    killed_by=("expiry:expired-returned",),
    scenarios=("stream-expiry",),
    rule="A liveness tail hides what expired by the store's clock and names the hidden seqs; "
    "only tail(include_expired=True) shows them",
)
class ExpiredStillTailedBus(_Mutant):
    """Failure mode: ``tail`` ignores expiry (fetch, claim and the others
    honour it).

    The stream's tail was written as "the ring, as it is": it never asks
    the expiry condition, so a dashboard shows alerts whose TTL said they
    no longer matter. The pages stay consecutive (nothing is missing), so
    only the expiry check can tell. Proven by ``expiry``
    (``expired-returned``).
    """

    def _unexpired(self, path: str, alias: str = "") -> str:
        if path == "tail":
            return "1"  # the bug: the tail never checks expiry
        return unexpired(alias)
