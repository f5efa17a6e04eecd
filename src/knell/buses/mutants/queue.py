"""Queue mutants: the reference SQLite queue with one seeded bug each.

Each is a subclass of the reference SQLite bus that overrides the steps of
the reference queue (:mod:`knell.buses.sqlite_queue`) keeping the promise
it breaks: ``_lease`` (the guarded lease write), ``_lapsed`` and ``_sweep``
(lapse judged at every claim), ``_redelivered`` (deliveries only grow),
``_released_state`` and ``_done_state`` (where release and done leave a
message), ``_held_by_caller`` (only the live holder acts). The failure
modes are raven's: what its queue design (atomic claim, lease auto-requeue
with the attempt count kept, dead-letter) exists to prevent.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from knell.buses.contract import Claim, DeadLetter
from knell.buses.mutants.registry import mutant
from knell.buses.mutants.sqlite import RECYCLE_AGE, _Mutant, _Recycling

__all__ = [
    "AttemptsResetOnRequeueBus",
    "ClaimWithoutGuardBus",
    "DeadLetterDroppedBus",
    "DeadOneEarlyBus",
    "DoneFromLapsedHolderBus",
    "DoneNotTerminalBus",
    "DoneRecycledBus",
    "LeaseNeverExpiresBus",
]

RACE_WINDOW = 0.002
"""Seconds between reading the oldest claimable message and writing the
lease, in the unguarded claim: the width of a real client's round trip."""


@mutant(
    "claim-without-guard",
    failure_mode="Claim without an atomic guard: two consumers win one message",
    killed_by=("lease-exclusive",),
    scenarios=("queue-kill-claimers",),
    rule="Read the oldest claimable message and lease it in one write transaction, "
    "with a guarded UPDATE (rowcount 1 wins)",
)
class ClaimWithoutGuardBus(_Mutant):
    """Failure mode: a claim without an atomic guard (two winners).

    ``claim`` reads the oldest claimable message with a plain read, and
    only then (a client round trip later) takes the write lock and writes
    the lease, unconditionally: two claimers racing for the oldest message
    both read it as free and both win it. Proven by ``lease-exclusive``.
    """

    def claim(self, channel: str, consumer: str, lease_s: float) -> Claim | None:
        with self._lock:
            with self._write() as db:  # kind and max (cached after the first claim)
                most = self._queue(db, channel, "claim")
            args: dict[str, Any] = {"channel": channel, "now": time.time(), "max": most}
            seq, again = self._oldest(self._db, args)  # the bug: anyone may claim it meanwhile
        if seq is None:
            return None
        time.sleep(RACE_WINDOW)
        with self._lock, self._write() as db:
            now = time.time()
            args.update(seq=seq, consumer=consumer, now=now, expires=now + lease_s)
            self._lease(db, args, again)
            return self._claimed(db, channel, seq, consumer)

    def _lease(self, db: sqlite3.Connection, lease: dict[str, Any], again: bool) -> int:
        """The lease written unguarded: whatever the row's state now."""
        if again:
            return db.execute(
                "UPDATE claims SET state = 'leased', consumer = :consumer, expires_at = :expires,"
                " deliveries = deliveries + 1, updated_at = :now"
                " WHERE channel = :channel AND seq = :seq",
                lease,
            ).rowcount
        return db.execute(
            "INSERT INTO claims (channel, seq, state, consumer, expires_at, deliveries,"
            " updated_at) VALUES (:channel, :seq, 'leased', :consumer, :expires, 1, :now)"
            " ON CONFLICT (channel, seq) DO UPDATE SET state = 'leased', consumer = :consumer,"
            " expires_at = :expires, deliveries = deliveries + 1, updated_at = :now",
            lease,
        ).rowcount


@mutant(
    "lease-never-expires",
    failure_mode="A lease that never expires: a crashed worker's message is stuck forever",
    killed_by=("lease-expiry",),
    scenarios=("queue-kill-claimers",),
    rule="A lapsed lease makes the message claimable again (with deliveries left) "
    "or dead, judged at every claim",
)
class LeaseNeverExpiresBus(_Mutant):
    """Failure mode: a lease that never expires (stuck forever).

    ``claim`` takes only never-claimed and released messages: a lease whose
    holder died or froze is never taken back, so the message stays leased
    to nobody, neither done nor dead (raven v1's "crashed consumer = message
    stuck forever"). Proven by ``lease-expiry`` (``queue-no-loss`` follows).
    """

    def _lapsed(self, db: sqlite3.Connection, args: dict[str, Any]) -> int | None:
        return None  # the bug: a lapsed lease is never taken back

    def _sweep(self, db: sqlite3.Connection, args: dict[str, Any]) -> None:
        pass  # nor ever judged dead


@mutant(
    "attempts-reset-on-requeue",
    failure_mode="The attempt count resets on requeue: a poison message is never dead",
    killed_by=("dead-letter",),
    scenarios=("queue-lapsing-leases",),
    rule="deliveries only ever grows; a lapse or release keeps it, and at "
    "max_deliveries the message is dead",
)
class AttemptsResetOnRequeueBus(_Mutant):
    """Failure mode: the attempt count resets on requeue (never dead).

    A message that comes back (lease lapsed, or released) starts counting
    its deliveries from one again, so a poison message that no worker can
    finish circulates forever and is never dead-lettered. Proven by
    ``dead-letter`` (``over-delivered``).
    """

    def _redelivered(self) -> str:
        return "1"  # the bug: a message that comes back counts from one again

    def _released_state(self) -> str:
        return "'ready'"  # and a release never makes it dead


