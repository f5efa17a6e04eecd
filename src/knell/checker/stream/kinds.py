"""stream-kind: a stream operation on another kind, and another kind's
operation on a stream, are refused.

A channel's kind is fixed by its first kind-specific operation and never
changes. Evidence of a kind is an ``ok`` that only a channel of that kind
may give: ``declare_stream`` for a stream; ``subscribe``, ``fetch``,
``ack`` or ``cursor`` for a broadcast channel; ``declare`` or ``claim``
for a queue; ``claim_role`` or ``receive`` for a role inbox. Anomalies:

* ``wrong-kind-accepted``: one channel has ok evidence of a stream and of
  another kind (one of the two should have been refused), or a tail
  returned ok on a channel no ``declare_stream`` could have made a stream
  (a tail never fixes a kind). Witness: both oks, or the tail.
* ``wrong-refusal``: a tail refused as ``wrong-kind`` on a channel whose
  ``declare_stream`` had completed ok before the tail was asked for.

A ``declare_stream`` whose outcome is unknown may have made the channel a
stream, so its channel is never judged a non-stream.
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.checker.base import Check, CheckResult, witness
from knell.checker.consumer import on, on_op
from knell.checker.stream.book import TAIL_F
from knell.history import Event

__all__ = ["StreamKindCheck"]

OTHER_KINDS: dict[str, str] = {
    "subscribe": "broadcast",
    "fetch": "broadcast",
    "ack": "broadcast",
    "cursor": "broadcast",
    "declare": "queue",
    "claim": "queue",
    "claim_role": "role",
}
"""The ok that proves a channel is of another kind than a stream."""


class StreamKindCheck(Check):
    name: ClassVar[str] = "stream-kind"
    anomaly_kinds: ClassVar[tuple[str, ...]] = ("wrong-kind-accepted", "wrong-refusal")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._stream: dict[str, Event] = {}
        """channel -> the first ok proving it a stream (a declare or a tail)."""
        self._declared: dict[str, Event] = {}
        """channel -> the first declare_stream ok."""
        self._maybe: set[str] = set()
        """channels with a declare_stream invoked (it may have made them streams)."""
        self._other: dict[str, Event] = {}
        """channel -> the first ok proving another kind."""
        self._tails: dict[str, Event] = {}
        """channel -> the first tail ok, judged at the end."""
        self._refused = 0
        self._reported: set[str] = set()

    @on("declare_stream", "invoke")
    def _declare_invoke(self, event: Event) -> None:
        self._maybe.add(event["channel"])

    @on("declare_stream", "ok")
    def _declare_ok(self, event: Event) -> None:
        self._declared.setdefault(event["channel"], event)
        self._streamy(event)

    @on(TAIL_F, "ok")
    def _tail_ok(self, event: Event) -> None:
        self._tails.setdefault(event["channel"], event)
        self._streamy(event)

    @on(tuple(OTHER_KINDS), "ok")
    def _other_ok(self, event: Event) -> None:
        if event["process"] == "nemesis" or event.get("channel") is None:
            return
        channel = event["channel"]
        self._other.setdefault(channel, event)
        stream = self._stream.get(channel)
        if stream is not None:
            self._both(channel, stream, event)

    def _streamy(self, event: Event) -> None:
        channel = event["channel"]
        self._stream.setdefault(channel, event)
        other = self._other.get(channel)
        if other is not None:
            self._both(channel, other, event)

    def _both(self, channel: str, one: Event, two: Event) -> None:
        if channel in self._reported:
            return
        self._reported.add(channel)
        self._report(
            "wrong-kind-accepted",
            f"{channel!r} answered both a {one['f']} and a {two['f']}: it cannot be a stream and "
            f"{OTHER_KINDS.get(one['f']) or OTHER_KINDS.get(two['f'])} at once, so one of them "
            "should have been refused",
            witness(one, two),
        )

    @on_op(TAIL_F, "fail")
    def _tail_refused(self, invoke: Event | None, done: Event) -> None:
        if done["value"].get("refused") != "wrong-kind":
            return
        self._refused += 1
        declared = self._declared.get(done["channel"])
        if invoke is not None and declared is not None and declared["time"] < invoke["time"]:
            self._report(
                "wrong-refusal",
                f"a tail of {done['channel']!r} was refused as wrong-kind, though its "
                "declare_stream had completed before the tail was asked for",
                witness(declared, invoke, done),
            )

    def finish(self) -> None:
        for channel, tail in self._tails.items():
            if channel in self._maybe or channel in self._reported:
                continue
            self._reported.add(channel)
            self._report(
                "wrong-kind-accepted",
                f"a tail of {channel!r} was served, but nothing ever declared it a stream "
                "(a tail never fixes a kind)",
                witness(tail),
            )

    def result(self) -> CheckResult:
        return self._result({"streams": len(self._declared), "refused-wrong-kind": self._refused})
