"""Fixtures shared by the store tests: a replicated private Postgres, a private NATS server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from knell.owners import Owner
from knell.stores import StoreSpec, create_store
from knell.stores.nats.server import NatsServer
from knell.stores.postgres.replication import ReplicatedPostgres
from tests.servers import assert_gone, require_nats, require_postgres, server_processes

MakeReplicated = Callable[..., ReplicatedPostgres]
"""``make(synchronous="off", replicas=1)``: a started primary and replicas."""


@pytest.fixture
def make(tmp_path: Path) -> Iterator[MakeReplicated]:
    """Start replicated Postgres stores (fsync off: these tests judge
    replication, not the disk); at the end every node's processes are
    stopped and proven gone, replication held back by a test released
    first."""
    require_postgres()
    started: list[ReplicatedPostgres] = []

    def _make(synchronous: str = "off", replicas: int = 1) -> ReplicatedPostgres:
        store = create_store(
            StoreSpec("postgres", fsync=False, replicas=replicas, synchronous=synchronous),
            tmp_path / f"run-{len(started)}",
        )
        assert isinstance(store, ReplicatedPostgres)
        started.append(store)
        store.start()
        return store

    yield _make
    for store in started:
        procs = [proc for node in store.nodes for proc in server_processes(node)]
        store.release_replication()
        store.stop()
        assert_gone(procs)


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    """A private NATS server (1 s op timeout), proven gone at the end."""
    require_nats()
    owner = Owner(tmp_path, states=tmp_path / "states")
    store = create_store(StoreSpec(kind="nats", op_timeout=1.0), tmp_path / "run", owner=owner)
    assert isinstance(store, NatsServer)
    try:
        store.start()
        yield store
    finally:
        procs = server_processes(store)
        store.stop()
        owner.close()
        assert_gone(procs)
