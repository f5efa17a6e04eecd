"""At-most-once mutants: the reference SQLite role inbox with one seeded bug each.

Each overrides the step of the reference role inbox
(:mod:`knell.buses.sqlite_roles`) keeping the promise it breaks
(``_deliver``: one delivery row per message, unread until read;
``_mark_read``: only by its recipient), or wraps a public method
(``stranded``, ``release_role``) when the bug is in what surrounds it. The failure modes are the
seed design's: what "keep at-most-once delivery and make a stranded
message visible" rules out.
"""

from __future__ import annotations

import sqlite3
import time

from knell.buses.contract import Delivery, Stranded
from knell.buses.leases import message_id
from knell.buses.mutants.registry import mutant
from knell.buses.mutants.sqlite import RECYCLE_AGE, _Mutant, _Recycling

__all__ = [
    "ReadByAnyRunBus",
    "ReadRecycledBus",
    "ReceiveMarksReadBus",
    "ReceiveUncheckedUpdateBus",
    "RedeliverToNewHolderBus",
    "StrandedMissesDeadRunsBus",
    "StrandedNewestFirstBus",
]

SCENARIOS = ("atmostonce-holder-churn",)


@mutant(
    "redeliver-to-new-holder",
    failure_mode="A departed run's unread messages are redelivered to the new holder",
    killed_by=("at-most-once",),
    scenarios=SCENARIOS,
    rule="A delivery is written once, with its run, and never moved: "
    "unread messages of a departed run are listed as stranded, not re-routed",
)
class RedeliverToNewHolderBus(_Mutant):
    """Failure mode: redelivery to the new holder.

    ``receive`` first hands the caller every unread message delivered to a
    run that no longer holds the role (re-routing the delivery to the new
    run), then the pending ones: the "helpful" fix the seed design rejects,
    since the departed run may have acted on them. Proven by ``at-most-once``.
    """

    def _deliver(
        self, db: sqlite3.Connection, role: str, run: str, now: float, limit: int
    ) -> list[Delivery]:
        rows = db.execute(
            "SELECT d.seq, m.body, m.sender FROM deliveries d JOIN messages m"
            " ON m.channel = d.channel AND m.seq = d.seq WHERE d.channel = ?"
            " AND d.read_at IS NULL AND d.run != ? ORDER BY d.seq LIMIT ?",
            (role, run, limit),
        ).fetchall()
        db.executemany(  # the bug: a departed run's deliveries move to the caller
            "UPDATE deliveries SET run = ?, delivered_at = ? WHERE channel = ? AND seq = ?",
            [(run, now, role, seq) for seq, _, _ in rows],
        )
        moved = [Delivery(message_id(role, s), role, s, b, snd, run) for s, b, snd in rows]
        if len(moved) >= limit:
            return moved
        return moved + super()._deliver(db, role, run, now, limit - len(moved))


@mutant(
    "stranded-misses-dead-runs",
    failure_mode="The stranded list misses what a run that died left unread",
    killed_by=("stranded-listed",),
    scenarios=SCENARIOS,
    rule="Stranded is derived from deliveries and the live hold at read time, "
    "not recorded when a run releases the role",
)
class StrandedMissesDeadRunsBus(_Mutant):
    """Failure mode: a stranded list missing entries.

    The naive design records a run's unread messages as stranded when the
    run *releases* the role; a run that dies (its hold lapses) never
    releases, so what it received and never read is missing from the list.
    Proven by ``stranded-listed``.
    """

    def release_role(self, role: str, run: str) -> None:
        super().release_role(role, run)
        with self._lock, self._write() as db:
            db.execute("CREATE TABLE IF NOT EXISTS mutant_left (run TEXT PRIMARY KEY)")
            db.execute("INSERT OR IGNORE INTO mutant_left (run) VALUES (?)", (run,))

    def stranded(self, role: str) -> list[Stranded]:
        listed = super().stranded(role)
        with self._lock:
            exists = self._db.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'mutant_left'"
            ).fetchone()
            left = (
                {str(r) for (r,) in self._db.execute("SELECT run FROM mutant_left").fetchall()}
                if exists
                else set()
            )
        return [s for s in listed if s.run in left]


