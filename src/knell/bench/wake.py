"""How late the doorbell rings for a post made by another process.

``wait`` on the reference bus holds no durable state: it remembers the
heads when armed and polls the store every ``poll_interval`` seconds (an
in-process condition variable only helps waiters in the poster's own
process). A post from another process is therefore seen at the next poll:
with posts arriving at random moments, the delay is spread evenly over one
interval, so p50 should be about half of it and p99 about all of it, plus
the time of one poll query. The configured interval is the baseline; the
goal is p99 within one interval plus 50 ms.

The waiter runs in a child process (``python -m knell.bench.wake URL
SAMPLES``): subscribe, then ring after ring, print the ring's seq and the
wall-clock time it returned (all processes share the clock), ack the seq
and re-arm. The parent posts one message at a random moment after each ring
and takes post-to-ring latency as ring time minus the time ``post``
returned, as the wake check does with the history.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from knell.bench.result import Row
from knell.buses import open_bus
from knell.buses.sqlite_url import sqlite_url
from knell.stats import percentile

__all__ = ["measure_wake", "run_wake_bench"]

CHANNEL = "events"
HANDLE = "waiter"


def _waiter(url: str, samples: int) -> int:
    parent = os.getppid()
    bus = open_bus(url)
    bus.subscribe(HANDLE, CHANNEL, "head")
    print("ready", flush=True)
    for _ in range(samples):
        if os.getppid() != parent:  # the bench died: do not outlive it
            return 70
        wake = bus.wait(HANDLE, 5.0)
        rang = time.time_ns()
        if wake is None:
            print("timeout", flush=True)
            continue
        bus.ack(HANDLE, CHANNEL, wake.seq)
        print(f"{wake.seq} {rang} {wake.reason}", flush=True)
    bus.close()
    return 0


def _measure(work: Path, interval: float, samples: int) -> dict[str, Any]:
    path = (work / f"wake-{int(interval * 1000)}ms.db").resolve()
    url = sqlite_url(path, poll_interval=interval)
    return measure_wake(url, interval, samples)


def measure_wake(url: str, interval: float, samples: int) -> dict[str, Any]:
    """Post-to-ring latencies (ms) of a waiter in another process, on the
    bus at ``url`` (any store); posts land at random phases of ``interval``."""
    bus = open_bus(url)
    rng = random.Random(11)
    child = subprocess.Popen(
        [sys.executable, "-m", "knell.bench.wake", url, str(samples)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )
    latencies: list[float] = []
    reasons: dict[str, int] = {}
    timeouts = 0
    try:
        assert child.stdout is not None
        if child.stdout.readline().strip() != "ready":
            raise RuntimeError("wake bench: the waiter did not start")
        for i in range(samples):
            # a random phase against the waiter's poll, after it has re-armed
            time.sleep(0.01 + rng.uniform(0, interval))
            message = bus.post(CHANNEL, f"poster:{i}", "poster")
            posted = time.time_ns()
            line = child.stdout.readline().split()
            if not line:
                raise RuntimeError("wake bench: the waiter exited early")
            if line[0] == "timeout":
                timeouts += 1
                continue
            seq, rang, reason = int(line[0]), int(line[1]), line[2]
            reasons[reason] = reasons.get(reason, 0) + 1
            if seq == message.seq:
                latencies.append(max(0, rang - posted) / 1e6)
        child.wait(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        bus.close()
    return {"latencies": latencies, "reasons": reasons, "timeouts": timeouts}


def run_wake_bench(work: Path, *, short: bool, say: Callable[[str], None] = print) -> list[Row]:
    work.mkdir(parents=True, exist_ok=True)
    plans = [(0.05, 30)] if short else [(0.05, 150), (0.1, 100)]
    rows = []
    for interval, samples in plans:
        result = _measure(work, interval, samples)
        latencies = result["latencies"]
        ms = interval * 1000
        p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
        say(f"wake: {len(latencies)} rings at poll interval {ms:.0f} ms")
        note = (
            f"{len(latencies)} rings ({result['reasons']}), {result['timeouts']} timeouts; "
            f"waiter in another process"
        )
        rows += [
            Row(
                section="wake",
                name=f"post -> ring p50, poll {ms:.0f} ms",
                value=p50,
                unit="ms",
                baseline=ms,
                baseline_name="poll interval",
                ratio=None if p50 is None else p50 / ms,
                note=note,
                extra={"samples_ms": latencies},
            ),
            Row(
                section="wake",
                name=f"post -> ring p99, poll {ms:.0f} ms",
                value=p99,
                unit="ms",
                baseline=ms,
                baseline_name="poll interval",
                ratio=None if p99 is None else p99 / ms,
                goal=f"p99 <= {ms + 50:.0f} ms (interval + 50 ms)",
                met=None if p99 is None else p99 <= ms + 50,
                note=f"max {max(latencies, default=0):.1f} ms",
            ),
        ]
    return rows


if __name__ == "__main__":
    sys.exit(_waiter(sys.argv[1], int(sys.argv[2])))
