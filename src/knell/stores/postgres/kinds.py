"""Channel kinds on the Postgres bus: which read-state serves a channel.

The same rule as the SQLite reference (:mod:`knell.buses.sqlite_kinds`):
a channel's kind (broadcast, queue, role, stream) is one row of
``channels``, written by the first kind-specific operation and never
changed, and an operation of another kind is refused with
:class:`~knell.buses.contract.WrongChannelKind`. A stream's row also
holds its ring bound (:mod:`.stream`). ``post`` never refuses a kind; it
only looks (in the append statement itself) whether the channel is a
stream whose ring it must trim, and once this bus has seen a channel's
kind it takes the plain broadcast append for every other kind.

Fixing a kind is ``INSERT ... ON CONFLICT DO NOTHING RETURNING``, and when
that returns nothing (the row exists, or another process is inserting it
at this moment: the insert waits for it), a second statement reads the row
in a *fresh* snapshot. One statement cannot do both: under READ COMMITTED
its snapshot predates the concurrent insert it waited for, so a read in
the same statement would find nothing.

Because a kind never changes, each bus caches what it has seen: the
broadcast hot paths (fetch, ack, cursor) pay a dict lookup, not a query,
once a channel's kind is known.
"""

from __future__ import annotations

from typing import Any

import psycopg

from knell.buses.contract import ChannelKind, WrongChannelKind
from knell.buses.sqlite_kinds import wrong_kind

__all__ = ["KINDS_DDL", "PgKinds"]

KINDS_DDL = """
CREATE TABLE IF NOT EXISTS {s}.channels (
    channel text PRIMARY KEY,
    kind text NOT NULL,
    max_deliveries integer,
    max_len bigint,
    max_age_s double precision,
    head bigint
);
"""
"""One row per channel with a kind: a queue's ``max_deliveries``; a
stream's ring bound and the seq of its last post (:mod:`.stream`)."""

Row = tuple[str, int | None]


def _row(found: Any) -> Row | None:
    if found is None:
        return None
    return str(found[0]), None if found[1] is None else int(found[1])


class PgKinds:
    """One bus's view of the ``channels`` table (a cache of rows that never
    change once written). Every method takes the connection it runs on, so
    the caller's error classification applies."""

    __slots__ = ("_fix", "_known", "_read")

    def __init__(self, schema: str) -> None:
        s = f'"{schema}"'
        self._known: dict[str, Row] = {}
        self._fix = (
            f"INSERT INTO {s}.channels (channel, kind, max_deliveries) VALUES (%s, %s, %s)"
            " ON CONFLICT (channel) DO NOTHING RETURNING kind, max_deliveries"
        )
        self._read = f"SELECT kind, max_deliveries FROM {s}.channels WHERE channel = %s"

    def known(self, channel: str) -> str | None:
        """The channel's kind if this bus has seen it (no query)."""
        row = self._known.get(channel)
        return None if row is None else row[0]

    def remember(self, channel: str, found: Any) -> None:
        """Cache a ``kind, max_deliveries`` row another statement read (a
        post's or a stream's); nothing when it found no row."""
        row = _row(found)
        if row is not None:
            self._known.setdefault(channel, row)

    def lookup(self, conn: psycopg.Connection[Any], channel: str) -> Row | None:
        row = self._known.get(channel)
        if row is None:
            row = _row(conn.execute(self._read, (channel,)).fetchone())
            if row is not None:
                self._known[channel] = row
        return row

    def fix(
        self,
        conn: psycopg.Connection[Any],
        channel: str,
        kind: ChannelKind,
        op: str,
        max_deliveries: int | None = None,
    ) -> int | None:
        """Make ``channel`` of ``kind`` unless it has a kind already; refuse
        if that kind is another. Returns its ``max_deliveries`` (queues)."""
        row = self._known.get(channel)
        if row is None:
            most = max_deliveries if kind == "queue" else None
            row = _row(conn.execute(self._fix, (channel, kind, most)).fetchone())
            if row is None:  # there already, or inserted by another process meanwhile
                row = _row(conn.execute(self._read, (channel,)).fetchone())
            if row is None:  # pragma: no cover - the insert either wrote it or saw it
                raise WrongChannelKind(f"{op} on {channel!r}: its kind could not be fixed")
            self._known[channel] = row
        if row[0] != kind:
            raise wrong_kind(channel, row[0], kind, op)
        return row[1]

    def expect(
        self, conn: psycopg.Connection[Any], channel: str, kind: ChannelKind, op: str
    ) -> int | None:
        """Refuse an operation of ``kind`` on a channel of another kind; a
        channel with no kind yet passes. Returns its ``max_deliveries``."""
        row = self.lookup(conn, channel)
        if row is None:
            return None
        if row[0] != kind:
            raise wrong_kind(channel, row[0], kind, op)
        return row[1]
