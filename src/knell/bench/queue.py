"""How close the reference queue comes to its store, and how fast a lapse comes back.

Two figures, each against a baseline measured in the same run:

* **claims/s** vs **a raw guarded-UPDATE loop on the same file**. A claim
  is one write transaction that finds the oldest claimable message (never
  claimed, released, or lapsed with deliveries left), sweeps lapsed leases
  that used their deliveries to dead, and leases the message with a
  guarded UPDATE. The least work that delivers the same durable outcome
  (one lease row written under the write lock, the oldest first, with the
  guard) is a single autocommit ``UPDATE ... WHERE seq = (SELECT MIN(seq)
  ... 'ready') AND state = 'ready'`` on pre-made ready rows, on another
  channel of the same SQLite file with the same journal and sync settings.
  Interleaved blocks, CPU-time rates, median of block ratios
  (:mod:`knell.bench.timing`).
* **lease expiry -> claimable again**, p50 and p99: a consumer's lease of
  ``LEASE`` seconds lapses while a second connection claims in a tight
  loop; the figure is the time from the lease's ``expires_at`` (the bus's
  clock) to the second consumer's claim returning the message. Its
  baseline is the floor of that measurement: how long the winning claim
  itself took (its p50 and p99, same loop; a commit that triggers a WAL
  checkpoint sets the tail). With expiry judged at claim time (sweep
  interval 0) the figure should be about one claim.

Run it with :func:`run_queue_bench`; it returns :class:`~knell.bench.result.Row`
objects for the ``queue`` section.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from knell.bench.result import Row
from knell.bench.timing import paired
from knell.buses.sqlite import SqliteBus
from knell.stats import percentile

__all__ = ["run_queue_bench"]

SECTION = "queue"
QUEUE = "bench-queue"
RAW = "bench-raw"
LAPSE = "bench-lapse"
LEASE = 0.02
"""Seconds of lease in the expiry measurement (short: many samples per second)."""
SPIN = 0.01
"""The poller claims in a tight loop from this long before the lease lapses
(a sleep that overshoots on a loaded machine then costs nothing)."""

_RAW_CLAIM = (
    "UPDATE claims SET state = 'leased', consumer = ?1, expires_at = ?2,"
    " deliveries = deliveries + 1, updated_at = ?3"
    " WHERE channel = ?4 AND seq = (SELECT MIN(seq) FROM claims WHERE channel = ?4"
    " AND state = 'ready') AND state = 'ready'"
)


def _seed(path: Path, channel: str, count: int, *, ready_rows: bool) -> None:
    """``count`` messages on ``channel`` (and, for the raw loop, a ready
    claims row for each), in one transaction."""
    db = sqlite3.connect(path, isolation_level=None)
    now = time.time()
    db.execute("BEGIN")
    db.executemany(
        "INSERT INTO messages (channel, seq, body, sender, idem_key, posted_at)"
        " VALUES (?, ?, ?, 'bench', NULL, ?)",
        ((channel, i, f"bench:{i}", now) for i in range(1, count + 1)),
    )
    if ready_rows:
        db.executemany(
            "INSERT INTO claims (channel, seq, state, consumer, expires_at, deliveries,"
            " updated_at) VALUES (?, ?, 'ready', NULL, NULL, 0, ?)",
            ((channel, i, now) for i in range(1, count + 1)),
        )
    db.execute("COMMIT")
    db.close()


def _claims(work: Path, short: bool) -> Row:
    block, rounds = (200, 6) if short else (500, 16)
    path = work / "claims.db"
    bus = SqliteBus(path)  # creates the schema, WAL, synchronous=NORMAL
    bus.declare_queue(QUEUE, 3)
    _seed(path, QUEUE, block * rounds, ready_rows=False)
    _seed(path, RAW, block * rounds, ready_rows=True)
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("PRAGMA journal_mode=WAL")
    raw.execute("PRAGMA synchronous=NORMAL")

    def bus_block() -> int:
        claim = bus.claim
        for _ in range(block):
            if claim(QUEUE, "bench", 60.0) is None:  # pragma: no cover - seeded enough
                raise RuntimeError("the benchmark queue ran dry")
        return block

    def raw_block() -> int:
        execute = raw.execute
        for _ in range(block):
            now = time.time()
            if execute(_RAW_CLAIM, ("bench", now + 60.0, now, RAW)).rowcount != 1:
                raise RuntimeError("the raw queue ran dry")  # pragma: no cover
        return block

    try:
        result = paired(bus_block, raw_block, rounds)
    finally:
        bus.close()
        raw.close()
    return Row(
        section=SECTION,
        name="sqlite: claim (oldest claimable, leased)",
        value=result.subject_rate,
        unit="claims/s",
        baseline=result.baseline_rate,
        baseline_name="raw guarded UPDATE of the oldest ready row, same file",
        ratio=result.ratio,
        note=f"WAL, synchronous=normal; {rounds} interleaved blocks of {block}; "
        "rates per CPU second",
        extra={
            "wall_rate": result.subject_wall_rate,
            "baseline_wall_rate": result.baseline_wall_rate,
            "block_ratios": result.ratios,
        },
    )


def _expiry(work: Path, short: bool) -> list[Row]:
    samples = 40 if short else 200
    path = work / "expiry.db"
    holder = SqliteBus(path)
    poller = SqliteBus(path)
    holder.declare_queue(LAPSE, 10 * samples + 10)
    holder.post(LAPSE, "bench:lapse", "bench")
    latencies: list[float] = []
    wins: list[float] = []
    empty = 0
    try:
        for _ in range(samples):
            held = holder.claim(LAPSE, "holder", LEASE)
            if held is None:  # pragma: no cover - it is always released below
                raise RuntimeError("the lapsing message is not claimable")
            time.sleep(max(0.0, held.expires_at - time.time() - SPIN))
            while True:
                started = time.perf_counter()
                got = poller.claim(LAPSE, "poller", 60.0)
                if got is not None:
                    latencies.append((time.time() - held.expires_at) * 1000)
                    wins.append((time.perf_counter() - started) * 1000)
                    poller.release(got.id, "poller")
                    break
                empty += 1
    finally:
        holder.close()
        poller.close()
    p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
    win, win99 = percentile(wins, 0.5), percentile(wins, 0.99)
    note = (
        f"{len(latencies)} lapses of a {LEASE * 1000:.0f} ms lease, a second connection "
        f"claiming in a tight loop from {SPIN * 1000:.0f} ms before ({empty} empty polls)"
    )
    return [
        Row(
            section=SECTION,
            name="sqlite: lease expiry -> claimable again, p50",
            value=p50,
            unit="ms",
            baseline=win,
            baseline_name="the winning claim's own duration, p50 (same loop): the floor",
            ratio=None if p50 is None or not win else p50 / win,
            note=note,
            extra={"samples_ms": latencies, "win_samples_ms": wins},
        ),
        Row(
            section=SECTION,
            name="sqlite: lease expiry -> claimable again, p99",
            value=p99,
            unit="ms",
            baseline=win99,
            baseline_name="the winning claim's own duration, p99 (same loop)",
            ratio=None if p99 is None or not win99 else p99 / win99,
            note=f"max {max(latencies, default=0.0):.2f} ms; declared sweep interval 0",
        ),
    ]


def run_queue_bench(work: Path, *, short: bool, say: Callable[[str], None] = print) -> list[Row]:
    """The queue section: claims/s against the raw loop, then expiry latency."""
    work.mkdir(parents=True, exist_ok=True)
    rows = [_claims(work, short)]
    say("queue: claims done")
    rows += _expiry(work, short)
    say("queue: expiry done")
    return rows
