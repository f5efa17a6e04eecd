"""A replicated private Redis on real servers: a primary, replicas, three Sentinels.

What ``[store] replicas = N`` promises, shown on real ``redis-server``
processes: a write on the primary reaches every replica, a replica refuses
writes, and nothing (no node, no Sentinel, no private folder) outlives
the store, even when the runner that started it is SIGKILLed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import redis

from knell.buses import DefiniteError, IndeterminateError, open_bus
from knell.owners import Owner
from knell.stores import StoreSpec, create_store
from knell.stores.base import StoreError
from knell.stores.redis.replicated import ReplicatedRedis
from knell.stores.redis.sentinel import RedisSentinel
from knell.stores.redis.server import RedisServer
from knell.stores.redis.tilt import TILT_WAIT, tilted
from knell.stores.server import ServerStore
from tests.histories import history_text
from tests.integration.conftest import REPO
from tests.servers import assert_gone, require_redis, runner_until_ready, server_processes

pytestmark = pytest.mark.integration


def every_process(store: ReplicatedRedis) -> list[psutil.Process]:
    return [p for s in [*store.nodes, *store.sentinels] for p in server_processes(s)]


@pytest.fixture
def replicated(tmp_path: Path) -> Iterator[ReplicatedRedis]:
    require_redis()
    owner = Owner(tmp_path, states=tmp_path / "states")
    store = create_store(StoreSpec(kind="redis", replicas=2), tmp_path / "run", owner=owner)
    assert isinstance(store, ReplicatedRedis)
    try:
        store.start()
        yield store
    finally:
        procs = every_process(store)
        store.stop()
        owner.close()
        assert_gone(procs)


def client(store: ReplicatedRedis, node: str) -> redis.Redis:
    return redis.Redis(port=store.node(node).port, socket_timeout=2, decode_responses=True)


def test_a_write_on_the_primary_reaches_every_replica(replicated: ReplicatedRedis) -> None:
    assert replicated.primary() == "redis-0"
    assert len(every_process(replicated)) >= 6  # three nodes, three sentinels
    client(replicated, "redis-0").set("knell:probe", "v1")
    for name in ("redis-1", "redis-2"):
        replica = client(replicated, name)
        deadline = time.monotonic() + 5
        while replica.get("knell:probe") != "v1":
            assert time.monotonic() < deadline, f"{name} never got the write"
            time.sleep(0.02)
        with pytest.raises(redis.exceptions.ReadOnlyError):
            replica.set("knell:probe", "v2")
    assert replicated.url.startswith("redis+sentinel://127.0.0.1:")
    assert replicated.describe()["nodes"].keys() == {"redis-0", "redis-1", "redis-2"}


RUNNER = """
import sys, time
from pathlib import Path
from knell.owners import Owner
from knell.stores import StoreSpec, create_store
run, states = Path(sys.argv[1]), Path(sys.argv[2])
owner = Owner(run, states=states)
store = create_store(StoreSpec(kind="redis", replicas=1, password="s3cret"), run, owner=owner)
store.start()
(run / "ready").write_text("ready\\n")
time.sleep(600)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL of the runner is POSIX-only here")
def test_no_node_sentinel_or_secret_folder_outlives_a_sigkilled_runner(tmp_path: Path) -> None:
    require_redis()
    run = tmp_path / "run"
    run.mkdir()
    states = tmp_path / "states"
    with runner_until_ready(RUNNER, run, states) as runner:
        procs = psutil.Process(runner.pid).children(recursive=True)
        servers = [p for p in procs if p.name() == "redis-server"]
        assert len(servers) == 5, servers  # a primary, a replica, three sentinels
        folders = [
            line.split('"id":"')[1].split('"')[0]
            for line in (run / "owners.jsonl").read_text().splitlines()
            if '"kind":"directory"' in line
        ]
        assert len(folders) == 5  # the secrets of two nodes and three sentinels
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(10)
        assert_gone(procs, timeout=10)
    assert not [f for f in folders if Path(f).exists()]


