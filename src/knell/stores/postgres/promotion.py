"""The SQL of a Postgres failover, one spelling for every topology.

A replicated Postgres fails over the same way whether its nodes are
private servers on this machine (:mod:`knell.stores.postgres.replication`)
or containers of a compose stack
(:mod:`knell.stores.postgres.composed`): read how far each replica has
replayed, promote the most advanced one, wait until it takes a write,
point the other replicas at it. Only how a node is reached (a libpq URL)
and how the old primary is fenced differ, so what is said to Postgres is
written once, here, against a node's admin URL.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import psycopg

from knell.stores.base import StoreError

__all__ = [
    "PROMOTE_TIMEOUT",
    "first_write",
    "most_advanced",
    "promote",
    "replay_position",
    "repoint",
    "sender_pids",
    "streaming",
]

PROMOTE_TIMEOUT = 30.0
"""Seconds a promoted replica has to take its first write."""


def _connect(url: str) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(url, connect_timeout=2, autocommit=True)


def replay_position(url: str) -> int:
    """Bytes of WAL the node at ``url`` has replayed (its LSN as a number;
    a primary's current write position)."""
    with _connect(url) as conn:
        row = conn.execute(
            "SELECT coalesce(pg_last_wal_replay_lsn(), pg_current_wal_lsn()) - '0/0'::pg_lsn"
        ).fetchone()
    assert row is not None
    return int(str(row[0]))


def most_advanced(
    candidates: Mapping[str, str], primary: str, fenced: bool
) -> tuple[str, dict[str, int]]:
    """The candidate (node name -> admin URL) that has replayed the most
    WAL, the first on a tie, and every answering candidate's position.

    Choosing by replayed WAL is what a careful failover manager does: it
    loses the fewest acknowledged commits an asynchronous primary took.
    A replica that does not answer is no candidate; when none answers,
    ``primary`` cannot be replaced, and the error says whether fencing
    (``fenced``: some nodes were cut off on purpose) is why."""
    positions: dict[str, int] = {}
    for node, url in candidates.items():
        try:
            positions[node] = replay_position(url)
        except (psycopg.Error, OSError):
            continue
    if not positions:
        raise StoreError(
            f"no replica can take over from {primary}: "
            + ("every other node is fenced" if fenced else "none answers")
        )
    return max(positions, key=positions.__getitem__), positions


def streaming(url: str) -> set[str]:
    """The ``application_name`` of every replica streaming from the
    primary at ``url``."""
    with _connect(url) as conn:
        rows = conn.execute(
            "SELECT application_name FROM pg_stat_replication WHERE state = 'streaming'"
        ).fetchall()
    return {str(r[0]) for r in rows}


def sender_pids(url: str, node: str | None = None) -> list[int]:
    """The pids (in the primary's own process namespace) of its WAL
    senders, or only of the one streaming to ``node``."""
    with _connect(url) as conn:
        if node is None:
            rows = conn.execute("SELECT pid FROM pg_stat_replication").fetchall()
        else:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_replication WHERE application_name = %s", (node,)
            ).fetchall()
    return [int(str(r[0])) for r in rows]


def promote(url: str, node: str, timeout: float = PROMOTE_TIMEOUT) -> None:
    """``pg_promote()`` (the SQL spelling of ``pg_ctl promote``) on the
    replica at ``url``, waiting until it has left recovery."""
    with _connect(url) as conn:
        row = conn.execute("SELECT pg_promote(true, %s)", (int(timeout),)).fetchone()
    if row is None or not row[0]:
        raise StoreError(f"{node} did not finish promotion within {timeout:g} s")


def first_write(url: str, node: str, timeout: float = PROMOTE_TIMEOUT) -> None:
    """Until the node at ``url`` commits a write: the proof that a promoted
    replica serves as a primary, not merely that it was told to."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with _connect(url) as conn:
                conn.execute("CREATE TABLE IF NOT EXISTS public.knell_failover (at float8)")
                conn.execute(
                    "INSERT INTO public.knell_failover "
                    "VALUES (extract(epoch from clock_timestamp()))"
                )
            return
        except psycopg.Error as exc:
            if time.monotonic() >= deadline:
                raise StoreError(
                    f"{node} took no write within {timeout:g} s of its "
                    f"promotion: {' '.join(str(exc).split())}"
                ) from None
            time.sleep(0.05)


def repoint(url: str, conninfo: str) -> bool:
    """The replica at ``url`` streams from ``conninfo`` from now on
    (``primary_conninfo`` is reloadable; libpq follows the new primary's
    timeline, since ``recovery_target_timeline`` is ``latest``). An empty
    ``conninfo`` stops its WAL receiver. False when the replica does not
    answer (it is then left as it was)."""
    quoted = conninfo.replace("'", "''")
    try:
        with _connect(url) as conn:
            conn.execute(f"ALTER SYSTEM SET primary_conninfo = '{quoted}'")
            conn.execute("SELECT pg_reload_conf()")
    except psycopg.Error:
        return False
    return True
