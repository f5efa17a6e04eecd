"""Queue channels on the Postgres bus: leases, requeue, dead-letter.

The layout is the SQLite reference's (:mod:`knell.buses.sqlite_queue`): a
queue's messages are ordinary ``messages`` rows, and one ``claims`` row per
message ever claimed holds its read-state (``state`` leased | ready | done
| dead, ``consumer``, ``expires_at``, ``deliveries``, never reset). What
changes is who serializes the claimers: SQLite has one writer at a time,
Postgres has many processes writing at once, so every promise is carried
by one statement and the server's row locks and unique indexes.

* **One winner.** A claim is *one* statement (one implicit transaction,
  one round trip). Its first step, ``SELECT ... ORDER BY seq LIMIT 1 FOR
  UPDATE SKIP LOCKED``, takes the oldest released or lapsed row and locks
  it; Postgres re-checks the row's condition on its newest version before
  granting the lock, and a row another claimer is taking right now is
  skipped rather than waited on. Then a guarded ``UPDATE`` leases it.
  When no such row exists, the oldest never-claimed message is leased by
  ``INSERT ... ON CONFLICT DO NOTHING``: the primary key ``(channel,
  seq)`` is the compare-and-set, so of two claimers inserting the same
  seq one inserts and the other inserts nothing and tries again.
* **Never-claimed messages need no row.** Seqs commit in order (the post
  path guarantees it) and a claim always takes the oldest claimable
  message, so the never-claimed are exactly the messages above the highest
  claimed seq: an index lookup, never a scan of the done.
* **Lapse is judged by the server's clock** (``clock_timestamp()``) inside
  the statement that acts on it: renew, done and release match only a
  lease whose ``expires_at`` is still ahead, re-evaluated on the row's
  newest version if another transaction changed it meanwhile. A lapsed
  lease is claimable at once (with deliveries left) or dead (without),
  so the declared ``sweep_interval`` is 0. The dead-flip of lapsed,
  used-up leases runs at most every :data:`SWEEP_EVERY` seconds per
  channel, and ``dead`` lists lapsed-and-used-up rows it has not flipped.
* **Every lookup is an index range**: released rows by seq, leases by
  expiry, dead rows by seq (partial indexes), never-claimed messages above
  the highest claimed seq.

Ids are ``CHANNEL/SEQ``, as on SQLite.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg

from knell.buses.contract import Claim, DeadLetter, DefiniteError, LeaseLost, QueueInfo
from knell.buses.leases import (
    DEFAULT_MAX_DELIVERIES,
    check_lease,
    check_max_deliveries,
    message_id,
    split_id,
)
from knell.stores.postgres.kinds import PgKinds

__all__ = [
    "CLAIM_SQL",
    "DONE_SQL",
    "QUEUE_DDL",
    "RELEASE_SQL",
    "RENEW_SQL",
    "RETIRE_SQL",
    "PostgresQueue",
]

T = TypeVar("T")

QUEUE_DDL = """
CREATE TABLE IF NOT EXISTS {s}.claims (
    channel text NOT NULL,
    seq bigint NOT NULL,
    state text NOT NULL,
    consumer text,
    expires_at double precision,
    deliveries integer NOT NULL,
    updated_at double precision NOT NULL,
    PRIMARY KEY (channel, seq)
);
CREATE INDEX IF NOT EXISTS claims_ready ON {s}.claims (channel, seq) WHERE state = 'ready';
CREATE INDEX IF NOT EXISTS claims_leases
    ON {s}.claims (channel, expires_at) WHERE state = 'leased';
