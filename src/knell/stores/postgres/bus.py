"""The Postgres bus: the reference contracts on a Postgres server.

Broadcast channels are this module; queue channels, role inboxes and
stream rings are its three mixins (:mod:`.queue`, :mod:`.roles`,
:mod:`.stream`), on the same log. A channel's kind (:mod:`.kinds`) is fixed by
``subscribe`` and checked by fetch, ack and cursor (a cached lookup);
``post`` never refuses a kind, and the append below stays one statement:
on a channel this bus knows is not a stream it is the plain append; on
one it knows is a stream it is the ring's append (:mod:`.stream`), which
trims the ring in the same statement; on one whose kind it has not seen
it is the plain append guarded by "not a stream" (nothing appended on a
stream: the post looks the kind up and takes the ring's append).

Many OS processes, each with its own connection, write at once. No
read-modify-write is ever decided on the client: each is one autocommit
statement whose invariant is enforced by the server, at the moment of the
write, so there is no window in which another process can act:

* **post** is one ``INSERT ... SELECT MAX(seq) + 1 ... ON CONFLICT DO
  NOTHING RETURNING seq``. The primary key ``(channel, seq)`` is a
  compare-and-set: a ``MAX`` read from a snapshot that another producer
  has overtaken names a seq that exists (or is being inserted: the insert
  waits for that transaction), so nothing is inserted and the post is
  retried in a fresh snapshot; a ``MAX`` that is current is exactly the
  next seq. The unique index on ``(channel, idem_key)`` arbitrates the
  idempotency key the same way, inside the same insert: a repeated key
  inserts nothing, and the post returns the original. Seqs are dense,
  and *committed in seq order*: seq k + 1 can only be computed from a
  snapshot in which k is committed, so a reader never sees 7 while 6 is
  still in flight (the trap of a ``SEQUENCE`` or an identity column,
  whose numbers are handed out before their rows commit). This is the
  SQLite reference's "guessed seq" fast path, with the server's unique
  indexes as the arbiter. Why not a lock: a per-channel advisory lock or
  counter row serializes the same, but costs a PL/pgSQL call or a second
  write per post, a third more time per post here. Why not SERIALIZABLE:
  every append of a channel conflicts with every other, so it would
  abort and retry wholesale where a unique index just says no.
* **ack** is ``UPDATE ... SET acked = GREATEST(acked, up_to)``: a
  concurrent update of the same row makes this one wait and re-evaluate
  on the newest row version, so the forward-only clamp holds across
  processes. The head it compares ``up_to`` with only grows, so the
  statement's snapshot is good enough.
* **subscribe** is ``INSERT ... ON CONFLICT DO NOTHING``, then a re-read
  in a fresh snapshot: of two processes subscribing one new handle, the
  second waits for the first and returns its cursor.

Sessions are pinned to READ COMMITTED (under REPEATABLE READ a retried
post would read the same stale ``MAX`` again).

**Errors.** A call that could not connect never reached the server:
:class:`~knell.buses.contract.DefiniteError`. An ERROR reply (a statement
timeout, a serialization failure, a constraint) means the server rolled
the statement back: definite too, and the connection stays usable. A lost
connection, a FATAL or PANIC reply (SQLSTATE classes ``08`` and ``57P``,
or any SQLSTATE at that severity: a PANIC at a commit's WAL flush) or no
reply in time after a write was sent: :class:`IndeterminateError` (the
commit may have happened). Reads that fail are definite: they changed
nothing. A connection found closed by the server before a call (a
restarted server) is replaced before anything is sent, so the first call
after a restart succeeds.

**Timeouts.** Every statement carries ``statement_timeout = op_timeout``
(a slow but live server cancels it: definite). A *paused* (SIGSTOPped)
server cannot cancel anything, and its kernel still ACKs our bytes, so
neither TCP keepalives nor ``tcp_user_timeout`` fire; a small watchdog
thread therefore shuts the socket down when a call has had no reply for
``op_timeout + 1`` seconds (psycopg offers no client-side statement
timeout of its own), which turns the hang into a lost connection
(indeterminate). Connecting is bounded by libpq's ``connect_timeout``.

**The doorbell.** ``wait`` arms in one statement (one snapshot: the
backlog by others and the heads together), then polls every
``poll_interval`` seconds for a post by someone else. Posts ``NOTIFY``
(delivered at commit) and an armed waiter ``LISTEN``s, so it usually wakes
within a round trip; the poll stays the correctness path, because a
notification is lost whenever the listening connection is (a restart).
``?notify=0`` turns notifications off (pure polling).

URL: ``postgresql://user:pw@host:port/db?schema=knell&poll_interval=0.1&op_timeout=5``
(and ``max_deliveries=5`` for queues claimed without being declared);
other query options go to libpq. Tables live in ``schema`` (created if
missing), so several runs can share one server.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import re
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from psycopg import conninfo as pg_conninfo

from knell.buses._netopts import redact, split_url
from knell.buses.contract import (
    BROADCAST,
    EXPIRY,
    QUEUE,
    ROLES,
    STREAM,
    AckBeyondHead,
    BusError,
    DefiniteError,
    IndeterminateError,
    JoinAt,
    Message,
    Wake,
)
from knell.buses.leases import DEFAULT_MAX_DELIVERIES
from knell.stores.postgres.kinds import KINDS_DDL, PgKinds
from knell.stores.postgres.queue import NOW, QUEUE_DDL, PostgresQueue
from knell.stores.postgres.roles import ROLES_DDL, PostgresRoles
from knell.stores.postgres.stream import PostgresStream

__all__ = ["SCHEMA_NAME", "PostgresBus", "open_postgres", "rolled_back", "schema_sql"]

T = TypeVar("T")
_P = TypeVar("_P", bound="PostgresBus")

SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,47}")
"""A schema name knell accepts: a plain identifier, short enough that the
notification channel ``knell_<schema>`` stays within Postgres's 63 bytes."""

