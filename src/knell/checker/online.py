"""Online checking: the single pass over a run still going, anomalies as they come.

The pass (:func:`knell.checker.dispatch.run_pass`) only iterates its
events, so an online check is the same pass over a generator that blocks
until the next event is safe to hand on (:func:`knell.history_feed.follow`):
nothing in a check knows whether its history is finished.

What changes is *when* an anomaly is seen. Every check records its
anomalies in its :class:`~knell.checker.base.AnomalyLog` (``add``, or
``count`` once its stored witnesses reach the cap). Most record them in an
event handler, the moment the event that proves them is read (a cursor
that went back, a duplicate seq, a claim held twice); some can only decide
at the end (a loss is a message nobody ever received; liveness is about
the whole run). :class:`OnlineCheck` gives every check a log that also
tells it: each anomaly is surfaced as :class:`Found`, with its witness, the
check, and the time and index of the event being handled when it was
recorded (the event that proved it), or ``None`` for one found at the end.

The verdict is the offline one: the same checks, the same configuration,
the same events in the same order (the feed's order is the merge's; an
event released out of order is counted by the feed, and then the offline
check of the merged file is the word on the run). One input differs: an
offline check preloads the clock changes of the whole history before the
pass (:func:`knell.checker.clocks.scan`); online, they are read in the pass,
as they come, which a run with clock faults may judge differently near a
change.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from knell.checker.base import Anomaly, AnomalyLog, Check, CheckConfig
from knell.checker.consumer import Consumer
from knell.checker.registry import CHECKS
from knell.checker.verdict import CheckFactory, Verdict, check_events
from knell.checker.windows import FaultWindows
from knell.history import Event

__all__ = ["FOUND_KEPT", "Found", "FoundLog", "OnlineCheck", "check_online"]

FOUND_KEPT = 100
"""How many surfaced anomalies a :class:`FoundLog` keeps before it keeps
only the first of each (check, kind)."""


@dataclass(frozen=True)
class Found:
    """One anomaly, surfaced when its check recorded it."""

    check: str
    kind: str
    anomaly: Anomaly | None
    """The anomaly with its witness; ``None`` when the check's log was
    already full (counted, not stored: its message was never built)."""
    proved_at: int | None
    """Time (ns) of the event whose handling recorded it; ``None`` when the
    check decided at the end of the pass."""
    index: int | None
    """That event's index in the (merged) history."""
    reported_ns: int
    """Wall-clock time (ns) at which it was surfaced."""

    @property
    def latency(self) -> float | None:
        """Seconds from the proving event's time to the report."""
        if self.proved_at is None:
            return None
        return (self.reported_ns - self.proved_at) / 1e9


class FoundLog:
    """The anomalies surfaced so far: all counted, the first
    :data:`FOUND_KEPT` kept, and past them the first of each (check, kind).

    A soak that goes on past a bug (``--keep-going``) may surface one
    anomaly per event for a day; keeping each would grow the checker's
    memory and ``online.json`` with it. The rule is the anomaly log's
    (:class:`~knell.checker.base.AnomalyLog`): the first ones, and no kind
    hidden behind another. Iterates and measures (``len``) what it kept;
    :attr:`count` is how many were surfaced."""

    __slots__ = ("_kinds", "count", "kept")

    def __init__(self) -> None:
        self.kept: list[Found] = []
        self.count = 0
        self._kinds: set[tuple[str, str]] = set()

    def append(self, found: Found) -> None:
        self.count += 1
        kind = (found.check, found.kind)
        if len(self.kept) < FOUND_KEPT or kind not in self._kinds:
            self.kept.append(found)
            self._kinds.add(kind)

    def __len__(self) -> int:
        return len(self.kept)

    def __iter__(self) -> Iterator[Found]:
        return iter(self.kept)

    def __getitem__(self, index: int) -> Found:
        return self.kept[index]


class _ReportingLog(AnomalyLog):
    """An anomaly log that also hands each anomaly to the online check."""

    __slots__ = ("name", "online")

    def __init__(self, cap: int, name: str, online: OnlineCheck) -> None:
        super().__init__(cap)
        self.name = name
        self.online = online

    def add(self, kind: str, message: str, events: list[Event]) -> None:
        stored = len(self.stored)
        super().add(kind, message, events)
        self.online.record(self.name, kind, self.stored[-1] if len(self.stored) > stored else None)

    def count(self, kind: str) -> None:
        super().count(kind)
        self.online.record(self.name, kind, None)


class OnlineCheck:
    """Watches one pass: which event it is at, and every anomaly recorded.

    ``on_anomaly`` is called with each :class:`Found` as it is recorded (in
    the pass's thread: keep it short); :attr:`found` counts them all and keeps
    a bounded sample (:class:`FoundLog`)."""

    def __init__(self, on_anomaly: Callable[[Found], None] | None = None) -> None:
        self.on_anomaly = on_anomaly
        self.found = FoundLog()
        self.events = 0
        self.current: Event | None = None

    def watch(self, events: Iterable[Event]) -> Iterator[Event]:
        """``events``, noting each as the one being handled: the pass
        handles an event before it asks for the next one."""
        for event in events:
            self.current = event
            self.events += 1
            yield event
        self.current = None  # what is recorded from here on is decided at the end

    def record(self, check: str, kind: str, anomaly: Anomaly | None) -> None:
        event = self.current
        found = Found(
            check,
            kind,
            anomaly,
            event.get("time") if event is not None else None,
            event.get("index") if event is not None else None,
            time.time_ns(),
        )
        self.found.append(found)
        if self.on_anomaly is not None:
            self.on_anomaly(found)

    def instrument(self, factory: CheckFactory) -> CheckFactory:
        """``factory`` whose checks report through this watcher."""

        def make(config: CheckConfig, windows: FaultWindows) -> Check:
            check = factory(config, windows)
            check.log = _ReportingLog(check.log.cap, check.name, self)
            return check

        return make


def check_online(
    events: Iterable[Event],
    config: CheckConfig | None = None,
    *,
    on_anomaly: Callable[[Found], None] | None = None,
    checks: Sequence[CheckFactory] | None = None,
    extra: Sequence[Consumer] = (),
) -> tuple[Verdict, OnlineCheck]:
    """:func:`~knell.checker.verdict.check_events` over ``events`` as they
    come (a blocking generator is fine), surfacing each anomaly as it is
    recorded. Returns the verdict and the watcher (its :attr:`~OnlineCheck.found`)."""
    online = OnlineCheck(on_anomaly)
    factories = [online.instrument(f) for f in (CHECKS if checks is None else checks)]
    verdict = check_events(
        online.watch(events), config, checks=factories, extra=extra, pause_gc=False
    )
    return verdict, online
