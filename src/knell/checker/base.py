"""What a check is, and what it hands back.

A *check* is one property of the delivery contract, decided from the
recorded history alone: knell never asks the bus whether it behaved, it
replays what every process asked and saw. Checks follow Jepsen's shape:

* one pass over the merged history (events in real-time order), so a
  million-event history is read once, by every check at the same time;
* memory proportional to the number of *messages*, never to the number of
  events: a check keeps per-message or per-cursor state in plain dicts and
  tuples, never the event list;
* a result of ``valid`` in ``True | False | "unknown"``: ``False`` means an
  anomaly was *proven*, ``"unknown"`` means the history cannot decide (a
  final drain is missing, say), ``True`` means nothing was found.

Results merge by Jepsen's priority: ``False`` beats ``"unknown"`` beats
``True``, because one proven violation settles the matter whatever else is
undecided.

Every anomaly carries a **minimal witness**: the handful of events (with
their ``index``, ``time`` and ``process``) that prove it, so a reader can
find them in ``history.jsonl`` and see the violation with their own eyes.

A check is any object with ``name``, ``fs`` (the ``f`` values it wants; the
driver dispatches on ``event["f"]`` so a check never sees irrelevant
events), ``observe(event)`` and ``result()``. It may also declare
``types``: for some of its ``f`` values, the event types it wants (say only
``ok`` for ``fetch``); the others are then never passed to it, and
``handlers``: per ``(f, type)``, a specialised method to call instead of
``observe`` (see :attr:`BaseCheck.handlers`). A check that
only cares about the first time each message is shown to a reader defines
``deliver(channel, seq, id, event)``: the driver calls it once per distinct
``(channel, seq, id)`` seen in fetch ``ok`` pages and ``handle`` events,
with the first event that showed it (repeats are skipped once, for every
such check, by the driver). :class:`BaseCheck` supplies the
common parts: the configuration, an anomaly log capped at
``config.max_anomalies`` stored anomalies (all are counted), and operation
pairing by ``(process, incarnation)``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol

from knell.history import Event

__all__ = [
    "EVENT_TYPES",
    "Anomaly",
    "AnomalyLog",
    "BaseCheck",
    "Check",
    "CheckConfig",
    "CheckResult",
    "Delivering",
    "OpKey",
    "Validity",
    "merge_validity",
    "op_key",
    "witness",
]

Validity = bool | Literal["unknown"]
"""``True``, ``False`` or ``"unknown"``: Jepsen's three-valued verdict."""

EVENT_TYPES: tuple[str, ...] = ("invoke", "ok", "fail", "info")
"""Every event ``type`` (a check that declares no ``types`` sees them all)."""

OpKey = tuple[str, Any]
"""``(process, incarnation)``: within one key operations are sequential."""


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
    someone else (or after arming over unacked backlog). ``max_anomalies``:
    anomalies stored per check (every anomaly is still counted).
    """

    wake_bound: float = 1.0
    max_anomalies: int = 50

    def __post_init__(self) -> None:
        if isinstance(self.wake_bound, bool) or not isinstance(self.wake_bound, (int, float)):
            raise TypeError(f"wake_bound must be a number of seconds, got {self.wake_bound!r}")
        if not math.isfinite(self.wake_bound) or self.wake_bound <= 0:
            raise ValueError(f"wake_bound must be a positive finite number, got {self.wake_bound}")
        if isinstance(self.max_anomalies, bool) or not isinstance(self.max_anomalies, int):
            raise TypeError(f"max_anomalies must be an int, got {self.max_anomalies!r}")
        if self.max_anomalies < 0:
            raise ValueError(f"max_anomalies must be >= 0, got {self.max_anomalies}")

    def to_json(self) -> dict[str, Any]:
        return {"wake_bound": self.wake_bound, "max_anomalies": self.max_anomalies}


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


class Check(Protocol):
    """The protocol the driver calls. ``fs`` lists the ``f`` values the
    check wants to see; every other event is never passed to it. An
    optional ``types`` attribute (``Mapping[str, frozenset[str]]``) narrows
    some ``f`` values to the event types wanted. ``observe`` is called once
    per event in history order; ``result`` once, after the last event."""

    @property
    def name(self) -> str: ...

    @property
    def fs(self) -> frozenset[str]: ...

    def observe(self, event: Event) -> None: ...

    def result(self) -> CheckResult: ...


class Delivering(Protocol):
    """The optional hook of a check that judges each delivered message once."""

    def deliver(self, channel: Any, seq: Any, mid: Any, event: Event) -> None: ...


def _order(event: Event) -> tuple[int, int]:
    return (event.get("time", 0), event.get("index", -1))


def witness(*events: Event | None) -> list[Event]:
    """The given events without ``None`` and duplicates, in history order."""
    out: list[Event] = []
    seen: set[int] = set()
    for event in events:
        if event is None or id(event) in seen:
            continue
        seen.add(id(event))
        out.append(event)
    out.sort(key=_order)
    return out


def op_key(event: Event) -> OpKey:
    """The key that matches an invoke to its completion."""
    return (event["process"], event.get("incarnation"))


class AnomalyLog:
    """Counts every anomaly by kind, stores the first ``cap`` of them."""

    __slots__ = ("cap", "counts", "stored")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.counts: dict[str, int] = {}
        self.stored: list[Anomaly] = []

    def add(self, kind: str, message: str, events: list[Event]) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if len(self.stored) < self.cap:
            self.stored.append(Anomaly(kind, message, events))

    @property
    def full(self) -> bool:
        """True once no more anomalies will be stored (skip building messages)."""
        return len(self.stored) >= self.cap

    def count(self, kind: str) -> None:
        """Count an anomaly without storing it (used when :attr:`full`)."""
        self.counts[kind] = self.counts.get(kind, 0) + 1

    @property
    def total(self) -> int:
        return sum(self.counts.values())


class BaseCheck(ABC):
    """Common parts of the built-in checks."""

    name: ClassVar[str]
    fs: ClassVar[frozenset[str]]
    types: ClassVar[Mapping[str, frozenset[str]]] = {}
    """Per ``f``, the event types wanted (absent: every type)."""
    kinds: ClassVar[tuple[str, ...]] = ()
    """Anomaly kinds this check can report (always present in ``counts``)."""
    handlers: ClassVar[Mapping[tuple[str, str], str]] = {}
    """Per ``(f, type)``, the name of a method the driver calls *instead of*
    ``observe`` for exactly those events. Most events of a history are a few
    hot kinds (``handle`` ok, ``fetch``, ``ack``, ``post``), each seen by
    several checks: a method that already knows what it was given skips
    re-reading ``f`` and ``type`` and the branches on them, which is most of
    the per-event cost. ``observe`` must still accept every event (it
    usually delegates to the same methods), so a check behaves the same
    whichever way it is fed."""

    def __init__(self, config: CheckConfig) -> None:
        self.config = config
        self.log = AnomalyLog(config.max_anomalies)

    @abstractmethod
    def observe(self, event: Event) -> None: ...

    @abstractmethod
    def result(self) -> CheckResult: ...

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
        for kind in self.kinds:
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
