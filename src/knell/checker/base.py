"""What a check is, and what it hands back.

A *check* is one property of the delivery contract, decided from the
recorded history alone: knell never asks the bus whether it behaved, it
replays what every process asked and saw. Checks follow Jepsen's shape:

* one pass over the merged history (events in real-time order), shared by
  every check: a check is a :class:`~knell.checker.consumer.Consumer` that
  declares, with decorators on its methods, the events, completed
  operations and deliveries it wants, and is fed exactly those;
* memory proportional to the number of *messages*, never to the number of
  events: a check keeps per-message or per-cursor state in plain dicts and
  tuples, never the event list, and an event it keeps as a witness in its
  packed form (:mod:`knell.checker.keep`), one copy shared by every check;
* a result of ``valid`` in ``True | False | "unknown"``: ``False`` means an
  anomaly was *proven*, ``"unknown"`` means the history cannot decide (a
  final drain is missing, say), ``True`` means nothing was found.

Results merge by Jepsen's priority: ``False`` beats ``"unknown"`` beats
``True``, because one proven violation settles the matter whatever else is
undecided.

Every anomaly carries a **minimal witness**: the handful of events (with
their ``index``, ``time`` and ``process``) that prove it, so a reader can
find them in ``history.jsonl`` and see the violation with their own eyes.

:class:`Check` supplies the common parts: the configuration, the fault
windows of the run (:mod:`knell.checker.windows`, for checks that excuse
what happens inside a fault), and an anomaly log that counts every
anomaly and stores the first ``config.max_anomalies`` of them, and past
that the first of each kind. A check declares its ``name`` and the
``anomaly_kinds`` it can report, and implements :meth:`Check.result`.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from knell.checker.consumer import Consumer
from knell.checker.keep import Held, Kept
from knell.checker.settle import Forgotten
from knell.checker.windows import FaultWindows
from knell.history import Event

__all__ = [
    "Anomaly",
    "AnomalyLog",
    "Check",
    "CheckConfig",
    "CheckResult",
    "Validity",
    "merge_validity",
    "pick_shown",
    "witness",
]

Validity = bool | Literal["unknown"]
"""``True``, ``False`` or ``"unknown"``: Jepsen's three-valued verdict."""


def merge_validity(values: Iterable[Validity]) -> Validity:
    """Merge verdicts by Jepsen's priority: False > "unknown" > True."""
    merged: Validity = True
    for value in values:
        if value is False:
            return False
        if value == "unknown":
            merged = "unknown"
    return merged


@dataclass(frozen=True)
class CheckConfig:
    """Knobs of the checker.

    ``wake_bound``: seconds within which a waiter must ring after a post by
    someone else (or after arming over unacked backlog). ``op_timeout``:
    seconds within which an operation must complete when no fault touches
    it (a wait gets its own timeout on top). ``max_error_rate``: the share
    of operations of one ``f`` (post, fetch...) that may fail outside fault
    windows. ``max_anomalies``: anomalies stored per check, and past it the
    first of each kind (every anomaly is still counted). ``contracts`` and
    ``roles``: what the scenario tests and which worker roles it runs, when
    known (from
    ``scenario.json``); a check of anything else is kept dormant
    (:mod:`knell.checker.dormant`). ``None``: not known, every check is fed.
    ``forget_after``: seconds of history after which a settled message,
    of any contract, is forgotten (:mod:`knell.checker.settle` and each
    contract's ``settle`` module); ``None`` (the
    default for a bare history): nothing is forgotten.
    """

    wake_bound: float = 1.0
    max_anomalies: int = 50
    op_timeout: float = 5.0
    max_error_rate: float = 0.0
    contracts: tuple[str, ...] | None = None
    roles: tuple[str, ...] | None = None
    forget_after: float | None = None

    def __post_init__(self) -> None:
        for name in ("wake_bound", "op_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{name} must be a number of seconds, got {value!r}")
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name} must be a positive finite number, got {value}")
        rate = self.max_error_rate
        if isinstance(rate, bool) or not isinstance(rate, (int, float)):
            raise TypeError(f"max_error_rate must be a number, got {rate!r}")
        if not 0 <= rate <= 1:
            raise ValueError(f"max_error_rate must be between 0 and 1, got {rate}")
        if isinstance(self.max_anomalies, bool) or not isinstance(self.max_anomalies, int):
            raise TypeError(f"max_anomalies must be an int, got {self.max_anomalies!r}")
        if self.max_anomalies < 0:
            raise ValueError(f"max_anomalies must be >= 0, got {self.max_anomalies}")
        after = self.forget_after
        if after is not None:
            if isinstance(after, bool) or not isinstance(after, (int, float)):
                raise TypeError(f"forget_after must be a number of seconds, got {after!r}")
            if not math.isfinite(after) or after < 0:
                raise ValueError(f"forget_after must be a finite number >= 0, got {after}")

    def to_json(self) -> dict[str, Any]:
        return {
            "wake_bound": self.wake_bound,
            "max_anomalies": self.max_anomalies,
            "op_timeout": self.op_timeout,
            "max_error_rate": self.max_error_rate,
        }


@dataclass(frozen=True)
class Anomaly:
    """One violation: its ``kind``, one human sentence, and the events that
    prove it (the actual history events, in history order)."""

    kind: str
    message: str
    witness: list[Event] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "witness": list(self.witness)}


