"""What a soak costs while it goes: the checker's memory and the run's disk, sampled.

A soak is worth running for hours only if its cost stays flat: the online
check's memory must not grow with the history it has read, and the run
directory must grow by a bounded number of bytes per hour. Both are
measured, not assumed: :class:`SoakTelemetry` samples, every
:data:`SAMPLE_EVERY` seconds of a ``knell soak`` (or ``knell run
--online``), the resident memory (RSS) of the process that runs the online
check (knell's own: the check is a thread beside the runner), the bytes
the run directory holds, the events checked so far and how far the check
is behind the run. :func:`summarize` turns the series into the verdict on
the cost, kept in ``soak.json`` and said in one line at the end.

**Warm-up.** RSS rises at first for reasons that are not growth: modules
imported on first use (the checks, the report), the allocator's arenas
filling, and the checks' live state reaching its steady size (messages in
flight between producers and every handle: a rate times a delivery
latency, reached within seconds). So memory is judged only after the
warm-up: the first :data:`WARM_UP_SHARE` of the samples' span, at least
:data:`WARM_UP_MIN` (a short soak's first faults have fired once), at
least :data:`HORIZONS` times the check's forgetting horizon when it
forgets (:mod:`knell.checker.settle`: a settled message is kept that many
seconds, so the live state fills for one horizon, and the allocator's
arenas reach the size that state turns over in within a few more: a
quickstart soak's RSS rises until about four horizons, 40 s), and at
most :data:`WARM_UP_MAX` (what warm-up waits for does not grow with the
soak's length, so a day-long soak is judged over almost all of its day).
Memory is *flat* when its largest sample after warm-up is within
:data:`RSS_FLAT` of its smallest. Only the samples taken while the
scenario ran are judged: the final phase (heal, stop, drain every handle
to the head, finish the pass) happens once per soak whatever its length,
so its peak is a fixed cost, reported apart (``rss_final``), not growth.

**Disk.** The bytes of the run directory are counted as the file system
allocates them (``st_blocks``), and split: ``store/`` holds the bus's own
data (the SQLite file, a private server's data directory), which the bus,
not knell, decides to keep; everything else (history parts, logs, control
files) is what knell writes. The rate of knell's bytes over the samples'
span after warm-up (the files every run writes once at its start are not a
rate), extrapolated to an hour, is held against :data:`DISK_BOUND_PER_HOUR`
(``docs/soaks.md`` derives it).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from knell.rundir import atomic_write

__all__ = [
    "DISK_BOUND_PER_HOUR",
    "MAX_SAMPLES",
    "RSS_FLAT",
    "SAMPLE_EVERY",
    "SOAK_FILE",
    "Sample",
    "SoakTelemetry",
    "dir_bytes",
    "summarize",
    "summary_line",
    "warm_up",
]

SOAK_FILE = "soak.json"
SAMPLE_EVERY = 2.0
"""Seconds between samples at first: each is a directory walk."""
MAX_SAMPLES = 2000
"""Samples kept at most: past it, every other one is dropped and the
interval doubles, so the series of a day-long soak stays a few hundred
kilobytes (it lives in the very process whose memory it measures) and
still spans the whole soak."""
WARM_UP_SHARE = 0.2
WARM_UP_MIN = 10.0
HORIZONS = 4.0
"""Forgetting horizons a soak's memory is left to settle for (see above)."""
WARM_UP_MAX = 600.0
RSS_FLAT = 0.20
"""Largest over smallest RSS after warm-up, minus one, that is still flat."""
DISK_BOUND_PER_HOUR = 300 * 10**6
"""Bytes per hour knell may add to a soak's run directory while it goes
(history parts, logs, control; the bus's ``store/`` apart), at the
quickstart's rate (about 1,800 events/s): ``docs/soaks.md`` derives it."""
STORE_DIR = "store"
_MB = 1e6


@dataclass(frozen=True, slots=True)
class Sample:
    """One look at the soak."""

    t: float
    """Seconds since the telemetry started."""
    rss: int
    """Resident bytes of the process that runs the online check."""
    disk: int
    """Bytes the run directory holds (all of it)."""
    store: int
    """Of which the bus's own data (``store/``)."""
    events: int
    """Events the online check has checked."""
    lag: float | None
    """Seconds the check is behind the run (``None``: nothing checked yet)."""


def dir_bytes(path: Path) -> int:
    """Bytes the file system allocates to the files under ``path`` (``du``),
    the logical size where it does not say (Windows); files that vanish
    while it walks (a part removed after the merge) count nothing."""
    total = 0
    stack = [str(path)]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                        elif entry.is_file(follow_symlinks=False):
                            st = entry.stat(follow_symlinks=False)
                            blocks = getattr(st, "st_blocks", None)
                            total += st.st_size if blocks is None else blocks * 512
                    except OSError:
                        continue
        except OSError:
            continue
    return total


def warm_up(span: float, horizon: float | None = None) -> float:
    """Seconds of a soak that lasted ``span`` before its memory is judged;
    ``horizon``: the check's forgetting horizon (``None``: it forgets nothing)."""
    floor = max(WARM_UP_MIN, HORIZONS * horizon) if horizon is not None else WARM_UP_MIN
    return min(max(floor, WARM_UP_SHARE * span), WARM_UP_MAX)


