"""Postgres mutants: the Postgres bus with one seeded bug each.

Each is a failure mode Postgres *invites*: code that looks right, passes
every single-connection test, and is what an ORM or a quick "let's make it
faster" produces. Each subclass of :class:`~knell.stores.postgres.bus.
PostgresBus` overrides one method (or the schema) and otherwise relies on
the reference's connection handling (``_run``, ``_q``), so error
classification and reconnects stay the reference's. A mutant that changes
the schema keeps its tables in a schema of its own (``<schema>_<suffix>``),
so it never meets tables the reference created.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar, TypeVar

import psycopg
from psycopg.conninfo import make_conninfo

from knell.buses.contract import (
    AckBeyondHead,
    Claim,
    DefiniteError,
    Delivery,
    IndeterminateError,
    JoinAt,
    Message,
    RoleHeld,
    RoleHold,
)
from knell.buses.leases import check_lease, message_id, split_id
from knell.buses.mutants.registry import mutant, no_expiry
from knell.stores.postgres.bus import SCHEMA_NAME, PostgresBus, open_postgres, schema_sql
from knell.stores.postgres.queue import (
    CLAIM_SQL,
    DONE_SQL,
    NOW,
    RELEASE_SQL,
    RENEW_SQL,
    _leased,
)
from knell.stores.postgres.roles import CLAIM_ROLE_SQL, RECEIVE_SQL

__all__ = [
    "AckCursorOnReplicaBus",
    "AckReadThenWriteBus",
    "CachedPrimaryBus",
    "ClaimReadThenUpsertBus",
    "ExpiryByClientClockBus",
    "LeaseFromClaimerClockBus",
    "ReceivePopsInboxBus",
    "RetryWithoutKeyBus",
    "RoleHoldFromClientClockBus",
    "SeqFromSequenceBus",
    "SeqOutsideLockBus",
    "StaleHeadFromReplicaBus",
    "UnloggedTablesBus",
]

_M = TypeVar("_M", bound="_PgMutant")

KILL_CONSUMERS = "postgres-kill-consumers"
STORE_CRASH = "postgres-store-crash"
LATENCY_STORM = "postgres-latency-storm"


class _PgMutant(PostgresBus):
    """A Postgres mutant opens from the same URL as the reference bus."""

    features: frozenset[str] = frozenset()
    """None: the expiry mutants are the SQLite bus's (:mod:`knell.buses.mutants.expiry`),
    and a mutant that writes messages its own way does not store ``expires_at``,
    so knell refuses a ttl scenario on these before anything starts."""

    suffix: ClassVar[str] = ""
    """Non-empty: the mutant's own schema, ``<schema>_<suffix>``."""

    @classmethod
    def from_url(cls: type[_M], url: str) -> _M:
        if not url.startswith(("postgresql://", "postgres://")):
            raise ValueError(f"a Postgres mutant needs a postgresql:// store URL, got {url!r}")
        base = open_postgres(url)  # validates the URL exactly as the reference does
        base.close()
        schema = base.schema
        if cls.suffix:
            schema = f"{schema[: 47 - len(cls.suffix)]}_{cls.suffix}"
            assert SCHEMA_NAME.fullmatch(schema)
        return cls(
            base._conninfo,
            schema=schema,
            poll_interval=base.poll_interval,
            op_timeout=base.op_timeout,
            notify=base.notify_channel is not None,
            display=base.display,
            max_deliveries=base.max_deliveries,
        )

    def _notify(self, conn: psycopg.Connection[Any], channel: str) -> None:
        if self.notify_channel is not None:
            conn.execute("SELECT pg_notify(%s, %s)", (self.notify_channel, channel))


def _original(
    bus: PostgresBus, conn: psycopg.Connection[Any], channel: str, key: str
) -> Message | None:
    row = conn.execute(
        f'SELECT seq, body, sender FROM "{bus.schema}".messages'
        " WHERE channel = %s AND idem_key = %s",
        (channel, key),
    ).fetchone()
    return None if row is None else Message(channel, int(row[0]), row[1], row[2], key)


# -- seq assignment -------------------------------------------------------------


