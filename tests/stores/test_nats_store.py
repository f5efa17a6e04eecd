"""A private NATS JetStream server under knell's store faults, through the
nats-jetstream driver: what a SIGKILL keeps, how failures are classified,
that nothing outlives a SIGKILLed runner, and the one promise JetStream
keeps only for a while (idempotency, within its duplicate window)."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from knell.buses import DefiniteError, IndeterminateError, open_bus
from knell.owners import Owner
from knell.stores.base import StoreError
from knell.stores.nats.server import NatsServer
from knell.targets.nats_jetstream import JetStreamBus, connect
from knell.targets.nats_jetstream.names import Names
from tests.servers import assert_gone, require_nats, runner_until_ready, server_processes

pytestmark = pytest.mark.integration


@pytest.fixture
def bus(nats_server: NatsServer) -> Iterator[JetStreamBus]:
    b = open_bus(nats_server.url)
    assert isinstance(b, JetStreamBus)
    yield b
    b.close()


def first_ok(call: object, bound: float = 10.0) -> float:
    """Seconds until ``call()`` first succeeds."""
    started = time.monotonic()
    while True:
        try:
            call()  # type: ignore[operator]
            return time.monotonic() - started
        except (DefiniteError, IndeterminateError):
            assert time.monotonic() - started < bound, "no ok operation within the bound"
            time.sleep(0.02)


def test_every_acknowledged_post_survives_a_sigkill_of_the_server(
    nats_server: NatsServer, bus: JetStreamBus
) -> None:
    posted = [bus.post("events", f"m{i}", "p", idempotency_key=f"k{i}") for i in range(40)]
    nats_server.crash()
    nats_server.restart()
    nats_server.wait_ready()
    first_ok(lambda: bus.head("events"))
    assert bus.head("events") == 40
    bus.subscribe("reader", "events", at="start")
    assert bus.fetch("reader", "events") == posted
    # The duplicate window is rebuilt from the stored messages: a retry after
    # the restart is still caught.
    assert bus.post("events", "retry", "p", idempotency_key="k3") == posted[3]


def test_a_post_to_a_dead_server_is_definite_and_to_a_frozen_one_unknown(
    nats_server: NatsServer, bus: JetStreamBus
) -> None:
    bus.post("events", "warm", "p")
    nats_server.crash()
    deadline = time.monotonic() + 10  # until the client has seen the connection close
    while bus._nc is not None and bus._nc.is_connected and time.monotonic() < deadline:
        time.sleep(0.02)
    with pytest.raises(DefiniteError, match="not connected"):
        bus.post("events", "refused", "p")
    nats_server.restart()
    nats_server.wait_ready()
    assert first_ok(lambda: bus.post("events", "back", "p")) < 5.0
    nats_server.pause()
    try:
        with pytest.raises(IndeterminateError):
            bus.post("events", "frozen", "p")
    finally:
        nats_server.resume()
    first_ok(lambda: bus.head("events"))


def test_idempotency_holds_only_within_the_duplicate_window(nats_server: NatsServer) -> None:
    """JetStream cannot keep the contract's promise forever: a retry after
    the stream's duplicate window appends a second copy (documented in
    knell.targets.nats_jetstream.bus)."""
    b = connect(nats_server.url + "&duplicate_window=1")
    try:
        first = b.post("events", "original", "p", idempotency_key="k")
        assert b.post("events", "retry", "p", idempotency_key="k") == first
        time.sleep(1.6)
        again = b.post("events", "late retry", "p", idempotency_key="k")
        assert (again.seq, b.head("events")) == (2, 2)
    finally:
        b.close()


def test_a_start_that_fails_leaves_nothing_running(tmp_path: Path) -> None:
    owner = Owner(tmp_path, states=tmp_path / "states")
    store = NatsServer(tmp_path / "run", owner=owner, binary="/bin/false")
    with pytest.raises(StoreError, match="exited"):
        store.start()
    assert not store.running and server_processes(store) == []
    owner.close()


RUNNER = """
import sys, time
from pathlib import Path
from knell.owners import Owner
from knell.stores import StoreSpec, create_store
run, states = Path(sys.argv[1]), Path(sys.argv[2])
owner = Owner(run, states=states)
store = create_store(StoreSpec(kind="nats"), run, owner=owner)
store.start()
(run / "ready").write_text("ready\\n")
time.sleep(600)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL of the runner is POSIX-only here")
def test_no_server_outlives_a_sigkilled_runner(tmp_path: Path) -> None:
    require_nats()
    run = tmp_path / "run"
    run.mkdir()
    states = tmp_path / "states"
    with runner_until_ready(RUNNER, run, states) as runner:
        procs = psutil.Process(runner.pid).children(recursive=True)
        assert [p for p in procs if p.name() == "nats-server"], procs
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(10)
        assert_gone(procs, timeout=10)


def test_an_ack_past_deliveries_a_dead_puller_held_completes_within_its_bound(
    nats_server: NatsServer,
) -> None:
    """A puller that dies holding deliveries leaves them pending; the next
    ack of the handle (from any process) must wait for their redelivery,
    so the driver's ack_wait stays within an operation's bound."""
    live, dead = connect(nats_server.url), connect(nats_server.url)
    try:
        live.subscribe("worker", "events", at="start")
        for i in range(10):
            live.post("events", f"m{i}", "p")

        async def pull_and_die(js: Any) -> int:
            pull = await js.pull_subscribe_bind(durable=Names.consumer("worker"), stream=stream)
            return len(await pull.fetch(10, timeout=1))

        stream = live.names.stream("events")
        assert dead._call("pull", pull_and_die) == 10  # delivered, never acked
        dead.close()
        started = time.monotonic()
        assert live.ack("worker", "events", 8) == 8
        assert time.monotonic() - started < live.op_timeout
        assert live.cursor("worker", "events") == 8
    finally:
        live.close()
        dead.close()
