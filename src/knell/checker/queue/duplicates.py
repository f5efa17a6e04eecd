"""duplicate-work (metric): work a lapsed holder did anyway.

At-least-once work claiming cannot prevent every duplicate: a worker whose
lease lapsed while it was still working (it was frozen, or slower than its
lease) finishes the work, and by then another worker has taken the message
and done it too. That is the price of leases, not a violation, so this
check never fails a run: it counts how often it happened, so a bus author
can see what a lease length costs.

Counted from the claimers' ``work`` events (logged when the work on a
message is finished, before its ``done``): messages worked on by more than
one consumer, extra work beyond one per message, and the ``done``, ``renew``
and ``release`` calls refused as ``lease-lost`` (a lapsed holder trying to
finish).
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.checker.base import Check, CheckResult
from knell.checker.consumer import on, on_op
from knell.history import Event

__all__ = ["DuplicateWorkCheck"]


class DuplicateWorkCheck(Check):
    name: ClassVar[str] = "duplicate-work"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._workers: dict[tuple[Any, Any], set[Any] | Any] = {}
        self._late = 0

    @on("work", "ok")
    def _work(self, event: Event) -> None:
        key = (event["channel"], event["value"]["id"])
        consumer = event["value"]["consumer"]
        seen = self._workers.get(key)
        if seen is None:
            self._workers[key] = consumer  # the common case: one worker, no set
        elif isinstance(seen, set):
            seen.add(consumer)
        elif seen != consumer:
            self._workers[key] = {seen, consumer}

    @on_op(("done", "renew", "release"), "fail")
    def _refused(self, invoke: Event | None, done: Event) -> None:
        if done["value"].get("refused") == "lease-lost":
            self._late += 1

    def result(self) -> CheckResult:
        worked = len(self._workers)
        twice = [s for s in self._workers.values() if isinstance(s, set)]
        extra = sum(len(s) - 1 for s in twice)
        return self._result(
            {"worked": worked, "duplicate-work": len(twice), "late-finishes-refused": self._late},
            {
                "duplicate-work-rate": round(len(twice) / worked, 6) if worked else None,
                "extra-work": extra,
            },
        )
