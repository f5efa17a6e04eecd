"""Two (or three) OS processes race on the same channel, on every backend.

Threads in one process would prove little: the invariants must hold when
seq assignment, the idempotency lookup and the ack clamp run in different
processes with their own connections, at the same moment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from knell.buses import open_bus
from tests.integration.conftest import REPO

pytestmark = pytest.mark.integration


def race(
    url: str, *racers: tuple[str, str, int, int], driver: str | None = None
) -> list[dict[str, Any]]:
    """Run racers ``(role, name, count, seed)`` at once (through ``driver``
    when given); their JSON outputs.

    A barrier, not a clock: each racer opens its bus and says ``ready``,
    and only when every one has does each get ``go``. A start time a fixed
    while ahead lost the race on a loaded CI machine, where one racer took
    longer than that to import and the other had posted all of its
    messages before it began."""
    env = {**os.environ, "KNELL_RACE_DRIVER": driver or ""}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.contract.racer", url, role, name, str(count), str(seed)],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for role, name, count, seed in racers
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            said = proc.stdout.readline()
            if said.strip() != "ready":
                _, err = proc.communicate(timeout=30)
                raise AssertionError(f"a racer did not get ready ({said!r}): {err}")
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outputs = []
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            outputs.append(json.loads(out))
        return outputs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_concurrent_posts_get_dense_distinct_seqs(url: str) -> None:
    n = 150
    outputs = race(url, ("post", "p1", n, 0), ("post", "p2", n, 0), ("post", "p3", n, 0))
    assert [o["failed"] for o in outputs] == [0, 0, 0]
    seqs = [s for o in outputs for s in o["seqs"]]
    assert sorted(seqs) == list(range(1, 3 * n + 1))
    bus = open_bus(url)
    try:
        bus.subscribe("check", "race", at="start")
        stored = {}
        page = bus.fetch("check", "race", limit=200)
        while page:
            stored.update({m.seq: m.body for m in page})
            page = bus.fetch("check", "race", after=page[-1].seq, limit=200)
    finally:
        bus.close()
    for name, o in zip(("p1", "p2", "p3"), outputs, strict=True):
        assert [stored[s] for s in o["seqs"]] == [f"{name}:{i}" for i in range(n)]
        assert o["seqs"] == sorted(o["seqs"])  # one process's posts stay in its order


def test_concurrent_retries_of_one_key_append_once(url: str) -> None:
    n = 120
    a, b = race(url, ("post-keys", "p1", n, 0), ("post-keys", "p2", n, 0))
    assert a["got"] == b["got"]  # both saw the same original for every key
    assert sorted(seq for _, seq, _ in a["got"]) == list(range(1, n + 1))
    bus = open_bus(url)
    try:
        assert bus.head("race") == n
    finally:
        bus.close()


def test_concurrent_acks_never_move_a_cursor_back(url: str) -> None:
    n = 200
    bus = open_bus(url)
    try:
        bus.subscribe("w", "race")
        for i in range(n):
            bus.post("race", f"m{i}", "p")
        a, b, watcher = race(
            url, ("ack", "up", n, 0), ("ack", "shuffled", n, 7), ("watch", "reader", 3 * n, 0)
        )
        for out in (a, b):
            cursors = [cursor for _, cursor in out["acks"]]
            assert all(cursor >= up_to for up_to, cursor in out["acks"])
            assert cursors == sorted(cursors), "a cursor this process saw went back"
        assert watcher["cursors"] == sorted(watcher["cursors"]), "a reader saw the cursor go back"
        assert bus.cursor("w", "race") == n
    finally:
        bus.close()


def test_concurrent_first_subscriptions_agree(url: str) -> None:
    bus = open_bus(url)
    try:
        for i in range(5):
            bus.post("race", f"m{i}", "p")
        a, b = race(url, ("subscribe", "newbie", 1, 0), ("subscribe", "newbie", 1, 0))
        assert a["cursor"] == b["cursor"] == 5
    finally:
        bus.close()