CREATE INDEX IF NOT EXISTS claims_dead ON {s}.claims (channel, seq) WHERE state = 'dead';
"""

CANDIDATES = 8
"""How many of the oldest released (and lapsed) rows a claim looks at:
room for as many claimers locking rows at the same instant."""

LAPSED_SCAN = 1000
"""At most this many lapsed leases (the earliest lapsed first) are looked
at per claim: the bound that makes the planner walk the expiry index
whatever its estimates. Only with more lapsed-and-unclaimed leases than
this at once could a claim take a lapsed message that is not the oldest."""

NOW = "extract(epoch FROM clock_timestamp())::float8"
"""The server's clock, in Unix seconds, read when evaluated (a volatile
function: a guard re-checked on a newer row version reads it again)."""

_LIVE = f"state = 'leased' AND consumer = %(who)s AND expires_at > {NOW}"
"""A claims row whose lease ``who`` holds right now."""

_CLAIMABLE = (
    "CASE c.state WHEN 'ready' THEN true"
    " WHEN 'leased' THEN c.expires_at <= n.t AND c.deliveries < %(max)s ELSE false END"
)
"""The guard: released, or lapsed with deliveries left. A CASE, not an OR
of states, so the planner cannot answer it from the partial indexes (a
scan of every lease): the rows it guards are found by primary key."""

CLAIM_SQL = f"""
WITH n AS (SELECT {NOW} AS t),
lapsed AS MATERIALIZED (
  SELECT seq FROM {{s}}.claims WHERE channel = %(c)s AND state = 'leased'
    AND expires_at <= (SELECT t FROM n) AND deliveries < %(max)s
  ORDER BY channel, expires_at LIMIT {LAPSED_SCAN}),
cand AS (
  (SELECT seq FROM {{s}}.claims WHERE channel = %(c)s AND state = 'ready'
   ORDER BY seq LIMIT {CANDIDATES})
  UNION ALL
  (SELECT seq FROM lapsed ORDER BY seq LIMIT {CANDIDATES})),
old AS (
  SELECT c.seq FROM cand JOIN {{s}}.claims c ON c.channel = %(c)s AND c.seq = cand.seq, n
  WHERE {_CLAIMABLE} AND NOT EXISTS (SELECT 1 FROM {{s}}.messages m
    WHERE m.channel = %(c)s AND m.seq = c.seq AND m.expires_at <= n.t)
  ORDER BY c.seq LIMIT 1 FOR UPDATE OF c SKIP LOCKED),
fresh AS (
  SELECT m.seq FROM {{s}}.messages m
  WHERE m.channel = %(c)s AND NOT EXISTS (SELECT 1 FROM cand)
    AND m.seq > (SELECT COALESCE(MAX(seq), 0) FROM {{s}}.claims WHERE channel = %(c)s)
    AND (m.expires_at IS NULL OR m.expires_at > (SELECT t FROM n))
  ORDER BY m.seq LIMIT 1),
again AS (
  UPDATE {{s}}.claims c SET state = 'leased', consumer = %(who)s,
    expires_at = n.t + %(lease)s, deliveries = c.deliveries + 1, updated_at = n.t
  FROM n
  WHERE c.channel = %(c)s AND c.seq = (SELECT seq FROM old)
    AND {_CLAIMABLE}
  RETURNING c.seq, c.deliveries, c.expires_at),
first AS (
  INSERT INTO {{s}}.claims (channel, seq, state, consumer, expires_at, deliveries, updated_at)
  SELECT %(c)s, fresh.seq, 'leased', %(who)s, n.t + %(lease)s, 1, n.t FROM fresh, n
  ON CONFLICT (channel, seq) DO NOTHING
  RETURNING seq, deliveries, expires_at),
won AS (SELECT * FROM again UNION ALL SELECT * FROM first)
SELECT EXISTS (SELECT 1 FROM cand) OR EXISTS (SELECT 1 FROM fresh),
  w.seq, w.deliveries, w.expires_at, m.body, m.sender
