"""At-most-once role delivery on the Postgres bus, with stranded listing.

The layout is the SQLite reference's (:mod:`knell.buses.sqlite_roles`):
a role inbox is a channel of kind ``role`` whose messages are ordinary log
rows; ``role_holds`` says which run holds each role until when, and
``deliveries`` has one row per message ever delivered (its run, when, and
``read_at``). Every promise is one statement, arbitrated by the server:

* **At most once.** ``receive`` inserts one ``deliveries`` row per
  message it hands out, ``ON CONFLICT DO NOTHING RETURNING``: the primary
  key is the message, so of two receives racing for one message exactly
  one gets a row back, and only what a receive inserted is returned. The
  undelivered messages are those above the highest delivered seq (receive
  always takes the oldest, and seqs commit in order).
* **Delivered to the holder.** ``receive`` finds the roles its run holds
  live with ``FOR SHARE`` on their hold rows, so a takeover (which
  updates that row) waits until the receive has committed: a message is
  never delivered to a run whose hold another run has already taken.
* **One holder.** ``claim_role`` is ``INSERT ... ON CONFLICT DO UPDATE
  ... WHERE`` the hold is the caller's own or has lapsed, judged on the
  row's newest version by the server's clock; no row back means another
  run holds it (refused).
* **Read by its recipient only**: ``read`` is an ``UPDATE`` that matches
  the delivery row only with the caller's run.
* **Stranded is derived, never written**: unread deliveries whose run is
  not the role's live holder, oldest delivery first, at most 50, in one
  statement (one snapshot). Releasing, dying and taking over write nothing
  extra, so none can forget to.

Ids are ``ROLE/SEQ``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg

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
from knell.stores.postgres.kinds import PgKinds
from knell.stores.postgres.queue import NOW

__all__ = ["CLAIM_ROLE_SQL", "RECEIVE_SQL", "ROLES_DDL", "PostgresRoles"]

T = TypeVar("T")

ROLES_DDL = """
CREATE TABLE IF NOT EXISTS {s}.role_holds (
    role text PRIMARY KEY,
    run text NOT NULL,
    expires_at double precision NOT NULL
);
CREATE TABLE IF NOT EXISTS {s}.deliveries (
    channel text NOT NULL,
    seq bigint NOT NULL,
    run text NOT NULL,
    delivered_at double precision NOT NULL,
    read_at double precision,
    PRIMARY KEY (channel, seq)
);
CREATE INDEX IF NOT EXISTS deliveries_unread
    ON {s}.deliveries (channel, delivered_at, seq) WHERE read_at IS NULL;
"""

CLAIM_ROLE_SQL = f"""
WITH held AS (
  INSERT INTO {{s}}.role_holds AS h (role, run, expires_at)
  VALUES (%(r)s, %(run)s, {NOW} + %(lease)s)
  ON CONFLICT (role) DO UPDATE SET run = excluded.run, expires_at = {NOW} + %(lease)s
  WHERE h.run = excluded.run OR h.expires_at <= {NOW}
  RETURNING expires_at)
SELECT (SELECT expires_at FROM held), h.run, h.expires_at
FROM (SELECT 1) AS one LEFT JOIN {{s}}.role_holds h ON h.role = %(r)s
"""
"""Take or renew the hold; the second and third columns say who held it
(for the refusal's message only: they come from the statement's snapshot)."""

_RELEASE_ROLE = f"DELETE FROM {{s}}.role_holds WHERE role = %s AND run = %s AND expires_at > {NOW}"

RECEIVE_SQL = f"""
WITH held AS (
  SELECT role FROM {{s}}.role_holds WHERE run = %(run)s AND expires_at > {NOW}
  ORDER BY role FOR SHARE),
pending AS (
  SELECT p.channel, p.seq, p.body, p.sender FROM held
  CROSS JOIN LATERAL (
    SELECT m.channel, m.seq, m.body, m.sender FROM {{s}}.messages m
    WHERE m.channel = held.role AND m.seq > (
      SELECT COALESCE(MAX(d.seq), 0) FROM {{s}}.deliveries d WHERE d.channel = held.role)
      AND (m.expires_at IS NULL OR m.expires_at > {NOW})
    ORDER BY m.seq LIMIT %(limit)s) p
  ORDER BY p.channel, p.seq LIMIT %(limit)s),
given AS (
  INSERT INTO {{s}}.deliveries (channel, seq, run, delivered_at)
  SELECT channel, seq, %(run)s, {NOW} FROM pending
  ON CONFLICT (channel, seq) DO NOTHING
  RETURNING channel, seq)
