"""The driver: one pass over a history, every check at once, one verdict.

``check_events`` reads each event exactly once and hands it only to the
checks that declared its ``f`` and ``type`` (two dict lookups per event,
so a check never pays for events it ignores; unknown ``f`` values such as
a worker's ``start``/``stop`` reach nobody). The per-check results merge into a
:class:`Verdict` by Jepsen's priority: ``False`` beats ``"unknown"`` beats
``True``.

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
from knell.history import Event, read_history

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
    instances = [factory(config) for factory in (CHECKS if checks is None else checks)]
    names = [c.name for c in instances]
    if len(set(names)) != len(names):
        raise ValueError(f"check names must be unique, got {names}")
    dispatch = _dispatch_table(instances)
    get = dispatch.get
    malformed: dict[str, _Malformed] = {}
    count = 0
    # The pass allocates millions of small tuples that can never form
    # reference cycles; with every event alive, each full collection would
    # walk the whole history for nothing. Collect once, afterwards.
    collecting = gc.isenabled()
    gc.disable()
    try:
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
        results = {c.name: _result(c, malformed) for c in instances}
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


_UNREADABLE = (LookupError, TypeError, AttributeError, ValueError)
"""What a check raises on an event that lacks a field the format promises."""


@dataclass
class _Malformed:
    count: int
    index: Any
    error: str


def _owner(observe: Callable[[Event], None]) -> str:
    return str(getattr(getattr(observe, "__self__", None), "name", observe))


def _note(malformed: dict[str, _Malformed], name: str, event: Event, exc: Exception) -> None:
    seen = malformed.get(name)
    if seen is None:
        where = event.get("index", "?")
        malformed[name] = _Malformed(1, where, f"{type(exc).__name__}: {exc}")
    else:
        seen.count += 1


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
    checks: Sequence[Check],
) -> dict[Any, dict[Any, tuple[Callable[[Event], None], ...]]]:
    """``f -> type -> observers``, in registry order."""
    table: dict[Any, dict[Any, list[Callable[[Event], None]]]] = {}
    for check in checks:
        types: Mapping[str, frozenset[str]] = getattr(check, "types", None) or {}
        for f in check.fs:
            for type_ in types.get(f, EVENT_TYPES):
                table.setdefault(f, {}).setdefault(type_, []).append(check.observe)
    return {
        f: {type_: tuple(observers) for type_, observers in by_type.items()}
        for f, by_type in table.items()
    }


def check_history(path: Path, config: CheckConfig | None = None) -> Verdict:
    """Check a merged ``history.jsonl`` (see :func:`knell.history.read_history`)."""
    return check_events(read_history(Path(path)), config)