def test_kill_the_primary_sentinel_promotes_and_the_bus_follows(
    replicated: ReplicatedRedis,
) -> None:
    bus = open_bus(replicated.url)
    try:
        before = bus.post("a", "before", "p", idempotency_key="k0")
        done = replicated.fail_over("kill")
        assert done["old"] == "redis-0" and done["new"] in ("redis-1", "redis-2")
        assert 0 < done["promoted"] <= done["writable"] < 30
        assert replicated.primary() == done["new"]
        assert not replicated.node("redis-0").running
        # The bus's connection died with the old primary: a failed call
        # first (definite or not, the run classifies it), then it follows.
        for _ in range(3):
            try:
                after = bus.post("a", "after", "p", idempotency_key="k1")
                break
            except (DefiniteError, IndeterminateError):
                time.sleep(0.2)
        else:
            pytest.fail("the bus never reached the new primary")
        assert after.seq == before.seq + 1  # the first post had reached the replica
        new = client(replicated, done["new"])
        assert new.xlen("knell:log:a") == 2
        back = replicated.rejoin("redis-0")  # restarted as a replica of the new primary
        assert back["primary"] == done["new"]
        old = client(replicated, "redis-0")
        deadline = time.monotonic() + 10
        while old.xlen("knell:log:a") != 2:
            assert time.monotonic() < deadline, "redis-0 never caught up"
            time.sleep(0.05)
    finally:
        bus.close()


def test_a_post_to_an_isolated_primary_is_indeterminate_then_the_next_reaches_the_new_one(
    tmp_path: Path,
) -> None:
    require_redis()
    store = create_store(
        StoreSpec(kind="redis", replicas=1, op_timeout=1.0), tmp_path / "run", owner=None
    )
    assert isinstance(store, ReplicatedRedis)
    try:
        store.start()
        bus = open_bus(store.url)
        bus.post("a", "m0", "p")
        done = store.fail_over("isolate")  # SIGSTOP: its socket stays open, silent
        assert done == {**done, "old": "redis-0", "new": "redis-1", "how": "isolate"}
        with pytest.raises(IndeterminateError):
            bus.post("a", "m1", "p")  # the reply is lost: may have applied, "info"
        assert bus.post("a", "m2", "p").seq == 2  # on redis-1, which never saw m1
        bus.close()
    finally:
        store.stop()


def test_a_demoted_primary_refuses_a_post_definitely_and_the_bus_asks_again(
    replicated: ReplicatedRedis,
) -> None:
    """redis-py's Sentinel connection turns ``READONLY`` into a connection
    error, which a bus must call indeterminate; it is a refusal."""
    bus = open_bus(replicated.url)
    try:
        bus.post("a", "m0", "p")  # connected to redis-0
        replica_port = replicated.node("redis-1").port
        client(replicated, "redis-0").execute_command("REPLICAOF", "127.0.0.1", replica_port)
        with pytest.raises(DefiniteError, match=r"READONLY|read only"):
            bus.post("a", "m1", "p")
    finally:
        bus.close()


def test_a_bus_on_a_primary_left_without_replicas_asks_the_sentinels_again(
    tmp_path: Path,
) -> None:
    """An isolated primary comes back (SIGCONT) after the failover and,
    with ``min_replicas_to_write``, refuses writes (``NOREPLICAS``): its
    replicas follow the new primary. The bus must not stay there."""
    require_redis()
    spec = StoreSpec(kind="redis", replicas=2, min_replicas_to_write=1)
    store = create_store(spec, tmp_path / "run", owner=None)
    assert isinstance(store, ReplicatedRedis)
    try:
        store.start()
        bus = open_bus(store.url)
        bus.post("a", "m0", "p")  # connected to redis-0
        done = store.fail_over("isolate")
        store.node("redis-0").resume()  # back, still a primary, alone
        deadline = time.monotonic() + 10
        while client(store, "redis-0").info("replication").get("connected_slaves") != 0:
            assert time.monotonic() < deadline, "redis-0 kept its replicas"
            time.sleep(0.02)
        with pytest.raises(DefiniteError, match="NOREPLICAS"):
            bus.post("a", "m1", "p")
        assert bus.post("a", "m2", "p").seq == 2  # on the new primary
        assert client(store, done["new"]).xlen("knell:log:a") == 2
        bus.close()
    finally:
        store.stop()


