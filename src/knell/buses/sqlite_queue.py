"""Queue channels on the reference SQLite bus: leases, requeue, dead-letter.

raven's design, on knell's shared log. A queue channel's messages are the
ordinary ``messages`` rows; the queue's read-state is one ``claims`` row
per message that has ever been claimed::

    state      leased (consumer, expires_at) | ready (released) | done | dead
    deliveries how many times it was handed out (never reset)

Where the promises live:

* **One winner.** Every claim runs inside ``BEGIN IMMEDIATE``: SQLite's
  write lock, taken before anything is read, serializes claimers across
  processes. The oldest claimable seq is chosen and leased in that one
  transaction, and the lease write is still a guarded UPDATE (it matches
  only a row that is claimable *now*), raven's atomic claim.
* **Every lookup is an index range.** The oldest released message is the
  first ``ready`` row by seq; lapsed leases are the ``leased`` rows whose
  ``expires_at`` has passed, found by expiry, so the leases still running
  (however many) are never scanned.
* **Never-claimed messages need no row.** Seqs commit in order and a
  claim always takes the oldest claimable message, so the messages never
  claimed are exactly those above the highest claimed seq: finding the
  next one is an index lookup, not a scan of the done.
* **Lapse is judged at claim time.** A lease lapses when its
  ``expires_at`` passes: from then on renew, done and release by its
  holder are refused, and the next claim may take the message (with
  deliveries left) or, with ``max_deliveries`` used, flips it to dead
  (the opportunistic sweep; ``dead`` also counts lapsed-and-used-up rows
  the sweep has not flipped yet). Nothing waits for a sweeper, so the
  declared ``sweep_interval`` is 0.
* **Time** is the bus process's clock, read after the write lock is held:
  a claimer frozen mid-call cannot act on a stale "now" while another
  process moved on.

* **Expiry** (a message posted with ``expires_at``) is judged at claim
  time too, by the same clock: the oldest claimable message, if it has
  expired, is retired (state ``expired``, written in the claim's
  transaction, so it is never claimable again even if the clock later
  steps back) and the claim looks at the next one. A lease taken before
  expiry stays the holder's until it lapses (renew and done keep
  working: the holder was handed live work); a lapse, sweep or release
  after expiry retires the message as ``expired``, never ``dead``: it was
  not delivered and failed, it ran out of time.

Ids are ``CHANNEL/SEQ``; callers treat them as opaque.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from knell.buses.contract import (
    Claim,
    DeadLetter,
    DefiniteError,
    LeaseLost,
    QueueInfo,
)
from knell.buses.leases import (
    DEFAULT_MAX_DELIVERIES,
    check_lease,
    check_max_deliveries,
    message_id,
    split_id,
)
from knell.buses.sqlite_expiry import SqliteExpiry
from knell.buses.sqlite_kinds import ChannelKinds

__all__ = ["QUEUE_SCHEMA", "SqliteQueue"]

QUEUE_SCHEMA = """
CREATE TABLE IF NOT EXISTS claims (
    channel TEXT NOT NULL,
    seq INTEGER NOT NULL,
    state TEXT NOT NULL,
    consumer TEXT,
    expires_at REAL,
    deliveries INTEGER NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (channel, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS claims_by_state ON claims (channel, state, seq);
CREATE INDEX IF NOT EXISTS claims_by_expiry ON claims (channel, state, expires_at);
"""

CLAIMABLE = "(state = 'ready' OR (state = 'leased' AND expires_at <= :now AND deliveries < :max))"
"""A claims row that may be leased now: released, or lapsed with deliveries left."""

_LIVE = "state = 'leased' AND consumer = :consumer AND expires_at > :now"
"""A claims row whose lease ``consumer`` holds right now."""

_READY = "SELECT MIN(seq) FROM claims WHERE channel = :channel AND state = 'ready'"
_LAPSED = (
    # the expiry index: only the lapsed leases are read, never the running ones
    "SELECT MIN(seq) FROM claims INDEXED BY claims_by_expiry WHERE channel = :channel"
    " AND state = 'leased' AND expires_at <= :now AND deliveries < :max"
)
_FRESH = (
    "SELECT MIN(seq) FROM messages WHERE channel = :channel AND seq >"
    " (SELECT COALESCE(MAX(seq), 0) FROM claims WHERE channel = :channel)"
)
"""The oldest claimable message is the least of: the oldest released one,
the oldest lapsed one with deliveries left, the oldest never claimed
(above the highest claimed seq). Three index lookups (one statement each:
SQLite plans a compound of them far worse)."""

_MESSAGE_EXPIRES = (
    "(SELECT m.expires_at FROM messages m WHERE m.channel = claims.channel AND m.seq = claims.seq)"
)
"""SQL: the ``expires_at`` of a claims row's message (NULL: never)."""

RETIRED = f"CASE WHEN {_MESSAGE_EXPIRES} <= expires_at THEN 'expired' ELSE 'dead' END"
"""SQL: what a used-up lapsed lease becomes: ``expired`` when its message
expired before the lease lapsed (it ran out of time, it was not a failed
delivery), else ``dead``."""

SWEEP_EVERY = 0.1


class SqliteQueue(SqliteExpiry):
    """The :class:`~knell.buses.contract.QueueBus` half of the SQLite bus.

    A mixin: the bus provides the connection, its lock, its write
    transaction and the channel kinds."""

    max_deliveries: int = DEFAULT_MAX_DELIVERIES
    """Used by a claim on a channel that was never declared."""

    _swept: dict[str, float]

    if TYPE_CHECKING:
        _db: sqlite3.Connection
        _lock: threading.RLock
        _kinds: ChannelKinds

        def _write(self) -> AbstractContextManager[sqlite3.Connection]: ...

    # -- declaring ----------------------------------------------------------

    def declare_queue(self, channel: str, max_deliveries: int) -> QueueInfo:
        check_max_deliveries(max_deliveries)
        with self._lock, self._write() as db:
            actual = self._kinds.fix(db, channel, "queue", "declare_queue", max_deliveries)
        return QueueInfo(channel, int(actual or max_deliveries), 0.0)

    def _queue(self, db: sqlite3.Connection, channel: str, op: str) -> int:
        """Inside a write transaction: the channel's max_deliveries, fixing
        an undeclared channel as a queue with the bus's default."""
        return int(self._kinds.fix(db, channel, "queue", op, self.max_deliveries) or 1)

    # -- claiming -----------------------------------------------------------

    def claim(self, channel: str, consumer: str, lease_s: float) -> Claim | None:
        check_lease(lease_s)
        with self._lock, self._write() as db:
            most = self._queue(db, channel, "claim")
            now = time.time()
            args: dict[str, Any] = {"channel": channel, "now": now, "max": most}
            self._sweep(db, args)
            while True:
                seq, again = self._oldest(db, args)
                if seq is None:
                    return None
                if not self._expired(db, channel, seq, args):
                    break
                self._retire(db, channel, seq, again, now)
            lease = {**args, "seq": seq, "consumer": consumer, "expires": now + lease_s}
            if self._lease(db, lease, again) != 1:  # pragma: no cover - impossible under the lock
                raise DefiniteError(f"claim of {channel}/{seq} lost its guard")
            return self._claimed(db, channel, seq, consumer)

    def _expired(
        self, db: sqlite3.Connection, channel: str, seq: int, args: dict[str, Any]
    ) -> bool:
        """Whether the message the claim chose has expired at ``now`` (the
        claim's clock reading): then it is retired, never leased."""
        row = db.execute(
            "SELECT 1 FROM messages WHERE channel = :channel AND seq = :seq"
            f" AND NOT {self._unexpired('claim')}",
            {**args, "seq": seq},
        ).fetchone()
        return row is not None

    def _retire(
        self, db: sqlite3.Connection, channel: str, seq: int, again: bool, now: float
    ) -> None:
        """Mark an expired message ``expired`` in the claim's transaction:
        claimable never again, listed by ``dead`` never (it was not
        delivered to death, it ran out of time)."""
        if again:
            db.execute(
                "UPDATE claims SET state = 'expired', updated_at = ? WHERE channel = ? AND seq = ?",
                (now, channel, seq),
            )
        else:
            db.execute(
                "INSERT INTO claims (channel, seq, state, consumer, expires_at, deliveries,"
                " updated_at) VALUES (?, ?, 'expired', NULL, NULL, 0, ?)",
                (channel, seq, now),
            )

    def _lease(self, db: sqlite3.Connection, lease: dict[str, Any], again: bool) -> int:
        """Write the lease on the seq :meth:`_oldest` chose, in the same
        write transaction, guarded: the UPDATE matches only a row claimable
        *now* and the INSERT only a message never claimed, so exactly one
        claimer can win it (the rows written: 1 is a win). Each hand-out
        counts one more delivery (:meth:`_redelivered`)."""
        if again:
            return db.execute(
                "UPDATE claims SET state = 'leased', consumer = :consumer,"
                f" expires_at = :expires, deliveries = {self._redelivered()},"
                f" updated_at = :now WHERE channel = :channel AND seq = :seq AND {CLAIMABLE}",
                lease,
            ).rowcount
        return db.execute(
            "INSERT INTO claims (channel, seq, state, consumer, expires_at, deliveries,"
            " updated_at) VALUES (:channel, :seq, 'leased', :consumer, :expires, 1, :now)"
            " ON CONFLICT (channel, seq) DO NOTHING",
            lease,
        ).rowcount

    def _redelivered(self) -> str:
        """SQL: a message's delivery count when it is handed out again. It
        only ever grows (a lapse or a release keeps it), so a message no
        worker can finish reaches ``max_deliveries`` and dies."""
        return "deliveries + 1"

    def _sweep(self, db: sqlite3.Connection, args: dict[str, Any]) -> None:
        """Flip lapsed leases with no deliveries left to dead (durably, at
        the moment their lease lapsed). Claims never take them and ``dead``
        lists them either way, so this only keeps the lapsed range of the
        expiry index short: done at most every :data:`SWEEP_EVERY` seconds
        per connection and channel."""
        now = time.monotonic()
        channel = args["channel"]
        if now - self._swept.get(channel, -SWEEP_EVERY) < SWEEP_EVERY:
            return
        self._swept[channel] = now
        db.execute(
            f"UPDATE claims SET state = {RETIRED}, updated_at = expires_at"
            " WHERE channel = :channel AND state = 'leased' AND expires_at <= :now"
            " AND deliveries >= :max",
            args,
        )

    def _oldest(self, db: sqlite3.Connection, args: dict[str, Any]) -> tuple[int | None, bool]:
        """The oldest claimable seq, and whether it has a claims row already
        (released or lapsed) or was never claimed."""
        again = db.execute(_READY, args).fetchone()[0]
        lapsed = self._lapsed(db, args)
        if lapsed is not None and (again is None or lapsed < again):
            again = lapsed
        fresh = db.execute(_FRESH, args).fetchone()[0]
        if again is None and fresh is None:
            return None, False
        if fresh is None or (again is not None and again < fresh):
            return int(again), True
        return int(fresh), False

    def _lapsed(self, db: sqlite3.Connection, args: dict[str, Any]) -> int | None:
        """The oldest message whose lease lapsed (``expires_at`` passed) with
        deliveries left: a holder that died or froze gives its message
        back by itself, judged at every claim."""
        lapsed = db.execute(_LAPSED, args).fetchone()[0]
        return None if lapsed is None else int(lapsed)

    def _claimed(self, db: sqlite3.Connection, channel: str, seq: int, consumer: str) -> Claim:
        row = db.execute(
            "SELECT m.body, m.sender, c.deliveries, c.expires_at FROM claims c"
            " JOIN messages m ON m.channel = c.channel AND m.seq = c.seq"
            " WHERE c.channel = ? AND c.seq = ?",
            (channel, seq),
        ).fetchone()
        return Claim(
            message_id(channel, seq),
            channel,
            seq,
            row[0],
            row[1],
            consumer,
            int(row[2]),
            float(row[3]),
        )

    # -- the holder's verbs ---------------------------------------------------

    def _holder_update(
        self, op: str, message: str, consumer: str, set_clause: str, extra: dict[str, object]
    ) -> tuple[sqlite3.Connection, str, int]:
        """Run ``UPDATE claims SET <set_clause>`` on a lease ``consumer``
        holds live, inside the caller's write transaction; refuse with
        :class:`LeaseLost` when there is none."""
        channel, seq = split_id(message)
        db = self._db
        most = self._kinds.expect(db, channel, "queue", op)
        now = time.time()
        args = {
            "channel": channel,
            "seq": seq,
            "consumer": consumer,
            "now": now,
            "max": most or self.max_deliveries,
            **extra,
        }
        updated = db.execute(
            f"UPDATE claims SET {set_clause} WHERE channel = :channel AND seq = :seq"
            f" AND {self._held_by_caller(op)}",
            args,
        ).rowcount
        if updated != 1:
            raise LeaseLost(f"{op} {message}: {consumer!r} holds no live lease on it")
        return db, channel, seq

    def _held_by_caller(self, op: str) -> str:
        """SQL: the lease ``op`` (renew, done, release) acts on is held by
        the caller (``:consumer``) right now: a holder whose lease lapsed
        may have been replaced, and must not touch the new holder's work."""
        return _LIVE

    def renew(self, id: str, consumer: str, lease_s: float) -> Claim:
        check_lease(lease_s)
        with self._lock, self._write():
            db, channel, seq = self._holder_update(
                "renew",
                id,
                consumer,
                "expires_at = :now + :lease, updated_at = :now",
                {"lease": lease_s},
            )
            return self._claimed(db, channel, seq, consumer)

    def done(self, id: str, consumer: str) -> None:
        with self._lock, self._write():
            state = self._done_state()
            self._holder_update("done", id, consumer, f"state = {state}, updated_at = :now", {})

    def _done_state(self) -> str:
        """SQL: the state ``done`` leaves a message in: terminal, matched
        by no claim ever again."""
        return "'done'"

    def release(self, id: str, consumer: str) -> None:
        with self._lock, self._write():
            self._holder_update(
                "release",
                id,
                consumer,
                f"state = {self._released_state()}, expires_at = :now, updated_at = :now",
                {},
            )

    def _released_state(self) -> str:
        """SQL: the state a released message goes to: claimable again with
        deliveries left; out of them, dead (kept and listed, never
        dropped); expired by then, retired as ``expired`` (not dead)."""
        return (
            f"CASE WHEN {_MESSAGE_EXPIRES} <= :now THEN 'expired'"
            " WHEN deliveries >= :max THEN 'dead' ELSE 'ready' END"
        )

    # -- dead letters ---------------------------------------------------------

    def dead(self, channel: str, after: int = 0, limit: int = 100) -> list[DeadLetter]:
        if limit <= 0:
            raise DefiniteError(f"dead limit must be > 0, got {limit}")
        with self._lock:
            most = self._kinds.expect(self._db, channel, "queue", "dead")
            if most is None:
                return []  # not a queue (yet): nothing can have died
            rows = self._db.execute(
                "SELECT c.seq, m.body, m.sender, c.deliveries,"
                " CASE WHEN c.state = 'dead' THEN c.updated_at ELSE c.expires_at END"
                " FROM claims c JOIN messages m ON m.channel = c.channel AND m.seq = c.seq"
                " WHERE c.channel = :channel AND c.seq > :after AND (c.state = 'dead'"
                " OR (c.state = 'leased' AND c.expires_at <= :now AND c.deliveries >= :max"
                " AND (m.expires_at IS NULL OR m.expires_at > c.expires_at)))"
                " ORDER BY c.seq LIMIT :limit",
                {
                    "channel": channel,
                    "after": after,
                    "now": time.time(),
                    "max": most,
                    "limit": limit,
                },
            ).fetchall()
        return [
            DeadLetter(message_id(channel, s), channel, int(s), b, snd, int(d), float(t))
            for s, b, snd, d, t in rows
        ]
