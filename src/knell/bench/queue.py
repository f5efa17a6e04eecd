"""How close the reference queue comes to its store, and how fast a lapse comes back.

Two figures per store (SQLite, and Postgres and Redis on private servers
when this machine has them), each against a baseline measured in the same
run:

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
  (:mod:`knell.bench.timing`). On Postgres the raw loop is the same
  guarded UPDATE on pre-made ready rows of the bus's schema; on Redis it
  is one script that pops the oldest ready seq from a sorted set and
  writes its lease (the least atomic step that hands a message to one
  consumer). Both server forms count wall time: the work is in the server.
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
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from knell.bench.network import wall_ratios
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

    def raw_claim() -> bool:
        now = time.time()
        return raw.execute(_RAW_CLAIM, ("bench", now + 60.0, now, RAW)).rowcount == 1

    try:
        return _paired_claims(
            "sqlite",
            bus,
            raw_claim,
            block,
            rounds,
            baseline_name="raw guarded UPDATE of the oldest ready row, same file",
            note="WAL, synchronous=normal",
            wall=False,
        )
    finally:
        bus.close()
        raw.close()


def _paired_claims(
    label: str,
    bus: Any,
    raw_claim: Callable[[], bool],
    block: int,
    rounds: int,
    *,
    baseline_name: str,
    note: str,
    wall: bool,
) -> Row:
    """Interleaved blocks of bus claims and raw claims (both queues seeded
    with ``block * rounds`` messages); rates per CPU second, or per wall
    second when the work is in a server."""

    def bus_block() -> int:
        claim = bus.claim
        for _ in range(block):
            if claim(QUEUE, "bench", 60.0) is None:  # pragma: no cover - seeded enough
                raise RuntimeError("the benchmark queue ran dry")
        return block

    def raw_block() -> int:
        for _ in range(block):
            if not raw_claim():  # pragma: no cover - seeded enough
                raise RuntimeError("the raw queue ran dry")
        return block

    result = paired(bus_block, raw_block, rounds)
    ratios = wall_ratios(result) if wall else result.ratios
    return Row(
        section=SECTION,
        name=f"{label}: claim (oldest claimable, leased)",
        value=result.subject_wall_rate if wall else result.subject_rate,
        unit="claims/s",
        baseline=result.baseline_wall_rate if wall else result.baseline_rate,
        baseline_name=baseline_name,
        ratio=statistics.median(ratios),
        note=f"{note}; {rounds} interleaved blocks of {block}; rates per "
        + ("wall second (the work is in the server)" if wall else "CPU second"),
        extra={
            "wall_rate": result.subject_wall_rate,
            "baseline_wall_rate": result.baseline_wall_rate,
            "block_ratios": ratios,
        },
    )


def _expiry(work: Path, short: bool) -> list[Row]:
    path = work / "expiry.db"
    return _lapses("sqlite", SqliteBus(path), SqliteBus(path), short)


def _lapses(label: str, holder: Any, poller: Any, short: bool) -> list[Row]:
    """Lease expiry -> claimable again through two connections (both closed
    at the end)."""
    samples = 40 if short else 200
    latencies: list[float] = []
    wins: list[float] = []
    empty = 0
    try:
        holder.declare_queue(LAPSE, 10 * samples + 10)
        holder.post(LAPSE, "bench:lapse", "bench")
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
            name=f"{label}: lease expiry -> claimable again, p50",
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
            name=f"{label}: lease expiry -> claimable again, p99",
            value=p99,
            unit="ms",
            baseline=win99,
            baseline_name="the winning claim's own duration, p99 (same loop)",
            ratio=None if p99 is None or not win99 else p99 / win99,
            note=f"max {max(latencies, default=0.0):.2f} ms; declared sweep interval 0",
        ),
    ]


# -- on private servers ------------------------------------------------------------------

RawClaim = tuple[Callable[[], bool], Callable[[], None]]
"""One raw claim (True when it leased a row), and how to close its client."""


def _servers_table() -> dict[str, tuple[Callable[[Any, Any, int], RawClaim], str, str]]:
    """Per server store: its raw claim loop, that baseline's name, the
    store's settings (each store kind's ``queue_bench``)."""
    from knell.stores import registry

    return {k.name: k.load(k.queue_bench) for k in registry.kinds().values() if k.queue_bench}


def _server(kind: str, store: Any, short: bool) -> list[Row]:
    """Claims against the store's raw loop, then expiry latency, on one
    private server."""
    from knell.buses import open_bus

    setup, baseline_name, note = _servers_table()[kind]
    block, rounds = (100, 6) if short else (250, 16)
    bus: Any = open_bus(store.url)
    bus.declare_queue(QUEUE, 3)  # creates the schema
    raw_claim, close_raw = setup(store, bus, block * rounds)
    try:
        row = _paired_claims(
            kind,
            bus,
            raw_claim,
            block,
            rounds,
            baseline_name=baseline_name,
            note=note,
            wall=True,
        )
    finally:
        bus.close()
        close_raw()
    return [row, *_lapses(kind, open_bus(store.url), open_bus(store.url), short)]


def _servers(work: Path, short: bool, say: Callable[[str], None]) -> list[Row]:
    from knell.stores import StoreSpec, create_store, unavailable

    rows: list[Row] = []
    for kind in _servers_table():
        reason = unavailable(kind)
        if reason is not None:
            say(f"queue: {kind} skipped: {reason}")
            continue
        with create_store(StoreSpec(kind=kind), work / kind) as store:
            rows += _server(kind, store, short)
        say(f"queue: {kind} done")
    return rows


def run_queue_bench(work: Path, *, short: bool, say: Callable[[str], None] = print) -> list[Row]:
    """The queue section: claims/s against the raw loop, then expiry latency."""
    work.mkdir(parents=True, exist_ok=True)
    rows = [_claims(work, short)]
    say("queue: claims done")
    rows += _expiry(work, short)
    say("queue: expiry done")
    return rows + _servers(work, short, say)