FROM (SELECT 1) AS one LEFT JOIN won w ON true
LEFT JOIN {{s}}.messages m ON m.channel = %(c)s AND m.seq = w.seq
"""
"""The whole claim (see the module docstring). ``cand`` reads the oldest
released and the oldest lapsed rows through their own indexes, never the
running leases (``lapsed`` is materialized and walks the expiry index in
its order, so the planner cannot trade it for a scan); the rows locked and
updated are looked up by primary key from the candidates' seqs. ``old``
locks the oldest still claimable, skipping rows another claimer holds
locked. The first column says whether anything was claimable in this
snapshot: if so but nothing was won (another claimer took or is taking it
this instant) the claim tries again, so it never answers "nothing" while a
message is claimable, and never passes an older claimable message over for
a never-claimed one."""

_MESSAGE_EXPIRES = (
    "(SELECT m.expires_at FROM {s}.messages m"
    " WHERE m.channel = {s}.claims.channel AND m.seq = {s}.claims.seq)"
)
"""SQL: the ``expires_at`` of a claims row's message (NULL: never)."""

RETIRE_SQL = f"""
WITH n AS (SELECT {NOW} AS t),
top AS (SELECT COALESCE(MAX(seq), 0) AS s FROM {{s}}.claims WHERE channel = %(c)s),
live AS (
  SELECT m.seq FROM {{s}}.messages m WHERE m.channel = %(c)s AND m.seq > (SELECT s FROM top)
    AND (m.expires_at IS NULL OR m.expires_at > (SELECT t FROM n))
  ORDER BY m.seq LIMIT 1),
gone AS (
  INSERT INTO {{s}}.claims (channel, seq, state, consumer, expires_at, deliveries, updated_at)
  SELECT %(c)s, m.seq, 'expired', NULL, NULL, 0, n.t FROM {{s}}.messages m, n
  WHERE m.channel = %(c)s AND m.seq > (SELECT s FROM top)
    AND m.seq < COALESCE((SELECT seq FROM live), 9223372036854775807)
  ON CONFLICT (channel, seq) DO NOTHING RETURNING seq),
stale AS MATERIALIZED (
  (SELECT seq FROM {{s}}.claims WHERE channel = %(c)s AND state = 'ready'
   ORDER BY seq LIMIT {LAPSED_SCAN})
  UNION ALL
  (SELECT seq FROM {{s}}.claims WHERE channel = %(c)s AND state = 'leased'
   AND expires_at <= (SELECT t FROM n) ORDER BY channel, expires_at LIMIT {LAPSED_SCAN})),
retired AS (
  UPDATE {{s}}.claims c SET state = 'expired', updated_at = n.t FROM n
  WHERE c.channel = %(c)s AND c.seq IN (
    SELECT s.seq FROM stale s JOIN {{s}}.messages m ON m.channel = %(c)s AND m.seq = s.seq
    WHERE m.expires_at <= (SELECT t FROM n))
  AND (c.state = 'ready' OR (c.state = 'leased' AND c.expires_at <= n.t))
  RETURNING c.seq)
SELECT (SELECT count(*) FROM gone) + (SELECT count(*) FROM retired)
"""
"""Expiry, judged at claim time by the server's clock: retire as
``expired`` (claimable never again, listed by ``dead`` never: it was not
delivered to death, it ran out of time) the never-claimed messages below
the oldest live never-claimed one, and the released or lapsed rows whose
message has expired. The claim statement itself never leases an expired
message (its guards skip one); this clears the expired ones out of its
candidates so they stop being looked at. A lease taken before its
message expired is left alone until it lapses: the holder was handed
live work.

It runs only when a claim found something claimable but won nothing (the
claim's own guards pass expired candidates over, so expired released or
lapsed rows show up exactly that way), then before the retry: a claim
that wins at once pays no extra round trip (measured: retiring before
every claim cost a third of the claim-and-done rate)."""

RETIRED = f"CASE WHEN {_MESSAGE_EXPIRES} <= expires_at THEN 'expired' ELSE 'dead' END"
"""SQL: what a used-up lapsed lease becomes: ``expired`` when its message
expired before the lease lapsed, else ``dead``."""