_DDL = """
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.messages (
    channel text NOT NULL,
    seq bigint NOT NULL,
    body text NOT NULL,
    sender text NOT NULL,
    idem_key text,
    posted_at double precision NOT NULL,
    expires_at double precision,
    PRIMARY KEY (channel, seq)
);
CREATE UNIQUE INDEX IF NOT EXISTS messages_idem
    ON {s}.messages (channel, idem_key) WHERE idem_key IS NOT NULL;
CREATE TABLE IF NOT EXISTS {s}.cursors (
    handle text NOT NULL,
    channel text NOT NULL,
    acked bigint NOT NULL,
    PRIMARY KEY (handle, channel)
);
"""
"""The schema, created in one transaction under an advisory lock
(concurrent ``CREATE ... IF NOT EXISTS`` races in Postgres), so once
``cursors`` exists everything does."""

_APPEND = (
    "WITH appended AS ("
    "INSERT INTO {s}.messages (channel, seq, body, sender, idem_key, posted_at, expires_at)"
    " SELECT %s, COALESCE(MAX(seq), 0) + 1, %s, %s, %s, %s, %s"
    " FROM {s}.messages WHERE channel = %s"
    " ON CONFLICT DO NOTHING RETURNING seq)"
    " SELECT seq, CASE WHEN %s::text IS NOT NULL THEN pg_notify(%s, %s) END"
    " FROM appended"
)
"""The whole append, arbitrated by the unique indexes (see the module
docstring); a notification only when a row was appended, delivered at
commit. No row back: a seq or the key was taken, nothing was written.
Positional parameters: named ones cost the client a fifth more time per
post in psycopg."""
_GUARDED_APPEND = _APPEND.replace(
    " FROM {s}.messages WHERE channel = %s",
    " FROM {s}.messages WHERE channel = %s HAVING NOT EXISTS"
    " (SELECT 1 FROM {s}.channels WHERE channel = %s AND kind = 'stream')",
)
"""The append on a channel whose kind this bus has not seen: it appends
nothing on a stream (whose posts must trim the ring, :mod:`.stream`), and
the post then looks the kind up. One primary-key probe more than the
plain append; a known broadcast, queue or role channel skips it."""
_ORIGINAL = "SELECT seq, body, sender FROM {s}.messages WHERE channel = %s AND idem_key = %s"
_SUBSCRIBE = (
    "INSERT INTO {s}.cursors (handle, channel, acked)"
    " SELECT %(h)s, %(c)s, CASE WHEN %(head)s"
    " THEN (SELECT COALESCE(MAX(seq), 0) FROM {s}.messages WHERE channel = %(c)s) ELSE 0 END"
    " ON CONFLICT (handle, channel) DO NOTHING RETURNING acked"
)
_ACK = (
    "WITH h AS (SELECT COALESCE(MAX(seq), 0) AS head FROM {s}.messages WHERE channel = %(c)s),"
    " moved AS (UPDATE {s}.cursors SET acked = GREATEST(acked, %(u)s)"
    " WHERE handle = %(h)s AND channel = %(c)s AND %(u)s <= (SELECT head FROM h)"
    " RETURNING acked)"
    " SELECT (SELECT head FROM h), (SELECT acked FROM moved)"
)
"""The clamp and the head check in one statement: the head, and the new
cursor (NULL when ``up_to`` is beyond the head or the handle is not
subscribed)."""

