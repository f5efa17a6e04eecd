"""head: the head of a channel is never behind what has been posted.

``head(channel)`` names the highest seq in the channel. Readers and the
final drain use it to decide where "everything" ends; a bus that reports a
stale head (a cached value, a replica that lags) makes a reader stop short
and, at the drain, would let knell itself exclude messages above the
reported head from the loss check. So a head read must be at least the seq
of every post on that channel that completed ``ok`` before the read was
invoked, and at least every head read that completed before it
(linearizability of a register that only grows).

Observations: ``head`` operations of the workers (``{"head": n}``) and the
heads the runner read for the final drain (``drain`` ok ``{"heads": {...}}``,
after every producer had stopped). Anomaly: ``stale-head``, witness: the
post (or earlier read) it is behind, and the read.
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.checker.base import Check, CheckResult, witness
from knell.checker.consumer import on, on_op
from knell.history import Event

__all__ = ["HeadCheck"]

# (highest seq known to exist, the event that proves it)
_Known = tuple[int, Event]


class HeadCheck(Check):
    name: ClassVar[str] = "head"
    anomaly_kinds: ClassVar[tuple[str, ...]] = ("stale-head",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._known: dict[Any, _Known] = {}  # channel -> highest completed post / head read
        self._snaps: dict[int, _Known | None] = {}
        self._reads = 0

    def _raise(self, channel: Any, seq: Any, event: Event) -> None:
        if isinstance(seq, int) and not isinstance(seq, bool):
            known = self._known.get(channel)
            if known is None or seq > known[0]:
                self._known[channel] = (seq, event)

    @on("post", "ok")
    def _post_ok(self, event: Event) -> None:
        self._raise(event["channel"], event["value"]["seq"], event)

    @on("head", "invoke")
    def _head_invoke(self, event: Event) -> None:
        self._snaps[id(event)] = self._known.get(event.get("channel"))

    @on_op("head", "fail", "info", "lost")
    def _head_failed(self, invoke: Event | None, done: Event | None) -> None:
        if invoke is not None:
            self._snaps.pop(id(invoke), None)

    @on_op("head", "ok")
    def _head_ok(self, invoke: Event | None, done: Event) -> None:
        snap = self._snaps.pop(id(invoke), None) if invoke is not None else None
        head = (done.get("value") or {}).get("head")
        self._reads += 1
        if snap is not None and isinstance(head, int) and head < snap[0]:
            self._stale(done.get("channel"), head, snap, done, invoke)
        self._raise(done.get("channel"), head, done)

    @on("drain", "ok")
    def _drain_ok(self, event: Event) -> None:
        heads = (event.get("value") or {}).get("heads")
        if not isinstance(heads, dict):
            return
        for channel, head in heads.items():
            self._reads += 1
            known = self._known.get(channel)
            if known is not None and isinstance(head, int) and head < known[0]:
                self._stale(channel, head, known, event, None)

    def _stale(
        self, channel: Any, head: int, known: _Known, read: Event, invoke: Event | None
    ) -> None:
        proof = known[1]
        what = "a post" if proof.get("f") == "post" else "an earlier head read"
        self._report(
            "stale-head",
            None
            if self.log.full("stale-head")
            else f"head of channel {channel} read as {head} by {read['process']}, although "
            f"{what} by {proof['process']} had completed with seq {known[0]} before it",
            witness(proof, invoke, read),
        )

    def result(self) -> CheckResult:
        return self._result({"reads": self._reads, "channels": len(self._known)})
