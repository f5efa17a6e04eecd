"""Stream channels on the Postgres bus: a ring of the newest messages.

A stream's messages are ordinary ``messages`` rows; its kind and ring
bound are its ``channels`` row (``kind = 'stream'``, ``max_len``,
``max_age_s``), written once by the first ``declare_stream`` and never
changed. Where the ring is kept (:mod:`knell.buses.rings` says what the
ring is, the same on every store):

* **Trimmed by the append itself.** ``post`` on a channel this bus knows
  is a stream runs :data:`RING_APPEND_SQL` (on one whose kind it has not
  seen, the bus's guarded append appends nothing on a stream, and the post
  learns the kind and comes here):
  one statement that reads the channel's ring bound, appends the message
  (the broadcast append's compare-and-set on the primary key, so seqs stay
  dense and commit in order), and deletes every seq at or below the cut,
  in the one implicit transaction. Once it commits, the ring is within its
  bound: no window in which another process sees it over.
* **Why the stream's row is locked.** The broadcast append's
  compare-and-set needs the row of every seq up to the head to exist: a
  poster whose snapshot went stale names a seq that is taken, and inserts
  nothing. A ring deletes those rows, so a poster whose snapshot is more
  than a ring behind would name a seq that was appended *and trimmed*
  since, and insert it again: a seq twice (seen: four processes posting to
  a ring of two, without the lock). So the ring append locks the
  channel's row (``FOR NO KEY UPDATE``: posters of one stream queue
  there), reads its ``head`` (the seq of the stream's last post) in the
  row's newest version, and appends only when its own ``MAX(seq)`` has
  caught up with it; a stale snapshot appends nothing and the post is
  retried in a fresh one. The same statement moves ``head`` to its seq.
* **The store's clock, read once per statement.** On a stream the row's
  ``posted_at`` is the server's ``clock_timestamp()`` (not the poster's
  clock), read once in a CTE, and the age cut compares with that same
  reading. Why ``clock_timestamp()`` and not ``now()``: ``now()`` is the
  transaction's start, and an insert that waited on a row lock (a racing
  poster) would stamp the time it *began*, earlier than its commit, and
  cut with a stale time; ``clock_timestamp()`` is read when the statement
  runs, the closest reading to the commit, as every lease in
  :mod:`.queue` is. The seq k + 1 is computed only after k committed, so
  stamps follow seqs while the server's clock runs forward.
* **The age cut looks at young rows only.** It walks the channel's
  primary key backward from the head to the newest row stamped before
  ``now - max_age_s`` (the rows it passes are all in the ring, so the cost
  is the ring's size, never the channel's history).
* **Expiry at read time.** A liveness tail judges each message's
  ``expires_at`` by the same server reading as the age cut and lists
  the seqs it hid in the page's ``expired`` (``limit`` counts both).
* **Read-time bound.** ``tail`` computes the same cut at read time in one
  statement (one snapshot: head, cut and page agree), so a ring nobody
  posts to still ages and ``first`` says so.

A post that raced the very declaration (its snapshot predates the new
``channels`` row) appends untrimmed and stamps the poster's clock, as
a post on a channel of no kind does; the read-time cut still bounds what
any tail sees, and the next post trims it. Such a post takes no lock, so
it is only as safe as the plain append: it could repeat a trimmed seq if
its statement stalled across the declaration and more than a ring of
posts after it (a window of one statement, on a channel's first posts).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg

from knell.buses.contract import (
    DefiniteError,
    Message,
    StreamInfo,
    StreamPage,
    WrongChannelKind,
)
from knell.buses.rings import check_ring
from knell.buses.sqlite_kinds import wrong_kind
from knell.stores.postgres.kinds import PgKinds
from knell.stores.postgres.queue import NOW

__all__ = ["RING_APPEND_SQL", "TAIL_SQL", "PostgresStream"]

T = TypeVar("T")

_AGE_CUT = """CASE WHEN {age} IS NULL THEN NULL ELSE (
      SELECT m.seq FROM {{s}}.messages m
      WHERE m.channel = %(c)s AND m.posted_at < {now} - {age}
        AND m.seq > {head} - COALESCE({len}, {head})
      ORDER BY m.seq DESC LIMIT 1) END"""
"""The highest seq stamped before ``now - age`` (rows below the count cut
are not looked at: they go anyway)."""

RING_APPEND_SQL = f"""
WITH n AS (SELECT {NOW} AS t),
kind AS (SELECT kind, max_deliveries FROM {{s}}.channels WHERE channel = %(c)s),
ring AS (SELECT max_len, max_age_s, head FROM {{s}}.channels
  WHERE channel = %(c)s AND kind = 'stream' FOR NO KEY UPDATE),