@mutant(
    "stranded-newest-first",
    failure_mode="The stranded list is newest first: the oldest strandings fall off the cap",
    killed_by=("stranded-listed:unordered",),
    scenarios=SCENARIOS,
    rule="Oldest delivery first, then the cap: what has waited longest is always shown",
)
class StrandedNewestFirstBus(_Mutant):
    """Failure mode: the stranded list is ordered newest first.

    The list sorts by delivery time descending (a "recent activity" view),
    so once more than 50 messages are stranded, the oldest ones, which
    have waited longest for a person, are the ones cut off. Proven by
    ``stranded-listed`` (``unordered``).
    """

    def stranded(self, role: str) -> list[Stranded]:
        return sorted(super().stranded(role), key=lambda s: (-s.delivered_at, -s.seq))


@mutant(
    "read-by-any-run",
    failure_mode="A read is allowed for a run the message was not delivered to",
    killed_by=("read-refusal",),
    scenarios=SCENARIOS,
    rule="read matches the delivery row only with the caller's run",
)
class ReadByAnyRunBus(_Mutant):
    """Failure mode: a read allowed for a non-holder.

    ``read`` checks that the message was delivered, not to whom: a new
    holder can mark read what a departed run left stranded, and it
    disappears from the list without anyone having acted on it. Proven by
    ``read-refusal`` (the holders' probe).
    """

    def _mark_read(self, db: sqlite3.Connection, role: str, seq: int, run: str) -> int:
        return db.execute(
            "UPDATE deliveries SET read_at = COALESCE(read_at, ?)"
            " WHERE channel = ? AND seq = ?",  # the bug: delivered, to any run
            (time.time(), role, seq),
        ).rowcount


@mutant(
    "receive-marks-read",
    failure_mode="receive marks messages read: what a crashed run received vanishes",
    killed_by=("nothing-vanishes",),
    scenarios=SCENARIOS,
    rule="Only read marks a message read; a delivery stays unread (and, once its "
    "run leaves, stranded) until its recipient reads it",
)
class ReceiveMarksReadBus(_Mutant):
    """Failure mode: a receive that marks messages read.

    ``receive`` sets ``read_at`` as it delivers (delivered = handled), so a
    run that dies between receive and read leaves nothing stranded: the
    messages are neither read by anyone nor listed. Proven by
    ``nothing-vanishes``.
    """

    def _deliver(
        self, db: sqlite3.Connection, role: str, run: str, now: float, limit: int
    ) -> list[Delivery]:
        got = super()._deliver(db, role, run, now, limit)
        db.executemany(  # the bug: delivered = read
            "UPDATE deliveries SET read_at = ? WHERE channel = ? AND seq = ?",
            [(now, d.role, d.seq) for d in got],
        )
        return got