_SWEEP = f"""
UPDATE {{s}}.claims SET state = {RETIRED}, updated_at = expires_at
WHERE (channel, seq) IN (
  SELECT channel, seq FROM {{s}}.claims
  WHERE channel = %(c)s AND state = 'leased' AND expires_at <= {NOW} AND deliveries >= %(max)s
  FOR UPDATE SKIP LOCKED)
"""

RENEW_SQL = f"""
WITH r AS (
  UPDATE {{s}}.claims SET expires_at = {NOW} + %(lease)s, updated_at = {NOW}
  WHERE channel = %(c)s AND seq = %(seq)s AND {_LIVE}
  RETURNING seq, deliveries, expires_at)
SELECT r.seq, r.deliveries, r.expires_at, m.body, m.sender
FROM r JOIN {{s}}.messages m ON m.channel = %(c)s AND m.seq = r.seq
"""
DONE_SQL = (
    f"UPDATE {{s}}.claims SET state = 'done', updated_at = {NOW}"
    f" WHERE channel = %(c)s AND seq = %(seq)s AND {_LIVE}"
)
RELEASE_SQL = (
    f"UPDATE {{s}}.claims SET state = CASE WHEN {_MESSAGE_EXPIRES} <= {NOW} THEN 'expired'"
    " WHEN deliveries >= %(max)s THEN 'dead' ELSE 'ready' END,"
    f" expires_at = {NOW}, updated_at = {NOW}"
    f" WHERE channel = %(c)s AND seq = %(seq)s AND {_LIVE}"
)
_DEAD = f"""
SELECT c.seq, m.body, m.sender, c.deliveries,
  CASE WHEN c.state = 'dead' THEN c.updated_at ELSE c.expires_at END
FROM {{s}}.claims c JOIN {{s}}.messages m ON m.channel = c.channel AND m.seq = c.seq
WHERE c.channel = %(c)s AND c.seq > %(after)s
  AND (c.state = 'dead'
       OR (c.state = 'leased' AND c.expires_at <= {NOW} AND c.deliveries >= %(max)s
           AND (m.expires_at IS NULL OR m.expires_at > c.expires_at)))
ORDER BY c.seq LIMIT %(limit)s
"""

CLAIM_RETRIES = 100
"""A claim that lost this many races in a row gives up (definitely
nothing claimed): each lost race means another claimer won a message."""

SWEEP_EVERY = 0.1


def _leased(channel: str, consumer: str, row: Any) -> Claim:
    """A :class:`Claim` from a statement's ``seq, deliveries, expires_at,
    body, sender`` (the claim's and renew's row shape)."""
    seq = int(row[0])
    return Claim(
        message_id(channel, seq),
        channel,
        seq,
        row[3],
        row[4],
        consumer,
        int(row[1]),
        float(row[2]),
    )