APPEND_RETRIES = 100
"""A post that lost this many races in a row gives up (definitely not
appended): each lost race means another post of the channel committed."""

UNEXPIRED = f"(expires_at IS NULL OR expires_at > {NOW})"
"""SQL: a message row is not expired by the server's clock (the clock the
leases use, read when evaluated); a message without ``expires_at`` never
expires. Every liveness read filters with it *in the query*, so a page is
still full of live messages."""

_FETCH_FROM_CURSOR = (
    "SELECT c.acked, m.seq, m.body, m.sender, m.idem_key FROM {s}.cursors c"
    " LEFT JOIN LATERAL (SELECT seq, body, sender, idem_key FROM {s}.messages"
    " WHERE channel = c.channel AND seq > c.acked AND @LIVE ORDER BY seq LIMIT %s) m ON true"
    " WHERE c.handle = %s AND c.channel = %s ORDER BY m.seq"
)
_FETCH_AFTER = (
    "SELECT seq, body, sender, idem_key FROM {s}.messages"
    " WHERE channel = %s AND seq > %s AND @LIVE ORDER BY seq LIMIT %s"
)
_HEAD = "SELECT COALESCE(MAX(seq), 0) FROM {s}.messages WHERE channel = %s"
_CURSOR = "SELECT acked FROM {s}.cursors WHERE handle = %s AND channel = %s"
_ARM = (
    "SELECT c.channel, h.head, b.seq, b.sender FROM {s}.cursors c"
    " CROSS JOIN LATERAL (SELECT COALESCE(MAX(seq), 0) AS head FROM {s}.messages"
    " WHERE channel = c.channel) h"
    " LEFT JOIN LATERAL (SELECT seq, sender FROM {s}.messages m"
    " WHERE m.channel = c.channel AND m.seq > c.acked AND m.sender <> %(h)s AND @LIVE"
    " ORDER BY m.seq LIMIT 1) b ON true"
    " WHERE c.handle = %(h)s ORDER BY c.channel"
)
"""Arming in one statement, so the backlog check and the heads come from
one snapshot: a post landing between two separate reads could otherwise be
neither backlog nor a post after arming, and ring nobody."""
_POLL = (
    "SELECT a.channel, m.seq, m.sender"
    " FROM unnest(%s::text[], %s::bigint[]) WITH ORDINALITY AS a(channel, head, ord)"
    " CROSS JOIN LATERAL (SELECT seq, sender FROM {s}.messages m"
    " WHERE m.channel = a.channel AND m.seq > a.head AND m.sender <> %s AND @LIVE"
    " ORDER BY m.seq LIMIT 1) m ORDER BY a.ord LIMIT 1"
)

