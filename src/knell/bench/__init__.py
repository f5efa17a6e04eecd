"""Benchmarks: how close knell and its buses come to the physical limit.

``knell bench`` (``make bench``) measures ten things, each against a
baseline taken in the same run on the same machine, because on a shared
machine absolute times drift by a factor of two from one minute to the
next while ratios hold:

=========  ==========================================  ==============================
section    figure                                      baseline (the limit)
=========  ==========================================  ==============================
bus        posts/s with idempotency keys; catch-up     raw INSERT transactions; one
           messages/s (see :mod:`knell.bench.bus`)     SELECT scan, same store
checker    events/s of the checker, peak memory        parse every line with orjson
           (:mod:`knell.bench.checker`)                and keep nothing
runner     ready time, kill-to-restarted, overhead     a bare interpreter start; the
           beyond the duration (:mod:`.runner`)        configured duration
wake       post-to-ring p50 / p99 for a waiter in      the configured poll interval
           another process (:mod:`.wake`)
proxy      round trip p50 / p99 and bulk throughput    the same through a direct
           through ``knell proxy`` (:mod:`.proxy`)     connection
bridge     posts/s and post-to-ring through one        the same bus, opened directly
           ``knell bridge`` (:mod:`.bridge`)
stdio      posts/s, fetches, cursor reads and claims/s the in-process bus
           through a stdio adapter (:mod:`.stdio`)
history    a worker's cost per event of writing its    one plain ``os.write`` of the
           zstd part; bytes per event (:mod:`.history`) line; plain JSON lines
=========  ==========================================  =======================
Results go to ``reports/bench/<timestamp>/bench.json``, ``bench.md`` and
``bench.html``.
``--short`` scales everything down for CI (well under a minute). A missed
goal is reported, never raised: benchmarks are not tests. A section that
crashes is recorded with its error and the others still run.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import traceback
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from knell.bench.report import host_info, write_bench
from knell.bench.result import Row
from knell.rundir import new_dir, point_latest

__all__ = ["Row", "run_bench"]

Say = Callable[[str], None]


def _bus(work: Path, short: bool, say: Say) -> list[Row]:
    from knell.bench.bus import BUS_BENCHES

    rows: list[Row] = []
    for store, bench in BUS_BENCHES.items():
        reason = bench.unavailable()
        if reason is not None:
            say(f"bus: {store} skipped: {reason}")
            continue
        rows += bench.run(work / store, short=short)
        say(f"bus: {store} done")
    return rows


def _checker(work: Path, short: bool, say: Say) -> list[Row]:
    from knell.bench.checker import run_checker_bench

    return run_checker_bench(work, short=short, say=say)


def _runner(work: Path, short: bool, say: Say) -> list[Row]:
    from knell.bench.runner import run_runner_bench

    return run_runner_bench(work, short=short, say=say)


def _wake(work: Path, short: bool, say: Say) -> list[Row]:
    from knell.bench.wake import run_wake_bench

    return run_wake_bench(work, short=short, say=say)


def _proxy(work: Path, short: bool, say: Say) -> list[Row]:
    from knell.bench.proxy import run_proxy_bench

    return run_proxy_bench(work, short=short, say=say)


def _bridge(work: Path, short: bool, say: Say) -> list[Row]:
    from knell.bench.bridge import run_bridge_bench

    return run_bridge_bench(work, short=short, say=say)


def _stdio(work: Path, short: bool, say: Say) -> list[Row]:
    from knell.bench.stdio import run_stdio_bench

    return run_stdio_bench(work, short=short, say=say)


def _queue(work: Path, short: bool, say: Say) -> list[Row]:
    from knell.bench.queue import run_queue_bench

    return run_queue_bench(work, short=short, say=say)


def _history(work: Path, short: bool, say: Say) -> list[Row]:
    from knell.bench.history import run_history_bench

    return run_history_bench(work, short=short, say=say)


def _report(work: Path, short: bool, say: Say) -> list[Row]:
    from knell.bench.render import run_render_bench

    return run_render_bench(work, short=short, say=say)


SECTIONS: dict[str, Callable[[Path, bool, Say], list[Row]]] = {
    "bus": _bus,
    "checker": _checker,
    "runner": _runner,
    "wake": _wake,
    "proxy": _proxy,
    "bridge": _bridge,
    "stdio": _stdio,
    "queue": _queue,
    "report": _report,
    "history": _history,
}


def run_bench(
    short: bool = False,
    *,
    reports: Path = Path("reports"),
    sections: list[str] | None = None,
    say: Say = lambda _: None,
) -> Path:
    """Run the benchmarks and write ``<reports>/bench/<timestamp>/``;
    returns that directory. ``sections`` picks some of :data:`SECTIONS`."""
    chosen = list(SECTIONS) if sections is None else sections
    unknown = [s for s in chosen if s not in SECTIONS]
    if unknown:
        raise ValueError(f"unknown bench section(s) {unknown}; known: {', '.join(SECTIONS)}")
    now = datetime.now(timezone.utc)
    out = new_dir(reports / "bench", now=now)
    started = time.perf_counter()
    rows: list[Row] = []
    errors: dict[str, str] = {}
    seconds: dict[str, float] = {}
    work = Path(tempfile.mkdtemp(prefix="knell-bench-"))
    try:
        for name in chosen:
            say(f"{name}: running")
            t0 = time.perf_counter()
            try:
                rows += SECTIONS[name](work / name, short, say)
            except Exception as exc:  # a crashed section is reported, the rest still run
                errors[name] = f"{type(exc).__name__}: {exc}"
                say(f"{name}: failed: {errors[name]}")
                say(traceback.format_exc())
            seconds[name] = time.perf_counter() - t0
    finally:
        shutil.rmtree(work, ignore_errors=True)
    data: dict[str, Any] = {
        "started": now.isoformat(timespec="seconds"),
        "short": short,
        "seconds": time.perf_counter() - started,
        "section_seconds": seconds,
        "host": host_info(),
        "rows": [row.to_json() for row in rows],
        "goals": {
            "met": sum(1 for r in rows if r.met is True),
            "missed": [f"{r.section}: {r.name}" for r in rows if r.met is False],
        },
        "errors": errors,
    }
    write_bench(out, data)
    point_latest(out)
    return out
