"""The final integrity probes on real private servers: an intact store
passes, and a store whose files were damaged on disk fails, through the
same store-kind hook the runner calls (a Postgres index page overwritten
behind the server's back; a Redis AOF with a command cut short)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from redis import Redis

from knell.stores import Store, StoreSpec, create_store
from knell.stores.registry import get
from tests.servers import assert_gone, require_postgres, require_redis, server_processes

pytestmark = pytest.mark.integration


@pytest.fixture
def stores() -> Iterator[list[Store]]:
    started: list[Store] = []
    yield started
    for store in started:
        procs = server_processes(store)
        store.stop()
        assert_gone(procs)


def _start(stores: list[Store], tmp_path: Path, spec: StoreSpec) -> Any:
    store = create_store(spec, tmp_path / "run")
    stores.append(store)
    store.start()
    return store


def test_amcheck_passes_an_intact_cluster_and_fails_a_damaged_index(
    stores: list[Store], tmp_path: Path
) -> None:
    require_postgres()
    store = _start(stores, tmp_path, StoreSpec("postgres"))
    url = store.admin_url
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA knell")
        conn.execute("CREATE TABLE knell.m (seq bigint PRIMARY KEY, body text NOT NULL)")
        conn.execute(
            "INSERT INTO knell.m SELECT g, repeat('x', 80) FROM generate_series(1, 5000) g"
        )
        conn.execute("CHECKPOINT")
        index = conn.execute("SELECT pg_relation_filepath('knell.m_pkey')").fetchone()
    assert index is not None
    found = get("postgres").integrity(store)
    assert found is not None and found.status == "ok", found
    assert "B-tree" in found.detail

    store.crash()  # nothing written since the checkpoint: recovery leaves the page as it is
    path = Path(store.data_dir) / str(index[0])
    with path.open("r+b") as fh:
        fh.seek(8192 * 2)  # a leaf page: the metapage (0) and the first leaf (1) kept
        fh.write(os.urandom(8192))
    store.restart()
    store.wait_ready(60)
    found = get("postgres").integrity(store)
    assert found is not None and found.status == "corrupt", found
    assert "SQLSTATE XX" in found.detail


def test_redis_check_aof_passes_a_loadable_aof_and_fails_a_cut_command(
    stores: list[Store], tmp_path: Path
) -> None:
    require_redis()
    store = _start(stores, tmp_path, StoreSpec("redis", persistence="always"))
    client = Redis.from_url(store.admin_url)
    try:
        for i in range(100):
            client.xadd("knell:events", {"body": f"m{i}"})
    finally:
        client.close()
    found = get("redis").integrity(store)
    assert found is not None and found.status == "ok", found
    folder = Path(store.data_dir) / "appendonlydir"
    (last,) = sorted(folder.glob("*.incr.aof"))[-1:]
    with last.open("ab") as fh:
        fh.write(b"*3\r\n$4\r\nXADD\r\n$3\r\nkn")  # a write cut short by a power cut
    found = get("redis").integrity(store)
    assert found is not None and found.status == "corrupt", found
    assert "not valid" in found.detail


def test_redis_without_persistence_is_not_probed(stores: list[Store], tmp_path: Path) -> None:
    require_redis()
    store = _start(stores, tmp_path, StoreSpec("redis", persistence="none"))
    assert get("redis").integrity(store) is None
