"""What an HTTP bridge costs: posts and doorbell latency through one bridge,
next to the same operations straight on the store.

A bridge adds a network round trip, an HTTP parse and a thread hop to
every call, so the question is how much of the store's speed survives,
measured against the store itself in the same run:

* **posts/s**: keyed posts through ``HttpBus`` and one bridge process,
  against keyed posts by a direct :class:`~knell.buses.sqlite.SqliteBus`
  on the same file, in interleaved blocks (wall time: the bridge's work
  happens in another process, so the client's CPU time would flatter it);
  once with one client, once with several clients at once (threads, each
  its own connection), which is what a bridge in front of many agents sees.
* **claims/s**: a claim and its done through one bridge, against the
  same on a direct bus, on a queue seeded with one message per claim.
* **post -> ring**: the doorbell's long poll through the bridge against a
  direct waiter, both with the poster in another process, as
  :mod:`knell.bench.wake` measures it. Through a bridge a post can arrive
  two ways: through the same bridge, where the bus's in-process bell rings
  the long poll at once, or straight into the store, where the bridge's
  wait finds it at its next poll like any other process would.

``run_bridge_bench(work, short=...)`` returns :class:`~knell.bench.result.Row`
objects (section ``bridge``); it needs only a bridge it starts itself, on
loopback, and stops (SIGKILL, reaped) before it returns.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from knell.bench.result import Row
from knell.bench.timing import Paired, paired
from knell.buses import open_bus
from knell.buses.contract import QueueBus
from knell.buses.sqlite_url import sqlite_url
from knell.stats import percentile

__all__ = ["run_bridge_bench"]

WAKE_CHANNEL = "events"  # as knell.bench.wake's waiter uses


def _url(path: Path, poll: float) -> str:
    return sqlite_url(path.resolve(), poll_interval=poll)


@contextmanager
def _bridge(store_url: str, work: Path, name: str) -> Iterator[str]:
    """A bridge process serving ``store_url`` on an ephemeral loopback port."""
    ready = work / f"{name}.ready.json"
    ready.unlink(missing_ok=True)
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "knell.bridge", "--bus", store_url, "--listen", "127.0.0.1:0",
            "--ready-file", str(ready), "--parent-pid", str(os.getpid()),
        ],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            if proc.poll() is not None:
                err = proc.stderr.read() if proc.stderr else ""
                raise RuntimeError(f"bridge bench: the bridge exited: {err.strip()}")
            if time.monotonic() > deadline:
                raise RuntimeError("bridge bench: the bridge did not become ready in 30 s")
            time.sleep(0.02)
        yield str(json.loads(ready.read_text(encoding="utf-8"))["url"])
    finally:
        proc.kill()
        proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


def _wall_ratio(result: Paired) -> float:
    pairs = zip(result.subject, result.baseline, strict=True)
    return float(statistics.median((s.ops / s.wall) / (b.ops / b.wall) for s, b in pairs))


def _posts(work: Path, short: bool, say: Callable[[str], None]) -> list[Row]:
    block, rounds = (60, 6) if short else (200, 12)
    clients = 4
    store = _url(work / "posts.db", 0.1)
    direct = open_bus(store)
    counter = {"direct": 0, "bridge": 0, "many": 0}

    def direct_block() -> int:
        start = counter["direct"]
        for i in range(start + 1, start + block + 1):
            direct.post("direct", f"producer-1.1:{i}", "producer-1", f"producer-1.1:{i}")
        counter["direct"] = start + block
        return block

    rows: list[Row] = []
    try:
        with _bridge(store, work, "posts") as url:
            http = open_bus(url)
            many = [open_bus(url) for _ in range(clients)]

            def bridge_block() -> int:
                start = counter["bridge"]
                for i in range(start + 1, start + block + 1):
                    http.post("bridge", f"producer-1.1:{i}", "producer-1", f"producer-1.1:{i}")
                counter["bridge"] = start + block
                return block

            def many_block() -> int:
                start = counter["many"]
                share = block // clients

                def one(c: int) -> None:
                    for i in range(share):
                        mid = f"producer-{c}.1:{start + i}"
                        many[c].post("many", mid, f"producer-{c}", mid)

                threads = [threading.Thread(target=one, args=(c,)) for c in range(clients)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                counter["many"] = start + share
                return share * clients

            bridge_block()  # warm up connections and the bridge's code paths
            many_block()
            one = paired(bridge_block, direct_block, rounds)
            say(f"bridge: one client {one.subject_wall_rate:.0f} posts/s")
            several = paired(many_block, direct_block, rounds)
            say(f"bridge: {clients} clients {several.subject_wall_rate:.0f} posts/s")
            http.close()
            for bus in many:
                bus.close()
    finally:
        direct.close()
    for result, label in ((one, "one client"), (several, f"{clients} clients at once")):
        rows.append(
            Row(
                section="bridge",
                name=f"post with idempotency key through one bridge, {label}",
                value=result.subject_wall_rate,
                unit="posts/s",
                baseline=result.baseline_wall_rate,
                baseline_name="direct SqliteBus posts, same store file, one client",
                ratio=_wall_ratio(result),
                note=f"WAL SQLite behind the bridge; {rounds} interleaved blocks of {block};"
                " wall-clock rates (the bridge works in another process)",
            )
        )
    return rows


def _claims(work: Path, short: bool, say: Callable[[str], None]) -> list[Row]:
    """Claims (each followed by its done) from a queue seeded with one
    message per claim, through one bridge against a direct bus on the same
    file, in interleaved blocks: the queue contract's hot path."""
    block, rounds = (40, 6) if short else (150, 12)
    store = _url(work / "claims.db", 0.1)
    direct = open_bus(store)
    assert isinstance(direct, QueueBus)
    for channel in ("direct", "bridge"):
        direct.declare_queue(channel, 3)
        for i in range(block * (rounds + 1)):
            direct.post(channel, f"job:{i}", "seeder")

    def claimer(bus: QueueBus, channel: str) -> Callable[[], int]:
        def run() -> int:
            for _ in range(block):
                claim = bus.claim(channel, "claimer-1.1", 60.0)
                if claim is None:  # pragma: no cover - seeded enough
                    raise RuntimeError("the benchmark queue ran dry")
                bus.done(claim.id, "claimer-1.1")
            return block

        return run

    try:
        with _bridge(store, work, "claims") as url:
            http = open_bus(url)
            assert isinstance(http, QueueBus)
            claimer(http, "bridge")()  # warm up the connection and the bridge's code paths
            result = paired(claimer(http, "bridge"), claimer(direct, "direct"), rounds)
            say(f"bridge: one claimer {result.subject_wall_rate:.0f} claims/s")
            http.close()
    finally:
        direct.close()
    return [
        Row(
            section="bridge",
            name="claim and done through one bridge, one claimer",
            value=result.subject_wall_rate,
            unit="claims/s",
            baseline=result.baseline_wall_rate,
            baseline_name="direct SqliteBus claim and done, same store file, one claimer",
            ratio=_wall_ratio(result),
            note=f"WAL SQLite behind the bridge; {rounds} interleaved blocks of {block}, each"
            " claim followed by its done (two requests); wall-clock rates",
        )
    ]