@dataclass
class CheckResult:
    """What one check concluded."""

    name: str
    valid: Validity
    counts: dict[str, int] = field(default_factory=dict)
    anomalies: list[Anomaly] = field(default_factory=list)
    metrics: dict[str, float | int | None] = field(default_factory=dict)
    unknown_reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "valid": self.valid,
            "counts": dict(self.counts),
            "anomalies": [a.to_json() for a in self.anomalies],
            "metrics": dict(self.metrics),
            "unknown_reason": self.unknown_reason,
        }

    def shown(self, limit: int) -> list[Anomaly]:
        """The stored anomalies a report has room for (:func:`pick_shown`)."""
        return [self.anomalies[i] for i in pick_shown([a.kind for a in self.anomalies], limit)]


def pick_shown(kinds: list[str], limit: int) -> list[int]:
    """Which of a check's stored anomalies (given by their kinds, in stored
    order) a report shows when it has room for ``limit``, in stored order.

    The first of every kind comes first: a bug that floods one kind must
    not crowd another kind's witness out of the report (the log stores it
    for that reason, :class:`AnomalyLog`). The room left goes half to the
    earliest of the rest and half spread evenly to the last of them, so a
    bug that fires all run long is shown early, midway and late."""
    firsts: dict[str, int] = {}
    for index, kind in enumerate(kinds):
        firsts.setdefault(kind, index)
    first = set(firsts.values())
    picked = sorted(first)[:limit]
    rest = [i for i in range(len(kinds)) if i not in first]
    room = limit - len(picked)
    if len(rest) <= room:
        return sorted(picked + rest)
    head = room // 2
    tail = room - head
    last = len(rest) - 1
    if tail == 1:
        spread = [*range(head), last]
    else:
        step = (last - head) / max(1, tail - 1)
        spread = [*range(head), *(round(head + i * step) for i in range(tail))]
    return sorted(picked + [rest[i] for i in set(spread)])


def _order(event: Event) -> tuple[int, int]:
    return (event.get("time", 0), event.get("index", -1))


def witness(*events: Held | None) -> list[Event]:
    """The given events without ``None`` and duplicates, in history order.
    A kept event (:mod:`knell.checker.keep`) is parsed back, and counts as
    a duplicate of an equal event already given (it is a copy of it)."""
    out: list[Event] = []
    copies: list[Event] = []  # the kept events, parsed back
    seen: set[int] = set()
    for event in events:
        if event is None or id(event) in seen:
            continue
        seen.add(id(event))
        if isinstance(event, Kept):
            event = event.event()
            if event in out:
                continue
            copies.append(event)
        elif event in copies:
            continue
        out.append(event)
    out.sort(key=_order)
    return out


class AnomalyLog:
    """Counts every anomaly by kind; stores the first ``cap`` of them and,
    beyond the cap, the first of every kind not stored yet.

    The cap bounds a run that fires all along (a soak keeps the same memory
    whatever it finds). The first of each kind is kept past it because a
    check can find several kinds, and the one found late is often the
    telling one: a bug that floods one kind must not hide a second kind's
    witness. The kinds of a check are few, so this stays bounded."""

    __slots__ = ("cap", "counts", "kinds", "stored")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.counts: dict[str, int] = {}
        self.stored: list[Anomaly] = []
        self.kinds: set[str] = set()
        """The kinds with an anomaly in :attr:`stored`."""

    def add(self, kind: str, message: str, events: list[Event]) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if not self.full(kind):
            self.stored.append(Anomaly(kind, message, events))
            self.kinds.add(kind)

    def full(self, kind: str) -> bool:
        """True when an anomaly of ``kind`` would not be stored, so its
        caller may skip building the message (and :meth:`count` it)."""
        return len(self.stored) >= self.cap and kind in self.kinds

    def count(self, kind: str) -> None:
        """Count an anomaly without storing it (used when :meth:`full`)."""
        self.counts[kind] = self.counts.get(kind, 0) + 1

    @property
    def total(self) -> int:
        return sum(self.counts.values())


class Check(Consumer):
    """Base of every check: see the module docstring."""

    name: ClassVar[str]
    anomaly_kinds: ClassVar[tuple[str, ...]] = ()
    """Anomaly kinds this check can report (always present in ``counts``)."""

    def __init__(self, config: CheckConfig, windows: FaultWindows | None = None) -> None:
        self.config = config
        self.log = AnomalyLog(config.max_anomalies)
        if windows is None:
            windows = FaultWindows()
        self.windows = windows
        self.forgotten: Forgotten | None = None
        """The pass's forgotten messages, when it forgets
        (:mod:`knell.checker.settle`); a check that keeps messages reads it
        to pass over a sighting of one it dropped."""

    @abstractmethod
    def result(self) -> CheckResult: ...

    def _report(self, kind: str, message: str | None, events: list[Event]) -> None:
        """Count an anomaly and store it while the log has room (``message``
        may be None only to count: callers skip building it when full)."""
        if message is None or self.log.full(kind):
            self.log.count(kind)
        else:
            self.log.add(kind, message, events)

    def _result(
        self,
        counts: dict[str, int],
        metrics: dict[str, float | int | None] | None = None,
        *,
        unknown_reason: str | None = None,
    ) -> CheckResult:
        """Build the result: invalid if any anomaly, else unknown if a
        reason is given, else valid. Anomaly counts join ``counts``."""
        all_counts = dict(counts)
        for kind in self.anomaly_kinds:
            all_counts[kind] = self.log.counts.get(kind, 0)
        for kind, n in self.log.counts.items():
            all_counts[kind] = n
        all_counts["anomalies"] = self.log.total
        valid: Validity
        if self.log.total:
            valid = False
        elif unknown_reason is not None:
            valid = "unknown"
        else:
            valid = True
        return CheckResult(
            name=self.name,
            valid=valid,
            counts=all_counts,
            anomalies=list(self.log.stored),
            metrics=dict(metrics or {}),
            unknown_reason=unknown_reason,
        )
