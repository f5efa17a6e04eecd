"""How close a reference bus comes to the raw speed of its own store.

A bus adds bookkeeping on top of its store: an idempotency-key check, seq
assignment under the write lock, cursor rows, message objects. The
question a bus author asks is how much that bookkeeping costs, so each
figure is set against the *same store doing the least work that delivers
the same durable outcome*:

* **post** vs **raw INSERT transactions**: the bus's ``post`` (with an
  idempotency key, at the durability the bus promises) against a loop of
  single-row autocommit ``INSERT`` statements into the same schema, on the
  same kind of file, with the same journal mode and ``synchronous`` level,
  the seq computed in Python. One message, one transaction, made durable
  the same way: no bus can post faster than that store commits, so the
  ratio is the fraction of the physical limit the bus reaches.
* **catch-up** vs **raw SELECT scan**: reading a backlog the way a
  consumer does (from the durable cursor, page after page, until an empty
  page) against one ``SELECT`` of the same rows in seq order. One scan is
  the least work that returns every message.

Stores slot in through :data:`BUS_BENCHES`, keyed by the scenario's
``store`` name: the Postgres and Redis benches (:mod:`knell.bench.network`)
supply their own raw loops (a plain ``INSERT`` / ``XADD`` against the same
private server) and add what only a server has: SIGKILL of the store to the
first post after its restart, and the wake-up fast path.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from knell.bench.result import Row
from knell.bench.timing import Paired, paired
from knell.buses.sqlite import SCHEMA, SqliteBus

__all__ = ["BUS_BENCHES", "BusBench", "SqliteBench"]

CHANNEL = "events"


class BusBench(Protocol):
    """One store's bus benchmarks."""

    @property
    def store(self) -> str: ...

    def unavailable(self) -> str | None:
        """Why this store cannot be benchmarked here (``None``: it can)."""
        ...

    def run(self, work: Path, *, short: bool) -> list[Row]: ...


class SqliteBench:
    """The reference bus on a WAL SQLite file, ``synchronous=NORMAL``."""

    store = "sqlite"
    synchronous = "normal"

    def unavailable(self) -> str | None:
        return None

    def run(self, work: Path, *, short: bool) -> list[Row]:
        work.mkdir(parents=True, exist_ok=True)
        return [self._posts(work, short), *self._catch_up(work, short)]

    # -- post --------------------------------------------------------------

    def _raw(self, path: Path) -> sqlite3.Connection:
        """A plain connection with the bus's journal and sync settings."""
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(f"PRAGMA synchronous={self.synchronous.upper()}")
        db.executescript(SCHEMA)
        return db

    def _posts(self, work: Path, short: bool) -> Row:
        block, rounds = (200, 8) if short else (500, 24)
        bus = SqliteBus(work / "post-bus.db", synchronous=self.synchronous)
        raw = self._raw(work / "post-raw.db")
        counter = {"bus": 0, "raw": 0}

        def bus_block() -> int:
            post = bus.post
            start = counter["bus"]
            for i in range(start + 1, start + block + 1):
                mid = f"producer-1.1:{i}"
                post(CHANNEL, mid, "producer-1", mid)
            counter["bus"] = start + block
            return block

        insert = (
            "INSERT INTO messages (channel, seq, body, sender, idem_key, posted_at)"
            " VALUES (?, ?, ?, ?, ?, ?)"
        )

        def raw_block() -> int:
            execute = raw.execute
            start = counter["raw"]
            for i in range(start + 1, start + block + 1):
                mid = f"producer-1.1:{i}"
                execute(insert, (CHANNEL, i, mid, "producer-1", mid, time.time()))
            counter["raw"] = start + block
            return block

        try:
            result = paired(bus_block, raw_block, rounds)
        finally:
            bus.close()
            raw.close()
        return _row(
            result,
            name=f"{self.store}: post with idempotency key",
            unit="posts/s",
            baseline_name="single-row INSERT transactions, same file settings",
            goal=(">= 0.8", lambda r: r >= 0.8),
            note=f"WAL, synchronous={self.synchronous}; {rounds} interleaved blocks of "
            f"{block}; rates per CPU second",
        )

    # -- catch-up ----------------------------------------------------------

    def _catch_up(self, work: Path, short: bool) -> list[Row]:
        backlog, rounds = (5_000, 4) if short else (20_000, 8)
        path = work / "catch-up.db"
        seed = self._raw(path)
        seed.execute("BEGIN")
        seed.executemany(
            "INSERT INTO messages (channel, seq, body, sender, idem_key, posted_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (
                (CHANNEL, i, f"producer-1.1:{i}", "producer-1", f"producer-1.1:{i}", time.time())
                for i in range(1, backlog + 1)
            ),
        )
        seed.execute("COMMIT")
        seed.close()
        bus = SqliteBus(path, synchronous=self.synchronous)
        bus.subscribe("bench", CHANNEL, at="start")
        raw = sqlite3.connect(path, isolation_level=None)
        scan = (
            "SELECT seq, body, sender, idem_key FROM messages"
            " WHERE channel = ? AND seq > ? ORDER BY seq"
        )

        def raw_block() -> int:
            return len(raw.execute(scan, (CHANNEL, 0)).fetchall())

        rows = []
        try:
            for batch in (50, 200):

                def bus_block(batch: int = batch) -> int:
                    fetch = bus.fetch
                    page = fetch("bench", CHANNEL, None, batch)
                    count = 0
                    while page:
                        count += len(page)
                        page = fetch("bench", CHANNEL, page[-1].seq, batch)
                    return count

                result = paired(bus_block, raw_block, rounds)
                rows.append(
                    _row(
                        result,
                        name=f"{self.store}: catch-up, pages of {batch}",
                        unit="messages/s",
                        baseline_name="one SELECT scan of the same rows",
                        goal=None,
                        note=f"{backlog} messages from the durable cursor to an empty page; "
                        "rates per CPU second",
                    )
                )
        finally:
            bus.close()
            raw.close()
        return rows


def _row(
    result: Paired,
    *,
    name: str,
    unit: str,
    baseline_name: str,
    goal: tuple[str, Callable[[float], bool]] | None,
    note: str,
) -> Row:
    ratio = result.ratio
    return Row(
        section="bus",
        name=name,
        value=result.subject_rate,
        unit=unit,
        baseline=result.baseline_rate,
        baseline_name=baseline_name,
        ratio=ratio,
        goal=None if goal is None else f"bus / raw {goal[0]}",
        met=None if goal is None else goal[1](ratio),
        note=note,
        extra={
            "wall_rate": result.subject_wall_rate,
            "baseline_wall_rate": result.baseline_wall_rate,
            "block_ratios": result.ratios,
        },
    )


def _server_benches() -> dict[str, BusBench]:
    """Each store kind's bus bench (its ``bench``)."""
    from knell.stores import registry

    return {k.name: k.load(k.bench)() for k in registry.kinds().values() if k.bench}


BUS_BENCHES: dict[str, BusBench] = {"sqlite": SqliteBench(), **_server_benches()}
"""Bus benchmarks by store name (the scenario's ``store``)."""
