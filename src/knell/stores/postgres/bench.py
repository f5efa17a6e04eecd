"""The Postgres benchmarks: the bus against raw single statements on one
connection (:mod:`knell.bench.network`), and the queue's claims against a
raw guarded UPDATE (:mod:`knell.bench.queue`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from knell.bench.network import CHANNEL, ServerBench, with_option
from knell.bench.queue import QUEUE, RAW, RawClaim
from knell.stores import Store, StoreSpec

__all__ = ["QUEUE_BENCH", "PostgresBench"]


class PostgresBench(ServerBench):
    store = "postgres"
    durable_label = "fsync on"
    fast_label = "fsync off"
    _raw_name = "INSERT"

    def _find(self) -> None:
        from knell.stores.postgres.discovery import find_postgres

        find_postgres()

    def _specs(self) -> tuple[StoreSpec, StoreSpec]:
        return StoreSpec(kind="postgres"), StoreSpec(kind="postgres", fsync=False)

    def _admin(self, store: Store) -> str:
        return str(store.admin_url)  # type: ignore[attr-defined]

    def _raw_writer(self, store: Store) -> tuple[Callable[[int], None], Callable[[], None]]:
        import psycopg

        from knell.stores.postgres.bus import schema_sql

        conn = psycopg.connect(self._admin(store), autocommit=True)
        conn.execute(schema_sql("raw"))
        insert = (
            'INSERT INTO "raw".messages (channel, seq, body, sender, idem_key, posted_at)'
            " VALUES (%s, %s, %s, %s, %s, %s)"
        )

        def write(i: int) -> None:
            mid = f"producer-1.1:{i}"
            conn.execute(insert, (CHANNEL, i, mid, "producer-1", mid, time.time()))

        return write, conn.close

    def _raw_setup(self, store: Store) -> None:
        import psycopg

        from knell.stores.postgres.bus import schema_sql

        with psycopg.connect(self._admin(store), autocommit=True) as conn:
            conn.execute(schema_sql("rawcrash"))

    def _raw_first_write(self, store: Store) -> None:
        import psycopg

        with psycopg.connect(self._admin(store), autocommit=True, connect_timeout=2) as conn:
            conn.execute(
                'INSERT INTO "rawcrash".messages VALUES (%s, (SELECT COALESCE(MAX(seq), 0) + 1'
                ' FROM "rawcrash".messages), %s, %s, NULL, 0)',
                (CHANNEL, "after-crash", "raw"),
            )

    wake_label = "LISTEN/NOTIFY"

    def _wake_urls(self, store: Store) -> list[tuple[str, str, bool]]:
        return [
            ("LISTEN/NOTIFY", store.url, True),
            ("polling only", with_option(store.url, "notify", "0"), False),
        ]


_PG_RAW_CLAIM = (
    "UPDATE {s}.claims SET state = 'leased', consumer = %(who)s, expires_at = %(exp)s,"
    " deliveries = deliveries + 1, updated_at = %(now)s"
    " WHERE channel = %(c)s AND seq = (SELECT MIN(seq) FROM {s}.claims WHERE channel = %(c)s"
    " AND state = 'ready') AND state = 'ready'"
)
_PG_SEED = (
    "INSERT INTO {s}.messages (channel, seq, body, sender, idem_key, posted_at)"
    " SELECT %(c)s, g, 'bench:' || g, 'bench', NULL, %(now)s FROM generate_series(1, %(n)s) g"
)
_PG_SEED_READY = (
    "INSERT INTO {s}.claims (channel, seq, state, consumer, expires_at, deliveries, updated_at)"
    " SELECT %(c)s, g, 'ready', NULL, NULL, 0, %(now)s FROM generate_series(1, %(n)s) g"
)


def _postgres_raw(store: Any, bus: Any, n: int) -> RawClaim:
    """``n`` messages on the bus's queue, and as many ready rows for the raw
    guarded UPDATE, in the bus's own schema (seeded in bulk)."""
    import psycopg

    raw = psycopg.connect(store.admin_url, autocommit=True)
    s = f'"{bus.schema}"'
    now = time.time()
    raw.execute(_PG_SEED.format(s=s), {"c": QUEUE, "now": now, "n": n})
    raw.execute(_PG_SEED.format(s=s), {"c": RAW, "now": now, "n": n})
    raw.execute(_PG_SEED_READY.format(s=s), {"c": RAW, "now": now, "n": n})
    sql = _PG_RAW_CLAIM.format(s=s)

    def raw_claim() -> bool:
        t = time.time()
        args = {"who": "bench", "exp": t + 60.0, "now": t, "c": RAW}
        return raw.execute(sql, args).rowcount == 1

    return raw_claim, raw.close


QUEUE_BENCH = (
    _postgres_raw,
    "raw guarded UPDATE of the oldest ready row, same schema",
    "fsync on, synchronous_commit on",
)
"""The queue bench's raw claim loop, that baseline's name, the settings."""