def _wake_samples(waiter_url: str, poster_url: str, interval: float, samples: int) -> list[float]:
    """Post-to-ring latencies (ms): a waiter child on ``waiter_url``, one
    post at a random moment after each ring through ``poster_url``."""
    poster = open_bus(poster_url)
    rng = random.Random(11)
    child = subprocess.Popen(
        [sys.executable, "-m", "knell.bench.wake", waiter_url, str(samples)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    latencies: list[float] = []
    try:
        assert child.stdout is not None
        if child.stdout.readline().strip() != "ready":
            raise RuntimeError("bridge bench: the waiter did not start")
        for i in range(samples):
            time.sleep(0.01 + rng.uniform(0, interval))
            message = poster.post(WAKE_CHANNEL, f"poster:{i}", "poster")
            posted = time.time_ns()
            line = child.stdout.readline().split()
            if not line:
                raise RuntimeError("bridge bench: the waiter exited early")
            if line[0] != "timeout" and int(line[0]) == message.seq:
                latencies.append(max(0, int(line[1]) - posted) / 1e6)
        child.wait(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()
        poster.close()
    return latencies


def _wake(work: Path, short: bool, say: Callable[[str], None]) -> list[Row]:
    interval, samples = (0.05, 30) if short else (0.05, 120)
    ms = interval * 1000
    direct_store = _url(work / "wake-direct.db", interval)
    open_bus(direct_store).close()
    baseline = _wake_samples(direct_store, direct_store, interval, samples)
    measured: dict[str, list[float]] = {}
    for poster in ("bridge", "store"):
        store = _url(work / f"wake-{poster}.db", interval)
        open_bus(store).close()
        with _bridge(store, work, f"wake-{poster}") as url:
            measured[poster] = _wake_samples(url, url if poster == "bridge" else store, interval,
                                             samples)  # fmt: skip
        say(f"bridge: {len(measured[poster])} rings, poster through the {poster}")
    rows: list[Row] = []
    labels = {
        "bridge": "post through the same bridge (in-process bell)",
        "store": "post straight into the store (the bridge polls)",
    }
    for poster, latencies in measured.items():
        for q, label in ((0.5, "p50"), (0.99, "p99")):
            value, base = percentile(latencies, q), percentile(baseline, q)
            goal: dict[str, Any] = {}
            if label == "p99":
                goal = {
                    "goal": f"p99 <= {ms + 50:.0f} ms (poll interval + 50 ms)",
                    "met": None if value is None else value <= ms + 50,
                }
            rows.append(
                Row(
                    section="bridge",
                    name=f"post -> ring {label} through the bridge's long poll, {labels[poster]}",
                    value=value,
                    unit="ms",
                    baseline=base,
                    baseline_name=f"direct waiter {label}, poll {ms:.0f} ms",
                    ratio=None if value is None or not base else value / base,
                    note=f"{len(latencies)} rings (direct: {len(baseline)}); waiter and poster in"
                    " separate processes",
                    extra={"samples_ms": latencies, "baseline_samples_ms": baseline}
                    if label == "p50"
                    else {},
                    **goal,
                )
            )
    return rows


def run_bridge_bench(work: Path, *, short: bool, say: Callable[[str], None] = print) -> list[Row]:
    """Posts/s, claims/s and post-to-ring latency through one bridge, each next to
    the same figure measured directly on the store in the same run."""
    work.mkdir(parents=True, exist_ok=True)
    return [*_posts(work, short, say), *_claims(work, short, say), *_wake(work, short, say)]


if __name__ == "__main__":
    import tempfile

    for row in run_bridge_bench(Path(tempfile.mkdtemp(prefix="knell-bridge-bench-")),
                                short="--short" in sys.argv):  # fmt: skip
        print(json.dumps({k: v for k, v in row.to_json().items() if k != "extra"}))
