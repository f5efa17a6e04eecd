"""Store faults on real private servers, and how the buses live through them.

A crash is SIGKILL of the server and everything it forked; a restart
brings it back on the same port and data directory; a pause freezes it.
The buses must reconnect by themselves, never hang, and classify every
failure honestly; what survives a crash is exactly what the server's
durability settings promise.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import psycopg
import pytest

from knell.buses import DefiniteError, IndeterminateError, open_bus
from knell.owners import Owner
from knell.stores import Store, StoreSpec, create_store
from tests.integration.conftest import REPO
from tests.servers import assert_gone, require_postgres, require_redis, server_processes

pytestmark = pytest.mark.integration


def _require(kind: str) -> None:
    require_postgres() if kind == "postgres" else require_redis()


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[list[Store]]:
    started: list[Store] = []
    yield started
    for store in started:
        procs = server_processes(store)
        store.stop()
        assert_gone(procs)


def start(stores: list[Store], tmp_path: Path, spec: StoreSpec) -> Store:
    _require(spec.kind)
    store = create_store(spec, tmp_path / f"run-{len(stores)}")
    stores.append(store)
    store.start()
    return store


def crash_and_restart(store: Store) -> None:
    store.crash()
    store.restart()
    store.wait_ready(60)


DURABLE = [
    pytest.param(StoreSpec(kind="postgres"), id="postgres"),
    pytest.param(StoreSpec(kind="postgres", fsync=False), id="postgres-fsync-off"),
    pytest.param(StoreSpec(kind="redis", persistence="always"), id="redis-aof-always"),
    pytest.param(StoreSpec(kind="redis", persistence="everysec"), id="redis-aof-everysec"),
]


def _wait_aof_written(store: Store, timeout: float = 10.0) -> None:
    """Until Redis has written its AOF buffer to the file. With ``appendfsync
    everysec`` Redis acknowledges a write before it reaches the file, and
    postpones the write itself (up to 2 s, its documented loss) while a
    background fsync is still running: a SIGKILL then loses what was
    acknowledged. Without this wait, a loaded machine turned this test into a
    demonstration of that loss (every post gone, the next seq 1)."""
    import redis

    client = redis.Redis.from_url(store.admin_url)  # type: ignore[attr-defined]
    deadline = time.monotonic() + timeout
    try:
        while True:
            info = client.info("persistence")
            if int(info.get("aof_buffer_length", 0)) == 0 and not info.get(
                "aof_rewrite_in_progress"
            ):
                return
            assert time.monotonic() < deadline, f"AOF buffer not written within {timeout} s: {info}"
            time.sleep(0.05)
    finally:
        client.close()


@pytest.mark.parametrize("spec", DURABLE)
def test_acked_posts_survive_a_crash_and_the_next_post_succeeds(
    stores: list[Store], tmp_path: Path, spec: StoreSpec
) -> None:
    store = start(stores, tmp_path, spec)
    bus = open_bus(store.url)
    try:
        bus.subscribe("w", "a")
        posted = [bus.post("a", f"m{i}", "p", idempotency_key=f"k{i}") for i in range(20)]
        assert bus.ack("w", "a", 10) == 10
        if spec.options.get("persistence") == "everysec":
            _wait_aof_written(store)
        crash_and_restart(store)
        # The same bus object: its connection died with the server; the
        # first call after the restart reconnects before sending anything.
        assert bus.post("a", "after", "p").seq == 21
        assert bus.cursor("w", "a") == 10
        assert bus.post("a", "retry", "p", idempotency_key="k3") == posted[3]
        assert [m.body for m in bus.fetch("w", "a", limit=5)] == [f"m{i}" for i in range(10, 15)]
    finally:
        bus.close()


def test_redis_without_persistence_loses_acked_posts_in_a_crash(
    stores: list[Store], tmp_path: Path
) -> None:
    store = start(stores, tmp_path, StoreSpec(kind="redis", persistence="none"))
    bus = open_bus(store.url)
    try:
        bus.subscribe("w", "a")
        for i in range(5):
            bus.post("a", f"m{i}", "p")  # every one of them answered ok
        bus.ack("w", "a", 3)
        crash_and_restart(store)
        assert bus.head("a") == 0  # all five acknowledged posts are gone
        with pytest.raises(DefiniteError, match="not subscribed"):
            bus.cursor("w", "a")  # and so is the cursor
        assert bus.post("a", "first again", "p").seq == 1  # seqs start over
    finally:
        bus.close()


def test_postgres_without_synchronous_commit_loses_acked_posts_in_a_crash(
    stores: list[Store], tmp_path: Path
) -> None:
    # With synchronous_commit=off a commit returns before its WAL is flushed;
    # the WAL writer flushes every wal_writer_delay (made long here), and a
    # SIGKILL of every server process takes the unflushed WAL buffers along.
    spec = StoreSpec(
        kind="postgres", synchronous_commit="off", settings={"wal_writer_delay": "10s"}
    )
    store = start(stores, tmp_path, spec)
    bus = open_bus(store.url)
    try:
        bus.subscribe("w", "a")
        with psycopg.connect(store.admin_url, autocommit=True) as admin:  # type: ignore[attr-defined]
            admin.execute("CHECKPOINT")  # the setup (schema, subscription) is on disk
        for i in range(5):
            bus.post("a", f"m{i}", "p")
        crash_and_restart(store)
        assert bus.head("a") < 5
    finally:
        bus.close()


@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_crash_kills_every_server_process(stores: list[Store], tmp_path: Path, kind: str) -> None:
    store = start(stores, tmp_path, StoreSpec(kind=kind))
    buses = [open_bus(store.url) for _ in range(3)]
    try:
        for b in buses:
            b.head("a")  # one backend per connection (Postgres)
        procs = server_processes(store)
        assert len(procs) >= (6 if kind == "postgres" else 2)
        store.crash()
        assert_gone(procs, timeout=5)
        with pytest.raises(DefiniteError, match="cannot connect"):
            buses[0].post("a", "while down", "p")
    finally:
        for b in buses:
            b.close()


@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_a_paused_store_times_calls_out_honestly(
    stores: list[Store], tmp_path: Path, kind: str
) -> None:
    store = start(stores, tmp_path, StoreSpec(kind=kind, op_timeout=1.0))
    writer, reader = open_bus(store.url), open_bus(store.url)
    try:
        writer.subscribe("w", "a")
        reader.head("a")
        store.pause()
        started = time.monotonic()
        with pytest.raises(IndeterminateError, match="outcome unknown"):
            writer.post("a", "maybe", "p")  # sent: it may apply on resume
        assert time.monotonic() - started < 3.5
        started = time.monotonic()
        with pytest.raises(DefiniteError):
            reader.head("a")  # a read that failed changed nothing
        assert time.monotonic() - started < 3.5
        store.resume()
        assert writer.post("a", "after", "p").seq in (1, 2)
        assert reader.head("a") in (1, 2)
    finally:
        writer.close()
        reader.close()


def _wait_for(path: Path, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().endswith("\n"):
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


RUNNER = """
import sys, time
from pathlib import Path
from knell.owners import Owner
from knell.stores import StoreSpec, create_store
from knell.buses import open_bus
run, states = Path(sys.argv[1]), Path(sys.argv[2])
owner = Owner(run, states=states)
pg = create_store(StoreSpec(kind="postgres"), run / "pg", owner=owner)
rd = create_store(StoreSpec(kind="redis"), run / "rd", owner=owner)
pg.start(); rd.start()
bus = open_bus(pg.url); bus.head("a")
pg.pause()
(run / "ready").write_text("ready\\n")
time.sleep(600)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL of the runner is POSIX-only here")
def test_no_server_outlives_a_sigkilled_runner(tmp_path: Path) -> None:
    require_postgres()
    require_redis()
    run = tmp_path / "run"
    run.mkdir()
    runner = subprocess.Popen(
        [sys.executable, "-c", RUNNER, str(run), str(tmp_path / "states")], cwd=REPO
    )
    try:
        _wait_for(run / "ready")
        procs = psutil.Process(runner.pid).children(recursive=True)
        servers = [p for p in procs if p.name() in ("postgres", "redis-server")]
        assert len(servers) >= 3, servers  # a paused postmaster with its backends, redis
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(10)
        everything = list(procs)
        for p in servers:  # backends Postgres moved to their own sessions
            with contextlib.suppress(psutil.NoSuchProcess):
                everything += p.children(recursive=True)
        assert_gone(everything, timeout=10)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    leftovers = list((tmp_path / "states").glob("runner-*.jsonl"))
    assert leftovers, "the owner registry recorded nothing"
    from knell.owners import reap

    reap(tmp_path / "states")  # the backstop finds nothing left to kill but the temp folder


def test_owner_registry_records_the_server(tmp_path: Path) -> None:
    require_redis()
    owner = Owner(tmp_path, states=tmp_path / "states")
    store = create_store(StoreSpec(kind="redis"), tmp_path / "run", owner=owner)
    try:
        store.start()
        records = (tmp_path / "owners.jsonl").read_text()
        assert '"name":"redis-keeper"' in records and '"kind":"group"' in records
    finally:
        store.stop()
        owner.close()