@mutant(
    "dead-letter-dropped",
    failure_mode="Dead letters are dropped: a poison message silently disappears",
    killed_by=("queue-no-loss",),
    scenarios=("queue-lapsing-leases",),
    rule="A message out of deliveries is kept as dead and listed, never deleted",
)
class DeadLetterDroppedBus(_Mutant):
    """Failure mode: the dead-letter step drops the message (loss).

    When a message runs out of deliveries the bus deletes it from the
    queue instead of keeping it as dead: it is neither claimable, nor done,
    nor listed. Proven by ``queue-no-loss``.
    """

    def _sweep(self, db: sqlite3.Connection, args: dict[str, Any]) -> None:
        db.execute(
            "UPDATE claims SET state = 'dropped' WHERE channel = :channel AND state = 'leased'"
            " AND expires_at <= :now AND deliveries >= :max",  # the bug: dropped, not dead
            args,
        )

    def _released_state(self) -> str:
        return "CASE WHEN deliveries >= :max THEN 'dropped' ELSE 'ready' END"  # the bug

    def dead(self, channel: str, after: int = 0, limit: int = 100) -> list[DeadLetter]:
        return []  # nothing is ever kept


@mutant(
    "dead-one-early",
    failure_mode="Off by one: a message is dead a delivery early",
    killed_by=("dead-letter",),
    scenarios=("queue-kill-claimers",),
    rule="a message is dead once it was delivered max_deliveries times and "
    "its last lease lapsed (or it was released), never sooner",
)
class DeadOneEarlyBus(_Mutant):
    """Failure mode: the dead-letter step is off by one.

    The bus counts deliveries from zero where the rule counts from one, so
    a message whose lease lapsed (or that was released) after
    ``max_deliveries - 1`` deliveries is dead: work that one more try
    would have finished is set aside, and a message whose worker crashed
    once is given up on sooner than the queue promised. Proven by
    ``dead-letter`` (``dead-early``), which must count every claim that may
    have been a delivery unseen: during the run a listing races the other
    claimers' claims.
    """

    def _queue(self, db: sqlite3.Connection, channel: str, op: str) -> int:
        return max(1, super()._queue(db, channel, op) - 1)  # the bug: one delivery short

    def _released_state(self) -> str:
        return super()._released_state().replace(":max", "(:max - 1)")  # the bug, on release


@mutant(
    "done-from-lapsed-holder",
    failure_mode="done accepted from a lapsed holder: finished work overwrites the new owner's",
    killed_by=("lease-holder",),
    scenarios=("queue-lapsing-leases",),
    rule="done, renew and release match only a live lease of the caller "
    "(consumer and expires_at in the guard)",
)
class DoneFromLapsedHolderBus(_Mutant):
    """Failure mode: ``done`` is accepted from a holder whose lease lapsed.

    ``done`` checks only that the message is leased, not by whom or until
    when: a worker that was slower than its lease marks done a message
    that another worker has since claimed and is still doing. Proven by
    ``lease-holder`` (``stale-holder-accepted``).
    """

    def _held_by_caller(self, op: str) -> str:
        if op == "done":
            return "state = 'leased'"  # the bug: leased, by anyone, until whenever
        return super()._held_by_caller(op)


@mutant(
    "done-not-terminal",
    failure_mode="done is not terminal: finished work is handed out again",
    killed_by=("done-terminal",),
    scenarios=("queue-kill-claimers",),
    rule="done is a terminal state no claim ever matches",
)
class DoneNotTerminalBus(_Mutant):
    """Failure mode: ``done`` does not end the message.

    ``done`` only lets go of the lease (the message goes back to the queue,
    as if released), so a finished work packet is claimed and done again.
    Proven by ``done-terminal``.
    """

    def _done_state(self) -> str:
        return "'ready'"  # the bug: done lets go of the lease, as a release would


@mutant(
    "done-recycled",
    failure_mode="A retention sweep puts old done work back in the queue",
    killed_by=("done-terminal",),
    scenarios=("queue-kill-claimers",),
    rule="a retention sweep deletes (or archives) done rows; it never changes their state",
)
class DoneRecycledBus(_Recycling):
    """Failure mode: old finished work comes back, long after its done.

    A retention sweep meant to clear done rows out of the hot table writes
    the wrong state: at most once a second per bus connection, at a
    claim, the oldest message done more than :data:`RECYCLE_AGE` seconds
    ago is made ready again, and the claim hands it out. ``done`` itself is
    right, so the finished work comes back seconds to minutes later: in a
    soak, after the checker settled and forgot the message
    (:mod:`knell.checker.queue.settle`), which must still name the claim.
    Proven by ``done-terminal``.
    """

    def claim(self, channel: str, consumer: str, lease_s: float) -> Claim | None:
        now = time.time()
        if self._recycle_due(now):
            with self._lock, self._write() as db:
                db.execute(  # the bug: "retired" written as ready
                    "UPDATE claims SET state = 'ready', consumer = NULL, updated_at = :now"
                    " WHERE channel = :channel AND seq = (SELECT MIN(seq) FROM claims"
                    " WHERE channel = :channel AND state = 'done' AND updated_at <= :old)",
                    {"channel": channel, "now": now, "old": now - RECYCLE_AGE},
                )
        return super().claim(channel, consumer, lease_s)
