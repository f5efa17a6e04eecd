"""What the plots draw, gathered in the checks' single pass: ``series.json``.

A report draws throughput and latency per operation kind over time,
post-to-wake latency and each handle's cursor lag, with the fault windows
shaded. Rendering must never re-read a million-event history, so the
figures are collected while the checks read it anyway: :class:`RunSeries`
is one more consumer of the single pass (:mod:`knell.checker.consumer`),
and its result is saved beside ``results.json`` so ``knell report`` can
draw a run again from small files.

Memory is bounded by time bins, never by events: every figure is kept per
bin (counts, and latency histograms that answer quantiles within a few
percent: :mod:`knell.report.histogram`). The bin width is not known before
the history ends, so it starts fine (10 ms) and doubles, merging pairs of
bins, whenever the run outgrows :data:`MAX_BINS` bins. The one structure
that grows with the run is a post-time table for post-to-wake latency: one
8-byte slot per message, indexed by its dense per-channel seq.

* throughput: completions per bin by operation and outcome (ok, fail,
  info), and ``handle`` events (messages processed);
* latency: invoke-to-completion quantiles (p50, p95, p99, max) per bin and
  operation, ``arm`` excepted (a wait lasts as long as nobody posts);
* post-to-wake: a ``post`` ring's time minus the ``ok`` time of the post
  it names (the wake check's metric, here over time);
* cursor lag per (handle, channel): the channel's head (the highest seq
  whose post completed) minus the cursor an ack, cursor read or subscribe
  returned, the worst per bin, as observed at each of those operations;
* per process: role, incarnations, outcomes, operations cut short by a
  kill, and the first few distinct error texts;
* the run's phases (begin, ready, heal, stop, drains, crashes);
* every clock setting a clock fault made (:mod:`knell.report.clocks`),
  for the ``clock`` panel.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Any, ClassVar

from knell.checker.consumer import Consumer, on, on_op
from knell.history import Event
from knell.report.clocks import CLOCK_FS, MAX_SETTINGS, setting_of
from knell.report.histogram import LogHistogram
from knell.text import clean

__all__ = ["LATENCY_OPS", "MAX_BINS", "OPS", "QUANTILES", "SERIES_VERSION", "RunSeries"]

SERIES_VERSION = 1
OPS = ("post", "fetch", "ack", "subscribe", "cursor", "head", "arm")
LATENCY_OPS = ("post", "fetch", "ack", "subscribe", "cursor", "head")
QUANTILES = (0.5, 0.95, 0.99, 1.0)
QUANTILE_NAMES = ("p50", "p95", "p99", "max")
MAX_BINS = 200
FIRST_BIN_NS = 10_000_000
MAX_LAG_SERIES = 24
"""(handle, channel) pairs saved with their lag (the most observed first)."""
MAX_ERRORS = 3
"""Distinct error texts kept per process."""
MAX_PHASES = 2_000
MAX_SEQ_JUMP = 1_000_000
"""A seq this far beyond the post-time table is not tracked (a bus that
hands out absurd seqs must not make knell allocate gigabytes)."""
_PHASE_FS = ("begin", "ready", "heal", "stop", "drain", "crash", "give-up")


@dataclass
class _Process:
    role: str | None = None
    incarnations: set[Any] = field(default_factory=set)
    outcomes: dict[str, int] = field(default_factory=dict)
    lost: int = 0
    errors: list[str] = field(default_factory=list)
    first: int | None = None
    last: int | None = None


def _coarsen_counts(values: list[int]) -> list[int]:
    return [
        values[i] + (values[i + 1] if i + 1 < len(values) else 0) for i in range(0, len(values), 2)
    ]


def _coarsen_hists(values: list[LogHistogram | None]) -> list[LogHistogram | None]:
    out: list[LogHistogram | None] = []
    for i in range(0, len(values), 2):
        a = values[i]
        b = values[i + 1] if i + 1 < len(values) else None
        if a is None:
            out.append(b)
        else:
            if b is not None:
                a.merge(b)
            out.append(a)
    return out


def _ms(ns: float | None) -> float | None:
    return None if ns is None else round(ns / 1e6, 3)


class RunSeries(Consumer):
    """Time series for the report's plots, from the single pass."""

    name: ClassVar[str] = "run-series"

    def __init__(self, *, max_bins: int = MAX_BINS, first_bin_ns: int = FIRST_BIN_NS) -> None:
        if max_bins < 2:
            raise ValueError(f"max_bins must be >= 2, got {max_bins}")
        self.max_bins = max_bins
        self.width = first_bin_ns
        self.t0: int | None = None
        self.t1: int | None = None
        self._counts: dict[tuple[str, str], list[int]] = {}
        self._latency: dict[str, list[LogHistogram | None]] = {}
        self._latency_total: dict[str, LogHistogram] = {}
        self._handled: list[int] = []
        self._wakes: list[int] = []
        self._wake_latency: list[LogHistogram | None] = []
        self._wake_total = LogHistogram()
        self._wake_unmatched = 0
        self._post_times: dict[Any, array[int]] = {}
        self._head: dict[Any, int] = {}
        self._lag: dict[tuple[Any, Any], dict[int, int]] = {}
        self._lag_seen: dict[tuple[Any, Any], int] = {}
        self._procs: dict[str, _Process] = {}
        self.phases: list[dict[str, Any]] = []
        self.clock: list[dict[str, Any]] = []

    # -- bins ----------------------------------------------------------------

    def _bin(self, t: int) -> int:
        t0 = self.t0
        if t0 is None:
            self.t0 = t0 = t
        if self.t1 is None or t > self.t1:
            self.t1 = t
        i = (t - t0) // self.width
        if i >= self.max_bins:
            while i >= self.max_bins:
                self._coarsen()
                i = (t - t0) // self.width
        return i if i > 0 else 0

    def _coarsen(self) -> None:
        self.width *= 2
        for key, values in self._counts.items():
            self._counts[key] = _coarsen_counts(values)
        for f, hists in self._latency.items():
            self._latency[f] = _coarsen_hists(hists)
        self._handled = _coarsen_counts(self._handled)
        self._wakes = _coarsen_counts(self._wakes)
        self._wake_latency = _coarsen_hists(self._wake_latency)
        for key, by_bin in self._lag.items():
            merged: dict[int, int] = {}
            for i, lag in by_bin.items():
                j = i // 2
                if lag > merged.get(j, -1):
                    merged[j] = lag
            self._lag[key] = merged

    @staticmethod
    def _count(values: list[int], i: int) -> None:
        if i >= len(values):
            values.extend([0] * (i + 1 - len(values)))
        values[i] += 1

    @staticmethod
    def _hist(values: list[LogHistogram | None], i: int) -> LogHistogram:
        if i >= len(values):
            values.extend([None] * (i + 1 - len(values)))
        hist = values[i]
        if hist is None:
            hist = values[i] = LogHistogram()
        return hist

    def _process(self, name: str) -> _Process:
        proc = self._procs.get(name)
        if proc is None:
            proc = self._procs[name] = _Process()
        return proc

    # -- the pass ------------------------------------------------------------

    @on(_PHASE_FS)
    def _phase(self, event: Event) -> None:
        if event["process"] != "nemesis":
            return
        t = event["time"]
        self._bin(t)
        if len(self.phases) < MAX_PHASES:
            value = event.get("value") or {}
            self.phases.append(
                {
                    "f": event["f"],
                    "type": event["type"],
                    "time": t,
                    "target": clean(value.get("target") or event.get("handle") or "", 200),
                }
            )

    @on(tuple(sorted(CLOCK_FS)), "ok", "info")
    def _clock_set(self, event: Event) -> None:
        setting = setting_of(event)
        if setting is not None and len(self.clock) < MAX_SETTINGS:
            self._bin(setting.time)
            self.clock.append(setting.to_json())

    @on("start")
    def _start(self, event: Event) -> None:
        process = event["process"]
        if process == "nemesis":
            return
        proc = self._process(process)
        role = (event.get("value") or {}).get("role")
        if proc.role is None and isinstance(role, str):
            proc.role = clean(role, 40)
        proc.incarnations.add(event.get("incarnation"))
        t = event["time"]
        self._bin(t)
        if proc.first is None:
            proc.first = t
        proc.last = t

    @on_op(OPS, "ok", "fail", "info", "lost")
    def _op(self, invoke: Event | None, done: Event | None) -> None:
        if done is None:
            if invoke is not None:
                self._process(invoke["process"]).lost += 1
            return
        f = done["f"]
        type_ = done["type"]
        t = done["time"]
        i = self._bin(t)
        counts = self._counts.get((f, type_))
        if counts is None:
            counts = self._counts[(f, type_)] = []
        self._count(counts, i)
        if invoke is not None and f != "arm":
            latency = t - invoke["time"]
            hists = self._latency.get(f)
            if hists is None:
                hists = self._latency[f] = []
                self._latency_total[f] = LogHistogram()
            self._hist(hists, i).add(latency)
            self._latency_total[f].add(latency)
        proc = self._process(done["process"])
        proc.outcomes[type_] = proc.outcomes.get(type_, 0) + 1
        if proc.first is None:
            proc.first = t
        proc.last = t
        if type_ != "ok":
            if len(proc.errors) < MAX_ERRORS:
                error = clean((done.get("value") or {}).get("error", ""), 300)
                if error and error not in proc.errors:
                    proc.errors.append(error)
            return
        if f == "post":
            self._posted(done, t)
        elif f in ("ack", "cursor", "subscribe"):
            self._observed_cursor(done, i)

    def _posted(self, event: Event, t: int) -> None:
        channel = event.get("channel")
        seq = (event.get("value") or {}).get("seq")
        if type(seq) is not int or seq < 1:
            return
        if seq > self._head.get(channel, 0):
            self._head[channel] = seq
        times = self._post_times.get(channel)
        if times is None:
            times = self._post_times[channel] = array("q")
        if seq >= len(times):
            if seq - len(times) > MAX_SEQ_JUMP:
                return
            times.extend([0] * (seq + 1 - len(times)))
        if not times[seq]:
            times[seq] = t

    def _observed_cursor(self, event: Event, i: int) -> None:
        cursor = (event.get("value") or {}).get("cursor")
        if type(cursor) is not int:
            return
        channel = event.get("channel")
        key = (event.get("handle"), channel)
        lag = self._head.get(channel, 0) - cursor
        if lag < 0:
            lag = 0
        by_bin = self._lag.get(key)
        if by_bin is None:
            by_bin = self._lag[key] = {}
        if lag > by_bin.get(i, -1):
            by_bin[i] = lag
        self._lag_seen[key] = self._lag_seen.get(key, 0) + 1

    @on("handle", "ok")
    def _handle(self, event: Event) -> None:
        self._count(self._handled, self._bin(event["time"]))

    @on("wake", "ok")
    def _wake(self, event: Event) -> None:
        t = event["time"]
        i = self._bin(t)
        self._count(self._wakes, i)
        value = event.get("value") or {}
        if value.get("reason") != "post":
            return
        seq = value.get("seq")
        times = self._post_times.get(event.get("channel"))
        posted = (
            times[seq] if times is not None and type(seq) is int and 0 < seq < len(times) else 0
        )
        if not posted:
            self._wake_unmatched += 1
            return
        latency = max(0, t - posted)
        self._hist(self._wake_latency, i).add(latency)
        self._wake_total.add(latency)

    # -- the result ----------------------------------------------------------

    def _padded(self, values: list[int], bins: int) -> list[int]:
        return values + [0] * (bins - len(values))

    def _quantiles(self, hists: list[LogHistogram | None], bins: int) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {name: [] for name in (*QUANTILE_NAMES, "count")}
        for i in range(bins):
            hist = hists[i] if i < len(hists) else None
            qs = hist.quantiles(QUANTILES) if hist is not None else [None] * len(QUANTILES)
            for name, q in zip(QUANTILE_NAMES, qs, strict=True):
                out[name].append(_ms(q))
            out["count"].append(hist.count if hist is not None else 0)
        return out

    @staticmethod
    def _summary(hist: LogHistogram) -> dict[str, Any]:
        qs = hist.quantiles(QUANTILES)
        return {
            "count": hist.count,
            **{name: _ms(q) for name, q in zip(QUANTILE_NAMES, qs, strict=True)},
        }

    def to_json(self) -> dict[str, Any]:
        """``series.json``: every figure per bin; times in seconds from ``t0``."""
        bins = 0 if self.t0 is None or self.t1 is None else (self.t1 - self.t0) // self.width + 1
        ops: dict[str, dict[str, list[int]]] = {}
        for (f, type_), values in sorted(self._counts.items()):
            ops.setdefault(f, {})[type_] = self._padded(values, bins)
        ranked = sorted(self._lag_seen, key=lambda k: (-self._lag_seen[k], str(k)))
        lag = []
        for key in ranked[:MAX_LAG_SERIES]:
            by_bin = self._lag[key]
            lag.append(
                {
                    "handle": clean(key[0], 200),
                    "channel": clean(key[1], 200),
                    "observations": self._lag_seen[key],
                    "max": max(by_bin.values()),
                    "points": [[i, by_bin[i]] for i in sorted(by_bin)],
                }
            )
        processes = []
        for name in sorted(self._procs):
            proc = self._procs[name]
            processes.append(
                {
                    "name": clean(name, 200),
                    "role": proc.role,
                    "incarnations": len(proc.incarnations),
                    "outcomes": dict(proc.outcomes),
                    "lost": proc.lost,
                    "errors": list(proc.errors),
                    "first": proc.first,
                    "last": proc.last,
                }
            )
        return {
            "version": SERIES_VERSION,
            "t0": self.t0,
            "t1": self.t1,
            "bin_s": self.width / 1e9,
            "bins": bins,
            "ops": ops,
            "handled": self._padded(self._handled, bins),
            "wakes": self._padded(self._wakes, bins),
            "latency": {f: self._quantiles(self._latency[f], bins) for f in sorted(self._latency)},
            "latency_total": {
                f: self._summary(self._latency_total[f]) for f in sorted(self._latency_total)
            },
            "wake_latency": self._quantiles(self._wake_latency, bins),
            "wake_latency_total": self._summary(self._wake_total),
            "wake_unmatched": self._wake_unmatched,
            "lag": lag,
            "lag_handles": len(self._lag),
            "processes": processes,
            "phases": self.phases,
            "clock": self.clock,
        }