appended AS (
  INSERT INTO {{s}}.messages (channel, seq, body, sender, idem_key, posted_at, expires_at)
  SELECT %(c)s, COALESCE(MAX(seq), 0) + 1, %(b)s, %(snd)s, %(k)s,
    CASE WHEN EXISTS (SELECT 1 FROM ring) THEN (SELECT t FROM n) ELSE %(client)s END,
    %(exp)s
  FROM {{s}}.messages WHERE channel = %(c)s
  HAVING COALESCE(MAX(seq), 0) >= COALESCE((SELECT head FROM ring), 0)
  ON CONFLICT DO NOTHING RETURNING seq),
moved AS (
  UPDATE {{s}}.channels SET head = a.seq FROM appended a, ring
  WHERE channel = %(c)s),
cut AS (
  SELECT GREATEST(a.seq - r.max_len, {
    _AGE_CUT.format(age="r.max_age_s", now="n.t", head="a.seq", len="r.max_len")
}) AS below
  FROM appended a, ring r, n),
dropped AS (
  DELETE FROM {{s}}.messages m USING cut
  WHERE m.channel = %(c)s AND m.seq <= cut.below
  RETURNING m.seq)
SELECT a.seq, k.kind, k.max_deliveries, (SELECT count(*) FROM dropped),
  CASE WHEN %(notify)s::text IS NOT NULL THEN pg_notify(%(notify)s, %(c)s) END
FROM appended a LEFT JOIN kind k ON true
"""
"""The append that keeps a ring (see the module docstring); on a channel
that is not a stream the ``ring`` CTE is empty and it is the broadcast
append. Returns the seq, the channel's kind row (the bus caches it) and
how many rows were trimmed; no row back: the seq or the key was taken, or
the snapshot was behind the stream's head: nothing was written."""

_DECLARE = (
    "INSERT INTO {s}.channels (channel, kind, max_len, max_age_s) VALUES (%s, 'stream', %s, %s)"
    " ON CONFLICT (channel) DO NOTHING RETURNING kind, max_len, max_age_s"
)
_RING = "SELECT kind, max_len, max_age_s FROM {s}.channels WHERE channel = %s"

TAIL_SQL = f"""
WITH n AS (SELECT {NOW} AS t),
h AS (SELECT COALESCE(MAX(seq), 0) AS head, MIN(seq) AS low
  FROM {{s}}.messages WHERE channel = %(c)s),
cut AS (
  SELECT h.head, GREATEST(0, h.head - %(len)s::bigint,
    COALESCE(h.low - 1, h.head), {
    _AGE_CUT.format(age="%(age)s::float8", now="n.t", head="h.head", len="%(len)s::bigint")
}) AS below
  FROM h, n)
SELECT cut.head, cut.below, m.seq, m.body, m.sender, m.idem_key,
  %(forensic)s::boolean OR m.expires_at IS NULL OR m.expires_at > n.t AS live
FROM cut CROSS JOIN n LEFT JOIN LATERAL (
  SELECT seq, body, sender, idem_key, expires_at FROM {{s}}.messages
  WHERE channel = %(c)s AND seq > GREATEST(%(after)s::bigint, cut.below)
  ORDER BY seq LIMIT %(limit)s) m ON true
ORDER BY m.seq
"""
"""One tail page in one snapshot: the head, the cut (every seq at or below
it is out of the ring: trimmed, or over a bound at this moment), then up
to ``limit`` seqs above both ``after`` and the cut, each with whether it
is live by the server's clock (the reading the age cut used; always, on
a forensic tail): a liveness tail hides the others and lists their seqs."""

Ring = tuple[int | None, float | None]


def _ring(found: Any) -> tuple[str, Ring] | None:
    if found is None:
        return None
    most = None if found[1] is None else int(found[1])
    age = None if found[2] is None else float(found[2])
    return str(found[0]), (most, age)


