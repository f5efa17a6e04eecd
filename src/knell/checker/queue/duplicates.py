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

A done message forgotten once settled (:mod:`knell.checker.queue.settle`)
is folded into the counts; a ``work`` record of it after that is passed
over (its claim is ``done-terminal``'s finding).
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
        self._folded = [0, 0, 0]  # forgotten: worked, worked by several, extra work

    def forget(self, channel: Any, seq: int, mid: Any, again: bool) -> None:
        seen = self._workers.pop((channel, mid), None)
        if seen is None or again:
            return
        self._folded[0] += 1
        if isinstance(seen, set):
            self._folded[1] += 1
            self._folded[2] += len(seen) - 1

    @on("work", "ok")
    def _work(self, event: Event) -> None:
        forgotten = self.forgotten
        if forgotten is not None and forgotten.has(event["channel"], event["value"].get("seq")):
            return
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
        twice = [s for s in self._workers.values() if isinstance(s, set)]
        worked = len(self._workers) + self._folded[0]
        several = len(twice) + self._folded[1]
        extra = sum(len(s) - 1 for s in twice) + self._folded[2]
        return self._result(
            {"worked": worked, "duplicate-work": several, "late-finishes-refused": self._late},
            {
                "duplicate-work-rate": round(several / worked, 6) if worked else None,
                "extra-work": extra,
            },
        )
