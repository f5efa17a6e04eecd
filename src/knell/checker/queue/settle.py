"""Settling on a queue: when a done message may be forgotten, so a queue soak checks at a flat cost.

The broadcast rule (:mod:`knell.checker.settle`) does not fit a queue: no
handle owes a queue message, a claimer does. A queue message's story ends
with a ``done`` that completed ok: from then on it must never be claimed
again (``done-terminal``) and it is not lost (``queue-no-loss``). What the
seven queue checks keep of it after that (its leases, claims, post, state)
answers only questions about operations still to come on it, and after
the horizon below every such operation is already a violation that needs
nothing kept to be named. A queue message is **settled** when

* a ``done`` of it completed ok, or a dead-letter listing showed it dead
  (its **end**; a message done with an unknown outcome is never settled:
  the final phase judges it);
* no ``renew``, ``done`` or ``release`` of it is in flight, and every one
  completed at least ``lease + sweep`` ago (the longest lease granted on
  its channel, and the channel's declared sweep interval): every lease the
  message ever had has surely lapsed, whichever holder took it;
* no claim on its channel that was invoked before its end is still in
  flight (such a claim may rightly still return it: it raced the done or
  the death); a claim in a process the nemesis killed is not in flight;
* the store's clock has never been moved by a clock fault: a lease is
  measured on the store's clock, and a store clock stepped back may
  revive one for as long as the step (:mod:`knell.checker.clocks`), so
  such a run keeps its queue messages whole.

It is then kept ``forget_after`` more seconds (the broadcast horizon: every
retry the workload makes of its post lands meanwhile) and **forgotten**:
its seq is marked in the same per-channel bitmap as a broadcast message
(a dead one in a second bitmap too, :attr:`QueueSettling.dead`), and every
forgetter drops it. What a later sighting means, by check:

* a claim that returns it was invoked after its end (every claim invoked
  before had completed when it was forgotten): ``done-terminal`` reports
  ``claimed-after-done`` for a done one, ``dead-letter``
  ``claimed-after-dead`` for a dead one, with that claim as the witness;
  the other queue checks pass it over (no lease is booked);
* a ``renew``, ``done`` or ``release`` of it accepted ok was invoked after
  every lease of it surely lapsed: ``lease-holder`` reports
  ``stale-holder-accepted``; refused, it is right and passed over. Those
  operations name the seq (``value.seq``) so the bitmap recognises them;
* a dead-letter listing or a ``work`` record naming it is passed over
  (the message is done: it is neither lost nor dead);
* a post ok answered with its seq (a retry) makes the checks drop what
  they noted of it again.

What is tallied instead of kept: ``queue-no-loss`` counts it done (or
dead), ``dead-letter`` and ``duplicate-work`` add it to their counts, so a
run's figures are the same with or without forgetting.
"""

from __future__ import annotations

import heapq
from typing import Any

from knell.checker.clocks import STORE
from knell.checker.consumer import Consumer, on, on_op
from knell.checker.inflight import died_in_flight
from knell.checker.queue.book import NS, ns
from knell.checker.settle import Forgotten, Settling
from knell.checker.windows import FaultWindows
from knell.history import Event

__all__ = ["QueueSettling"]

_RETRY_NS = NS
"""How soon a message whose settling was put off is looked at again."""


class _Msg:
    """A claimed queue message not yet forgotten."""

    __slots__ = ("dead", "done_at", "inflight", "seq", "touch")

    def __init__(self, seq: int) -> None:
        self.seq = seq
        self.done_at: int | None = None
        """its end: when its done completed ok, or a listing showed it dead"""
        self.dead = False
        self.inflight = 0
        self.touch = 0
        """the latest claim, renew, done or release of it, invoked or completed"""


class _Channel:
    __slots__ = ("claims", "lease_ns", "msgs", "sweep_ns")

    def __init__(self) -> None:
        self.msgs: dict[Any, _Msg] = {}
        self.claims: dict[tuple[Any, Any], int] = {}
        """claims in flight: (process, incarnation) -> invoke time"""
        self.lease_ns = 0
        self.sweep_ns = 0