@mutant(
    "postgres-seq-outside-lock",
    failure_mode="Seq computed as MAX(seq)+1 in a READ COMMITTED transaction, without a lock",
    killed_by=("no-duplicate-seq",),
    scenarios=(KILL_CONSUMERS, STORE_CRASH),
    rule="The primary key (channel, seq) arbitrates: a post whose MAX(seq) went stale inserts "
    "nothing and retries",
    store="postgres",
)
class SeqOutsideLockBus(_PgMutant):
    """Failure mode: seq computed as ``MAX(seq) + 1`` without a lock.

    ``post`` runs ``BEGIN; SELECT MAX(seq) + 1; INSERT; COMMIT`` under READ
    COMMITTED, the default isolation level: each statement sees what was
    committed when it started, and nothing stops two producers from
    reading the same maximum before either commits, so both append the same
    seq. (A transaction is not a lock: only SERIALIZABLE, an explicit lock
    or a unique constraint arbitrating the insert would catch it.) The
    reference lets its primary key decide, so this mutant's schema
    (``<schema>_loose``) has none, as a table keyed by a surrogate id.
    Proven by ``no-duplicate-seq``.
    """

    suffix = "loose"

    def _ddl(self) -> str:
        key = ",\n    PRIMARY KEY (channel, seq)\n);"
        ddl = schema_sql(self.schema).replace(key, "\n);", 1)  # the first: messages
        assert key not in ddl.split(".cursors")[0]
        return ddl + (
            f'CREATE INDEX IF NOT EXISTS messages_seq ON "{self.schema}".messages (channel, seq);'
        )

    def post(
        self,
        channel: str,
        body: str,
        sender: str,
        idempotency_key: str | None = None,
        expires_at: float | None = None,
    ) -> Message:
        no_expiry(expires_at)
        table = f'"{self.schema}".messages'

        def call(conn: psycopg.Connection[Any]) -> Message:
            with conn.transaction():
                if idempotency_key is not None:
                    found = _original(self, conn, channel, idempotency_key)
                    if found is not None:
                        return found
                row = conn.execute(
                    f"SELECT COALESCE(MAX(seq), 0) + 1 FROM {table} WHERE channel = %s",
                    (channel,),
                ).fetchone()
                seq = int(row[0]) if row is not None else 1
                conn.execute(
                    f"INSERT INTO {table} (channel, seq, body, sender, idem_key, posted_at)"
                    " VALUES (%s, %s, %s, %s, %s, extract(epoch FROM clock_timestamp()))",
                    (channel, seq, body, sender, idempotency_key),
                )
                self._notify(conn, channel)
            return Message(channel, seq, body, sender, idempotency_key)

        return self._run("post", True, call)


@mutant(
    "postgres-seq-from-sequence",
    failure_mode="Seq taken from a SEQUENCE: numbers commit out of order, a reader skips one",
    killed_by=("no-loss",),
    # Not postgres-kill-consumers: its two producers rarely commit out of
    # order there (0 in 3 seeds); the store-crash scenario's three race.
    scenarios=(STORE_CRASH,),
    rule="A seq is computed from a snapshot holding every lower seq, so seqs commit in order",
    store="postgres",
)
class SeqFromSequenceBus(_PgMutant):
    """Failure mode: seq taken from a ``SEQUENCE`` (a serial or identity
    column): numbers are handed out before their rows commit.

    ``post`` fetches ``nextval`` first (as an ORM does to know the new
    row's id), then inserts and commits. Seqs are unique, but two producers
    can commit in the other order: seq 7 becomes visible while 6 is still
    in flight. A consumer that reads from its cursor then, handles 7 and
    acks it, has moved its cursor past 6, which appears a moment later
    below the cursor and is never delivered to that handle. (Aborted posts
    also leave gaps, which a dense-seq reader may wait on forever.) Proven
    by ``no-loss``.
    """

    suffix = "seqgen"

    def _ddl(self) -> str:
        return schema_sql(self.schema) + (
            f'CREATE SEQUENCE IF NOT EXISTS "{self.schema}".message_seq;'
        )

    def post(
        self,
        channel: str,
        body: str,
        sender: str,
        idempotency_key: str | None = None,
        expires_at: float | None = None,
    ) -> Message:
        no_expiry(expires_at)
        table = f'"{self.schema}".messages'

        def call(conn: psycopg.Connection[Any]) -> Message:
            with conn.transaction():
                if idempotency_key is not None:
                    found = _original(self, conn, channel, idempotency_key)
                    if found is not None:
                        return found
                row = conn.execute(f"SELECT nextval('\"{self.schema}\".message_seq')").fetchone()
                seq = int(row[0]) if row is not None else 0
                conn.execute(
                    f"INSERT INTO {table} (channel, seq, body, sender, idem_key, posted_at)"
                    " VALUES (%s, %s, %s, %s, %s, extract(epoch FROM clock_timestamp()))",
                    (channel, seq, body, sender, idempotency_key),
                )
                self._notify(conn, channel)
            return Message(channel, seq, body, sender, idempotency_key)

        return self._run("post", True, call)


