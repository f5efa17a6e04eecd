"""``redis+sentinel://`` URLs: the Sentinels, the service, the data nodes'
options; and what a replicated Redis refuses before it starts anything."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from knell.buses import open_bus
from knell.stores import StoreError, StoreSpec, create_store
from knell.stores.redis.sentinel_url import parse


def test_a_url_names_its_sentinels_service_db_and_client_options() -> None:
    target = parse("redis+sentinel://:pw@127.0.0.1:1,[::1]:2,h:3/knell/4?socket_keepalive=true")
    assert target.sentinels == (("127.0.0.1", 1), ("::1", 2), ("h", 3))
    assert target.service == "knell"
    assert target.client_url == "redis://:pw@localhost/4?socket_keepalive=true"
    assert parse("redis+sentinel://h:1/svc").client_url == "redis://localhost/0"


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis+sentinel://h/knell", "sentinel 'h' is not host:port"),
        ("redis+sentinel://h:1,h:x/knell", "sentinel 'h:x' is not host:port"),
        ("redis+sentinel://h:70000/knell", "sentinel 'h:70000'"),
        ("redis+sentinel://h:1", "names no /service"),
        ("redis+sentinel://h:1/a/b/c", "names no /service"),
        ("redis+sentinel://h:1/knell/x", "db must be a number, got 'x'"),
        ("redis://h:1/knell", "expected a redis+sentinel:// URL"),
    ],
)
def test_a_bad_url_is_refused_naming_the_part(url: str, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        parse(url)


def test_the_password_never_shows_in_the_error() -> None:
    with pytest.raises(ValueError) as caught:
        parse("redis+sentinel://:hunter2@h:1")
    assert "hunter2" not in str(caught.value)


def test_the_reference_bus_opens_a_sentinel_url_without_connecting() -> None:
    bus = open_bus("redis+sentinel://127.0.0.1:1,127.0.0.1:2/knell/0?prefix=t:&op_timeout=1")
    assert type(bus).__name__ == "RedisBus" and bus.prefix == "t:"
    bus.close()


def test_a_redis_mutant_opens_a_sentinel_url_too() -> None:
    from knell.stores.redis.mutants import SeqGetThenSetBus

    bus = SeqGetThenSetBus.from_url("redis+sentinel://127.0.0.1:1/knell/0?prefix=t:")
    assert bus.prefix.startswith("t:") and bus.client_url.startswith("redis+sentinel://")
    bus.close()


def test_a_failover_that_could_never_take_a_write_is_refused_before_anything(
    tmp_path: Path,
) -> None:
    from knell.stores.redis.replicated import ReplicatedRedis

    store = create_store(StoreSpec(kind="redis", replicas=1, min_replicas_to_write=1), tmp_path)
    assert isinstance(store, ReplicatedRedis)  # made, not started
    with pytest.raises(StoreError, match="left with 0 replicas and refuses every write"):
        store.fail_over("kill")


def test_nodes_translates_what_the_sentinels_name_to_the_clients_own_link() -> None:
    target = parse(
        "redis+sentinel://:pw@127.0.0.1:1/knell/0"
        "?nodes=127.0.0.1:6001>127.0.0.1:7001,127.0.0.1:6002>127.0.0.1:7002&socket_keepalive=true"
    )
    assert target.dial(("127.0.0.1", 6002)) == ("127.0.0.1", 7002)
    assert target.dial(("127.0.0.1", 6009)) == ("127.0.0.1", 6009)  # not named: as named
    assert target.client_url == "redis://:pw@localhost/0?socket_keepalive=true"


def test_nodes_survives_the_bus_taking_its_own_options_out() -> None:
    from knell.buses._netopts import split_url
    from knell.stores.redis.bus import PREFIX

    url, _ = split_url(
        "redis+sentinel://127.0.0.1:1/knell/0?nodes=127.0.0.1:6001>127.0.0.1:7001&prefix=t:",
        namespace_key="prefix", namespace_check=PREFIX, schemes=("redis+sentinel",),
    )  # fmt: skip
    assert parse(url).nodes == ((("127.0.0.1", 6001), ("127.0.0.1", 7001)),)


@pytest.mark.parametrize(
    ("nodes", "says"),
    [
        ("127.0.0.1:1", "nodes item '127.0.0.1:1' has no '>'"),
        ("127.0.0.1:1>h", "nodes link 'h' is not host:port"),
        ("x>127.0.0.1:2", "nodes node 'x' is not host:port"),
        ("a:1>b:2&nodes=c:3>d:4", "nodes is given 2 times"),
    ],
)
def test_a_bad_nodes_option_is_refused_naming_the_item(nodes: str, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)) as caught:
        parse(f"redis+sentinel://:hunter2@h:1/knell?nodes={nodes}")
    assert "hunter2" not in str(caught.value)


def test_the_bus_dials_the_node_through_its_link(monkeypatch: pytest.MonkeyPatch) -> None:
    """The connection asks the Sentinels (here: a stand-in for their
    answer) and hands redis-py the translated address to dial."""
    from redis.sentinel import SentinelConnectionPoolProxy, SentinelManagedConnection

    from knell.stores.redis.sentinel_url import primary_connection

    target = parse("redis+sentinel://127.0.0.1:1/knell/0?nodes=127.0.0.1:6001>127.0.0.1:7001")
    monkeypatch.setattr(
        SentinelConnectionPoolProxy, "get_master_address", lambda _: ("127.0.0.1", 6001)
    )
    dialled: list[tuple[str, int]] = []
    monkeypatch.setattr(SentinelManagedConnection, "connect_to", lambda _, a: dialled.append(a))
    primary_connection(target, socket_timeout=1).connect()
    assert dialled == [("127.0.0.1", 7001)]