class QueueSettling(Consumer):
    """Decides when each done queue message settled and has every
    forgetter of ``settling`` drop it (module docstring). Fed after the
    checks, as :class:`~knell.checker.settle.Settling` is."""

    name = "queue-settling"

    def __init__(self, settling: Settling, windows: FaultWindows) -> None:
        self._settling = settling
        self._windows = windows
        self._after = int(settling.after_s * NS)
        self._channels: dict[Any, _Channel] = {}
        self._due: list[tuple[int, int, Any, Any]] = []  # (time, tie, channel, id)
        self._tie = 0
        self._now = 0
        self.dead = Forgotten()
        """The forgotten messages that ended dead (each is in the shared
        bitmap as well): a claim of one is ``claimed-after-dead``."""

    def _channel(self, channel: Any) -> _Channel:
        found = self._channels.get(channel)
        if found is None:
            found = self._channels[channel] = _Channel()
        return found

    def _msg(self, event: Event) -> _Msg | None:
        ch = self._channels.get(event["channel"])
        return None if ch is None else ch.msgs.get(event["value"]["id"])

    def _seen(self, time: int) -> None:
        if time > self._now:
            self._now = time

    # -- what happened ------------------------------------------------------

    @on_op("declare", "ok")
    def _declared(self, invoke: Event | None, done: Event) -> None:
        ch = self._channel(done["channel"])
        ch.sweep_ns = max(ch.sweep_ns, ns(done["value"].get("sweep_interval", 0) or 0))

    @on("claim", "invoke")
    def _claim_invoked(self, event: Event) -> None:
        self._seen(event["time"])
        ch = self._channel(event["channel"])
        ch.claims[(event["process"], event.get("incarnation"))] = event["time"]
        ch.lease_ns = max(ch.lease_ns, ns(event["value"]["lease_s"]))

    @on_op("claim", "ok", "info", "fail", "lost")
    def _claim_done(self, invoke: Event | None, done: Event | None) -> None:
        event = done or invoke
        if event is None:
            return
        ch = self._channel(event["channel"])
        ch.claims.pop((event["process"], event.get("incarnation")), None)
        if done is None or done["type"] != "ok":
            return
        self._seen(done["time"])
        self._expire()
        value = done["value"]
        mid, seq = value.get("id"), value.get("seq")
        if mid is None or type(seq) is not int:
            return
        if self._settling.forgotten.has(done["channel"], seq):
            return  # a claim of a done message: done-terminal's finding
        msg = ch.msgs.get(mid)
        if msg is None:
            msg = ch.msgs[mid] = _Msg(seq)
        msg.touch = max(msg.touch, done["time"])

    @on("kill", "info")
    @on("crash", "info")
    def _died(self, event: Event) -> None:
        """A SIGKILLed process writes nothing more: its claim in flight will
        never return a message."""
        for ch in self._channels.values():
            for key in died_in_flight(event, ch.claims):
                del ch.claims[key]

    @on(("renew", "done", "release"), "invoke")
    def _verb_invoked(self, event: Event) -> None:
        self._seen(event["time"])
        msg = self._msg(event)
        if msg is not None:
            msg.inflight += 1
            msg.touch = max(msg.touch, event["time"])

    @on_op(("renew", "done", "release"), "ok", "info", "fail", "lost")
    def _verb_done(self, invoke: Event | None, done: Event | None) -> None:
        if invoke is None:
            return  # its invoke was never counted
        msg = self._msg(invoke)
        if msg is None:
            return
        if msg.inflight > 0:
            msg.inflight -= 1
        at = self._now if done is None else done["time"]
        self._seen(at)
        msg.touch = max(msg.touch, at)
        if done is not None and done["f"] == "done" and done["type"] == "ok":
            if msg.done_at is None:
                msg.done_at = done["time"]
                self._schedule(done["channel"], invoke["value"]["id"], msg)
            self._expire()

    @on_op("dead", "ok")
    def _listed(self, invoke: Event | None, done: Event) -> None:
        self._seen(done["time"])
        ch = self._channels.get(done["channel"])
        if ch is None:
            return
        for entry in done["value"]["messages"]:
            msg = ch.msgs.get(entry["id"])
            if msg is not None and msg.done_at is None:
                msg.done_at, msg.dead = done["time"], True
                self._schedule(done["channel"], entry["id"], msg)
        self._expire()

    @on("post", "ok")
    def _post_ok(self, event: Event) -> None:
        """A retry of a forgotten message's post, answered with its seq:
        the checks noted it anew, so they drop it again."""
        ch = self._channels.get(event["channel"])
        seq = event["value"].get("seq")
        if ch is not None and self._settling.forgotten.has(event["channel"], seq):
            self._settling.forget(event["channel"], seq, event["value"]["id"])

    # -- settling -----------------------------------------------------------

    def _schedule(self, channel: Any, mid: Any, msg: _Msg) -> None:
        ch = self._channels[channel]
        assert msg.done_at is not None
        at = max(msg.done_at, msg.touch) + ch.lease_ns + ch.sweep_ns + self._after
        self._tie += 1
        heapq.heappush(self._due, (at, self._tie, channel, mid))

    def _expire(self) -> None:
        due, now = self._due, self._now
        while due and due[0][0] <= now:
            _, _, channel, mid = heapq.heappop(due)
            ch = self._channels[channel]
            msg = ch.msgs.get(mid)
            if msg is None or msg.done_at is None:
                continue
            if self._windows.clocks.clock(STORE) is not None:
                continue  # a store clock moved: kept whole (module docstring)
            ready = max(msg.done_at, msg.touch) + ch.lease_ns + ch.sweep_ns + self._after
            racing = any(t < msg.done_at for t in ch.claims.values())
            if msg.inflight > 0 or racing or ready > now:
                self._tie += 1
                heapq.heappush(due, (max(ready, now + _RETRY_NS), self._tie, channel, mid))
                continue
            del ch.msgs[mid]
            if msg.dead:
                self.dead.mark(channel, msg.seq)
            self._settling.forget(channel, msg.seq, mid)

    def live(self) -> int:
        """Claimed queue messages still tracked (not yet forgotten)."""
        return sum(len(ch.msgs) for ch in self._channels.values())
