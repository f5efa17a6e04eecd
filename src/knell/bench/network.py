"""The Postgres and Redis buses against their own servers' limits.

Each store gets a private server (the same :mod:`knell.stores` a run
uses) and three figures, each against a baseline measured on the same
server in the same run:

* **post** vs **raw single-statement writes**: the bus's ``post`` (with an
  idempotency key) against a loop of single autocommit ``INSERT``s
  (Postgres) or ``XADD``s (Redis) of the same rows, the seq computed in
  Python. Once with the durable settings a run defaults to (Postgres
  ``fsync`` + ``synchronous_commit``, Redis ``appendfsync always``), once
  without (``fsync=off``; no persistence), where the server does the least
  work and the bus's own cost shows most. The work happens in the server,
  so rates are per *wall* second (CPU time of the client would flatter the
  bus); blocks are interleaved and the median per-block ratio is taken
  (:mod:`knell.bench.timing`). Goal: bus / raw >= 0.7.
* **SIGKILL -> first post**: the store is SIGKILLed (every server process)
  and restarted at once on the same port and data; the time from the kill
  to the first post the *same* bus object gets through (it must notice
  its dead connection and reconnect). The baseline is the same cycle with
  a brand-new raw client writing one row: the server's own recovery
  time. Ratio = bus / raw (1.0: reconnecting costs nothing).
* **post -> ring** of a waiter in another process: Postgres with
  ``LISTEN``/``NOTIFY`` and without (pure polling), Redis with ``XREAD
  BLOCK``; the baseline is the poll interval. A fast path should ring in a
  small fraction of it.

A machine without the server binaries skips the store with the reason.
"""

from __future__ import annotations

import statistics
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

from knell.bench.result import Row
from knell.bench.timing import Paired, paired
from knell.stats import percentile
from knell.stores import Store, StoreError, StoreSpec, create_store

__all__ = ["ServerBench", "with_option"]

CHANNEL = "events"
POST_GOAL = 0.7
WAKE_INTERVAL = 0.1


def wall_ratios(result: Paired) -> list[float]:
    """Bus wall rate / raw wall rate, block by block."""
    return [
        (s.ops / s.wall) / (b.ops / b.wall)
        for s, b in zip(result.subject, result.baseline, strict=True)
        if s.wall > 0 and b.wall > 0
    ]


