"""What the stdio protocol costs: one bus, called in-process and through an adapter.

The ``exec:`` driver puts a process boundary and two JSON encodings between
a worker and its bus. A bus author wants to know whether that boundary, not
their bus, sets the pace of a run. So the figure holds the bus fixed and
changes only the path to it: knell's reference :class:`SqliteBus`

* called **in-process** (the baseline: what a Python driver costs), and
* called through the **Python example adapter**
  (``examples/python-adapter/adapter.py``, which wraps that same class)
  via :class:`~knell.buses.stdio.StdioBus`,

each on its own fresh file with the same settings, in interleaved blocks
(see :mod:`knell.bench.timing`). Three broadcast operations span the
range: a keyed ``post`` (a write transaction, where the store's commit
dominates), a ``fetch`` of a 50-message page (the largest replies), and a
``cursor`` read (almost no bus work: the protocol's round trip alone). A
fourth is the queue contract's hot path, a ``claim`` (a write transaction
that finds the oldest claimable message and leases it, replying with the
whole lease).

Rates are **wall-clock**, unlike the other bus figures: the adapter works
in another process, whose CPU time this process does not see.

The hook for :mod:`knell.bench` is :func:`run_stdio_bench`, shaped like
every section (``(work, short=..., say=...) -> list[Row]``).
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from pathlib import Path

from knell.bench.result import Row
from knell.bench.timing import Paired, paired
from knell.buses.contract import Bus
from knell.buses.sqlite import SqliteBus
from knell.buses.sqlite_url import sqlite_url
from knell.buses.stdio import StdioBus

__all__ = ["python_adapter", "run_stdio_bench"]

CHANNEL = "events"
QUEUE = "jobs"
PAGE = 50
BACKLOG = 1000


def python_adapter() -> Path | None:
    """The example Python adapter of this source checkout, if there is one."""
    path = Path(__file__).resolve().parents[3] / "examples" / "python-adapter" / "adapter.py"
    return path if path.is_file() else None


def _url(path: Path) -> str:
    return sqlite_url(path.resolve())


def run_stdio_bench(work: Path, *, short: bool, say: Callable[[str], None] = print) -> list[Row]:
    """Ops/s through the Python stdio adapter next to the same bus in-process."""
    adapter = python_adapter()
    if adapter is None:
        say("stdio: skipped: examples/python-adapter/adapter.py is not here (a source checkout)")
        return []
    work.mkdir(parents=True, exist_ok=True)
    block, rounds = (200, 6) if short else (1000, 12)
    direct = SqliteBus(work / "direct.db")
    stdio = StdioBus([sys.executable, str(adapter)], _url(work / "stdio.db"), stderr=work / "log")
    try:
        rows = [
            _posts(stdio, direct, block, rounds),
            _fetches(stdio, direct, block, rounds),
            _cursors(stdio, direct, block, rounds),
            _claims(stdio, direct, work, block, rounds),
        ]
    finally:
        stdio.close()
        direct.close()
    say("stdio: done")
    return rows


def _posts(stdio: Bus, direct: Bus, block: int, rounds: int) -> Row:
    def poster(bus: Bus, name: str) -> Callable[[], int]:
        count = [0]

        def run() -> int:
            post = bus.post
            start = count[0]
            for i in range(start + 1, start + block + 1):
                mid = f"{name}.1:{i}"
                post(CHANNEL, mid, name, mid)
            count[0] = start + block
            return block

        return run

    result = paired(poster(stdio, "stdio"), poster(direct, "direct"), rounds)
    return _row(result, "post with idempotency key", block, rounds)


def _prepare_reads(bus: Bus) -> None:
    bus.subscribe("bench", CHANNEL, "start")
    for i in range(bus.head(CHANNEL) + 1, BACKLOG + 1):
        bus.post(CHANNEL, f"seed:{i}", "seeder")


def _fetches(stdio: Bus, direct: Bus, block: int, rounds: int) -> Row:
    for bus in (stdio, direct):
        _prepare_reads(bus)

    def fetcher(bus: Bus) -> Callable[[], int]:
        def run() -> int:
            fetch = bus.fetch
            for i in range(block):
                fetch("bench", CHANNEL, (i * PAGE) % (BACKLOG - PAGE), PAGE)
            return block

        return run

    result = paired(fetcher(stdio), fetcher(direct), rounds)
    return _row(result, f"fetch, pages of {PAGE}", block, rounds)


def _cursors(stdio: Bus, direct: Bus, block: int, rounds: int) -> Row:
    def reader(bus: Bus) -> Callable[[], int]:
        def run() -> int:
            cursor = bus.cursor
            for _ in range(block):
                cursor("bench", CHANNEL)
            return block

        return run

    result = paired(reader(stdio), reader(direct), rounds)
    return _row(result, "cursor read (the round trip alone)", block, rounds)


def _claims(stdio: StdioBus, direct: SqliteBus, work: Path, block: int, rounds: int) -> Row:
    """Claims from a queue seeded with one message per claim, on each side."""
    count = block * rounds
    seeders = [SqliteBus(work / "stdio.db"), direct]  # the adapter's file, opened here too
    try:
        for bus in seeders:
            bus.declare_queue(QUEUE, 3)
            for i in range(bus.head(QUEUE) + 1, count + 1):
                bus.post(QUEUE, f"job:{i}", "seeder")
    finally:
        seeders[0].close()

    def claimer(bus: StdioBus | SqliteBus) -> Callable[[], int]:
        def run() -> int:
            claim = bus.claim
            for _ in range(block):
                if claim(QUEUE, "bench", 60.0) is None:  # pragma: no cover - seeded enough
                    raise RuntimeError("the benchmark queue ran dry")
            return block

        return run

    result = paired(claimer(stdio), claimer(direct), rounds)
    return _row(result, "claim (oldest claimable, leased)", block, rounds)


def _row(result: Paired, operation: str, block: int, rounds: int) -> Row:
    ratios = [
        (s.ops / s.wall) / (b.ops / b.wall)
        for s, b in zip(result.subject, result.baseline, strict=True)
        if s.wall > 0 and b.wall > 0
    ]
    return Row(
        section="stdio",
        name=f"{operation}, through the Python stdio adapter",
        value=result.subject_wall_rate,
        unit="ops/s",
        baseline=result.baseline_wall_rate,
        baseline_name="the same SqliteBus called in-process",
        ratio=statistics.median(ratios) if ratios else None,
        note=f"wall-clock rates (the adapter is another process); {rounds} interleaved "
        f"blocks of {block}",
    )
