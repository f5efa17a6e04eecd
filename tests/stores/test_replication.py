"""A private Postgres with streaming replicas, on real servers.

What the failover fault rests on: a write on the primary reaches the
replica; a promoted replica takes writes; a multi-host bus URL follows the
primary there by itself; asynchronous replication held back loses what the
old primary acknowledged, synchronous replication does not; and every node
is gone after stop.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import psutil
import psycopg
import pytest

from knell.buses import DefiniteError, open_bus
from knell.stores import StoreError, StoreSpec, create_store
from knell.stores.postgres.replication import ReplicatedPostgres
from knell.stores.replicated import Replicated, is_replicated
from tests.servers import assert_gone, require_postgres, runner_until_ready, server_processes

pytestmark = pytest.mark.integration


def _processes(store: ReplicatedPostgres) -> list[psutil.Process]:
    return [proc for node in store.nodes for proc in server_processes(node)]


def _rows(url: str) -> list[int]:
    with psycopg.connect(url, autocommit=True, connect_timeout=2) as conn:
        return [int(r[0]) for r in conn.execute("SELECT x FROM t ORDER BY x").fetchall()]


def _until(what: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_write_on_the_primary_reaches_the_replica_and_a_promoted_replica_takes_writes(
    make: object,
) -> None:
    store = make()  # type: ignore[operator]
    assert isinstance(store, Replicated) and is_replicated(store)
    assert store.primary() == "pg-0"
    with psycopg.connect(store.admin_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (x int)")
        conn.execute("INSERT INTO t VALUES (1)")
    replica = store.nodes[1]
    _until(lambda: _safe_rows(replica.admin_url) == [1])
    with (
        psycopg.connect(replica.admin_url, autocommit=True) as conn,
        pytest.raises(psycopg.errors.ReadOnlySqlTransaction),
    ):
        conn.execute("INSERT INTO t VALUES (2)")

    done = store.fail_over("kill")

    assert (done["old"], done["new"], done["old_state"]) == ("pg-0", "pg-1", "dead")
    assert done["fenced_s"] <= done["promoted_s"] <= done["first_write_s"]
    assert store.primary() == "pg-1"
    with psycopg.connect(replica.admin_url, autocommit=True) as conn:
        conn.execute("INSERT INTO t VALUES (2)")
    assert _rows(replica.admin_url) == [1, 2]


def _safe_rows(url: str) -> list[int] | None:
    try:
        return _rows(url)
    except psycopg.Error:
        return None


@pytest.mark.parametrize("synchronous", ["off", "remote_apply"])
def test_a_commit_held_back_from_the_replica_is_lost_by_a_failover_unless_synchronous(
    make: object, synchronous: str
) -> None:
    """The finding the failover scenarios make, on the store alone: with
    the primary's WAL senders frozen, an asynchronous commit is acked at
    once and gone after the failover; a synchronous one waits for the
    replica, and the failover kills it unacknowledged."""
    store = make(synchronous)  # type: ignore[operator]
    with psycopg.connect(store.admin_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (x int)")
        conn.execute("INSERT INTO t VALUES (1)")
    _until(lambda: _safe_rows(store.nodes[1].admin_url) == [1])
    assert store.hold_replication() == 1
    outcome: list[str] = []

    def insert() -> None:
        try:
            with psycopg.connect(store.admin_url, autocommit=True) as conn:
                conn.execute("INSERT INTO t VALUES (2)")
            outcome.append("acked")
        except psycopg.Error:
            outcome.append("failed")

    writer = threading.Thread(target=insert)
    writer.start()
    writer.join(1.0)
    acked_before = list(outcome)

    store.fail_over("kill")
    writer.join(10)

    rows = _rows(store.url.split("&schema")[0])
    if synchronous == "off":
        assert acked_before == ["acked"]
        assert rows == [1], "an acked commit the replica never saw survived a failover?"
    else:
        assert acked_before == [], "a synchronous commit returned while replication was held"
        assert outcome == ["failed"]
        assert rows in ([1], [1, 2])  # never acked: either is honest


def test_the_bus_url_follows_the_primary_through_a_failover(make: object) -> None:
    store = make("remote_apply")  # type: ignore[operator]
    assert "target_session_attrs=read-write" in store.url
    bus = open_bus(store.url)
    try:
        bus.subscribe("w", "a")
        bus.post("a", "before", "p")
        store.fail_over("kill")
        deadline = time.monotonic() + 15
        while True:
            try:
                bus.post("a", "after", "p")
                break
            except DefiniteError:  # its connection died with pg-0: never sent
                assert time.monotonic() < deadline, "the bus never reached the new primary"
                time.sleep(0.1)
        assert [m.body for m in bus.fetch("w", "a")] == ["before", "after"]
    finally:
        bus.close()


def test_a_bus_that_caches_the_primary_never_reaches_the_new_one(make: object) -> None:
    """The postgres-cached-primary mutant: the same failover, and every
    post after it fails (never sent: the cached node is dead)."""
    from knell.stores.postgres.mutants import CachedPrimaryBus

    store = make("remote_apply")  # type: ignore[operator]
    bus = CachedPrimaryBus.from_url(store.url)
    try:
        bus.post("a", "before", "p")
        store.fail_over("kill")
        for _ in range(5):
            with pytest.raises(DefiniteError, match="cannot connect"):
                bus.post("a", "after", "p")
            time.sleep(0.2)
    finally:
        bus.close()


def test_an_isolated_primary_is_frozen_not_dead_and_stays_so(make: object) -> None:
    store = make()  # type: ignore[operator]
    old = store.nodes[0]
    done = store.fail_over("isolate")
    assert done["old_state"] == psutil.STATUS_STOPPED
    assert old._server is not None and old._server.alive()
    assert store.fenced == {"pg-0": "frozen"}
    with pytest.raises(StoreError, match="no replica can take over from pg-1"):
        store.fail_over("kill")


RUNNER = """
import sys, time
from pathlib import Path
from knell.owners import Owner
from knell.stores import StoreSpec, create_store
run, states = Path(sys.argv[1]), Path(sys.argv[2])
owner = Owner(run, states=states)
store = create_store(StoreSpec("postgres", fsync=False, replicas=2), run / "st", owner=owner)
store.start()
store.hold_replication()
(run / "ready").write_text("ready\\n")
time.sleep(600)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL of the runner is POSIX-only here")
def test_no_node_outlives_a_sigkilled_runner_and_reap_removes_their_folders(
    tmp_path: Path,
) -> None:
    require_postgres()
    run = tmp_path / "run"
    run.mkdir()
    states = tmp_path / "states"
    with runner_until_ready(RUNNER, run, states) as runner:
        procs = psutil.Process(runner.pid).children(recursive=True)
        servers = [p for p in procs if p.name() == "postgres"]
        postmasters = [p for p in servers if p.parent().name() != "postgres"]
        assert len(postmasters) == 3, postmasters  # pg-0, pg-1, pg-2 (under their keepers)
        everything = list(procs)
        for p in postmasters:  # backends and WAL senders, in sessions of their own
            with contextlib.suppress(psutil.NoSuchProcess):
                everything += p.children(recursive=True)
        records = [json.loads(line) for line in (run / "owners.jsonl").read_text().splitlines()]
        names = {str(r.get("name")) for r in records}
        assert {"pg-0", "pg-1", "pg-2", "pg-1-basebackup"} <= names
        folders = [Path(str(r["id"])) for r in records if r.get("kind") == "directory"]
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(10)
        assert_gone(everything, timeout=10)
    assert not [f for f in folders if f.exists()], "a node's folder outlived knell reap"


def test_a_replica_that_cannot_be_made_leaves_nothing_running(tmp_path: Path) -> None:
    """A failed start (the primary refuses replication connections, so
    pg_basebackup fails) stops the primary it had started and says why."""
    require_postgres()
    store = create_store(
        StoreSpec("postgres", fsync=False, replicas=1, settings={"max_wal_senders": "0"}),
        tmp_path / "run",
    )
    assert isinstance(store, ReplicatedPostgres)
    first = store.nodes[0]
    with pytest.raises(StoreError, match=r"pg_basebackup of pg-1 .* failed"):
        store.start()
    assert first._server is not None and not first._server.alive()
    assert_gone(server_processes(first))
    folders = [node._temp for node in store.nodes if node._temp is not None]
    assert not [f for f in folders if f.exists()], "a node's folder outlived a failed start"