# -- cursors ----------------------------------------------------------------------


@mutant(
    "postgres-ack-read-then-write",
    failure_mode="Cursor clamp read, compared and written back from the client (lost update)",
    killed_by=("no-cursor-regression",),
    scenarios=(KILL_CONSUMERS, STORE_CRASH, "contract-tour"),
    rule="The forward-only clamp is GREATEST(acked, up_to) inside the UPDATE",
    store="postgres",
)
class AckReadThenWriteBus(_PgMutant):
    """Failure mode: the cursor clamp is read, compared and written back
    from the client: a lost update.

    ``ack`` runs ``SELECT acked``, takes ``max(acked, up_to)`` in Python and
    writes it with ``UPDATE``, in one READ COMMITTED transaction. Every ack
    on its own is forward-only, so sequential tests pass; but when twin
    consumers of one handle ack at the same moment (most of all when a
    paused store releases the acks queued behind it), both read the same
    old cursor and the slower, smaller write lands last, moving the cursor
    back. ``SELECT ... FOR UPDATE`` or the clamp inside the ``UPDATE``
    closes the window. Proven by ``no-cursor-regression``.
    """

    def ack(self, handle: str, channel: str, up_to: int) -> int:
        s = f'"{self.schema}"'

        def call(conn: psycopg.Connection[Any]) -> int:
            with conn.transaction():
                row = conn.execute(
                    f"SELECT COALESCE(MAX(seq), 0) FROM {s}.messages WHERE channel = %s",
                    (channel,),
                ).fetchone()
                head = int(row[0]) if row is not None else 0
                if up_to > head:
                    raise AckBeyondHead(f"ack {up_to} is beyond head {head} of {channel!r}")
                row = conn.execute(
                    f"SELECT acked FROM {s}.cursors WHERE handle = %s AND channel = %s",
                    (handle, channel),
                ).fetchone()
                if row is None:
                    raise DefiniteError(f"{handle!r} is not subscribed to {channel!r}")
                acked = max(int(row[0]), up_to)  # the bug: decided on a value already stale
                conn.execute(
                    f"UPDATE {s}.cursors SET acked = %s WHERE handle = %s AND channel = %s",
                    (acked, handle, channel),
                )
            return acked

        return self._run("ack", True, call)


# -- durability --------------------------------------------------------------------


@mutant(
    "postgres-unlogged-tables",
    failure_mode="UNLOGGED tables for speed: a server crash empties them",
    killed_by=("no-loss", "no-duplicate-seq"),
    scenarios=(STORE_CRASH,),
    rule="Messages and cursors live in ordinary (WAL-logged) tables",
    store="postgres",
)
class UnloggedTablesBus(_PgMutant):
    """Failure mode: UNLOGGED tables, for speed: a server crash empties them.

    The schema creates ``messages`` and ``cursors`` as ``UNLOGGED``: no WAL,
    so posts are cheaper, and everything works, acknowledged and
    persistent across clean restarts. After a crash, recovery *truncates*
    unlogged tables: every acknowledged post is gone, cursors are gone,
    and seqs start again at 1. Proven by ``no-loss`` (backlogs gone) and
    ``no-duplicate-seq`` (seqs reused by the next posts) after a store
    crash, with cursor regressions as a consequence.
    """

    suffix = "unlogged"

    def _ddl(self) -> str:
        ddl = schema_sql(self.schema).replace("CREATE TABLE", "CREATE UNLOGGED TABLE")
        assert "CREATE TABLE" not in ddl
        return ddl