_CONNECTION_LOST = ("08", "57P")
"""SQLSTATE classes of a dead session: connection exceptions and server
shutdown. Any other error reply means the statement was rolled back."""

_DEAD_SEVERITIES = ("FATAL", "PANIC")
"""Reply severities after which the session is gone, whatever the SQLSTATE:
a PANIC at a commit's WAL flush (``could not fdatasync``: SQLSTATE 53100,
disk full) comes after the commit record was written, and crash recovery
may replay it."""


def rolled_back(exc: psycopg.Error) -> bool:
    """Whether ``exc`` is an ERROR reply, after which the server has rolled
    the statement back and the session lives: an SQLSTATE outside the
    dead-session classes, and a severity below FATAL. A reply of severity
    FATAL or PANIC is not one, whatever its SQLSTATE: Postgres PANICs with
    ``53100`` when the WAL flush of a commit fails on a full disk, after the
    commit record reached the WAL, and the commit then survives recovery."""
    sqlstate = exc.sqlstate or ""
    if not sqlstate or sqlstate.startswith(_CONNECTION_LOST):
        return False
    severity = exc.diag.severity_nonlocalized or exc.diag.severity or ""
    return severity not in _DEAD_SEVERITIES


_WATCHDOG_GRACE = 1.0
"""Seconds the client waits beyond ``statement_timeout`` before it gives a
call up: a live server answers with its own timeout error first."""


def schema_sql(schema: str) -> str:
    """The DDL of the bus's tables and functions in ``schema``."""
    if not SCHEMA_NAME.fullmatch(schema):
        raise ValueError(f"schema {schema!r} is not a valid name ({SCHEMA_NAME.pattern})")
    return (_DDL + KINDS_DDL + QUEUE_DDL + ROLES_DDL).format(s=f'"{schema}"')


def _lockspace(schema: str) -> int:
    """A stable 32-bit number per schema: the advisory lock its creation
    takes, so runs sharing a server never queue behind each other."""
    value = 0
    for byte in f"knell:{schema}".encode():
        value = (value * 131 + byte) % 2_147_483_647
    return value