class PostgresQueue:
    """The :class:`~knell.buses.contract.QueueBus` half of the Postgres bus
    (a mixin: the bus provides ``_run``, ``schema`` and the kinds)."""

    max_deliveries: int = DEFAULT_MAX_DELIVERIES
    """Used by a claim on a channel that was never declared."""

    if TYPE_CHECKING:
        schema: str
        _kinds: PgKinds

        def _run(
            self, what: str, write: bool, call: Callable[[psycopg.Connection[Any]], T]
        ) -> T: ...

        def _sql(self, text: str) -> str: ...

    _swept: dict[str, float]

    def declare_queue(self, channel: str, max_deliveries: int) -> QueueInfo:
        check_max_deliveries(max_deliveries)
        actual = self._run(
            "declare_queue",
            True,
            lambda c: self._kinds.fix(c, channel, "queue", "declare_queue", max_deliveries),
        )
        return QueueInfo(channel, int(actual or max_deliveries), 0.0)

    def claim(self, channel: str, consumer: str, lease_s: float) -> Claim | None:
        return self._claim(channel, consumer, lease_s, CLAIM_SQL, {})

    def _claim(
        self, channel: str, consumer: str, lease_s: float, text: str, extra: dict[str, Any]
    ) -> Claim | None:
        """Run a claim statement shaped like :data:`CLAIM_SQL` with extra
        arguments (a mutant may change how it reads the time)."""
        check_lease(lease_s)
        sql = self._sql(text)

        retire = False

        def call(conn: psycopg.Connection[Any]) -> Any:
            most = int(self._kinds.fix(conn, channel, "queue", "claim", self.max_deliveries) or 1)
            args = {"c": channel, "who": consumer, "lease": float(lease_s), "max": most, **extra}
            self._sweep(conn, args)
            if retire:
                conn.execute(self._sql(RETIRE_SQL), args)
            return conn.execute(sql, args).fetchone()

        for _ in range(CLAIM_RETRIES):
            row = self._run("claim", True, call)
            if row is None or not row[0]:
                return None
            if row[1] is not None:
                return _leased(channel, consumer, row[1:])
            # Something looked claimable but nothing was won: a race, or
            # candidates the claim passed over as expired. Retire those
            # before trying again (a claim that wins at once never pays
            # for the extra statement).
            retire = True
        raise DefiniteError(f"postgres claim: lost {CLAIM_RETRIES} races on {channel!r}")

    def _sweep(self, conn: psycopg.Connection[Any], args: dict[str, Any]) -> None:
        """Flip lapsed leases with no deliveries left to dead, at most every
        :data:`SWEEP_EVERY` seconds per channel (claims never take them and
        ``dead`` lists them either way: this keeps the open range short)."""
        now = time.monotonic()
        channel = args["c"]
        if now - self._swept.get(channel, -SWEEP_EVERY) < SWEEP_EVERY:
            return
        self._swept[channel] = now
        conn.execute(self._sql(_SWEEP), args)

    def _holder(self, op: str, id: str, consumer: str, sql: str, extra: dict[str, Any]) -> Any:
        """Run a statement on a lease ``consumer`` holds live; refuse with
        :class:`LeaseLost` when it matched none. Returns its row (a
        statement that returns rows) or its row count."""
        channel, seq = split_id(id)

        def call(conn: psycopg.Connection[Any]) -> Any:
            most = self._kinds.expect(conn, channel, "queue", op)
            args = {
                "c": channel,
                "seq": seq,
                "who": consumer,
                "max": most or self.max_deliveries,
                **extra,
            }
            cur = conn.execute(self._sql(sql), args)
            return cur.fetchone() if cur.description is not None else cur.rowcount

        found = self._run(op, True, call)
        if found is None or found == 0:
            raise LeaseLost(f"{op} {id}: {consumer!r} holds no live lease on it")
        return found

    def renew(self, id: str, consumer: str, lease_s: float) -> Claim:
        check_lease(lease_s)
        row = self._holder("renew", id, consumer, RENEW_SQL, {"lease": float(lease_s)})
        return _leased(split_id(id)[0], consumer, row)

    def done(self, id: str, consumer: str) -> None:
        self._holder("done", id, consumer, DONE_SQL, {})

    def release(self, id: str, consumer: str) -> None:
        self._holder("release", id, consumer, RELEASE_SQL, {})

    def dead(self, channel: str, after: int = 0, limit: int = 100) -> list[DeadLetter]:
        if limit <= 0:
            raise DefiniteError(f"dead limit must be > 0, got {limit}")

        def call(conn: psycopg.Connection[Any]) -> list[Any]:
            most = self._kinds.expect(conn, channel, "queue", "dead")
            if most is None:
                return []  # not a queue (yet): nothing can have died
            args = {"c": channel, "after": after, "max": most, "limit": limit}
            return conn.execute(self._sql(_DEAD), args).fetchall()

        rows = self._run("dead", False, call)
        return [
            DeadLetter(message_id(channel, int(s)), channel, int(s), b, snd, int(d), float(t))
            for s, b, snd, d, t in rows
        ]