# -- a replicated store (only a failover shows this) ----------------------------------

FAILOVER_FOLLOW = "postgres-failover-follow"
"""A failover early in the run: a short run still has time after its window."""


@mutant(
    "postgres-cached-primary",
    failure_mode="The primary's address is resolved once and cached: writes keep going to the "
    "deposed primary after a failover",
    killed_by=("availability",),
    scenarios=(FAILOVER_FOLLOW,),
    rule="Every reconnect asks the multi-host URL for a read-write node "
    "(target_session_attrs=read-write), so it lands on the current primary",
    store="postgres",
)
class CachedPrimaryBus(_PgMutant):
    """Failure mode: the primary's address is cached after the first connect.

    The bus URL names every node with ``target_session_attrs=read-write``,
    and libpq picks the one that takes writes. A client that "saves a
    lookup" remembers the host and port it first landed on and reconnects
    there only, as an application that resolved a DNS name once does. Until
    a failover nothing differs; after it, every reconnect goes to the old
    primary, which is dead (or fenced), and every operation fails from then
    on while the new primary stands idle. Proven by ``availability``
    (errors outside any fault window, once the failover's window and grace
    have passed).
    """

    _pinned: bool = False

    def _connection(self) -> psycopg.Connection[Any]:
        conn = super()._connection()
        if not self._pinned:
            self._pinned = True
            self._conninfo = make_conninfo(
                self._conninfo,
                host=conn.info.host,
                port=str(conn.info.port),
                target_session_attrs="any",
            )
        return conn


REPLICA_LAG = "postgres-replica-lag"


class _ReadsFromReplica(_PgMutant):
    """A bus with a second connection for reads it believes a replica can
    serve: the same multi-host URL with ``target_session_attrs=
    prefer-standby``, so libpq picks a standby when there is one and the
    primary otherwise. On a lone server (every developer's laptop, every
    single-server test) both connections reach the same server and nothing
    differs; only a replicated store shows what the split costs."""

    _reader: PostgresBus | None = None

    def _replica(self) -> PostgresBus:
        if self._reader is None:
            with self._lock:
                self._connection()  # the writer creates the schema first
            reader = PostgresBus(
                make_conninfo(
                    self._conninfo,
                    target_session_attrs="prefer-standby",
                    application_name="knell-reads",
                ),
                schema=self.schema,
                poll_interval=self.poll_interval,
                op_timeout=self.op_timeout,
                notify=False,
                display=self.display,
                max_deliveries=self.max_deliveries,
            )
            reader._schema_ready = True  # a standby cannot create it; the writer does
            self._reader = reader
        return self._reader

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
        super().close()


_JOIN_AT = (
    "INSERT INTO {s}.cursors (handle, channel, acked) VALUES (%s, %s, %s)"
    " ON CONFLICT (handle, channel) DO NOTHING RETURNING acked"
)


@mutant(
    "postgres-stale-head-from-replica",
    failure_mode="The head (where a new subscriber joins, what head() answers) is read from a "
    "replica, which lags the primary",
    killed_by=("no-flood-on-join", "head"),
    scenarios=(REPLICA_LAG,),
    rule="A join reads the head in the statement that writes the cursor, on the primary; "
    "head() reads the primary",
    store="postgres",
)
class StaleHeadFromReplicaBus(_ReadsFromReplica):
    """Failure mode: the head is read from a replica.

    "Where does the log end" looks like the most read-only question a bus
    answers, and the first one a read/write split sends to a replica: here
    ``head()`` and a join's ``subscribe(at="head")`` ask the read connection
    (``prefer-standby``) for ``MAX(seq)``, and only the cursor is written on
    the primary. Asynchronous streaming keeps a replica milliseconds behind,
    so tests pass; a replica that falls behind (a long query, a slow disk,
    a WAL sender stalled: the ``replica-lag`` fault) answers from the past.
    A handle that joins then starts below the true head and is handed the
    history in between (``no-flood-on-join``: ``join-below-head``,
    ``flood``), and a consumer's head read is behind posts already
    acknowledged (``head``: ``stale-head``).
    """

    def head(self, channel: str) -> int:
        return self._replica().head(channel)

    def subscribe(self, handle: str, channel: str, at: JoinAt = "head") -> int:
        if at != "head":
            return super().subscribe(handle, channel, at)
        head = self._replica().head(channel)  # the bug: a replica's idea of the head

        def call(conn: psycopg.Connection[Any]) -> Any:
            self._kinds.fix(conn, channel, "broadcast", "subscribe")
            return conn.execute(self._sql(_JOIN_AT), (handle, channel, head)).fetchone()

        row = self._run("subscribe", True, call)
        if row is not None:
            return int(row[0])
        return self.cursor(handle, channel)


