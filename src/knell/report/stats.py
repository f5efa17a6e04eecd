"""What happened in a run, as opposed to whether it was correct.

Throughput, fault counts, readiness and restart latency are read back from
the merged history in the same single pass as the checks (:class:`RunStats`
is one more pass consumer), so the report states only what was observed: a
figure that could not be measured is ``None`` and the report says so, it
is never estimated.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, ClassVar

from knell.checker.consumer import Consumer, Handler, on
from knell.history import Event
from knell.stats import percentile

__all__ = ["RunStats"]

NS = 1_000_000_000

_FAULT_FS = ("kill", "pause", "resume", "restart", "crash")
_FINAL_WORKERS = ("drain-", "queue-drain-", "role-drain-")
"""The final phase's workers (:mod:`knell.runner`, :mod:`knell.final_phase`):
they start at the end, so they are not part of "all processes ready"."""


@dataclass
class _Figures:
    events: int = 0
    seconds: float | None = None
    posts: dict[str, int] = field(default_factory=dict)
    posts_per_second: float | None = None
    handled: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    processes: int = 0
    incarnations: int = 0
    ready_seconds: float | None = None
    restart_ms: dict[str, float | None] = field(default_factory=dict)
    spawn_ms: dict[str, float | None] = field(default_factory=dict)
    crashes: list[dict[str, Any]] = field(default_factory=list)


def _summary(values: list[float]) -> dict[str, float | None]:
    return {
        "count": float(len(values)),
        "p50": percentile(values, 0.50),
        "p99": percentile(values, 0.99),
        "max": max(values) if values else None,
    }


class RunStats(_Figures, Consumer):
    """Run statistics, gathered as a consumer of the single pass. The
    totals that need every event (count, first and last time) come from
    the pass itself: call :meth:`close` with them."""

    name: ClassVar[str] = "run-stats"

    def __init__(self) -> None:
        _Figures.__init__(self)
        # Every other registered fault kind (network, store, disk, clock...)
        # is counted by its apply, so a run whose faults are all partitions
        # or clock jumps does not report "faults: none".
        from knell.nemesis.registry import events

        others = sorted({k.apply_f for k in events().values()} - set(_FAULT_FS))
        self.handlers = type(self).handlers + tuple(  # type: ignore[misc]  # kinds vary
            Handler("event", f, ("ok", "info"), "_applied") for f in others
        )
        self._posts: Counter[str] = Counter()
        self._faults: Counter[str] = Counter()
        self._begin: int | None = None
        self._first_post: int | None = None
        self._last_post: int | None = None
        self._first_starts: dict[str, int] = {}
        self._incarnations: set[tuple[str, int]] = set()
        self._killed_at: dict[str, int] = {}
        self._restarted_at: dict[str, int] = {}
        self._restart: list[float] = []
        self._spawn: list[float] = []

    @on("begin")
    def _begin_event(self, event: Event) -> None:
        if event.get("process") == "nemesis":
            self._begin = event["time"]

    @on("kill")
    @on("pause")
    @on("resume")
    @on("restart")
    @on("crash")
    def _fault(self, event: Event) -> None:
        if event.get("process") != "nemesis" or event.get("type") in ("invoke", "fail"):
            return
        f = str(event.get("f"))
        t = event["time"]
        self._faults[f] += 1
        target = str(event.get("value", {}).get("target"))
        if f in ("kill", "crash"):
            self._killed_at[target] = t
        if f == "crash":
            value = event.get("value") or {}
            self.crashes.append(
                {"process": target, "exit": value.get("exit"), "error": value.get("error")}
            )
        elif f == "restart":
            self._restarted_at[target] = t

    def _applied(self, event: Event) -> None:
        """A fault kind's apply, as it completed (its window's opening
        record carries the fault's ``effect``; a kind's later notes do not)."""
        value = event.get("value") or {}
        if event.get("process") == "nemesis" and "effect" in value:
            self._faults[str(event.get("f"))] += 1

    @on("post")
    def _post(self, event: Event) -> None:
        if event.get("process") == "nemesis":
            return
        type_ = event["type"]
        self._posts[type_] += 1
        if type_ == "invoke" and self._first_post is None:
            self._first_post = event["time"]
        elif type_ == "ok":
            self._last_post = event["time"]

    @on("handle")
    def _handle(self, event: Event) -> None:
        if event.get("process") != "nemesis":
            self.handled += 1

    @on("start")
    def _start(self, event: Event) -> None:
        process = event.get("process", "")
        if process == "nemesis":
            return
        t = event["time"]
        self._incarnations.add((process, event.get("incarnation", 0)))
        if event.get("incarnation") == 1:
            self._first_starts.setdefault(process, t)
        if process in self._killed_at:
            self._restart.append((t - self._killed_at.pop(process)) / 1e6)
        if process in self._restarted_at:
            self._spawn.append((t - self._restarted_at.pop(process)) / 1e6)

    def close(self, events: int, first: int | None, last: int | None) -> RunStats:
        """Settle the figures; ``events``, ``first`` and ``last`` (times in
        ns) come from the pass. Returns self."""
        self.events = events
        if first is not None and last is not None:
            self.seconds = (last - first) / NS
        self.posts = dict(self._posts)
        if (
            self._first_post is not None
            and self._last_post is not None
            and self._last_post > self._first_post
        ):
            self.posts_per_second = self._posts["ok"] / ((self._last_post - self._first_post) / NS)
        self.faults = dict(self._faults)
        self.processes = len({p for p, _ in self._incarnations})
        self.incarnations = len(self._incarnations)
        workers = [t for p, t in self._first_starts.items() if not p.startswith(_FINAL_WORKERS)]
        if self._begin is not None and workers:
            self.ready_seconds = (max(workers) - self._begin) / NS
        self.restart_ms = _summary(self._restart)
        self.spawn_ms = _summary(self._spawn)
        return self

    def to_json(self) -> dict[str, Any]:
        return {
            "events": self.events,
            "seconds": self.seconds,
            "posts": self.posts,
            "posts_per_second": self.posts_per_second,
            "handled": self.handled,
            "faults": self.faults,
            "processes": self.processes,
            "incarnations": self.incarnations,
            "ready_seconds": self.ready_seconds,
            "restart_ms": self.restart_ms,
            "spawn_ms": self.spawn_ms,
            "crashes": self.crashes,
        }