def test_a_start_that_fails_midway_leaves_nothing_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sentinels that cannot settle in time (no time at all, here) fail
    the start after the nodes and Sentinels were launched."""
    require_redis()
    import knell.stores.redis.replicated as replicated_module

    monkeypatch.setattr(replicated_module, "SETTLE_TIMEOUT", 0.0)
    store = create_store(StoreSpec(kind="redis", replicas=1), tmp_path / "run")
    assert isinstance(store, ReplicatedRedis)
    launched: list[psutil.Process] = []
    for server in (RedisServer, RedisSentinel):
        real = server._launch

        def launch_and_note(self: ServerStore, real: Any = real) -> None:
            real(self)
            launched.extend(server_processes(self))

        monkeypatch.setattr(server, "_launch", launch_and_note)
    with pytest.raises(StoreError, match=r"not settled|replicas in sync"):
        store.start()
    assert len(launched) >= 4  # at least both nodes, each a keeper and a server
    assert_gone(launched)


def test_a_whole_run_on_a_replicated_redis_crashing_its_primary_and_partitioning_is_valid(
    tmp_path: Path,
) -> None:
    """Through the CLI: workers reach the Sentinels and the primary through
    the run's links (one per client group and address), a partition of
    the consumers cuts (and proves cut) every one of theirs, store-crash
    kills and restarts the primary, the integrity probe reads its AOF, and
    the reference bus stays VALID."""
    require_redis()
    shipped = (REPO / "scenarios" / "redis-store-crash-aof-always.toml").read_text()
    scenario = tmp_path / "replicated.toml"
    scenario.write_text(
        shipped.replace('persistence = "always"\n', 'persistence = "always"\nreplicas = 1\n', 1)
        + '\n[[nemesis]]\nfault = "partition"\ntarget = "consumer"\nevery = "2s"\n'
        'duration = "600ms"\nstart = "1.3s"\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "knell", "run", str(scenario), "--duration", "3s",
         "--reports", str(tmp_path / "reports")],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "redis with 1 replicas and 3 sentinels" in output
    assert "store integrity (redis-check-aof): ok" in output
    assert "store-crash store" in output
    assert "healed: partition-end consumer" in output
    (run,) = (tmp_path / "reports").glob("*/2*")
    logs = {p.name for p in (run / "store").glob("*.log")}
    assert logs == {"redis-0.log", "redis-1.log", "sentinel-0.log", "sentinel-1.log",
                    "sentinel-2.log", "cluster-proxy.log"}  # fmt: skip
    links = json.loads((run / "links.json").read_text())["links"]
    consumer = {n for n, link in links.items() if link["processes"] == ["consumer-1", "consumer-2"]}
    assert consumer == {"consumer--store", "consumer--store-sentinel-1",
                        "consumer--store-sentinel-2", "consumer--store-redis-0",
                        "consumer--store-redis-1"}  # fmt: skip
    proofs = [
        json.loads(line)["value"]["proofs"]
        for line in history_text(run).splitlines()
        if '"f":"partition"' in line and '"proofs"' in line
    ]
    assert proofs and all(
        proof["status"] == "proven" and len(each) == len(consumer)
        for each in proofs
        for proof in each.values()
    ), proofs


def test_a_failover_after_a_stall_waits_until_no_sentinel_is_in_tilt(
    replicated: ReplicatedRedis,
) -> None:
    """A machine that stalls puts every Sentinel in TILT mode for 30 s
    (here each Sentinel is frozen for 3 s, so its timer runs late). A
    primary killed then can never be replaced: when the TILT ends no
    replica qualifies, its link having broken too long before the primary
    was marked down (knell.stores.redis.tilt; a CI run lost a compose
    failover this way). The failover waits the TILT out, says how long,
    and then promotes as usual."""
    frozen = [psutil.Process(s._server.pid) for s in replicated.sentinels if s._server]
    assert len(frozen) == 3
    for proc in frozen:
        proc.suspend()
    time.sleep(3)
    for proc in frozen:
        proc.resume()
    deadline = time.monotonic() + 5
    while not tilted(replicated._sentinel_infos()):
        assert time.monotonic() < deadline, "no Sentinel went into TILT after a 3 s stall"
        time.sleep(0.1)
    done = replicated.fail_over("kill")
    assert done["new"] in ("redis-1", "redis-2"), done
    assert 15 < done["tilt_waited_s"] <= TILT_WAIT, done
    assert not tilted(replicated._sentinel_infos())
    assert client(replicated, done["new"]).set("after-tilt", "1")