@mutant(
    "postgres-ack-cursor-on-replica",
    failure_mode="Acks are sorted with the reads and sent to a replica: every ack is refused "
    "as a write in a read-only transaction",
    killed_by=("availability",),
    scenarios=(REPLICA_LAG,),
    rule="An ack is a write and goes to the primary (the read-write URL), like every write",
    store="postgres",
)
class AckCursorOnReplicaBus(_ReadsFromReplica):
    """Failure mode: the ack is filed with the reads a replica serves.

    Read scaling: a bus sends what it takes for reads to a second
    connection (``prefer-standby``), and a naive rule sorted the ack there
    because it reads like one (``WITH h AS (SELECT ...``: the head it
    checks) and touches only the consumer's own cursor row, but it is an
    ``UPDATE``. (Only the ack is moved here, so that the one seeded bug is
    what a run sees; fetch and cursor stay on the primary.) On a lone
    server nothing differs.
    On a replicated store libpq hands the read connection a standby, and
    every ack is refused there with ``cannot execute SELECT in a read-only
    transaction`` (SQLSTATE 25006: Postgres names the statement, a SELECT
    whose ``WITH`` holds the UPDATE; an ERROR reply, so definitely not
    applied), which this bus reports as the reference classifies any ERROR
    reply, rather than swallow it and redeliver in silence. No
    cursor ever moves while a standby answers, so consumers are handed the
    same page again each round. Proven by ``availability``: ack errors
    outside every fault window.
    """

    def ack(self, handle: str, channel: str, up_to: int) -> int:
        args = {"h": handle, "c": channel, "u": up_to}
        reader = self._replica()  # the bug: the read connection, a standby when there is one
        row = reader._run(
            "ack",
            True,
            lambda c: (
                reader._broadcast(c, channel, "ack").execute(reader._q["ack"], args).fetchone()
            ),
        )
        head = int(row[0]) if row is not None else 0
        if row is None or row[1] is None:
            if up_to > head:
                raise AckBeyondHead(f"ack {up_to} is beyond head {head} of {channel!r}")
            raise DefiniteError(f"{handle!r} is not subscribed to {channel!r}")
        return int(row[1])


# -- lost replies (only a network fault shows these) ---------------------------------


@mutant(
    "postgres-retry-without-key",
    failure_mode="A post whose reply never came is re-sent by the client without its key",
    killed_by=("idempotency",),
    scenarios=(LATENCY_STORM,),
    rule="A post retried after an unknown outcome carries its idempotency key",
    store="postgres",
)
class RetryWithoutKeyBus(_PgMutant):
    """Failure mode: a post whose reply never came is re-sent, without its
    idempotency key.

    A client library that "helpfully" retries a timed-out write once, as a
    fresh statement: the key is per request, the retry builds a new one.
    But a timeout says nothing about the first attempt, which may well have
    committed with only its reply held up in a slow network: the retry
    appends the same message a second time under a new seq. No process
    crash or store crash shows it (nothing times out there); a latency
    storm on the replies does. It retries until an attempt goes through
    (the storm passes), each as a fresh post. Proven by ``idempotency``
    (one key, two seqs: readers see the message id at both).
    """

    retries: ClassVar[int] = 8

    def post(
        self,
        channel: str,
        body: str,
        sender: str,
        idempotency_key: str | None = None,
        expires_at: float | None = None,
    ) -> Message:
        try:
            return super().post(channel, body, sender, idempotency_key, expires_at)
        except IndeterminateError:
            failure: Exception | None = None
            for _ in range(self.retries):
                try:
                    return super().post(channel, body, sender, None, expires_at)
                except (IndeterminateError, DefiniteError) as exc:
                    failure = exc
                    time.sleep(0.2)
            assert failure is not None
            raise failure from None


