"""ack-beyond-head: an ack can only acknowledge what exists.

``ack(handle, channel, up_to)`` with ``up_to`` above the channel's head
must be refused (``AckBeyondHead``, history ``fail``). A bus that accepts
it moves the cursor into the future: the next messages posted at those
seqs are then "already handled" for that handle and are skipped, silently
lost with no crash anywhere to blame.

The history bounds the head without trusting the bus: seqs are dense, so
the head of a channel can never exceed the number of ``post`` invokes on it
that were invoked before a given moment (every landed append was invoked
first, and indeterminate or retried posts only make the bound looser). An
``ack`` that completed ``ok`` with ``up_to`` (or resulting ``cursor``)
above that count, taken at the ack's completion, was accepted beyond head.

Refused acks are the expected behaviour and are counted (``refused``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.checker.base import Check, CheckResult, witness
from knell.checker.consumer import on, on_op
from knell.history import Event

__all__ = ["AckHeadCheck"]


class AckHeadCheck(Check):
    name: ClassVar[str] = "ack-beyond-head"
    anomaly_kinds: ClassVar[tuple[str, ...]] = ("ack-beyond-head",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._posts: dict[Any, int] = {}
        self._accepted = 0
        self._refused = 0
        self._indeterminate = 0

    @on("post", "invoke")
    def _post_invoke(self, event: Event) -> None:
        channel = event.get("channel")
        self._posts[channel] = self._posts.get(channel, 0) + 1

    @on_op("ack")
    def _ack_done(self, inv: Event | None, event: Event) -> None:
        type_ = event["type"]
        if type_ == "fail":
            self._refused += 1
            return
        if type_ != "ok":
            self._indeterminate += 1
            return
        self._accepted += 1
        up_to = (inv.get("value") or {}).get("up_to") if inv is not None else None
        cursor = (event.get("value") or {}).get("cursor")
        values = [v for v in (up_to, cursor) if isinstance(v, int)]
        if not values:
            return
        u = max(values)
        channel = event.get("channel")
        bound = self._posts.get(channel, 0)
        if u <= bound:
            return
        if self.log.full("ack-beyond-head"):
            self.log.count("ack-beyond-head")
            return
        self.log.add(
            "ack-beyond-head",
            f"ack by {event['process']} (handle {event.get('handle')}, channel {channel}) "
            f"was accepted at {u} although at most {bound} post(s) on the channel had "
            f"been invoked when it completed",
            witness(inv, event),
        )

    def result(self) -> CheckResult:
        return self._result(
            {
                "accepted": self._accepted,
                "refused": self._refused,
                "indeterminate": self._indeterminate,
            },
            {"refused": self._refused},
        )
