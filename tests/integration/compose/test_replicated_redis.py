"""A replicated Redis in containers: real replication, a real Sentinel
election, clients following through the links, nothing left after.

The primary, two replicas and three Sentinels come up from
docker-compose.replicated.yml; a write on the primary reaches a replica;
a client with the store's ``redis+sentinel://`` URL (the Sentinels'
addresses on the stack's network translated to the links) writes through
it. Then replication is held back, the primary acknowledges a write no
replica gets, and it is killed: the Sentinels elect a replica, the same
URL's next connection lands there, and the acknowledged write is gone.
Then that one is isolated (its link cut, its container paused) and the
last replica takes over.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from redis.connection import Connection

from knell.owners import Owner
from knell.stores.compose.store import ComposeStore
from knell.stores.redis.composed import (
    REPLICATION,
    SENTINEL_SERVICES,
    ComposedReplicatedRedis,
    min_replicas_env,
)
from knell.stores.redis.sentinel_url import parse, primary_connection
from tests.integration.compose.support import leftovers

pytestmark = [pytest.mark.integration, pytest.mark.compose]


def _through_sentinels(store: ComposedReplicatedRedis, *command: str) -> tuple[object, str]:
    """Run ``command`` on whichever node the Sentinels name, as a bus
    connects (the URL's own translation), and say which role it has."""
    target = parse(store.url.split("&poll_interval")[0])
    conn: Connection = primary_connection(
        target, socket_timeout=2, socket_connect_timeout=2, decode_responses=True
    )
    try:
        conn.connect()  # asks the Sentinels (a bare send would dial the placeholder host)
        conn.send_command(*command)
        reply = conn.read_response()
        conn.send_command("ROLE")
        role = conn.read_response()
    finally:
        conn.disconnect()
    return reply, str(role[0])


def _get(store: ComposedReplicatedRedis, service: str, key: str) -> object:
    return store._ask(service, "GET", key)


def test_write_reaches_replicas_and_clients_follow_two_sentinel_failovers(
    docker: None, tmp_path: Path
) -> None:
    owner = Owner(states=tmp_path / "owners")
    inner = ComposeStore(
        "redis", owner=owner, log_dir=tmp_path, replicas=2, env=min_replicas_env(0)
    )
    store = ComposedReplicatedRedis(inner, tmp_path, 0.05, 2.0)
    project = inner.stack.project
    try:
        store.start()
        assert store.primary() == "redis-0"
        assert list(store.node_addresses()) == [
            "sentinel-0", "sentinel-1", "sentinel-2", "redis-0", "redis-1", "redis-2",
        ]  # fmt: skip
        reply, role = _through_sentinels(store, "SET", "k", "1")
        assert (reply, role) == ("OK", "master")
        deadline = time.monotonic() + 10
        while {_get(store, s, "k") for s in ("redis-1", "redis-2")} != {"1"}:
            assert time.monotonic() < deadline, "the write never reached both replicas"
            time.sleep(0.1)

        # The Sentinels watch the primary where the replicas follow it, the
        # replication link: a Sentinel re-points a replica whose master is
        # another address (some seconds in), and a hold on a link the
        # replicas no longer use would hold nothing.
        link = f"{store.stack.ip('toxiproxy')}:{REPLICATION.listen_port}"
        for sentinel in SENTINEL_SERVICES:
            named = store._ask(sentinel, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "knell")
            assert f"{named[0]}:{named[1]}" == link, sentinel
        for replica in ("redis-1", "redis-2"):
            info = store._ask(replica, "INFO", "replication")
            assert f"master_port:{REPLICATION.listen_port}" in info, replica

        # Replication held back: the primary acknowledges a write no replica gets.
        assert store.hold_replication() == 1
        reply, _ = _through_sentinels(store, "SET", "k", "held")
        assert reply == "OK"
        time.sleep(0.5)
        assert {_get(store, s, "k") for s in ("redis-1", "redis-2")} == {"1"}

        first = store.fail_over("kill")
        assert first["old"] == "redis-0" and first["old_state"] == "dead", first
        assert first["new"] in ("redis-1", "redis-2") and first["promoted_by"] == "sentinel"
        reply, role = _through_sentinels(store, "GET", "k")
        assert (reply, role) == ("1", "master")  # acknowledged, then gone
        reply, role = _through_sentinels(store, "SET", "k", "2")
        assert (reply, role) == ("OK", "master")
        assert _get(store, store.primary_service, "k") == "2"

        second = store.fail_over("isolate")
        other = "redis-2" if first["new"] == "redis-1" else "redis-1"
        assert (second["old"], second["new"], second["old_state"]) == (
            first["new"], other, "stopped",
        )  # fmt: skip
        reply, role = _through_sentinels(store, "SET", "k", "3")
        assert (reply, role) == ("OK", "master")
        described = store.describe()
        assert [p["node"] for p in described["primaries"]] == ["redis-0", first["new"], other]
        assert described["fenced"] == {"redis-0": "killed", first["new"]: "frozen"}
    finally:
        store.stop()
        owner.close()
    assert leftovers(project) == []
