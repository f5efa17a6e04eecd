"""One bridge process under the faults a chaos run gives it: SIGKILL with a
post in flight, restart on the same port, its parent dying, many clients
at once, long polls filling up; and its start-up errors."""

from __future__ import annotations

import contextlib
import json
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from knell.buses import DefiniteError, IndeterminateError, open_bus
from knell.buses.http import HttpBus
from tests.integration.bridges import REPO, Bridges, sqlite_url

pytestmark = pytest.mark.integration


def fresh_store(tmp_path: Path) -> str:
    url = sqlite_url(tmp_path / "bus.db")
    open_bus(url).close()
    return url


def count(db: Path, sql: str = "SELECT COUNT(*) FROM messages") -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute(sql).fetchone()[0])


def test_ready_file_names_the_ephemeral_port_and_pid(bridges: Bridges, tmp_path: Path) -> None:
    bridge = bridges.start("--bus", fresh_store(tmp_path))
    data = json.loads(bridge.ready_file.read_text())
    assert data["pid"] == bridge.pid
    assert data["url"] == f"http://127.0.0.1:{bridge.port}" and bridge.port > 0
    bus = open_bus(data["url"])
    assert bus.head("a") == 0
    bus.close()


def test_sigkill_mid_post_is_indeterminate_then_refused_then_restart_serves(
    bridges: Bridges, tmp_path: Path
) -> None:
    url = fresh_store(tmp_path)
    bridge = bridges.start("--bus", url, "--driver", "slow_bus:make_bus")
    client = open_bus(bridge.url)
    assert client.post("a", "first", "p").seq == 1
    outcome: list[BaseException] = []

    def in_flight() -> None:
        try:
            client.post("a", "slow: committed, then the bridge dies", "p")
        except BaseException as exc:
            outcome.append(exc)

    poster = threading.Thread(target=in_flight)
    poster.start()
    deadline = time.monotonic() + 10
    while count(tmp_path / "bus.db") < 2:  # the store has it; the answer hangs
        assert time.monotonic() < deadline
        time.sleep(0.01)
    bridge.kill()
    poster.join(timeout=10)
    assert len(outcome) == 1 and isinstance(outcome[0], IndeterminateError), outcome
    # It did land: "info" was the honest answer.
    assert count(tmp_path / "bus.db") == 2
    with pytest.raises(DefiniteError, match="not sent"):
        client.post("a", "refused: nothing listens", "p")
    assert count(tmp_path / "bus.db") == 2
    again = bridges.restart(bridge)
    assert again.port == bridge.port
    assert client.post("a", "after restart", "p").seq == 3  # the same client, the same URL
    client.close()


def test_bridge_dies_with_its_parent(tmp_path: Path) -> None:
    url = fresh_store(tmp_path)
    ready = tmp_path / "ready.json"
    parent = subprocess.Popen(
        [
            sys.executable, "-c",
            "import os, subprocess, sys, time\n"
            "p = subprocess.Popen([sys.executable, '-m', 'knell.bridge', '--bus', sys.argv[1],"
            " '--ready-file', sys.argv[2], '--parent-pid', str(os.getpid())])\n"
            "print(p.pid, flush=True)\n"
            "time.sleep(60)\n",
            url, str(ready),
        ],
        stdout=subprocess.PIPE, text=True, cwd=REPO,
    )  # fmt: skip
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        deadline = time.monotonic() + 20
        while not ready.exists():
            assert time.monotonic() < deadline, "bridge never became ready"
            time.sleep(0.02)
        psutil.Process(parent.pid).kill()
        parent.wait(timeout=10)
        _, alive = psutil.wait_procs([psutil.Process(child)], timeout=5)
        assert not alive, "the bridge outlived its parent"
    finally:
        if psutil.pid_exists(child):
            psutil.Process(child).kill()
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_sigterm_stops_gracefully_even_with_a_wait_in_flight(
    bridges: Bridges, tmp_path: Path
) -> None:
    bridge = bridges.start("--bus", fresh_store(tmp_path))
    client = open_bus(bridge.url)
    client.subscribe("w", "a")
    waiter = threading.Thread(target=lambda: _swallow(lambda: client.wait("w", 20)))
    waiter.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    bridge.proc.terminate()
    code = bridge.proc.wait(timeout=10)
    # uvicorn finishes its graceful shutdown (requests in flight get up to 2 s),
    # then re-raises the signal, so the exit status says "stopped by SIGTERM".
    assert code != 3 and time.monotonic() - t0 < 5
    assert "Traceback" not in bridge.log.read_text()
    waiter.join(timeout=10)
    client.close()


def _swallow(call: Callable[[], object]) -> None:
    with contextlib.suppress(Exception):
        call()


