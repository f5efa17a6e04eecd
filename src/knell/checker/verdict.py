"""The driver: one pass over a history, every check at once, one verdict.

``check_events`` reads each event exactly once and hands it only to the
checks that declared its ``f`` and ``type`` (two dict lookups per event,
so a check never pays for events it ignores; unknown ``f`` values such as
a worker's ``start``/``stop`` reach nobody). The per-check results merge into a
:class:`Verdict` by Jepsen's priority: ``False`` beats ``"unknown"`` beats
``True``.

Deliveries are shared: a message is shown to readers again and again (each
handle fetches it, handles it, and a twin or a restarted incarnation does it
once more), but several checks only care about the *first* time a given
``(channel, seq, id)`` appears. The driver keeps one set of the triples it
has seen and calls those checks' ``deliver(channel, seq, id, event)`` once
per new triple, with the first fetch ``ok`` or ``handle`` event that showed
it, instead of every such check looping over every page.

Checks read the fields the history format promises directly (``value``,
``channel``, a message's ``seq`` and ``id``...). An event missing one makes
that check ``"unknown"`` with the event's index and the error as the
reason, rather than crashing the run or passing silently: a check that
could not read part of the history cannot vouch for it.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from knell.checker.base import (
    EVENT_TYPES,
    Check,
    CheckConfig,
    CheckResult,
    Validity,
    merge_validity,
)
from knell.checker.registry import CHECKS
from knell.history import Event, HistoryReader

__all__ = ["Verdict", "check_events", "check_history"]

CheckFactory = Callable[[CheckConfig], Check]


@dataclass
class Verdict:
    """The merged outcome of every check over one history."""

    valid: Validity
    checks: dict[str, CheckResult] = field(default_factory=dict)
    events: int = 0
    seconds: float = 0.0
    config: CheckConfig = field(default_factory=CheckConfig)

    def to_json(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "events": self.events,
            "seconds": self.seconds,
            "config": self.config.to_json(),
            "checks": {name: result.to_json() for name, result in self.checks.items()},
        }


def check_events(
    events: Iterable[Event],
    config: CheckConfig | None = None,
    *,
    checks: Sequence[CheckFactory] | None = None,
) -> Verdict:
    """Run every check (``checks``, default :data:`CHECKS`) over ``events``
    in a single pass and merge the results."""
    if config is None:
        config = CheckConfig()
    elif not isinstance(config, CheckConfig):
        raise TypeError(f"config must be a CheckConfig, got {type(config).__name__}")
    started = time.perf_counter()
    factories = CHECKS if checks is None else checks
    malformed: dict[str, _Malformed] = {}
    # The pass allocates millions of small tuples that can never form
    # reference cycles; with every event alive, each full collection would
    # walk the whole history for nothing. Collect once, afterwards.
    collecting = gc.isenabled()
    gc.disable()
    try:
        count, results = _single_pass(events, config, factories, malformed)
    finally:
        if collecting:
            gc.enable()
    return Verdict(
        valid=merge_validity(r.valid for r in results.values()),
        checks=results,
        events=count,
        seconds=time.perf_counter() - started,
        config=config,
    )


def _single_pass(
    events: Iterable[Event],
    config: CheckConfig,
    factories: Sequence[CheckFactory],
    malformed: dict[str, _Malformed],
) -> tuple[int, dict[str, CheckResult]]:
    """Feed every event to its observers; return the count and the results.

    Its own function so that every check's state dies when it returns,
    while the collector is still off: alive when the collector comes back,
    that state (all of it "young") would be walked once more for nothing."""
    instances = [factory(config) for factory in factories]
    names = [c.name for c in instances]
    if len(set(names)) != len(names):
        raise ValueError(f"check names must be unique, got {names}")
    get = _dispatch_table(instances, malformed).get
    count = 0
    for event in events:
        count += 1
        by_type = get(event.get("f"))
        if by_type is not None:
            observers = by_type.get(event.get("type"))
            if observers is not None:
                for observe in observers:
                    try:
                        observe(event)
                    except _UNREADABLE as exc:
                        _note(malformed, _owner(observe), event, exc)
    return count, {c.name: _result(c, malformed) for c in instances}


_UNREADABLE = (LookupError, TypeError, AttributeError, ValueError)
"""What a check raises on an event that lacks a field the format promises."""


@dataclass
class _Malformed:
    count: int
    index: Any
    error: str
    last: Event  # counted once per event, however many of its parts fail


def _owner(observe: Callable[..., None]) -> str:
    return str(getattr(getattr(observe, "__self__", None), "name", observe))


def _note(malformed: dict[str, _Malformed], name: str, event: Event, exc: Exception) -> None:
    seen = malformed.get(name)
    if seen is None:
        where = event.get("index", "?")
        malformed[name] = _Malformed(1, where, f"{type(exc).__name__}: {exc}", event)
    elif seen.last is not event:
        seen.count += 1
        seen.last = event


Deliver = Callable[[Any, Any, Any, Event], None]


def _deliveries(
    deliverers: Sequence[Deliver], malformed: dict[str, _Malformed]
) -> tuple[Callable[[Event], None], Callable[[Event], None]]:
    """The observers of ``handle`` ok and fetch ``ok`` events (one each, so
    neither re-reads ``f``) that call each check's ``deliver`` once per new
    ``(channel, seq, id)``. An event whose messages cannot be read is
    charged to every delivering check.

    Most sightings are repeats (every message is fetched, then handled, and
    redelivered after a kill), so the common path is one tuple and one set
    lookup per message, with no call at all."""
    seen: set[tuple[Any, Any, Any]] = set()
    add = seen.add

    def show(channel: Any, seq: Any, mid: Any, event: Event) -> None:
        for deliver in deliverers:
            try:
                deliver(channel, seq, mid, event)
            except _UNREADABLE as exc:
                _note(malformed, _owner(deliver), event, exc)

    def unreadable(event: Event, exc: Exception) -> None:
        for deliver in deliverers:
            _note(malformed, _owner(deliver), event, exc)

    def handled(event: Event) -> None:
        try:
            channel = event["channel"]
            value = event["value"]
            triple = (channel, value["seq"], value["id"])
            if triple not in seen:
                add(triple)
                show(channel, triple[1], triple[2], event)
        except _UNREADABLE as exc:
            unreadable(event, exc)

    def fetched(event: Event) -> None:
        try:
            channel = event["channel"]
            for m in event["value"]["messages"]:
                triple = (channel, m["seq"], m["id"])
                if triple not in seen:
                    add(triple)
                    show(channel, triple[1], triple[2], event)
        except _UNREADABLE as exc:
            unreadable(event, exc)

    return handled, fetched


def _result(check: Check, malformed: dict[str, _Malformed]) -> CheckResult:
    """The check's result; a check that could not read some events cannot
    vouch for the history, so it is at best "unknown" (never a crash)."""
    try:
        result = check.result()
    except _UNREADABLE as exc:
        _note(malformed, check.name, {}, exc)
        result = CheckResult(name=check.name, valid="unknown")
    bad = malformed.get(check.name)
    if bad is None:
        return result
    reason = f"{bad.count} event(s) could not be read (first at index {bad.index}: {bad.error})"
    result.counts["malformed-events"] = bad.count
    if result.valid is True:
        result.valid = "unknown"
    result.unknown_reason = (
        f"{result.unknown_reason}; {reason}" if result.unknown_reason else reason
    )
    return result


def _dispatch_table(
    checks: Sequence[Check], malformed: dict[str, _Malformed]
) -> dict[Any, dict[Any, tuple[Callable[[Event], None], ...]]]:
    """``f -> type -> observers``, in registry order (a check's ``handlers``
    method for that ``(f, type)`` where it names one, else its ``observe``);
    the shared delivery observer (if any check delivers) runs first on fetch
    ok and handle ok."""
    table: dict[Any, dict[Any, list[Callable[[Event], None]]]] = {}
    deliverers: list[Deliver] = []
    for check in checks:
        deliver = getattr(check, "deliver", None)
        if callable(deliver):
            deliverers.append(deliver)
        types: Mapping[str, frozenset[str]] = getattr(check, "types", None) or {}
        handlers: Mapping[tuple[str, str], str] = getattr(check, "handlers", None) or {}
        for f in check.fs:
            for type_ in types.get(f, EVENT_TYPES):
                name = handlers.get((f, type_))
                observe = check.observe if name is None else getattr(check, name)
                table.setdefault(f, {}).setdefault(type_, []).append(observe)
    if deliverers:
        handled, fetched = _deliveries(deliverers, malformed)
        table.setdefault("handle", {}).setdefault("ok", []).insert(0, handled)
        table.setdefault("fetch", {}).setdefault("ok", []).insert(0, fetched)
    return {
        f: {type_: tuple(observers) for type_, observers in by_type.items()}
        for f, by_type in table.items()
    }


def check_history(path: Path, config: CheckConfig | None = None) -> Verdict:
    """Check a merged ``history.jsonl`` (see :func:`knell.history.read_history`)."""
    # The reader itself, not read_history's generator around it: one
    # generator frame less per event, a million times.
    return check_events(HistoryReader(Path(path)), config)
