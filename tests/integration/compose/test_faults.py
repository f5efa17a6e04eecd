"""Every container fault really happens, as a client of the store sees it
through the stack's Toxiproxy link, and every one heals."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from knell.stores.compose import ComposeStack, ComposeStore
from tests.integration.compose.support import leftovers, resp

pytestmark = [pytest.mark.integration, pytest.mark.compose]


@pytest.fixture(scope="module")
def stack(docker: None) -> Iterator[ComposeStack]:
    with ComposeStack(("redis",)) as up:
        yield up
    assert leftovers(up.project) == []


@pytest.fixture
def healthy(stack: ComposeStack) -> Iterator[ComposeStack]:
    stack.wait_ready()
    yield stack
    stack.faults.heal()
    stack.wait_ready()


def test_kill_is_a_crash_and_start_recovers_the_data(healthy: ComposeStack) -> None:
    link = healthy.address("redis")
    assert resp(link, "SET", "k", "before-crash") == b"+OK\r\n"
    healthy.faults.kill("redis")
    assert healthy.container("redis").attrs["State"]["ExitCode"] == 137  # SIGKILL
    assert not healthy.ready("redis")
    healthy.faults.start("redis")
    healthy.wait_ready(timeout=30)
    assert resp(link, "GET", "k") == b"$12\r\nbefore-crash\r\n"  # the append-only file


def test_pause_freezes_and_unpause_thaws(healthy: ComposeStack) -> None:
    healthy.faults.pause("redis")
    assert healthy.container("redis").status == "paused"
    assert not healthy.ready("redis", timeout=0.5)
    healthy.faults.unpause("redis")
    assert healthy.ready("redis")


def test_restart_breaks_open_connections_and_comes_back(healthy: ComposeStack) -> None:
    import socket

    before = healthy.container("redis").attrs["State"]["StartedAt"]
    conn = socket.create_connection(healthy.address("redis"), timeout=5)
    healthy.faults.restart("redis", timeout=1)
    try:
        conn.sendall(b"PING\r\n")
        answer = conn.recv(64)
    except OSError:
        answer = b""
    finally:
        conn.close()
    assert answer == b"", "a connection from before the restart still answered"
    assert healthy.container("redis").attrs["State"]["StartedAt"] != before
    healthy.wait_ready(timeout=30)


def test_disconnect_partitions_and_reconnect_heals(healthy: ComposeStack) -> None:
    healthy.faults.disconnect("redis")
    assert (
        healthy.network().name
        not in healthy.container("redis").attrs["NetworkSettings"]["Networks"]
    )
    assert not healthy.ready("redis")
    healthy.faults.reconnect("redis")
    deadline = time.monotonic() + 10
    while not healthy.ready("redis"):
        assert time.monotonic() < deadline, "redis unreachable after reconnect"
        time.sleep(0.1)


def test_heal_undoes_every_fault_in_effect(healthy: ComposeStack) -> None:
    healthy.faults.disconnect("redis")
    healthy.faults.pause("toxiproxy")
    assert sorted(healthy.faults.heal()) == ["reconnect redis", "unpause toxiproxy"]
    healthy.wait_ready(timeout=30)


def test_postgres_store_verbs(docker: None, tmp_path) -> None:
    store = ComposeStore("postgres", log_dir=tmp_path)
    try:
        store.start()
        assert store.url().startswith("postgresql://knell:knell@127.0.0.1:")
        assert store.link == "postgres" and store.toxiproxy_url.startswith("http://127.0.0.1:")
        store.crash()
        assert not store.stack.ready("postgres")
        store.restart()
        store.wait_ready(timeout=60)
        store.pause()
        assert not store.stack.ready("postgres", timeout=0.5)
        store.resume()
        assert store.stack.ready("postgres")
        store.restart()  # a running one: stop and start
        store.wait_ready(timeout=60)
        store.disconnect()
        assert not store.stack.ready("postgres")
        store.reconnect()
        store.wait_ready(timeout=30)
    finally:
        store.stop()
    assert leftovers(store.stack.project) == []