# -- queues and role inboxes ----------------------------------------------------------

QUEUE_KILL = "queue-kill-claimers"
HOLDER_CHURN = "atmostonce-holder-churn"


@mutant(
    "postgres-claim-read-then-upsert",
    failure_mode="A claim reads the oldest claimable message, then upserts the lease: "
    "two consumers win one message",
    killed_by=("lease-exclusive",),
    scenarios=(QUEUE_KILL,),
    rule="Choose and lease in one statement: FOR UPDATE SKIP LOCKED, then an UPDATE "
    "guarded by claimability (or an insert the primary key arbitrates)",
    store="postgres",
)
class ClaimReadThenUpsertBus(_PgMutant):
    """Failure mode: claim without an atomic guard, the Postgres way.

    The get-or-create an ORM writes: one statement finds the oldest
    claimable message, a second "saves" the lease as an upsert (``INSERT
    ... ON CONFLICT DO UPDATE``), which always succeeds. Two claimers that
    read the same oldest message both write a lease and both go to work;
    the last upsert wins the row, the first consumer's lease is simply
    overwritten. No single-connection test sees it; claimers racing on a
    busy queue do, within seconds. Proven by ``lease-exclusive``
    (two live leases on one message)."""

    def claim(self, channel: str, consumer: str, lease_s: float) -> Claim | None:
        check_lease(lease_s)
        s = f'"{self.schema}"'

        def call(conn: psycopg.Connection[Any]) -> Claim | None:
            most = int(self._kinds.fix(conn, channel, "queue", "claim", self.max_deliveries) or 1)
            now = time.time()
            row = conn.execute(
                f"SELECT seq FROM {s}.claims WHERE channel = %s AND (state = 'ready'"
                " OR (state = 'leased' AND expires_at <= %s AND deliveries < %s))"
                " ORDER BY seq LIMIT 1",
                (channel, now, most),
            ).fetchone()
            if row is None:
                row = conn.execute(
                    f"SELECT MIN(seq) FROM {s}.messages WHERE channel = %s AND seq >"
                    f" (SELECT COALESCE(MAX(seq), 0) FROM {s}.claims WHERE channel = %s)",
                    (channel, channel),
                ).fetchone()
            if row is None or row[0] is None:
                return None
            seq = int(row[0])
            leased = conn.execute(
                f"INSERT INTO {s}.claims AS c (channel, seq, state, consumer, expires_at,"
                " deliveries, updated_at) VALUES (%(c)s, %(seq)s, 'leased', %(who)s,"
                " %(exp)s, 1, %(now)s) ON CONFLICT (channel, seq) DO UPDATE SET"
                " state = 'leased', consumer = excluded.consumer,"
                " expires_at = excluded.expires_at, deliveries = c.deliveries + 1,"
                " updated_at = excluded.updated_at RETURNING deliveries, expires_at",
                {"c": channel, "seq": seq, "who": consumer, "exp": now + lease_s, "now": now},
            ).fetchone()
            message = conn.execute(
                f"SELECT body, sender FROM {s}.messages WHERE channel = %s AND seq = %s",
                (channel, seq),
            ).fetchone()
            assert leased is not None and message is not None
            return Claim(
                message_id(channel, seq),
                channel,
                seq,
                message[0],
                message[1],
                consumer,
                int(leased[0]),
                float(leased[1]),
            )

        return self._run("claim", True, call)


