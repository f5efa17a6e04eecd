"""Stream channels on the reference SQLite bus: a bounded ring read by tails.

A stream channel's messages are the ordinary ``messages`` rows; its
read-state is one ``streams`` row: the ring bound (``max_len``,
``max_age_s``) and ``first``, the oldest seq the ring still holds. Tails
keep no state at all (no cursors, no acks), so a killed tail loses nothing
and costs the bus nothing.

Where the promises live:

* **The ring is trimmed by the post that overflows it, in its own write.**
  ``post`` is kind-neutral and never looks at a channel's kind (it is the
  hot path of every contract), so the trim is a trigger on ``messages``:
  it runs inside the inserting statement, under SQLite's write lock, in
  every process that posts, whether it knows the channel is a stream or
  not. It moves ``first`` past the messages beyond the count bound and
  those older than the age bound (by the post's own timestamp: the store's
  clock); the rows below ``first`` are deleted in batches
  (:data:`TRIM_EVERY`), and nothing ever reads them meanwhile. A post therefore never
  completes with the ring over its bound, and no race between a post and
  a ``declare_stream`` in another process can leave one untrimmed.
* **Seqs stay dense although rows go.** The append relies on two things
  rows being deleted would break: ``MAX(seq) + 1`` is the next seq, and a
  guessed seq at or below the head names a row that exists (the primary
  key refuses it). The trim never deletes the newest row, so ``MAX(seq)``
  is the head; and a second trigger refuses an insert below ``first``
  (a guess into the trimmed range), which the append treats exactly like
  a taken seq.
* **Age is judged at read time too.** Between posts nothing trims, so a
  ``tail`` computes ``first`` again from its own clock (the newest message
  older than ``max_age_s``, plus one) and serves only what is younger: a
  quiet ring still holds nothing older than its bound. ``first`` only ever
  moves forward (the stored one by ``MAX``, the computed one as time
  passes).
* **Expiry hides, the page accounts.** A liveness tail judges each
  message's ``expires_at`` by the bus's clock read inside the page (the
  same condition as every other read path, :mod:`.sqlite_expiry`) and
  lists the seqs it hid in ``expired``; ``limit`` counts the span, shown
  and hidden together, so a page is bounded however much expired.
* **One snapshot per page.** ``tail`` reads the bound, the head and the
  messages inside one read transaction, so ``first``, ``head`` and the
  page always agree.

An idempotency key is remembered while its message's row exists (at
least while it is in the ring): a retry after the row was deleted
appends again.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from knell.buses.contract import DefiniteError, Message, StreamInfo, StreamPage
from knell.buses.rings import check_ring
from knell.buses.sqlite_expiry import SqliteExpiry
from knell.buses.sqlite_kinds import ChannelKinds, wrong_kind

__all__ = ["MOVE_FIRST", "STREAM_SCHEMA", "STREAM_TRIGGERS", "TRIM_EVERY", "SqliteStream"]

STREAM_SCHEMA = """
CREATE TABLE IF NOT EXISTS streams (
    channel TEXT PRIMARY KEY,
    max_len INTEGER,
    max_age_s REAL,
    first INTEGER NOT NULL
) WITHOUT ROWID;
"""

STREAM_GUARD = """
CREATE TRIGGER IF NOT EXISTS stream_guard BEFORE INSERT ON messages
WHEN NEW.seq < (SELECT first FROM streams WHERE channel = NEW.channel)
BEGIN SELECT RAISE(ABORT, 'stream seq below the ring'); END;
"""
"""A guessed seq in the trimmed range of a ring is refused (as a taken seq is)."""

TRIM_EVERY = 32
"""The rows below ``first`` are deleted by every post whose seq is a
multiple of this, not by each: a tail never reads below ``first``, so what
the ring holds moves with ``first`` at every post, and the file keeps at
most this many unreadable rows more (deleting one row per post cost four
fifths of a post's time)."""

MOVE_FIRST = """
    UPDATE streams SET first = MAX(
        first,
        CASE WHEN max_len IS NULL THEN 1 ELSE NEW.seq - max_len + 1 END,
        CASE WHEN max_age_s IS NULL THEN 1 ELSE 1 + COALESCE((
            SELECT MAX(m.seq) FROM messages m WHERE m.channel = NEW.channel
            AND m.seq >= streams.first AND m.posted_at < NEW.posted_at - streams.max_age_s
        ), 0) END
    ) WHERE channel = NEW.channel;
"""
"""The trim's first step: ``first`` moves past the count and the age bound."""

STREAM_TRIM = f"""
CREATE TRIGGER IF NOT EXISTS stream_trim AFTER INSERT ON messages
WHEN EXISTS (SELECT 1 FROM streams WHERE channel = NEW.channel)
BEGIN{MOVE_FIRST}
    DELETE FROM messages WHERE NEW.seq % {TRIM_EVERY} = 0 AND channel = NEW.channel
        AND seq < NEW.seq AND seq < (SELECT first FROM streams WHERE channel = NEW.channel);
END;
"""
"""The trim, inside the post's own statement: ``first`` moves past the
count bound and the age bound (the post's timestamp is the store's clock
now), and the rows below it go (every :data:`TRIM_EVERY` seqs); the new
row, the head, always stays."""

STREAM_TRIGGERS = (STREAM_GUARD, STREAM_TRIM)

_AGE_FIRST = "SELECT MAX(seq) FROM messages WHERE channel = ? AND seq >= ? AND posted_at < ?"


class SqliteStream(SqliteExpiry):
    """The :class:`~knell.buses.contract.StreamBus` half of the SQLite bus.

    A mixin: the bus provides the connection, its lock, its write
    transaction and the channel kinds; the triggers it installs with the
    schema do the trimming."""

    stream_triggers: tuple[str, ...] = STREAM_TRIGGERS
    """The trigger statements the schema installs (a mutant swaps them)."""

    if TYPE_CHECKING:
        _db: sqlite3.Connection
        _lock: threading.RLock
        _kinds: ChannelKinds

        def _write(self) -> AbstractContextManager[sqlite3.Connection]: ...

    def declare_stream(
        self, channel: str, max_len: int | None = None, max_age_s: float | None = None
    ) -> StreamInfo:
        check_ring(max_len, max_age_s)
        with self._lock, self._write() as db:
            self._kinds.fix(db, channel, "stream", "declare_stream")
            row = db.execute(
                "SELECT max_len, max_age_s FROM streams WHERE channel = ?", (channel,)
            ).fetchone()
            if row is None:
                self._ring_from(db, channel, max_len, max_age_s)
                row = (max_len, max_age_s)
        return StreamInfo(
            channel,
            None if row[0] is None else int(row[0]),
            None if row[1] is None else float(row[1]),
        )

    def _ring_from(
        self, db: sqlite3.Connection, channel: str, max_len: int | None, max_age_s: float | None
    ) -> None:
        """A new ring over whatever the channel already holds (posts are
        kind-neutral, so a channel may have messages before it is declared):
        trimmed to its bound at once, as a post would trim it."""
        head = int(
            db.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM messages WHERE channel = ?", (channel,)
            ).fetchone()[0]
        )
        first = 1
        if max_len is not None:
            first = max(first, head - max_len + 1)
        if max_age_s is not None:
            old = db.execute(_AGE_FIRST, (channel, first, time.time() - max_age_s)).fetchone()[0]
            first = max(first, 1 if old is None else int(old) + 1)
        db.execute(
            "INSERT INTO streams (channel, max_len, max_age_s, first) VALUES (?, ?, ?, ?)",
            (channel, max_len, max_age_s, first),
        )
        db.execute(
            "DELETE FROM messages WHERE channel = ? AND seq < ? AND seq < ?",
            (channel, first, head),
        )

    def tail(
        self, channel: str, after: int = 0, limit: int = 100, include_expired: bool = False
    ) -> StreamPage:
        if limit <= 0:
            raise DefiniteError(f"tail limit must be > 0, got {limit}")
        if after < 0:
            raise DefiniteError(f"tail after must be >= 0, got {after}")
        with self._lock:
            kind = self._kinds.kind(self._db, channel)
            if kind != "stream":
                raise wrong_kind(channel, kind or "undeclared", "stream", "tail")
            self._db.execute("BEGIN")  # one snapshot: bound, head and page agree
            try:
                return self._page_of(channel, after, limit, include_expired)
            finally:
                self._db.execute("COMMIT")

    def _page_of(
        self, channel: str, after: int, limit: int, include_expired: bool = False
    ) -> StreamPage:
        """Inside a read transaction: the ring's ``first`` as of now, the
        head, and the seqs from ``max(after + 1, first)``, shown or (on a
        liveness tail) listed as expired."""
        row = self._db.execute(
            "SELECT first, max_age_s FROM streams WHERE channel = ?", (channel,)
        ).fetchone()
        head = int(
            self._db.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM messages WHERE channel = ?", (channel,)
            ).fetchone()[0]
        )
        first = self._first(channel, int(row[0]), row[1])
        messages, expired = self._held_after(channel, after, first, limit, include_expired)
        return StreamPage(channel, messages, min(first, head + 1), head, expired)

    def _held_after(
        self, channel: str, after: int, first: int, limit: int, include_expired: bool = False
    ) -> tuple[tuple[Message, ...], tuple[int, ...]]:
        """The page itself: strictly after ``after`` (the reader has that
        one), and nothing below ``first`` (the ring no longer holds it).
        ``limit`` seqs of the ring, each shown, or (a liveness tail, the
        message expired by the bus's clock read here) hidden and named in
        the second tuple: expiry hides a message, the page still accounts
        for its seq, so a reader never mistakes it for a silent gap."""
        live = "1" if include_expired else self._unexpired("tail")
        rows = self._db.execute(
            f"SELECT seq, body, sender, idem_key, {live} FROM messages"
            " WHERE channel = :channel AND seq > :after AND seq >= :first"
            " ORDER BY seq LIMIT :limit",
            {
                "channel": channel,
                "after": after,
                "first": first,
                "limit": limit,
                "now": time.time(),
            },
        ).fetchall()
        shown = tuple(Message(channel, int(s), b, snd, k) for s, b, snd, k, ok in rows if ok)
        return shown, tuple(int(r[0]) for r in rows if not r[4])

    def _first(self, channel: str, stored: int, max_age_s: float | None) -> int:
        """The oldest seq the ring holds now: the stored ``first`` (moved by
        posts), or past the newest message that aged out since."""
        if max_age_s is None:
            return stored
        old = self._db.execute(
            _AGE_FIRST, (channel, stored, time.time() - float(max_age_s))
        ).fetchone()[0]
        return stored if old is None else max(stored, int(old) + 1)
