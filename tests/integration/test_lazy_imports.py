"""A SQLite-only run never imports a server's client library: psycopg and
redis-py load only when a Postgres or Redis bus, store or mutant is used."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
import knell, knell.buses, knell.stores, knell.bench.bus, knell.owners
from knell.buses import open_bus, resolve_driver
from knell.stores import StoreSpec, create_store
from knell.buses.mutants import all_mutants
resolve_driver("sqlite:///x.db", "knell.buses.mutants:stale_ack_regresses")
all_mutants("sqlite")
store = create_store(StoreSpec(kind="sqlite"), __import__("pathlib").Path(sys.argv[1]))
store.start()
bus = open_bus(store.url)
bus.post("a", "m", "p")
bus.close()
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("psycopg", "redis"))
print(",".join(loaded))
"""


def test_sqlite_runs_never_import_psycopg_or_redis(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "", out.stdout


def test_the_schemes_resolve_to_their_buses() -> None:
    from knell.buses import resolve_driver
    from knell.buses.postgres import open_postgres
    from knell.buses.redis import open_redis

    assert resolve_driver("postgresql://u@h/db") is open_postgres
    assert resolve_driver("postgres://u@h/db") is open_postgres
    assert resolve_driver("redis://h:1/0") is open_redis