class ServerBench(ABC):
    """One server store's bus benchmarks (see the module docstring)."""

    store: str
    durable_label: str
    fast_label: str

    @abstractmethod
    def _find(self) -> None:
        """Raise :class:`StoreError` when the server binaries are missing."""

    @abstractmethod
    def _specs(self) -> tuple[StoreSpec, StoreSpec]:
        """The durable and the fast server configuration."""

    @abstractmethod
    def _raw_writer(self, store: Store) -> tuple[Callable[[int], None], Callable[[], None]]:
        """A single-statement write of message ``i`` on one raw connection,
        and its closer."""

    @abstractmethod
    def _raw_first_write(self, store: Store) -> None:
        """Connect afresh and write one row (raises while the server is down)."""

    def _raw_setup(self, store: Store) -> None:
        """Prepare what :meth:`_raw_first_write` writes to (nothing by default)."""
        return None

    def unavailable(self) -> str | None:
        try:
            self._find()
        except StoreError as exc:
            return str(exc)
        return None

    def run(self, work: Path, *, short: bool) -> list[Row]:
        work.mkdir(parents=True, exist_ok=True)
        durable, fast = self._specs()
        rows: list[Row] = []
        with create_store(durable, work / "durable") as store:
            rows.append(self._posts(store, self.durable_label, short, durable=True))
            rows += self._crashes(store, short)
            rows += self._wakes(store, short)
        with create_store(fast, work / "fast") as store:
            rows.append(self._posts(store, self.fast_label, short, durable=False))
        return rows

    # -- post ------------------------------------------------------------------

    def _posts(self, store: Store, label: str, short: bool, *, durable: bool) -> Row:
        from knell.buses import open_bus

        block = (40 if short else 100) if durable else (200 if short else 1000)
        rounds = 8 if short else 16
        bus = open_bus(store.url)
        bus.head(CHANNEL)  # connected and set up before the clock starts
        write, close_raw = self._raw_writer(store)
        counter = {"bus": 0, "raw": 0}

        def bus_block() -> int:
            start = counter["bus"]
            for i in range(start + 1, start + block + 1):
                mid = f"producer-1.1:{i}"
                bus.post(CHANNEL, mid, "producer-1", mid)
            counter["bus"] = start + block
            return block

        def raw_block() -> int:
            start = counter["raw"]
            for i in range(start + 1, start + block + 1):
                write(i)
            counter["raw"] = start + block
            return block

        try:
            result = paired(bus_block, raw_block, rounds)
        finally:
            bus.close()
            close_raw()
        ratios = wall_ratios(result)
        ratio = statistics.median(ratios)
        return Row(
            section="bus",
            name=f"{self.store}: post with idempotency key, {label}",
            value=result.subject_wall_rate,
            unit="posts/s",
            baseline=result.baseline_wall_rate,
            baseline_name=f"single-statement {self._raw_name} loop, same server",
            ratio=ratio,
            goal=f"bus / raw >= {POST_GOAL}",
            met=ratio >= POST_GOAL,
            note=f"{rounds} interleaved blocks of {block}; rates per wall second (the work is "
            "in the server)",
            extra={"block_ratios": ratios, "cpu_rate": result.subject_rate},
        )

    _raw_name = "write"

    # -- crash -> first post ---------------------------------------------------------

    def _crashes(self, store: Store, short: bool) -> list[Row]:
        from knell.buses import open_bus

        cycles = self._cycles(short)
        self._raw_setup(store)
        bus = open_bus(store.url)
        bus.head(CHANNEL)
        times: dict[str, list[float]] = {"bus": [], "raw": []}
        errors: dict[str, int] = {"bus": 0, "raw": 0}
        try:
            for i in range(2 * cycles):
                who = "bus" if (i % 4) in (0, 3) else "raw"  # bus raw raw bus ...
                store.crash()
                killed = time.perf_counter()
                store.restart()
                while True:
                    try:
                        if who == "bus":
                            bus.post(CHANNEL, f"after-crash-{i}", "producer-1")
                        else:
                            self._raw_first_write(store)
                        break
                    except Exception:
                        errors[who] += 1
                        if time.perf_counter() - killed > 60:
                            raise
                        time.sleep(0.005)
                times[who].append((time.perf_counter() - killed) * 1000)
        finally:
            bus.close()
        rows = []
        for q, label in ((0.5, "p50"), (0.99, "p99")):
            value = percentile(times["bus"], q)
            base = percentile(times["raw"], q)
            rows.append(
                Row(
                    section="bus",
                    name=f"{self.store}: SIGKILL -> first post after restart, {label}",
                    value=value,
                    unit="ms",
                    baseline=base,
                    baseline_name="SIGKILL -> first write of a fresh raw client",
                    ratio=None if value is None or not base else value / base,
                    note=f"{cycles} cycles each, restart at once, retry every 5 ms; the same bus "
                    f"object throughout; {errors['bus']} failed bus attempts (all definite)",
                    extra={"bus_ms": times["bus"], "raw_ms": times["raw"]},
                )
            )
        return rows

    def _cycles(self, short: bool) -> int:
        return 3 if short else 10

    # -- wake ----------------------------------------------------------------------------

    def _wake_urls(self, store: Store) -> list[tuple[str, str, bool]]:
        """(label, url, fast path?) per waiter configuration."""
        return [(self.wake_label, store.url, True)]

    wake_label = "blocking read"

    def _wakes(self, store: Store, short: bool) -> list[Row]:
        from knell.bench.wake import measure_wake

        samples = 20 if short else 60
        ms = WAKE_INTERVAL * 1000
        rows = []
        for label, url, fast in self._wake_urls(store):
            url = with_option(url, "poll_interval", f"{WAKE_INTERVAL:g}")
            result: dict[str, Any] = measure_wake(url, WAKE_INTERVAL, samples)
            latencies = result["latencies"]
            p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
            limit = ms / 4 if fast else ms + 50
            note = f"{len(latencies)} rings ({result['reasons']}), {result['timeouts']} timeouts"
            rows += [
                Row(
                    section="wake",
                    name=f"{self.store} {label}: post -> ring p50, poll {ms:.0f} ms",
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
                    name=f"{self.store} {label}: post -> ring p99, poll {ms:.0f} ms",
                    value=p99,
                    unit="ms",
                    baseline=ms,
                    baseline_name="poll interval",
                    ratio=None if p99 is None else p99 / ms,
                    goal=f"p99 <= {limit:.0f} ms"
                    + (" (a quarter of the interval)" if fast else " (interval + 50 ms)"),
                    met=None if p99 is None else p99 <= limit,
                    note=f"max {max(latencies, default=0):.1f} ms",
                ),
            ]
        return rows


def with_option(url: str, key: str, value: str) -> str:
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != key]
    return urlunsplit(parts._replace(query=urlencode([*query, (key, value)])))