@mutant(
    "postgres-receive-pops-inbox",
    failure_mode="receive pops the inbox (DELETE ... RETURNING style): what a crashed "
    "run received is gone, never listed as stranded",
    killed_by=("nothing-vanishes",),
    scenarios=(HOLDER_CHURN,),
    rule="A delivery stays unread until its recipient reads it; once its run leaves "
    "the role, it is listed as stranded",
    store="postgres",
)
class ReceivePopsInboxBus(_PgMutant):
    """Failure mode: a receive that consumes.

    The classic Postgres work-queue idiom (``DELETE ... RETURNING``, or an
    ``UPDATE ... SET done = true RETURNING``) applied to a role inbox: a
    receive hands the messages out and marks them finished in the same
    statement. At-most-once holds, and every single-run test passes; but a
    run that dies between receive and read takes its messages with it, and
    the stranded list, derived from unread deliveries, never shows them.
    Proven by ``nothing-vanishes`` (after the final phase, messages neither
    read nor listed)."""

    def receive(self, run: str, limit: int = 50) -> list[Delivery]:
        unread = f"(channel, seq, run, delivered_at)\n  SELECT channel, seq, %(run)s, {NOW} FROM"
        assert unread in RECEIVE_SQL
        popped = RECEIVE_SQL.replace(
            unread,
            f"(channel, seq, run, delivered_at, read_at)\n"
            f"  SELECT channel, seq, %(run)s, {NOW}, {NOW} FROM",
        )
        return self._deliver(run, limit, popped)


# -- clocks (only a clock fault shows these) -------------------------------------------


def _swapped(text: str, *pairs: tuple[str, str]) -> str:
    """``text`` with each ``old`` replaced by ``new``; every ``old`` must be
    there (a mutant whose edit silently missed would be the reference)."""
    for old, new in pairs:
        assert old in text, old
        text = text.replace(old, new)
    return text


_DEADLINE_CLAIM = _swapped(
    CLAIM_SQL,
    ("expires_at = n.t + %(lease)s", "expires_at = %(deadline)s"),
    ("'leased', %(who)s, n.t + %(lease)s, 1, n.t", "'leased', %(who)s, %(deadline)s, 1, n.t"),
)
_DEADLINE_RENEW = _swapped(
    RENEW_SQL, (f"expires_at = {NOW} + %(lease)s", "expires_at = %(deadline)s")
)


QUEUE_SKEW = "queue-clock-skew"
QUEUE_JUMP = "queue-clock-jump"
HOLDER_SKEW = "atmostonce-clock-skew"
STORE_CLOCK = "postgres-clock-store"


@mutant(
    "postgres-lease-from-claimer-clock",
    failure_mode="The lease deadline is the claimer's clock + lease_s; the server judges lapse "
    "by its own clock: a claimer behind writes a lease already lapsed",
    killed_by=("lease-exclusive",),
    scenarios=(QUEUE_SKEW, STORE_CLOCK),
    rule="The store computes the deadline from its own clock, in the statement that grants it",
    store="postgres",
)
class LeaseFromClaimerClockBus(_PgMutant):
    """Failure mode: the lease deadline computed from the claimer's clock.

    ``claim`` and ``renew`` send ``time.time() + lease_s`` and the server
    stores it as ``expires_at``; the server still judges lapse by its own
    clock. Every test on one machine passes: client and server read the
    same clock. A claimer whose clock runs behind (another machine, a
    container that drifted) writes a deadline already past, and the next
    claimer takes the message it is working on; one that runs ahead holds
    a message long after it died. Proven by ``lease-exclusive`` (two live
    leases) under per-claimer skew."""

    def claim(self, channel: str, consumer: str, lease_s: float) -> Claim | None:
        check_lease(lease_s)
        deadline = time.time() + float(lease_s)  # the bug: the client's clock
        return self._claim(channel, consumer, lease_s, _DEADLINE_CLAIM, {"deadline": deadline})

    def renew(self, id: str, consumer: str, lease_s: float) -> Claim:
        check_lease(lease_s)
        extra = {"lease": float(lease_s), "deadline": time.time() + float(lease_s)}
        row = self._holder("renew", id, consumer, _DEADLINE_RENEW, extra)
        return _leased(split_id(id)[0], consumer, row)


_CLIENT_LIVE = (f"expires_at > {NOW}", "expires_at > %(client_now)s")
_CLIENT_CLAIM = _swapped(
    CLAIM_SQL,
    ("c.expires_at <= n.t", "c.expires_at <= %(client_now)s"),
    ("expires_at <= (SELECT t FROM n)", "expires_at <= %(client_now)s"),
)


