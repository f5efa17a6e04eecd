"""The private Postgres server's final integrity probe: ``amcheck``.

``amcheck`` (a contrib extension shipped with the server on Debian) checks
a relation's on-disk structure without trusting it: ``bt_index_check``
walks a B-tree's pages and, with ``heapallindexed``, proves that every
live row of the table has its index entry (a power cut that kept an index
page and lost the heap page it points to, or the reverse, fails it);
``verify_heapam`` (amcheck 1.3, Postgres 14 on) checks the table's own
pages and tuples. The probe creates the extension, then checks every
B-tree index and table outside the system schemas: the bus's schema, and
any an adapter made.

Corruption is decided by SQLSTATE, not message text: class ``XX``
(``data_corrupted``, ``index_corrupted``: what amcheck raises on a
damaged relation) is corrupt, and so is any row ``verify_heapam`` returns.
Anything else (the extension not installed, the server not answering, a
permission refused) means the probe could not look: unknown, with the
reason.
"""

from __future__ import annotations

from typing import Any

import psycopg

from knell.stores.integrity import Integrity

__all__ = ["PROBE", "amcheck", "classify_error"]

PROBE = "amcheck"

_CORRUPT_CLASS = "XX"
"""SQLSTATE class "internal error": XX001 data_corrupted, XX002 index_corrupted."""

_USER_RELATIONS = """
SELECT c.oid, c.oid::regclass::text, c.relkind, am.amname
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_am am ON am.oid = c.relam
LEFT JOIN pg_index i ON i.indexrelid = c.oid
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp%'
  AND c.relpersistence = 'p'
  AND ((c.relkind = 'i' AND am.amname = 'btree' AND i.indisvalid) OR c.relkind = 'r')
ORDER BY c.oid
"""


def classify_error(exc: psycopg.Error) -> Integrity:
    """A failed probe statement, by SQLSTATE: class XX is corrupt, any
    other error means the probe could not look."""
    state = exc.sqlstate or ""
    text = " ".join(str(exc).split())
    if state.startswith(_CORRUPT_CLASS):
        return Integrity.corrupt(PROBE, f"SQLSTATE {state}: {text}")
    return Integrity.unknown(PROBE, f"could not run ({state or type(exc).__name__}: {text})")


Relations = list[tuple[int, str]]


def _relations(conn: psycopg.Connection[Any]) -> tuple[Relations, Relations]:
    """The B-tree indexes and the tables outside the system schemas."""
    indexes: Relations = []
    tables: Relations = []
    for oid, name, relkind, _am in conn.execute(_USER_RELATIONS).fetchall():
        (indexes if relkind == "i" else tables).append((int(oid), str(name)))
    return indexes, tables


def _has_verify_heapam(conn: psycopg.Connection[Any]) -> bool:
    found = conn.execute("SELECT 1 FROM pg_proc WHERE proname = 'verify_heapam'").fetchone()
    return found is not None


def amcheck(admin_url: str, *, timeout: int = 10) -> Integrity | None:
    """Run the probe on the server at ``admin_url`` (a superuser's). No
    table outside the system schemas: no probe (``None``), as a bus of
    one's own that keeps its data elsewhere left nothing here to check."""
    try:
        with psycopg.connect(admin_url, connect_timeout=timeout, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS amcheck")
            indexes, tables = _relations(conn)
            if not indexes and not tables:
                return None
            for oid, _name in indexes:
                conn.execute("SELECT bt_index_check(%s::oid::regclass, true)", (oid,))
            heap = _has_verify_heapam(conn)
            damaged: list[str] = []
            if heap:
                for oid, name in tables:
                    for row in conn.execute(
                        "SELECT blkno, offnum, msg FROM verify_heapam(%s::oid::regclass)", (oid,)
                    ).fetchall():
                        damaged.append(f"{name} block {row[0]} item {row[1]}: {row[2]}")
    except psycopg.Error as exc:
        return classify_error(exc)
    if damaged:
        more = f"; and {len(damaged) - 3} more" if len(damaged) > 3 else ""
        return Integrity.corrupt(PROBE, "verify_heapam: " + "; ".join(damaged[:3]) + more)
    checked = f"{len(indexes)} B-tree index(es) with heapallindexed"
    checked += f", {len(tables)} table(s) by verify_heapam" if heap else " (no verify_heapam)"
    return Integrity.ok(PROBE, f"{checked}: no corruption")
