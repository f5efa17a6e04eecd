"""At-most-once role delivery on the reference SQLite bus, with stranded listing.

A role inbox is a channel of kind ``role``: messages addressed to the role
are ordinary log rows. Two more tables hold its read-state::

    role_holds  role -> the run holding it, until expires_at (a lease, so a
                run that dies without releasing loses the role on its own)
    deliveries  (role, seq) -> the run it was delivered to, when, read_at

Where the promises live:

* **At most once.** ``receive`` runs inside ``BEGIN IMMEDIATE`` and writes
  one ``deliveries`` row per message it hands out; the row's primary key
  is the message, so no message can be delivered twice, to this run or any
  later one. The undelivered messages are exactly those above the highest
  delivered seq (receive always takes the oldest), an index lookup.
* **One holder.** ``claim_role`` checks and writes the hold under the
  same write lock; a live hold of another run refuses it.
* **Read by its recipient only.** ``read`` is a guarded UPDATE that
  matches the delivery row only with the caller's run.
* **Stranded is derived, never written.** A stranded message is a
  delivery row with no ``read_at`` whose run is not the role's current
  (live) holder: the seed design's rule, as one SELECT (one snapshot), so
  releasing, dying and taking over write nothing extra and cannot forget
  to. Oldest delivery first, at most :data:`STRANDED_CAP`.

Ids are ``ROLE/SEQ``, as on queue channels.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from knell.buses.contract import (
    STRANDED_CAP,
    DefiniteError,
    Delivery,
    NotDeliveredTo,
    NotHolder,
    RoleHeld,
    RoleHold,
    Stranded,
)
from knell.buses.leases import check_lease, message_id, split_id
from knell.buses.sqlite_expiry import SqliteExpiry
from knell.buses.sqlite_kinds import ChannelKinds

__all__ = ["ROLES_SCHEMA", "STRANDED_CAP", "SqliteRoles"]

ROLES_SCHEMA = """
CREATE TABLE IF NOT EXISTS role_holds (
    role TEXT PRIMARY KEY,
    run TEXT NOT NULL,
    expires_at REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS deliveries (
    channel TEXT NOT NULL,
    seq INTEGER NOT NULL,
    run TEXT NOT NULL,
    delivered_at REAL NOT NULL,
    read_at REAL,
    PRIMARY KEY (channel, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS deliveries_unread
    ON deliveries (channel, delivered_at, seq) WHERE read_at IS NULL;
"""

STRANDED_QUERY = (
    "SELECT d.seq, m.body, m.sender, d.run, d.delivered_at FROM deliveries d"
    " JOIN messages m ON m.channel = d.channel AND m.seq = d.seq"
    " WHERE d.channel = :role AND d.read_at IS NULL"
    " AND d.run IS NOT (SELECT run FROM role_holds WHERE role = :role AND expires_at > :now)"
    " ORDER BY d.delivered_at, d.seq LIMIT :cap"
)
"""Unread deliveries to any run but the live holder: one statement, one snapshot."""


class SqliteRoles(SqliteExpiry):
    """The :class:`~knell.buses.contract.RoleBus` half of the SQLite bus (a
    mixin: the bus provides the connection, lock, write transaction, kinds)."""

    if TYPE_CHECKING:
        _db: sqlite3.Connection
        _lock: threading.RLock
        _kinds: ChannelKinds

        def _write(self) -> AbstractContextManager[sqlite3.Connection]: ...

    def claim_role(self, role: str, run: str, lease_s: float) -> RoleHold:
        check_lease(lease_s)
        with self._lock, self._write() as db:
            self._kinds.fix(db, role, "role", "claim_role")
            now = time.time()
            row = db.execute(
                "SELECT run, expires_at FROM role_holds WHERE role = ?", (role,)
            ).fetchone()
            if row is not None and row[0] != run and row[1] > now:
                raise RoleHeld(f"role {role!r} is held by run {row[0]!r} until {row[1]:.3f}")
            db.execute(
                "INSERT INTO role_holds (role, run, expires_at) VALUES (?, ?, ?)"
                " ON CONFLICT (role) DO UPDATE SET run = excluded.run,"
                " expires_at = excluded.expires_at",
                (role, run, now + lease_s),
            )
            return RoleHold(role, run, now + lease_s)

    def release_role(self, role: str, run: str) -> None:
        with self._lock, self._write() as db:
            self._kinds.expect(db, role, "role", "release_role")
            gone = db.execute(
                "DELETE FROM role_holds WHERE role = ? AND run = ? AND expires_at > ?",
                (role, run, time.time()),
            ).rowcount
            if gone != 1:
                raise NotHolder(f"run {run!r} does not hold role {role!r}")

    def receive(self, run: str, limit: int = 50) -> list[Delivery]:
        if limit <= 0:
            raise DefiniteError(f"receive limit must be > 0, got {limit}")
        with self._lock, self._write() as db:
            now = time.time()
            roles = [
                str(r)
                for (r,) in db.execute(
                    "SELECT role FROM role_holds WHERE run = ? AND expires_at > ? ORDER BY role",
                    (run, now),
                ).fetchall()
            ]
            if not roles:
                raise NotHolder(f"run {run!r} holds no role")
            out: list[Delivery] = []
            for role in roles:
                out += self._deliver(db, role, run, now, limit - len(out))
                if len(out) >= limit:
                    break
            return out

    def _deliver(
        self, db: sqlite3.Connection, role: str, run: str, now: float, limit: int
    ) -> list[Delivery]:
        """Hand ``run`` the oldest undelivered messages of ``role``, at most
        ``limit``, writing one delivery row each (keyed by the message, so
        none is delivered twice, to this run or any later one). A delivery
        is unread until its recipient reads it. Expired messages are passed
        over (and, once a later one is delivered, never delivered at all)."""
        rows = db.execute(
            "SELECT seq, body, sender FROM messages WHERE channel = :role AND seq >"
            " (SELECT COALESCE(MAX(seq), 0) FROM deliveries WHERE channel = :role)"
            f" AND {self._unexpired('receive')} ORDER BY seq LIMIT :limit",
            {"role": role, "limit": limit, "now": now},
        ).fetchall()
        db.executemany(
            "INSERT INTO deliveries (channel, seq, run, delivered_at) VALUES (?, ?, ?, ?)",
            [(role, seq, run, now) for seq, _, _ in rows],
        )
        return [Delivery(message_id(role, int(s)), role, int(s), b, snd, run) for s, b, snd in rows]

    def read(self, id: str, run: str) -> None:
        role, seq = split_id(id)
        with self._lock, self._write() as db:
            self._kinds.expect(db, role, "role", "read")
            if self._mark_read(db, role, seq, run) != 1:
                raise NotDeliveredTo(f"{id} was not delivered to run {run!r}")

    def _mark_read(self, db: sqlite3.Connection, role: str, seq: int, run: str) -> int:
        """Mark a delivery read, only by the run it was delivered to (a new
        holder cannot make a departed run's message vanish from the
        stranded list); the rows updated."""
        return db.execute(
            "UPDATE deliveries SET read_at = COALESCE(read_at, ?)"
            " WHERE channel = ? AND seq = ? AND run = ?",
            (time.time(), role, seq, run),
        ).rowcount

    def stranded(self, role: str) -> list[Stranded]:
        with self._lock:
            self._kinds.expect(self._db, role, "role", "stranded")
            rows = self._db.execute(
                STRANDED_QUERY, {"role": role, "now": time.time(), "cap": STRANDED_CAP}
            ).fetchall()
        return [
            Stranded(message_id(role, int(s)), role, int(s), b, snd, r, float(at))
            for s, b, snd, r, at in rows
        ]
