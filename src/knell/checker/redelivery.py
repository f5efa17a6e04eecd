"""redelivery (metric): how often a handle handled the same message again.

Delivery is at-least-once. A consumer that is killed after handling a
message but before its ack lands will see the message again in its next
incarnation, and a handle shared by several processes may race on a page.
That is the contract, not a violation, so this check is always valid; but
the rate is worth watching: a bus (or a workload) whose redelivery rate
climbs is doing far more duplicate work than its fault schedule explains.

Per handle: ids handled, ids handled more than once, extra deliveries
(handle events beyond the first per id) and their rate against distinct
ids.

What it keeps: per handle and channel, each id handled and how often. That
is O(messages x handles) for the whole run, and genuinely so: a redelivery
may come at any time (a consumer killed before its ack lands, or a bus that
forgets an ack), and only the ids already handled can tell it from a first
delivery. Kept as one small dict per (handle, channel), not one tuple key
per delivery, which halves it. In a run that forgets
(:mod:`knell.checker.settle`), a settled message is tallied and dropped
once it is forgotten; a handling of it after that is counted as an extra
delivery (every handle that owed it had handled it).
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.checker.base import Check, CheckResult
from knell.checker.consumer import on
from knell.history import Event

__all__ = ["RedeliveryCheck"]


class RedeliveryCheck(Check):
    name: ClassVar[str] = "redelivery"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        # (handle, channel) -> id -> times handled
        self._seen: dict[tuple[Any, Any], dict[Any, int]] = {}
        # channel -> (handle, its dict above) (forgetting visits only these)
        self._seen_in: dict[Any, list[tuple[Any, dict[Any, int]]]] = {}
        # handle -> [handled, distinct, redelivered, extra] of forgotten messages
        self._tally: dict[Any, list[int]] = {}

    @on("handle", "ok")
    def _handled(self, event: Event) -> None:
        hc = (event["handle"], event["channel"])
        forgotten = self.forgotten
        if forgotten is not None and forgotten.has(hc[1], event["value"]["seq"]):
            tally = self._tally.setdefault(hc[0], [0, 0, 0, 0])
            tally[0] += 1
            tally[3] += 1
            return
        seen = self._seen.get(hc)
        if seen is None:
            seen = self._seen[hc] = {}
            self._seen_in.setdefault(hc[1], []).append((hc[0], seen))
        mid = event["value"]["id"]
        seen[mid] = seen.get(mid, 0) + 1

    def forget(self, channel: Any, seq: int, mid: Any, again: bool) -> None:
        for handle, by_id in self._seen_in.get(channel, ()):
            n = by_id.pop(mid, 0)
            if n:
                tally = self._tally.setdefault(handle, [0, 0, 0, 0])
                tally[0] += n
                tally[1] += not again
                tally[2] += n > 1 and not again
                tally[3] += n - 1 if not again else n

    def result(self) -> CheckResult:
        distinct: dict[Any, int] = {}
        repeated: dict[Any, int] = {}
        extra: dict[Any, int] = {}
        handled = 0
        for handle, (n, d, r, x) in self._tally.items():
            handled += n
            distinct[handle] = distinct.get(handle, 0) + d
            if r:
                repeated[handle] = repeated.get(handle, 0) + r
            if x:
                extra[handle] = extra.get(handle, 0) + x
        for (handle, _channel), by_id in self._seen.items():
            handled += sum(by_id.values())
            distinct[handle] = distinct.get(handle, 0) + len(by_id)
            again = [n for n in by_id.values() if n > 1]
            if again:
                repeated[handle] = repeated.get(handle, 0) + len(again)
                extra[handle] = extra.get(handle, 0) + sum(again) - len(again)
        counts: dict[str, int] = {
            "handled": handled,
            "distinct": sum(distinct.values()),
            "redelivered": sum(repeated.values()),
            "extra-deliveries": sum(extra.values()),
        }
        total_distinct = counts["distinct"]
        metrics: dict[str, float | int | None] = {
            "rate": counts["extra-deliveries"] / total_distinct if total_distinct else 0.0,
        }
        for handle in sorted(distinct, key=str):
            counts[f"redelivered[{handle}]"] = repeated.get(handle, 0)
            counts[f"extra-deliveries[{handle}]"] = extra.get(handle, 0)
            metrics[f"rate[{handle}]"] = extra.get(handle, 0) / distinct[handle]
        return self._result(counts, metrics)