class PostgresStream:
    """The :class:`~knell.buses.contract.StreamBus` half of the Postgres
    bus (a mixin: the bus provides ``_run``, ``_sql``, the kinds and
    ``notify_channel``)."""

    _rings: dict[str, Ring]
    """Ring bounds seen (they never change once declared)."""

    if TYPE_CHECKING:
        _kinds: PgKinds
        notify_channel: str | None

        def _run(
            self, what: str, write: bool, call: Callable[[psycopg.Connection[Any]], T]
        ) -> T: ...

        def _sql(self, text: str) -> str: ...

    def declare_stream(
        self, channel: str, max_len: int | None = None, max_age_s: float | None = None
    ) -> StreamInfo:
        most, age = check_ring(max_len, max_age_s)

        def call(conn: psycopg.Connection[Any]) -> tuple[str, Ring] | None:
            found = _ring(conn.execute(self._sql(_DECLARE), (channel, most, age)).fetchone())
            if found is None:  # there already, or declared by another process meanwhile
                found = _ring(conn.execute(self._sql(_RING), (channel,)).fetchone())
            return found

        found = self._run("declare_stream", True, call)
        if found is None:  # pragma: no cover - the insert either wrote it or saw it
            raise WrongChannelKind(f"declare_stream on {channel!r}: its kind could not be fixed")
        kind, ring = found
        if kind != "stream":
            raise wrong_kind(channel, kind, "stream", "declare_stream")
        self._learn(channel, ring)
        return StreamInfo(channel, ring[0], ring[1])

    def _learn(self, channel: str, ring: Ring) -> None:
        self._rings[channel] = ring
        self._kinds.remember(channel, ("stream", None))

    def _bound(self, conn: psycopg.Connection[Any], channel: str) -> Ring:
        """The channel's ring bound; refused unless it is a stream (a tail
        never fixes a kind: a default ring would be a guess)."""
        ring = self._rings.get(channel)
        if ring is not None:
            return ring
        found = _ring(conn.execute(self._sql(_RING), (channel,)).fetchone())
        if found is None:
            raise WrongChannelKind(f"tail on {channel!r}: it is not a stream (no kind yet)")
        kind, ring = found
        if kind != "stream":
            raise wrong_kind(channel, kind, "stream", "tail")
        self._learn(channel, ring)
        return ring

    def tail(
        self, channel: str, after: int = 0, limit: int = 100, include_expired: bool = False
    ) -> StreamPage:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
            raise DefiniteError(f"tail limit must be an int > 0, got {limit!r}")
        if isinstance(after, bool) or not isinstance(after, int):
            raise DefiniteError(f"tail after must be an int, got {after!r}")

        def call(conn: psycopg.Connection[Any]) -> list[Any]:
            most, age = self._bound(conn, channel)
            args = {
                "c": channel,
                "len": most,
                "age": age,
                "after": after,
                "limit": limit,
                "forensic": bool(include_expired),
            }
            return conn.execute(self._sql(TAIL_SQL), args).fetchall()

        rows = self._run("tail", False, call)
        head, below = int(rows[0][0]), int(rows[0][1])
        held = [row for row in rows if row[2] is not None]
        messages = tuple(
            Message(channel, int(s), b, snd, k) for _, _, s, b, snd, k, live in held if live
        )
        expired = tuple(int(row[2]) for row in held if not row[6])
        return StreamPage(channel, messages, below + 1, head, expired)

    def _ring_append(
        self,
        conn: psycopg.Connection[Any],
        channel: str,
        body: str,
        sender: str,
        idempotency_key: str | None,
        client_time: float,
        expires_at: float | None = None,
    ) -> int | None:
        """Append with :data:`RING_APPEND_SQL`; the seq, or ``None`` when
        nothing was written (a lost race, or the key is taken)."""
        args = {
            "c": channel,
            "b": body,
            "snd": sender,
            "k": idempotency_key,
            "client": client_time,
            "exp": expires_at,
            "notify": self.notify_channel,
        }
        row = conn.execute(self._sql(RING_APPEND_SQL), args).fetchone()
        if row is None:
            return None
        if row[1] is not None:
            self._kinds.remember(channel, (row[1], row[2]))
        return int(row[0])
