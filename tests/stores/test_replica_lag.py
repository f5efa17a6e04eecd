"""One replica held back, on real servers: what the replica-lag fault rests on.

The replica's replay position stops while the primary's and the other
replica's move on; released, it catches up; a failover told to promote it
promotes it, however far behind, and what it missed is gone. And the two
mutants that read or ack on a replica, against a held-back one: a stale
head, a refused ack (and neither shows on a lone server).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from knell.buses import DefiniteError, open_bus
from knell.stores import StoreSpec, create_store
from knell.stores.postgres.mutants import AckCursorOnReplicaBus, StaleHeadFromReplicaBus
from knell.stores.postgres.replication import ReplicatedPostgres
from tests.servers import require_postgres

pytestmark = pytest.mark.integration

Make = Callable[..., ReplicatedPostgres]


def _count(url: str) -> int | None:
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=2) as conn:
            row = conn.execute("SELECT count(*) FROM t").fetchone()
    except psycopg.Error:
        return None
    return None if row is None else int(row[0])


def _until(what: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _write(store: ReplicatedPostgres, rows: int) -> None:
    with psycopg.connect(store.admin_url, autocommit=True) as conn:
        for _ in range(rows):
            conn.execute("INSERT INTO t VALUES (1)")


def _table(store: ReplicatedPostgres) -> None:
    with psycopg.connect(store.admin_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (x int)")
    _write(store, 1)
    for node in store.nodes[1:]:
        _until(lambda node=node: _count(node.admin_url) == 1)  # type: ignore[misc]


def test_a_held_replica_stops_while_the_primary_and_the_other_replica_move_on_then_catches_up(
    make: Make,
) -> None:
    store = make(replicas=2)
    _table(store)
    held = store.hold_replica("pg-1")
    assert held["replica"] == "pg-1" and held["replica_lsn"] <= held["primary_lsn"]

    _write(store, 50)
    _until(lambda: _count(store.nodes[2].admin_url) == 51)  # pg-2 streams on
    time.sleep(0.5)
    during = store.lag_positions("pg-1")
    assert _count(store.nodes[1].admin_url) == 1, "the held replica replayed the writes"
    assert during["replica_lsn"] == held["replica_lsn"], "its replay position moved"
    assert during["primary_lsn"] > held["primary_lsn"], "the primary did not move"

    store.release_replication()
    seconds = store.wait_caught_up("pg-1", during["primary_lsn"], 10.0)
    assert seconds < 10.0 and _count(store.nodes[1].admin_url) == 51


def test_a_failover_to_the_lagging_replica_promotes_it_over_a_more_advanced_one(
    make: Make,
) -> None:
    store = make(replicas=2)
    _table(store)
    store.hold_replica("pg-1")
    _write(store, 20)
    _until(lambda: _count(store.nodes[2].admin_url) == 21)

    done = store.fail_over("kill", to="pg-1")

    assert (done["new"], done["chosen"], done["old_state"]) == ("pg-1", "named", "dead")
    assert done["replayed"]["pg-2"] > done["replayed"]["pg-1"], "pg-1 was not behind"
    assert store.primary() == "pg-1"
    assert _count(store.nodes[1].admin_url) == 1, "the lagging replica had the 20 writes?"


def test_the_most_advanced_replica_is_still_the_default(make: Make) -> None:
    store = make(replicas=2)
    _table(store)
    store.hold_replica("pg-1")
    _write(store, 20)
    _until(lambda: _count(store.nodes[2].admin_url) == 21)
    done = store.fail_over("kill")
    assert (done["new"], done["chosen"]) == ("pg-2", "most-advanced")


def test_the_stale_head_mutant_answers_a_lagging_replicas_head(make: Make) -> None:
    store = make()
    ref = open_bus(store.url)
    bus = StaleHeadFromReplicaBus.from_url(store.url)
    try:
        ref.subscribe("w", "a")
        ref.post("a", "1", "p")
        _until(lambda: _replica_head(bus) == 1)
        store.hold_replica("pg-1")
        for i in range(5):
            ref.post("a", str(i), "p")
        assert ref.head("a") == 6
        assert bus.head("a") == 1, "the head came from the primary"
        assert bus.subscribe("late", "a") == 1, "a new handle joined at the true head"
        assert len(bus.fetch("late", "a")) == 5  # the history it joined below
    finally:
        bus.close()
        ref.close()


def _replica_head(bus: StaleHeadFromReplicaBus) -> int | None:
    """The head as the mutant reads it, None until the replica has the table."""
    try:
        return bus.head("a")
    except DefiniteError:
        return None


def test_the_ack_on_replica_mutant_is_refused_on_a_standby(make: Make) -> None:
    store = make()
    bus = AckCursorOnReplicaBus.from_url(store.url)
    try:
        bus.subscribe("w", "a")
        bus.post("a", "1", "p")
        _until(lambda: _count_messages(store) == 1)
        with pytest.raises(DefiniteError, match=r"25006.*read-only transaction"):
            bus.ack("w", "a", 1)
        assert bus.cursor("w", "a") == 0
    finally:
        bus.close()


def _count_messages(store: ReplicatedPostgres) -> int | None:
    url = store.nodes[1].admin_url
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=2) as conn:
            row = conn.execute('SELECT count(*) FROM "knell".messages').fetchone()
    except psycopg.Error:
        return None
    return None if row is None else int(row[0])


@pytest.mark.parametrize("mutant", [StaleHeadFromReplicaBus, AckCursorOnReplicaBus])
def test_neither_mutant_shows_on_a_lone_server(tmp_path: Path, mutant: type) -> None:
    """prefer-standby falls back to the primary: on one server both behave
    as the reference (why single-server tests never catch them)."""
    require_postgres()
    store = create_store(StoreSpec("postgres", fsync=False), tmp_path)
    store.start()
    try:
        bus = mutant.from_url(store.url)
        try:
            bus.subscribe("w", "a")
            for i in range(3):
                bus.post("a", str(i), "p")
            assert bus.head("a") == 3
            assert bus.subscribe("late", "a") == 3
            assert bus.ack("w", "a", 2) == 2 and bus.cursor("w", "a") == 2
        finally:
            bus.close()
    finally:
        store.stop()
