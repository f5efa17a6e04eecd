"""A run checked while it goes: the online check beside the runner.

``knell run --online`` (and ``knell soak``) start an :class:`OnlineRun`
with the workers: a thread follows the run's parts
(:class:`knell.history_feed.HistoryFeed`) and runs the single pass over
them (:func:`knell.checker.online.check_online`). At the first anomaly it
asks the runner to stop (unless ``keep_going``): the runner then leaves
its schedule and goes through its normal final phase (heal, stop, drain,
merge, check), so a stopped run leaves nothing behind and is judged like
any other.

The run's verdict stays the offline check of the merged history, done by
the runner's final phase as for every run: the online pass is how an
anomaly is *seen early*, not a second judge. What it saw is kept in
``online.json`` (events checked, events out of order, every anomaly with
its proving event's time and the time it was reported), and its own
verdict is there to compare with the run's. What the check cost while it
went (its process's memory, the run directory's disk, its lag) is sampled
beside it into ``soak.json`` (:mod:`knell.soak_telemetry`).

The pass frees what it forgets, but on Linux the C allocator keeps freed
pages resident (:func:`knell.platform.trim_heap` says why): each time the
pass has caught up with the run, at most every :data:`TRIM_EVERY`
seconds, the heap is trimmed, so the process's memory follows the
check's live state rather than its history.

An error of the online check itself (a part it cannot read) ends the
online check and is said as knell's problem; it never stops the run or
counts against the bus (the offline check reads the parts again and names
what is wrong with them).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from knell.checker.base import CheckConfig
from knell.checker.online import Found, FoundLog, check_online
from knell.checker.settle import kept_whole
from knell.errors import KnellError
from knell.history_feed import WINDOW, HistoryFeed, follow
from knell.platform import trim_heap
from knell.rundir import atomic_write
from knell.soak_telemetry import SoakTelemetry

__all__ = ["ONLINE_FILE", "TRIM_EVERY", "OnlineRun"]

ONLINE_FILE = "online.json"

TRIM_EVERY = 5.0
"""Least seconds between two heap trims of the online check: a trim walks
every arena (a few milliseconds for a soak's heap), and what it gives back
accrues at the pace of forgetting, a few megabytes a minute at most."""


class HeapTrim:
    """Trim the heap when called, at most every ``every`` seconds; counts
    the trims and the time they took (``online.json``)."""

    def __init__(
        self,
        every: float = TRIM_EVERY,
        *,
        trim: Callable[[], bool] = trim_heap,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.every = every
        self.trims = 0
        self.seconds = 0.0
        self._trim = trim
        self._clock = clock
        self._last = clock()

    def __call__(self) -> None:
        now = self._clock()
        if now - self._last < self.every:
            return
        if self._trim():
            self.trims += 1
        self._last = self._clock()
        self.seconds += self._last - now


class OnlineRun:
    """The online check of one run (see the module docstring)."""

    def __init__(
        self,
        *,
        keep_going: bool = False,
        window: float = WINDOW,
        say: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.keep_going = keep_going
        self.window = window
        self.say = say
        self.halt = threading.Event()
        """Set at the first anomaly (unless ``keep_going``): the runner
        leaves its schedule for the final phase."""
        self.found = FoundLog()
        """Every anomaly counted, a bounded sample kept (:class:`FoundLog`)."""
        self.problem: str | None = None
        self.valid: object = None
        self.checks: dict[str, dict[str, Any]] = {}
        """Check -> its verdict and counts, once the pass is over."""
        self._over = threading.Event()
        self._thread: threading.Thread | None = None
        self._feed: HistoryFeed | None = None
        self._run_dir: Path | None = None
        self._telemetry: SoakTelemetry | None = None
        self._trim = HeapTrim()
        self.soak: dict[str, Any] | None = None
        """The soak's cost (:func:`knell.soak_telemetry.summarize`), once it ended."""
        self.kept_whole: list[str] = []
        """The tested contracts whose checks keep every message to the end
        (:func:`knell.checker.settle.kept_whole`): said when the check starts."""

    def start(self, run_dir: Path, config: CheckConfig) -> None:
        """Follow ``run_dir``'s parts from now on, in a thread."""
        self._run_dir = run_dir
        self.kept_whole = kept_whole(config.contracts, config.forget_after)
        if self.kept_whole:
            self.say(
                f"online: the {' and '.join(self.kept_whole)} checks keep every message "
                "until the run ends (this run forgets nothing: a handle that reads from the "
                "start owes every message ever posted), so the check's memory grows with the "
                "run's length (docs/soaks.md)"
            )
        self._feed = HistoryFeed(run_dir / "history", window=self.window)
        self._thread = threading.Thread(
            target=self._check, args=(self._feed, config), name="online-check", daemon=True
        )
        self._thread.start()
        feed = self._feed
        self._telemetry = SoakTelemetry(
            run_dir, lambda: (feed.released, feed.lag()), horizon=config.forget_after
        )
        self._telemetry.start()

    def _check(self, feed: HistoryFeed, config: CheckConfig) -> None:
        try:
            verdict, _ = check_online(
                follow(feed, lambda: not self._over.is_set(), idle=self._trim),
                config,
                on_anomaly=self._found,
            )
            self.valid = verdict.valid
            self.checks = {
                name: {"valid": result.valid, "counts": dict(result.counts)}
                for name, result in verdict.checks.items()
            }
        except KnellError as exc:
            self.problem = f"online check stopped (the run goes on; its check is offline): {exc}"
            self.say(self.problem)
        except Exception as exc:  # knell's own bug: never the bus's, never the run's end
            self.problem = (
                "online check failed (a bug in knell; the run goes on and is checked offline): "
                f"{type(exc).__name__}: {exc}"
            )
            self.say(self.problem)

    def _found(self, found: Found) -> None:
        self.found.append(found)
        if self.found.count > 1 or found.proved_at is None:
            return
        latency = found.latency
        self.say(
            f"online: {found.check} found {found.kind} at event {found.index}"
            + (f", {latency:.2f} s after the event that proves it" if latency is not None else "")
            + ("" if self.keep_going else "; stopping the run")
        )
        if not self.keep_going:
            self.halt.set()

    def status(self) -> str:
        """Events checked, lag behind the run, anomalies so far, and the
        checker's memory at the last sample (progress)."""
        feed = self._feed
        if feed is None:
            return "online check: not started"
        lag = feed.lag()
        samples = self._telemetry.samples if self._telemetry is not None else []
        return (
            f"online check: {feed.released} events checked, "
            + (f"{lag:.1f} s behind the run" if lag is not None else "nothing yet")
            + f", {self.found.count} anomal{'y' if self.found.count == 1 else 'ies'}"
            + (f", RSS {samples[-1].rss / 1e6:.0f} MB" if samples else "")
        )

    def final_phase(self) -> None:
        """The run left its schedule for the final phase: its memory from
        now on is a fixed cost, not the soak's (:mod:`knell.soak_telemetry`)."""
        if self._telemetry is not None:
            self._telemetry.final_phase()

    def end(self) -> None:
        """The run's processes are gone: finish the pass, write ``online.json``
        and ``soak.json``."""
        self._over.set()
        if self._thread is not None:
            self._thread.join()
        if self._telemetry is not None:
            self.soak = self._telemetry.stop()
        if self._run_dir is not None and self._feed is not None:
            atomic_write(self._run_dir / ONLINE_FILE, json.dumps(self.to_json(), indent=2) + "\n")

    def to_json(self) -> dict[str, Any]:
        feed = self._feed
        return {
            "window": self.window,
            "events": feed.released if feed else 0,
            "late": feed.late if feed else 0,
            "torn": feed.torn_count if feed else 0,
            "valid": self.valid,
            "problem": self.problem,
            "checks": self.checks,
            "heap_trims": {"count": self._trim.trims, "seconds": round(self._trim.seconds, 3)},
            "kept_whole": self.kept_whole,
            "written": time.time_ns(),
            "found": self.found.count,
            "anomalies": [
                {
                    "check": f.check,
                    "kind": f.kind,
                    "index": f.index,
                    "proved_at": f.proved_at,
                    "reported": f.reported_ns,
                    "latency": f.latency,
                    "message": f.anomaly.message if f.anomaly else None,
                }
                for f in self.found
            ],
        }
