"""Channel kinds on the reference SQLite bus: which read-state serves a channel.

Every contract appends to the same log (the ``messages`` table); what a
channel is *for* (broadcast cursors, queue leases, role deliveries, a stream's ring) is a
row of ``channels``, written by the first kind-specific operation
(``subscribe``, ``declare_queue`` or ``claim``, ``claim_role``,
``declare_stream``) inside its
write transaction, and never changed. An operation of another kind is then
refused with :class:`~knell.buses.contract.WrongChannelKind`, so a claim
can never consume a broadcast channel's messages and a subscriber can
never read a work queue as if it were a feed (raven's ADR-001: kind is
decided once, immutable after).

Because a kind never changes, each connection caches what it has seen: the
broadcast hot paths (fetch, ack) pay one dict lookup, not a query.
``post`` is kind-neutral and never looks.
"""

from __future__ import annotations

import sqlite3

from knell.buses.contract import ChannelKind, WrongChannelKind

__all__ = ["KINDS_SCHEMA", "ChannelKinds", "wrong_kind"]

KINDS_SCHEMA = """
CREATE TABLE IF NOT EXISTS channels (
    channel TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    max_deliveries INTEGER
) WITHOUT ROWID;
"""

_NAMES = {
    "broadcast": "a broadcast channel",
    "queue": "a queue",
    "role": "a role inbox",
    "stream": "a stream",
    "undeclared": "not declared",
}


def wrong_kind(channel: str, kind: str, wanted: str, op: str) -> WrongChannelKind:
    """The refusal of ``op`` (of kind ``wanted``) on a channel of ``kind``:
    one wording for every bus."""
    return WrongChannelKind(
        f"{op} on {channel!r}: it is {_NAMES.get(kind, kind)}, not {_NAMES.get(wanted, wanted)}"
    )


class ChannelKinds:
    """One connection's view of the ``channels`` table (a cache of rows,
    which never change once written)."""

    __slots__ = ("_known",)

    def __init__(self) -> None:
        self._known: dict[str, tuple[str, int | None]] = {}

    def _row(self, db: sqlite3.Connection, channel: str) -> tuple[str, int | None] | None:
        known = self._known.get(channel)
        if known is not None:
            return known
        row = db.execute(
            "SELECT kind, max_deliveries FROM channels WHERE channel = ?", (channel,)
        ).fetchone()
        if row is None:
            return None
        found = (str(row[0]), None if row[1] is None else int(row[1]))
        self._known[channel] = found
        return found

    def fix(
        self,
        db: sqlite3.Connection,
        channel: str,
        kind: ChannelKind,
        op: str,
        max_deliveries: int | None = None,
    ) -> int | None:
        """Inside a write transaction: make ``channel`` of ``kind`` unless it
        already has a kind; refuse if that kind is another. Returns the
        channel's ``max_deliveries`` (queues only)."""
        row = self._row(db, channel)
        if row is None:
            db.execute(
                "INSERT INTO channels (channel, kind, max_deliveries) VALUES (?, ?, ?)"
                " ON CONFLICT (channel) DO NOTHING",
                (channel, kind, max_deliveries if kind == "queue" else None),
            )
            row = self._row(db, channel)
            assert row is not None  # written above, or by an earlier transaction
        if row[0] != kind:
            raise wrong_kind(channel, row[0], kind, op)
        return row[1]

    def expect(
        self, db: sqlite3.Connection, channel: str, kind: ChannelKind, op: str
    ) -> int | None:
        """Refuse an operation of ``kind`` on a channel of another kind; a
        channel with no kind yet passes (nothing was fixed). Returns its
        ``max_deliveries`` (queues only)."""
        row = self._row(db, channel)
        if row is None:
            return None
        if row[0] != kind:
            raise wrong_kind(channel, row[0], kind, op)
        return row[1]

    def kind(self, db: sqlite3.Connection, channel: str) -> str | None:
        row = self._row(db, channel)
        return None if row is None else row[0]
