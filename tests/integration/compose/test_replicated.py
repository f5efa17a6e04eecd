"""A replicated Postgres in containers: real streaming replication, real
promotion, clients following through the links, nothing left after.

The primary and two replicas come up from docker-compose.replicated.yml;
a write committed on the primary (``remote_apply``) is read on a replica
at once; the primary is isolated (its link cut, its container paused),
the most advanced replica promoted, and a client with the multi-host URL
lands on it; the other replica streams from the new primary; then the
primary is killed and the last replica takes over.
"""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
import pytest

from knell.owners import Owner
from knell.stores.compose.store import ComposeStore
from knell.stores.postgres import promotion
from knell.stores.postgres.composed import ComposedReplicatedPostgres, synchronous_env
from tests.integration.compose.support import leftovers

pytestmark = [pytest.mark.integration, pytest.mark.compose]


def _client_url(store: ComposedReplicatedPostgres) -> str:
    """The bus's URL as libpq reads it (knell's own parameters dropped)."""
    return store.url.split("&poll_interval")[0]


def _count(url: str) -> int:
    with psycopg.connect(url, connect_timeout=2, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM public.t").fetchone()
    assert row is not None
    return int(str(row[0]))


def test_write_reaches_replicas_and_clients_follow_two_failovers(
    docker: None, tmp_path: Path
) -> None:
    owner = Owner(states=tmp_path / "owners")
    inner = ComposeStore(
        "postgres",
        owner=owner,
        log_dir=tmp_path,
        replicas=2,
        env=synchronous_env("remote_apply"),
    )
    store = ComposedReplicatedPostgres(inner, tmp_path, 0.05, 2.0, synchronous="remote_apply")
    project = inner.stack.project
    try:
        store.start()
        assert store.primary() == "pg-0"
        assert set(store.node_addresses()) == {"pg-0", "pg-1", "pg-2"}
        with psycopg.connect(_client_url(store), connect_timeout=2, autocommit=True) as conn:
            conn.execute("CREATE TABLE public.t (x int)")
            conn.execute("INSERT INTO public.t VALUES (1)")
        # remote_apply: the commit returned once a replica applied it.
        replicas = [_count(store.admin_url(s)) for s in ("postgres-1", "postgres-2")]
        assert 1 in replicas, replicas

        first = store.fail_over("isolate", promote_after=0.0)
        assert first["old"] == "pg-0" and first["old_state"] == "stopped", first
        assert first["new"] in ("pg-1", "pg-2")
        with psycopg.connect(_client_url(store), connect_timeout=2, autocommit=True) as conn:
            conn.execute("INSERT INTO public.t VALUES (2)")
            row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
        assert row is not None and row[0] is False
        assert _count(store.admin_url(store.primary_service)) == 2
        other = "pg-2" if first["new"] == "pg-1" else "pg-1"
        deadline = time.monotonic() + 30
        while other not in promotion.streaming(store.admin_url(store.primary_service)):
            assert time.monotonic() < deadline, f"{other} never streamed from {first['new']}"
            time.sleep(0.2)

        second = store.fail_over("kill", promote_after=0.0)
        assert second == {**second, "old": first["new"], "new": other, "old_state": "dead"}
        assert _count(_client_url(store)) == 2
        described = store.describe()
        assert [p["node"] for p in described["primaries"]] == ["pg-0", first["new"], other]
        assert described["fenced"] == {"pg-0": "frozen", first["new"]: "killed"}
    finally:
        store.stop()
        owner.close()
    assert leftovers(project) == []