class Watchdog:
    """Gives up a call that had no reply in time, by shutting its socket
    down (see the module docstring for why the server cannot do it)."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._lock = threading.Lock()
        self._deadline: float | None = None
        self._fd = -1
        self._fired = False
        self._closed = False
        self._thread: threading.Thread | None = None

    def arm(self, fd: int) -> None:
        with self._lock:
            self._deadline = time.monotonic() + self.timeout
            self._fd = fd
            self._fired = False
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._watch, name="knell-pg-watchdog", daemon=True
                )
                self._thread.start()

    def disarm(self) -> bool:
        """Stop watching; whether the watchdog gave this call up."""
        with self._lock:
            self._deadline = None
            return self._fired

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._deadline = None

    def _watch(self) -> None:
        tick = min(0.25, self.timeout / 4)
        while True:
            time.sleep(tick)
            with self._lock:
                if self._closed:
                    return
                if self._deadline is not None and time.monotonic() >= self._deadline:
                    self._fired = True
                    self._deadline = None
                    _shutdown(self._fd)


def _shutdown(fd: int) -> None:
    """Shut a socket down for both directions: a call blocked reading it
    sees end-of-file at once. Works on a duplicate, so the owner's file
    descriptor stays valid (and is closed by its owner)."""
    try:
        sock = socket.socket(fileno=os.dup(fd))
    except OSError:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        sock.close()


def _peer_closed(conn: psycopg.Connection[Any], listening: bool) -> bool:
    """Whether an idle connection is going away (a crashed or restarted
    server), judged without sending anything. An idle socket that is
    readable holds end-of-file, a farewell (``FATAL: terminating
    connection``), or, while the connection ``LISTEN``s, a notification;
    only in that last case is it read to tell which."""
    if conn.closed:
        return True
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError):
        return True
    if not readable:
        return False
    if not listening:
        return True
    try:
        conn.pgconn.consume_input()
    except psycopg.Error:
        return True
    return bool(conn.pgconn.status != psycopg.pq.ConnStatus.OK)


class PostgresBus(PostgresQueue, PostgresRoles, PostgresStream):
    """A :class:`knell.buses.contract.Bus` on a Postgres server, which also
    serves queue channels, role inboxes and stream rings (see :mod:`.queue`,
    :mod:`.roles` and :mod:`.stream`)."""

    contracts = frozenset({BROADCAST, QUEUE, ROLES, STREAM})
    features = frozenset({EXPIRY})

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str = "knell",
        poll_interval: float = 0.1,
        op_timeout: float = 5.0,
        notify: bool = True,
        display: str | None = None,
        max_deliveries: int = DEFAULT_MAX_DELIVERIES,
    ) -> None:
        if max_deliveries < 1:
            raise ValueError(f"max_deliveries must be >= 1, got {max_deliveries}")
        self.max_deliveries = max_deliveries
        self._kinds = PgKinds(schema)
        self._swept = {}
        self._rings = {}
        if not SCHEMA_NAME.fullmatch(schema):
            raise ValueError(f"schema {schema!r} is not a valid name ({SCHEMA_NAME.pattern})")
        if poll_interval <= 0 or op_timeout <= 0:
            raise ValueError("poll_interval and op_timeout must be > 0")
        try:
            params = pg_conninfo.conninfo_to_dict(conninfo)
        except psycopg.Error as exc:
            raise ValueError(f"bad postgres URL {redact(conninfo)}: {exc}") from None
        params.setdefault("connect_timeout", max(2, math.ceil(op_timeout)))
        params.setdefault("application_name", "knell")
        self._conninfo = pg_conninfo.make_conninfo("", **params)
        self.display = display or redact(conninfo)
        self.schema = schema
        self.poll_interval = poll_interval
        self.op_timeout = op_timeout
        self.notify_channel = f"knell_{schema}" if notify else None
        self._filled: dict[str, str] = {}
        self._q = {
            name: sql.format(s=f'"{schema}"').replace("@LIVE", UNEXPIRED)
            for name, sql in {
                "fetch_cursor": _FETCH_FROM_CURSOR,
                "fetch_after": _FETCH_AFTER,
                "forensic_cursor": _FETCH_FROM_CURSOR.replace("@LIVE", "true"),
                "forensic_after": _FETCH_AFTER.replace("@LIVE", "true"),
                "head": _HEAD,
                "cursor": _CURSOR,
                "arm": _ARM,
                "poll": _POLL,
                "append": _APPEND,
                "guarded": _GUARDED_APPEND,
                "original": _ORIGINAL,
                "subscribe": _SUBSCRIBE,
                "ack": _ACK,
                "ready": "SELECT to_regclass('{s}.deliveries')",
                "has_expiry": "SELECT 1 FROM information_schema.columns WHERE table_schema = %s"
                " AND table_name = 'messages' AND column_name = 'expires_at'",
            }.items()
        }
        self._lock = threading.RLock()
        self._conn: psycopg.Connection[Any] | None = None
        self._schema_ready = False
        self._listening = False
        self._dog = Watchdog(op_timeout + _WATCHDOG_GRACE)

    # -- connections --------------------------------------------------------

    def _connection(self) -> psycopg.Connection[Any]:
        """The live connection, (re)opened when needed. Anything that goes
        wrong here happens before the caller's statement is sent."""
        conn = self._conn
        if conn is not None and _peer_closed(conn, self._listening):
            self._drop()
            conn = None
        if conn is not None:
            return conn
        try:
            conn = psycopg.connect(self._conninfo, autocommit=True)
        except psycopg.Error as exc:
            raise DefiniteError(
                f"postgres: cannot connect to {self.display}: {_one_line(exc)}"
            ) from exc
        self._dog.arm(conn.fileno())
        try:
            conn.execute(
                f"SET statement_timeout = {int(self.op_timeout * 1000)};"
                " SET default_transaction_isolation = 'read committed'"
            )
            if not self._schema_ready:
                self._ensure_schema(conn)
        except psycopg.Error as exc:
            fired = self._dog.disarm()
            conn.close()
            why = f"no reply within {self._dog.timeout:g}s" if fired else _one_line(exc)
            raise DefiniteError(f"postgres: cannot set up the session: {why}") from exc
        finally:
            self._dog.disarm()
        self._conn = conn
        return conn

    def _ensure_schema(self, conn: psycopg.Connection[Any]) -> None:
        row = conn.execute(self._q["ready"]).fetchone()
        if row is None or row[0] is None:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lockspace(self.schema),))
                conn.execute(self._ddl())
        self._add_expiry_column(conn)
        self._schema_ready = True

    def _add_expiry_column(self, conn: psycopg.Connection[Any]) -> None:
        """Give a schema created before expiry existed its ``expires_at``
        column (NULL: never expires). A fresh schema has it from ``CREATE
        TABLE``, so this only reads the catalog. The ``ALTER`` runs in a
        transaction of its own that takes nothing before it but the
        schema's advisory lock (posts never take that lock), so it waits
        for running posts to finish and they wait for it: no lock is ever
        upgraded, no deadlock with concurrent posts; ``IF NOT EXISTS``
        makes a second process's migration a no-op."""
        if conn.execute(self._q["has_expiry"], (self.schema,)).fetchone() is not None:
            return
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lockspace(self.schema),))
            conn.execute(
                f'ALTER TABLE "{self.schema}".messages'
                " ADD COLUMN IF NOT EXISTS expires_at double precision"
            )

    def _ddl(self) -> str:
        """The schema this bus creates (a mutant may loosen it)."""
        return schema_sql(self.schema)

    def _sql(self, text: str) -> str:
        """A statement with the bus's schema filled in (once per statement:
        the queue and role halves call this on every operation)."""
        sql = self._filled.get(text)
        if sql is None:
            sql = self._filled[text] = text.format(s=f'"{self.schema}"')
        return sql

    def _drop(self) -> None:
        self._listening = False
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _run(self, what: str, write: bool, call: Callable[[psycopg.Connection[Any]], T]) -> T:
        """One call, classified: see the module docstring."""
        with self._lock:
            conn = self._connection()
            self._dog.arm(conn.fileno())
            try:
                return call(conn)
            except psycopg.Error as exc:
                fired = self._dog.disarm()
                raise self._failure(what, write, exc, fired) from exc
            finally:
                self._dog.disarm()

    def _failure(self, what: str, write: bool, exc: psycopg.Error, fired: bool) -> BusError:
        sqlstate = exc.sqlstate or ""
        if fired:
            self._drop()
            why = f"no reply within {self._dog.timeout:g}s"
        elif rolled_back(exc):
            # An ERROR reply: the server rolled the statement back.
            return DefiniteError(f"postgres {what}: [{sqlstate}] {_one_line(exc)}")
        else:
            self._drop()
            why = f"[{sqlstate}] {_one_line(exc)}" if sqlstate else _one_line(exc)
        if write:
            return IndeterminateError(f"postgres {what}: outcome unknown: {why}")
        return DefiniteError(f"postgres {what}: {why}")

    # -- the contract -------------------------------------------------------

    def post(
        self,
        channel: str,
        body: str,
        sender: str,
        idempotency_key: str | None = None,
        expires_at: float | None = None,
    ) -> Message:
        notify = self.notify_channel
        args = (
            channel,
            body,
            sender,
            idempotency_key,
            time.time(),
            expires_at,
            channel,
            notify,
            notify,
            channel,
        )
        known = self._kinds.known(channel)
        mode = "append" if known not in (None, "stream") else (known or "guarded")
        for _ in range(APPEND_RETRIES):
            if mode == "stream":
                seq = self._run(
                    "post",
                    True,
                    lambda c: self._ring_append(
                        c, channel, body, sender, idempotency_key, args[4], expires_at
                    ),
                )
            else:
                sql = self._q[mode]
                values = args if mode == "append" else (*args[:7], channel, *args[7:])
                row = self._run("post", True, functools.partial(_one_row, sql, values))
                seq = None if row is None else int(row[0])
            if seq is not None:
                return Message(channel, seq, body, sender, idempotency_key)
            # Nothing was written: the key is taken, another post took the
            # seq, or (guarded) the channel is a stream.
            if idempotency_key is not None:
                found = self._run(
                    "post",
                    False,
                    lambda c: c.execute(self._q["original"], (channel, idempotency_key)).fetchone(),
                )
                if found is not None:
                    return Message(channel, int(found[0]), found[1], found[2], idempotency_key)
            if mode == "guarded":
                kind = self._run("post", False, lambda c: self._kinds.lookup(c, channel))
                if kind is not None:
                    mode = "stream" if kind[0] == "stream" else "append"
        raise DefiniteError(f"postgres post: lost {APPEND_RETRIES} races for a seq of {channel!r}")

    def subscribe(self, handle: str, channel: str, at: JoinAt = "head") -> int:
        if at not in ("head", "start"):
            raise DefiniteError(f"subscribe at must be 'head' or 'start', got {at!r}")
        args = {"h": handle, "c": channel, "head": at == "head"}

        def call(conn: psycopg.Connection[Any]) -> Any:
            self._kinds.fix(conn, channel, "broadcast", "subscribe")
            return conn.execute(self._q["subscribe"], args).fetchone()

        row = self._run("subscribe", True, call)
        if row is not None:
            return int(row[0])
        # Subscribed already (perhaps a moment ago, by another process): this
        # statement's fresh snapshot sees that cursor.
        return self.cursor(handle, channel)

    def fetch(
        self,
        handle: str,
        channel: str,
        after: int | None = None,
        limit: int = 100,
        include_expired: bool = False,
    ) -> list[Message]:
        """A page of live messages (expired ones are skipped in the query,
        by the server's clock); the forensic read (``include_expired``)
        returns them too: expiry hides a message, it never deletes it."""
        if limit <= 0:
            raise DefiniteError(f"fetch limit must be > 0, got {limit}")
        read = "forensic" if include_expired else "fetch"
        if after is not None:
            rows = self._run(
                "fetch",
                False,
                lambda c: (
                    self._broadcast(c, channel, "fetch")
                    .execute(self._q[f"{read}_after"], (channel, after, limit))
                    .fetchall()
                ),
            )
            return [Message(channel, int(s), b, snd, k) for s, b, snd, k in rows]
        rows = self._run(
            "fetch",
            False,
            lambda c: (
                self._broadcast(c, channel, "fetch")
                .execute(self._q[f"{read}_cursor"], (limit, handle, channel))
                .fetchall()
            ),
        )
        if not rows:
            raise DefiniteError(f"{handle!r} is not subscribed to {channel!r}")
        return [Message(channel, int(s), b, snd, k) for _, s, b, snd, k in rows if s is not None]

    def _broadcast(
        self, conn: psycopg.Connection[Any], channel: str, op: str
    ) -> psycopg.Connection[Any]:
        """Refuse a broadcast operation on a queue or role channel (a dict
        lookup once the channel's kind is known); the connection, to go on."""
        self._kinds.expect(conn, channel, "broadcast", op)
        return conn

    def ack(self, handle: str, channel: str, up_to: int) -> int:
        args = {"h": handle, "c": channel, "u": up_to}
        row = self._run(
            "ack",
            True,
            lambda c: self._broadcast(c, channel, "ack").execute(self._q["ack"], args).fetchone(),
        )
        head = int(row[0]) if row is not None else 0
        if row is None or row[1] is None:
            if up_to > head:
                raise AckBeyondHead(f"ack {up_to} is beyond head {head} of {channel!r}")
            raise DefiniteError(f"{handle!r} is not subscribed to {channel!r}")
        return int(row[1])

    def cursor(self, handle: str, channel: str) -> int:
        row = self._run(
            "cursor",
            False,
            lambda c: (
                self._broadcast(c, channel, "cursor")
                .execute(self._q["cursor"], (handle, channel))
                .fetchone()
            ),
        )
        if row is None:
            raise DefiniteError(f"{handle!r} is not subscribed to {channel!r}")
        return int(row[0])

    def head(self, channel: str) -> int:
        row = self._run("head", False, lambda c: c.execute(self._q["head"], (channel,)).fetchone())
        return int(row[0]) if row is not None else 0

    def wait(self, handle: str, timeout: float) -> Wake | None:
        deadline = time.monotonic() + timeout
        with self._lock:
            listening = False
            try:
                if self.notify_channel is not None:
                    # LISTEN before arming: a post committed after the arming
                    # snapshot is then certainly notified.
                    self._run("wait", False, lambda c: c.execute(f'LISTEN "{self.notify_channel}"'))
                    listening = self._listening = True
                    self._drain_notifies()
                rows = self._run(
                    "wait", False, lambda c: c.execute(self._q["arm"], {"h": handle}).fetchall()
                )
                for channel, _, seq, sender in rows:
                    if seq is not None:
                        return Wake(channel, int(seq), sender, "backlog")
                channels = [str(r[0]) for r in rows]
                heads = [int(r[1]) for r in rows]
                while True:
                    if channels:
                        ring = self._run(
                            "wait",
                            False,
                            lambda c: c.execute(
                                self._q["poll"], (channels, heads, handle)
                            ).fetchone(),
                        )
                        if ring is not None:
                            return Wake(str(ring[0]), int(ring[1]), str(ring[2]), "post")
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return None
                    self._sleep(min(self.poll_interval, remaining), listening)
            finally:
                if listening and self._listening:
                    with contextlib.suppress(BusError):
                        self._run("wait", False, lambda c: c.execute("UNLISTEN *"))
                    self._listening = False

    def _drain_notifies(self) -> None:
        conn = self._conn
        if conn is None:
            return
        try:
            for _ in conn.notifies(timeout=0):
                pass
        except psycopg.Error:
            self._drop()

    def _sleep(self, seconds: float, listening: bool) -> None:
        """Until the next poll, or earlier when a notification arrives."""
        conn = self._conn
        if not listening or conn is None:
            time.sleep(seconds)
            return
        try:
            for _ in conn.notifies(timeout=seconds, stop_after=1):
                pass
        except psycopg.Error as exc:
            self._drop()
            raise DefiniteError(f"postgres wait: {_one_line(exc)}") from exc

    def close(self) -> None:
        with self._lock:
            self._dog.close()
            self._drop()

    @classmethod
    def from_url(cls: type[_P], url: str) -> _P:
        """Open from a ``postgresql://`` driver URL (see the module docstring)."""
        return _from_url(cls, url)


def _one_row(sql: str, values: tuple[Any, ...], conn: psycopg.Connection[Any]) -> Any:
    return conn.execute(sql, values).fetchone()


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return " ".join(text.split())


def open_postgres(url: str) -> PostgresBus:
    """Build a :class:`PostgresBus` from a ``postgresql://`` driver URL."""
    return PostgresBus.from_url(url)


def _from_url(cls: type[_P], url: str) -> _P:
    client, options = split_url(
        url,
        namespace_key="schema",
        namespace_check=SCHEMA_NAME,
        schemes=("postgresql", "postgres"),
    )
    return cls(
        client,
        schema=options.namespace or "knell",
        poll_interval=options.poll_interval,
        op_timeout=options.op_timeout,
        notify=options.notify,
        display=redact(url),
        max_deliveries=options.max_deliveries,
    )