def summarize(
    samples: list[Sample],
    *,
    bound: int = DISK_BOUND_PER_HOUR,
    final: float | None = None,
    horizon: float | None = None,
) -> dict[str, Any]:
    """The cost of a soak from its samples (see the module docstring).
    ``final``: when the final phase began (seconds, as ``Sample.t``); the
    samples after it are left out of the memory verdict. ``rss_flat`` and
    ``disk_kept`` are ``None`` when the samples cannot say (a soak shorter
    than its warm-up, fewer than two samples)."""
    out: dict[str, Any] = {
        "samples": len(samples),
        "seconds": 0.0,
        "warm_up": None,
        "rss_min": None,
        "rss_max": None,
        "rss_growth": None,
        "rss_flat": None,
        "final_phase": final,
        "rss_final": None,
        "disk_bytes": None,
        "store_bytes": None,
        "disk_per_hour": None,
        "disk_bound_per_hour": bound,
        "disk_kept": None,
        "events": samples[-1].events if samples else 0,
        "lag_max": None,
    }
    if not samples:
        return out
    first, last = samples[0], samples[-1]
    span = last.t - first.t
    out["seconds"] = round(span, 3)
    out["disk_bytes"] = last.disk - last.store
    out["store_bytes"] = last.store
    lags = [s.lag for s in samples if s.lag is not None]
    out["lag_max"] = round(max(lags), 3) if lags else None
    settle = warm_up(span, horizon)
    after = [s for s in samples if s.t - first.t >= settle]
    rated = after if len(after) >= 2 else samples
    rate_span = rated[-1].t - rated[0].t
    if rate_span > 0:
        grown = (rated[-1].disk - rated[-1].store) - (rated[0].disk - rated[0].store)
        per_hour = max(grown, 0) / rate_span * 3600
        out["disk_per_hour"] = round(per_hour)
        out["disk_kept"] = per_hour <= bound
    if final is not None:
        ending = [s.rss for s in samples if s.t > final]
        out["rss_final"] = max(ending) if ending else None
        after = [s for s in after if s.t <= final]
    if len(after) >= 2:
        low, high = min(s.rss for s in after), max(s.rss for s in after)
        growth = (high - low) / low if low else 0.0
        out.update(
            warm_up=settle,
            rss_min=low,
            rss_max=high,
            rss_growth=round(growth, 4),
            rss_flat=growth <= RSS_FLAT,
        )
    return out


def summary_line(summary: dict[str, Any]) -> str:
    """The one line a soak ends with."""
    if summary["rss_flat"] is None:
        memory = f"RSS not judged ({summary['seconds']:.0f} s, shorter than its warm-up)"
    else:
        memory = (
            f"RSS after {summary['warm_up']:.0f} s warm-up {summary['rss_min'] / _MB:.0f}-"
            f"{summary['rss_max'] / _MB:.0f} MB (+{summary['rss_growth'] * 100:.1f} %, "
            + ("flat" if summary["rss_flat"] else f"NOT flat: over {RSS_FLAT * 100:.0f} %")
            + ")"
        )
    if summary["disk_kept"] is None:
        disk = "disk not judged"
    else:
        disk = (
            f"disk {summary['disk_per_hour'] / _MB:.1f} MB/h "
            + ("within" if summary["disk_kept"] else "OVER")
            + f" its bound of {summary['disk_bound_per_hour'] / _MB:.0f} MB/h"
        )
    lag = summary["lag_max"]
    checked = f"{summary['events']} events checked" + (
        f", at most {lag:.1f} s behind" if lag is not None else ""
    )
    return f"soak: {memory}; {disk}; {checked}"


class SoakTelemetry:
    """Samples a running soak in a thread (see the module docstring).
    ``progress`` gives the online check's events checked and lag."""

    def __init__(
        self,
        run_dir: Path,
        progress: Callable[[], tuple[int, float | None]],
        *,
        every: float = SAMPLE_EVERY,
        bound: int = DISK_BOUND_PER_HOUR,
        horizon: float | None = None,
    ) -> None:
        self.run_dir = run_dir
        self.progress = progress
        self.every = every
        self.bound = bound
        self.horizon = horizon
        """The check's forgetting horizon (:func:`warm_up`)."""
        self.samples: list[Sample] = []
        import psutil  # on first use: every knell command starts without it

        self._process = psutil.Process()
        self._errors: tuple[type[Exception], ...] = (OSError, psutil.Error)
        self._t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.final: float | None = None
        """When the final phase began (as ``Sample.t``), once it has."""

    def final_phase(self) -> None:
        """The scenario is over: the samples from now on measure the final
        phase, a fixed cost (module docstring), and one is taken now."""
        self.final = round(time.monotonic() - self._t0, 3)
        with contextlib.suppress(*self._errors):
            self.sample()

    def sample(self) -> Sample:
        """Take one sample now and keep it."""
        events, lag = self.progress()
        sample = Sample(
            t=round(time.monotonic() - self._t0, 3),
            rss=self._process.memory_info().rss,
            disk=dir_bytes(self.run_dir),
            store=dir_bytes(self.run_dir / STORE_DIR),
            events=events,
            lag=None if lag is None else round(lag, 3),
        )
        self.samples.append(sample)
        if len(self.samples) > MAX_SAMPLES:
            del self.samples[1::2]  # the first stays: the rates start there
            self.every *= 2
        return sample

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="soak-telemetry", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            with contextlib.suppress(*self._errors):  # one missed sample, never the run's end
                self.sample()
            if self._stop.wait(self.every):
                return

    def stop(self) -> dict[str, Any]:
        """End the sampling (one last sample) and write ``soak.json``;
        returns its summary."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            last = self.sample()  # the run is over: its lag only grows from here
            self.samples[-1] = replace(last, lag=None)
        except self._errors:
            pass
        summary = summarize(self.samples, bound=self.bound, final=self.final, horizon=self.horizon)
        atomic_write(
            self.run_dir / SOAK_FILE,
            json.dumps(
                {
                    "every": self.every,
                    "summary": summary,
                    "samples": [asdict(s) for s in self.samples],
                },
                indent=2,
            )
            + "\n",
        )
        return summary