@mutant(
    "postgres-expiry-by-client-clock",
    failure_mode="Lapse judged against the client's wall clock: after it steps back (or the "
    "server's forward) leases look live for that long, a dead worker's message is stuck",
    killed_by=("lease-exclusive", "lease-expiry", "lease-holder"),
    # Declared on queue-clock-jump alone, where one claimer's forward step
    # catches it. postgres-clock-store (every claimer shares the bug) missed
    # it with 30 s steps (0 of 1 at 10 s) and catches it with 5 s steps
    # (lease-expiry, seeds 149 and 150 at 5 s): not relied on.
    scenarios=(QUEUE_JUMP,),
    rule="Lapse is judged by the store's clock inside the statement that acts on it",
    store="postgres",
)
class ExpiryByClientClockBus(_PgMutant):
    """Failure mode: lease expiry compared with the client's wall clock.

    The server writes ``expires_at`` from its own clock, but every
    statement that asks "has it lapsed?" is handed the caller's
    ``time.time()``: claim (which lapsed leases may be taken) and renew,
    done, release (is the caller's lease still live?). When the client's
    clock is stepped back (an NTP correction, a VM restored), or the
    server's forward, every lease looks live that much longer: a message
    whose worker died is stuck, and a worker past its lease still renews
    and finishes; a claimer whose clock stepped forward takes messages the
    server still counts as leased. Proven by ``lease-exclusive`` (a
    claimer ahead), ``lease-expiry`` (``not-claimable``) and
    ``lease-holder`` (``stale-holder-accepted``) (a claimer behind, when no
    other claimer took the message first)."""

    def claim(self, channel: str, consumer: str, lease_s: float) -> Claim | None:
        extra = {"client_now": time.time()}  # the bug: the client's clock judges lapse
        return self._claim(channel, consumer, lease_s, _CLIENT_CLAIM, extra)

    def renew(self, id: str, consumer: str, lease_s: float) -> Claim:
        check_lease(lease_s)
        extra = {"lease": float(lease_s), "client_now": time.time()}
        row = self._holder("renew", id, consumer, _swapped(RENEW_SQL, _CLIENT_LIVE), extra)
        return _leased(split_id(id)[0], consumer, row)

    def done(self, id: str, consumer: str) -> None:
        extra = {"client_now": time.time()}
        self._holder("done", id, consumer, _swapped(DONE_SQL, _CLIENT_LIVE), extra)

    def release(self, id: str, consumer: str) -> None:
        extra = {"client_now": time.time()}
        self._holder("release", id, consumer, _swapped(RELEASE_SQL, _CLIENT_LIVE), extra)


_DEADLINE_ROLE = _swapped(CLAIM_ROLE_SQL, (f"{NOW} + %(lease)s", "%(deadline)s"))


@mutant(
    "postgres-role-hold-from-client-clock",
    failure_mode="A role hold's deadline is the holder's clock + lease_s: a holder behind "
    "writes a hold already lapsed, and the next run takes the role from it",
    killed_by=("role-exclusive",),
    scenarios=(HOLDER_SKEW,),
    rule="The store computes the hold's deadline from its own clock when it grants it",
    store="postgres",
)
class RoleHoldFromClientClockBus(_PgMutant):
    """Failure mode: a role hold's TTL computed from the client's clock.

    ``claim_role`` sends ``time.time() + lease_s`` as the hold's deadline;
    the server judges takeovers and receives by its own clock. A holder
    whose clock runs behind writes a hold the server already counts as
    lapsed, so the next run takes the role while the first still holds it
    (and is told it holds none on its next receive); one whose clock runs
    ahead keeps the role for minutes after it died. Proven by
    ``role-exclusive`` (two live holds) under per-holder skew."""

    def claim_role(self, role: str, run: str, lease_s: float) -> RoleHold:
        check_lease(lease_s)
        args = {"r": role, "run": run, "lease": float(lease_s)}
        args["deadline"] = time.time() + float(lease_s)  # the bug: the client's clock

        def call(conn: psycopg.Connection[Any]) -> Any:
            self._kinds.fix(conn, role, "role", "claim_role")
            return conn.execute(self._sql(_DEADLINE_ROLE), args).fetchone()

        row = self._run("claim_role", True, call)
        if row is None or row[0] is None:
            holder = "another run" if row is None or row[1] is None else f"run {row[1]!r}"
            raise RoleHeld(f"role {role!r} is held by {holder}")
        return RoleHold(role, run, float(row[0]))