def test_many_clients_post_and_ack_at_once(bridges: Bridges, tmp_path: Path) -> None:
    """Producers and twin consumers, each its own connection, all at once
    through one bridge: no duplicate seq, no gap, no cursor regression."""
    url = fresh_store(tmp_path)
    bridge = bridges.start("--bus", url)
    producers, consumers, per_producer = 6, 4, 60
    setup = open_bus(bridge.url)
    setup.subscribe("w", "a")
    posted: list[list[int]] = [[] for _ in range(producers)]
    seen_cursors: list[list[int]] = [[] for _ in range(consumers)]
    errors: list[BaseException] = []
    done = threading.Event()

    def produce(i: int) -> None:
        bus = open_bus(bridge.url)
        try:
            for n in range(per_producer):
                posted[i].append(bus.post("a", f"p{i}:{n}", f"p{i}", f"p{i}:{n}").seq)
        except BaseException as exc:
            errors.append(exc)
        finally:
            bus.close()

    def consume(i: int) -> None:
        bus = open_bus(bridge.url)
        try:
            while True:
                page = bus.fetch("w", "a", limit=7)
                if page:
                    seen_cursors[i].append(bus.ack("w", "a", page[-1].seq))
                elif done.is_set():
                    return
                seen_cursors[i].append(bus.cursor("w", "a"))
        except BaseException as exc:
            errors.append(exc)
        finally:
            bus.close()

    threads = [threading.Thread(target=produce, args=(i,)) for i in range(producers)]
    threads += [threading.Thread(target=consume, args=(i,)) for i in range(consumers)]
    for t in threads:
        t.start()
    for t in threads[:producers]:
        t.join(timeout=120)
    done.set()
    for t in threads[producers:]:
        t.join(timeout=120)
    assert not errors, errors
    total = producers * per_producer
    seqs = sorted(s for p in posted for s in p)
    assert seqs == list(range(1, total + 1)), "duplicate or missing seq"
    for cursors in seen_cursors:
        assert cursors == sorted(cursors), "a consumer saw its cursor go back"
    assert setup.cursor("w", "a") == total
    db = tmp_path / "bus.db"
    assert count(db) == total
    assert count(db, "SELECT COUNT(DISTINCT seq) FROM messages WHERE channel = 'a'") == total
    assert count(db, "SELECT MAX(seq) FROM messages WHERE channel = 'a'") == total
    setup.close()


def test_long_polls_have_their_own_slots_and_never_block_the_rest(
    bridges: Bridges, tmp_path: Path
) -> None:
    bridge = bridges.start("--bus", fresh_store(tmp_path), "--max-waits", "2")
    clients = [open_bus(bridge.url) for _ in range(3)]
    for i, c in enumerate(clients):
        c.subscribe(f"w{i}", "a")
    rings: list[object] = []
    waiters = [
        threading.Thread(target=lambda c=c, i=i: rings.append(c.wait(f"w{i}", 4.0)))
        for i, c in enumerate(clients[:2])
    ]
    for t in waiters:
        t.start()
    time.sleep(0.5)  # both slots are taken now
    t0 = time.monotonic()
    with pytest.raises(DefiniteError, match="too-many-waits"):
        clients[2].wait("w2", 1.0)
    assert time.monotonic() - t0 < 0.5, "a refused wait must not queue"
    # Ordinary operations go on at full speed while the long polls hold their threads
    # (the SQLite bus's lock is taken per poll, never for a whole wait).
    t0 = time.monotonic()
    for n in range(20):
        clients[2].post("a", f"m{n}", "poster")
        clients[2].head("a")
    assert time.monotonic() - t0 < 2.0
    for t in waiters:
        t.join(timeout=10)
    assert len(rings) == 2 and all(r is not None for r in rings)  # the posts rang them
    for c in clients:
        c.close()


def test_non_loopback_listen_with_a_token(bridges: Bridges, tmp_path: Path) -> None:
    bridge = bridges.start("--bus", fresh_store(tmp_path), "--token", "tk", listen="0.0.0.0:0")
    assert bridge.url.startswith("http://127.0.0.1:")
    bus = HttpBus(bridge.url, token="tk")
    assert bus.post("a", "x", "p").seq == 1
    bus.close()


def _startup(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "knell.bridge", *args],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip


def test_startup_errors_are_one_line_and_exit_3(tmp_path: Path) -> None:
    url = fresh_store(tmp_path)
    taken = socket.create_server(("127.0.0.1", 0))
    port = taken.getsockname()[1]
    cases = {
        "in use": ("--bus", url, "--listen", f"127.0.0.1:{port}"),
        "needs --token": ("--bus", url, "--listen", "0.0.0.0:0"),
        "unknown scheme": ("--bus", "nope://x"),
        "cannot open bus": ("--bus", sqlite_url(tmp_path / "no" / "such" / "dir.db")),
        "no such bridge mutant": ("--bus", url, "--mutant", "no-such-mutant"),
        "expected HOST:PORT": ("--bus", url, "--listen", "nonsense"),
        "the port must be": ("--bus", url, "--listen", "127.0.0.1:99999"),
        "is not this process's parent": ("--bus", url, "--parent-pid", "1"),
    }
    try:
        for expected, args in cases.items():
            proc = _startup(*args)
            assert proc.returncode == 3, (expected, proc.stderr)
            lines = proc.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("knell bridge: error:"), proc.stderr
            assert expected in lines[0], (expected, lines[0])
            assert "Traceback" not in proc.stderr
    finally:
        taken.close()
    usage = _startup("--listen", "127.0.0.1:0")  # no --bus
    assert usage.returncode == 3 and "--bus" in usage.stderr and "Traceback" not in usage.stderr
    via_knell = subprocess.run(
        [sys.executable, "-m", "knell", "bridge", "--bus", "nope://x"],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert via_knell.returncode == 3 and "unknown scheme" in via_knell.stderr