@mutant(
    "receive-unchecked-update",
    failure_mode="receive selects the oldest undelivered messages, then marks them delivered "
    "without checking that its mark won: two receivers at once get the same message",
    killed_by=("at-most-once",),
    scenarios=("atmostonce-concurrent-receivers",),
    rule="The choice and the mark are one write transaction (or the mark is conditional on "
    "the message being undelivered and its row count checked)",
)
class ReceiveUncheckedUpdateBus(_Mutant):
    """Failure mode: consume-on-read without checking the update.

    ``receive`` reads the oldest undelivered messages in one statement and
    writes their delivery rows in a later transaction with ``INSERT OR
    REPLACE``, so the write never fails and nobody looks at what it
    replaced. One receiver at a time never notices; two receivers of one
    inbox (competing workers of one session) both select the same message
    between a post and the first mark, and both are handed it. Measured on
    the seed design's first version: 4 processes, 400 messages, dozens
    delivered twice. Proven by ``at-most-once`` when receivers overlap
    (``together = true`` holders).
    """

    def receive(self, run: str, limit: int = 50) -> list[Delivery]:
        if limit <= 0:
            return super().receive(run, limit)
        now = time.time()
        with self._lock:
            chosen = self._choose(run, limit, now)
            if chosen is None:
                return super().receive(run, limit)  # refused as the reference refuses
            return self._mark(chosen, run, now)

    def _choose(self, run: str, limit: int, now: float) -> list[Delivery] | None:
        """The bug, part one: the oldest undelivered messages of the roles
        ``run`` holds, chosen outside any write (None: it holds none)."""
        roles = [
            str(r)
            for (r,) in self._db.execute(
                "SELECT role FROM role_holds WHERE run = ? AND expires_at > ? ORDER BY role",
                (run, now),
            ).fetchall()
        ]
        if not roles:
            return None
        chosen: list[Delivery] = []
        for role in roles:
            chosen += [
                Delivery(message_id(role, int(s)), role, int(s), str(b), str(snd), run)
                for s, b, snd in self._db.execute(
                    "SELECT m.seq, m.body, m.sender FROM messages m WHERE m.channel = ?1"
                    " AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.channel = ?1"
                    " AND d.seq = m.seq) ORDER BY m.seq LIMIT ?2",
                    (role, limit - len(chosen)),
                ).fetchall()
            ]
        return chosen

    def _mark(self, chosen: list[Delivery], run: str, now: float) -> list[Delivery]:
        """Part two: the mark always "succeeds", replacing a rival's."""
        with self._write() as db:
            db.executemany(
                "INSERT OR REPLACE INTO deliveries (channel, seq, run, delivered_at)"
                " VALUES (?, ?, ?, ?)",
                [(d.role, d.seq, run, now) for d in chosen],
            )
        return chosen


@mutant(
    "read-recycled",
    failure_mode="A retention sweep puts old read messages back in the inbox",
    killed_by=("at-most-once",),
    scenarios=SCENARIOS,
    rule="a retention sweep deletes (or archives) read deliveries; it never makes them pending",
)
class ReadRecycledBus(_Recycling):
    """Failure mode: old read work comes back, long after its read.

    A retention sweep meant to clear read deliveries out of the hot table
    writes the wrong state: at most once a second per bus connection, at a
    receive, the oldest message read more than :data:`RECYCLE_AGE` seconds
    ago is delivered again, to the caller. The first delivery and the read
    were right, so the message comes back seconds to minutes later: in a
    soak, after the checker settled and forgot it
    (:mod:`knell.checker.atmostonce.settle`), which must still name the
    receive. Proven by ``at-most-once``.
    """

    def _deliver(
        self, db: sqlite3.Connection, role: str, run: str, now: float, limit: int
    ) -> list[Delivery]:
        out: list[Delivery] = []
        if limit > 0 and self._recycle_due(now):
            row = db.execute(
                "SELECT d.seq, m.body, m.sender FROM deliveries d JOIN messages m"
                " ON m.channel = d.channel AND m.seq = d.seq WHERE d.channel = ?"
                " AND d.read_at IS NOT NULL AND d.read_at < ? ORDER BY d.seq LIMIT 1",
                (role, now - RECYCLE_AGE),
            ).fetchone()
            if row is not None:
                db.execute(  # the bug: "retired" written as delivered anew
                    "UPDATE deliveries SET run = ?, delivered_at = ?, read_at = NULL"
                    " WHERE channel = ? AND seq = ?",
                    (run, now, role, row[0]),
                )
                seq, body, sender = row
                out.append(Delivery(message_id(role, int(seq)), role, int(seq), body, sender, run))
        return out + super()._deliver(db, role, run, now, limit - len(out))
