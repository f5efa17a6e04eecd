"""A split brain of a private Postgres with a streaming replica, on real servers.

What the ``split-brain`` fault rests on: once the primary is cut off from
its replica and the replica promoted, both nodes take writes from direct
connections (two primaries, diverging) unless the old one was fenced; a
synchronous commit on the cut-off primary is never acknowledged; and the
heal fences an old primary still running.
"""

from __future__ import annotations

import threading
import time

import psutil
import psycopg
import pytest

from knell.stores.postgres.replication import ReplicatedPostgres
from knell.stores.replicated import Splittable, is_splittable
from tests.servers import assert_gone, server_processes

pytestmark = pytest.mark.integration


def _insert(url: str, x: int) -> None:
    with psycopg.connect(url, autocommit=True, connect_timeout=2) as conn:
        conn.execute("INSERT INTO t VALUES (%s)", (x,))


def _rows(url: str) -> list[int]:
    with psycopg.connect(url, autocommit=True, connect_timeout=2) as conn:
        return [int(r[0]) for r in conn.execute("SELECT x FROM t ORDER BY x").fetchall()]


def _senders(url: str) -> int:
    with psycopg.connect(url, autocommit=True, connect_timeout=2) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_replication").fetchone()
    assert row is not None
    return int(row[0])


def _table(store: ReplicatedPostgres) -> None:
    """Table ``t`` holding 1, on the primary and (synchronously) the replica."""
    with psycopg.connect(store.admin_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (x int)")
        conn.execute("INSERT INTO t VALUES (1)")
    deadline = time.monotonic() + 10
    while True:  # until the replica has replayed it
        try:
            if _rows(store.nodes[1].admin_url) == [1]:
                return
        except psycopg.Error:
            pass
        assert time.monotonic() < deadline, "the replica never replayed the first row"
        time.sleep(0.05)


def test_without_a_fence_both_primaries_take_writes_until_the_heal_kills_the_old_one(
    make: object,
) -> None:
    store = make()  # type: ignore[operator]
    assert isinstance(store, Splittable) and is_splittable(store)
    _table(store)
    old, new = store.nodes

    done = store.split(promote_after=0.1, fence=False)

    assert (done["old"], done["new"], done["old_state"]) == ("pg-0", "pg-1", "running")
    assert done["receivers_stopped"] == 1
    assert 0 <= done["cut_s"] <= done["promoted_s"] <= done["first_write_s"]
    assert store.primary() == "pg-1"
    assert _senders(old.admin_url) == 0, "the cut-off primary still streams"
    _insert(old.admin_url, 2)  # its clients still write there: acknowledged
    _insert(new.admin_url, 3)
    assert _rows(old.admin_url) == [1, 2]
    assert _rows(new.admin_url) == [1, 3], "the old primary's write reached the new one"

    healed = store.unsplit()

    assert (healed["old"], healed["old_state"]) == ("pg-0", "dead")
    assert store.fenced == {"pg-0": "killed"}
    assert _rows(new.admin_url) == [1, 3]  # what pg-0 acknowledged is gone


def test_with_a_fence_the_old_primary_is_dead_before_the_promotion(make: object) -> None:
    store = make()  # type: ignore[operator]
    _table(store)
    old, new = store.nodes

    done = store.split(promote_after=0.1, fence=True)

    assert (done["old"], done["new"], done["old_state"]) == ("pg-0", "pg-1", "dead")
    assert done["cut_s"] <= done["fenced_s"] <= done["promoted_s"] <= done["first_write_s"]
    assert old._server is not None and not old._server.alive()
    assert_gone(server_processes(old))
    with pytest.raises(psycopg.OperationalError):
        _insert(old.admin_url, 2)
    _insert(new.admin_url, 3)
    assert _rows(new.admin_url) == [1, 3]
    assert store.unsplit()["old_state"] == "dead"


def test_a_synchronous_commit_on_the_cut_off_primary_is_never_acknowledged(
    make: object,
) -> None:
    """Why ``synchronous = "on"`` survives a split brain: the old primary
    waits for a replica that no longer streams from it, so what its clients
    write there is never acknowledged, and the heal ends it unanswered."""
    store = make("on")  # type: ignore[operator]
    _table(store)
    old, new = store.nodes
    store.split(promote_after=0.0, fence=False)
    outcome: list[str] = []

    def insert() -> None:
        try:
            _insert(old.admin_url, 2)
            outcome.append("acked")
        except psycopg.Error:
            outcome.append("failed")

    writer = threading.Thread(target=insert)
    writer.start()
    writer.join(1.0)
    assert outcome == [], "a synchronous commit was acknowledged with no replica streaming"
    assert psutil.pid_exists(old._server.pid)  # type: ignore[union-attr,arg-type]

    store.unsplit()
    writer.join(10)

    assert outcome == ["failed"]
    assert _rows(new.admin_url) == [1]


def test_the_replica_does_not_dial_the_cut_off_primary_again(make: object) -> None:
    """Terminating the WAL senders alone is no cut: the replica's receiver
    dials again within seconds (``wal_retrieve_retry_interval``, 5 s) and
    streams what the old primary took meanwhile. Its emptied
    ``primary_conninfo`` keeps it away for a promotion as slow as 6 s."""
    store = make()  # type: ignore[operator]
    _table(store)
    old, new = store.nodes
    failed: list[BaseException] = []

    def split() -> None:
        try:
            store.split(promote_after=6.0, fence=False)
        except BaseException as exc:
            failed.append(exc)

    splitting = threading.Thread(target=split)
    splitting.start()
    time.sleep(0.5)
    _insert(old.admin_url, 2)  # acknowledged by the cut-off primary alone
    splitting.join(30)
    assert not failed, failed
    assert store.primary() == "pg-1"
    assert _rows(new.admin_url) == [1], "the replica streamed from the cut-off primary"