SELECT (SELECT count(*) FROM held), p.channel, p.seq, p.body, p.sender
FROM (SELECT 1) AS one
LEFT JOIN (pending p JOIN given g ON g.channel = p.channel AND g.seq = p.seq) ON true
ORDER BY p.channel, p.seq
"""
"""Deliver, in one statement: the first column counts the roles held
(none: refused), the rest are the messages this receive inserted."""

_READ = (
    f"UPDATE {{s}}.deliveries SET read_at = COALESCE(read_at, {NOW})"
    " WHERE channel = %s AND seq = %s AND run = %s"
)

_STRANDED = f"""
SELECT d.seq, m.body, m.sender, d.run, d.delivered_at FROM {{s}}.deliveries d
JOIN {{s}}.messages m ON m.channel = d.channel AND m.seq = d.seq
WHERE d.channel = %(r)s AND d.read_at IS NULL
  AND d.run IS DISTINCT FROM (
    SELECT run FROM {{s}}.role_holds WHERE role = %(r)s AND expires_at > {NOW})
ORDER BY d.delivered_at, d.seq LIMIT %(cap)s
"""


class PostgresRoles:
    """The :class:`~knell.buses.contract.RoleBus` half of the Postgres bus
    (a mixin: the bus provides ``_run``, ``schema`` and the kinds)."""

    if TYPE_CHECKING:
        _kinds: PgKinds

        def _run(
            self, what: str, write: bool, call: Callable[[psycopg.Connection[Any]], T]
        ) -> T: ...

        def _sql(self, text: str) -> str: ...

    def claim_role(self, role: str, run: str, lease_s: float) -> RoleHold:
        check_lease(lease_s)
        args = {"r": role, "run": run, "lease": float(lease_s)}

        def call(conn: psycopg.Connection[Any]) -> Any:
            self._kinds.fix(conn, role, "role", "claim_role")
            return conn.execute(self._sql(CLAIM_ROLE_SQL), args).fetchone()

        row = self._run("claim_role", True, call)
        if row is None or row[0] is None:
            holder = "another run" if row is None or row[1] is None else f"run {row[1]!r}"
            raise RoleHeld(f"role {role!r} is held by {holder}")
        return RoleHold(role, run, float(row[0]))

    def release_role(self, role: str, run: str) -> None:
        def call(conn: psycopg.Connection[Any]) -> int:
            self._kinds.expect(conn, role, "role", "release_role")
            return conn.execute(self._sql(_RELEASE_ROLE), (role, run)).rowcount

        if self._run("release_role", True, call) != 1:
            raise NotHolder(f"run {run!r} does not hold role {role!r}")

    def receive(self, run: str, limit: int = 50) -> list[Delivery]:
        return self._deliver(run, limit, RECEIVE_SQL)

    def _deliver(self, run: str, limit: int, sql: str) -> list[Delivery]:
        """Run a receive statement shaped like :data:`RECEIVE_SQL` (a
        mutant may change what it writes)."""
        if limit <= 0:
            raise DefiniteError(f"receive limit must be > 0, got {limit}")
        args = {"run": run, "limit": limit}
        rows = self._run("receive", True, lambda c: c.execute(self._sql(sql), args).fetchall())
        if not rows or not rows[0][0]:
            raise NotHolder(f"run {run!r} holds no role")
        return [
            Delivery(message_id(str(r), int(s)), str(r), int(s), b, snd, run)
            for _, r, s, b, snd in rows
            if s is not None
        ]

    def read(self, id: str, run: str) -> None:
        role, seq = split_id(id)

        def call(conn: psycopg.Connection[Any]) -> int:
            self._kinds.expect(conn, role, "role", "read")
            return conn.execute(self._sql(_READ), (role, seq, run)).rowcount

        if self._run("read", True, call) != 1:
            raise NotDeliveredTo(f"{id} was not delivered to run {run!r}")

    def stranded(self, role: str) -> list[Stranded]:
        def call(conn: psycopg.Connection[Any]) -> list[Any]:
            if self._kinds.lookup(conn, role) is None:
                return []  # no kind yet: nothing was ever delivered
            self._kinds.expect(conn, role, "role", "stranded")
            return conn.execute(self._sql(_STRANDED), {"r": role, "cap": STRANDED_CAP}).fetchall()

        rows = self._run("stranded", False, call)
        return [
            Stranded(message_id(role, int(s)), role, int(s), b, snd, r, float(at))
            for s, b, snd, r, at in rows
        ]
