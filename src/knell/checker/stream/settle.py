"""When a stream message may be forgotten: once the ring surely dropped it.

A stream (a ring) has no acks, no handles that owe a message, no end state
a message reaches: it is dropped when the ring trims it. So the broadcast
rule (:mod:`knell.checker.settle`: every owing handle acked) never fires
for it, and without another rule the stream checks keep every post for the
whole run: a soak of a stream grows with its length.

The ring says what it dropped: every tail page reports ``first``, the
oldest seq it holds, and ``ring-tail`` (:mod:`knell.checker.stream.pages`)
holds the bus to it: a page asked for after another page completed may
not report a lower ``first`` (``first-regressed``), nor show a seq below
its own ``first`` (``below-first``). So once a page reporting ``first =
F`` completed at ``T``, and every tail invoked before ``T`` has completed
(or its process died: it will never complete), **every later page that
shows a seq below F is ring-tail's finding**, whatever else is wrong with
it. Nothing any other check could still learn from such a seq is needed
for the verdict: a message below F is **settled**.

A settled message is kept :attr:`~knell.checker.settle.Settling.after_s`
more seconds (the retry horizon of the broadcast rule: a retry of its post
lands while it is still known) and then forgotten through the shared
bitmap, by every :class:`~knell.checker.settle.Forgetter` (the stream
checks, and the checks of every contract that keep posts). A post whose
ok comes after its seq settled (a paused producer) is forgotten the horizon
after its ok; a retry answered with a forgotten seq is forgotten again at
once.

What each stream check does with a forgotten message:

* ``ring-tail`` keeps no message; it drops the rises of ``first`` at or
  below a forgotten seq (only the highest ``first`` before a page's invoke
  decides ``first-regressed``, and every page still to come was invoked
  after the one that settled it);
* ``ring-content`` and ``ring-bound`` drop its post (and id); a page that
  shows a forgotten seq again is passed over (ring-tail reports the page).
  A page that shows a forgotten *id* at a new seq is ``phantom`` (it was
  ``wrong-body`` while the post was known: an anomaly either way);
* ``tail-continuity`` (SSE tails through a bridge) is not a forgetter: it
  judges gaps once the whole history is read, and keeps every post of a
  channel an SSE tailer follows.

A seq whose post never completed ok (its outcome unknown) has no id here
and is never forgotten; its id stays in the checks that keep unknown posts.
What it gives up, as the broadcast rule does: a *new* post answered with a
seq forgotten long ago (a store that reuses seqs once the ring dropped
them) is taken for a retry of the original post.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from knell.checker.consumer import Consumer, on, on_op
from knell.checker.inflight import died_in_flight
from knell.checker.settle import Settling
from knell.checker.stream.book import TAIL_F
from knell.history import Event

__all__ = ["StreamSettling"]

_NS = 1_000_000_000


class _Ring:
    """One stream channel, as far as settling goes."""

    __slots__ = ("floors", "ids", "late", "tails", "upto")

    def __init__(self) -> None:
        self.ids: dict[int, Any] = {}
        """seq -> the id its post's ok put there (not yet forgotten)"""
        self.tails: dict[tuple[Any, Any], int] = {}
        """tails in flight: (process, incarnation) -> invoke time"""
        self.floors: deque[tuple[int, int]] = deque()
        """(completion time, first) of each page that raised ``first``, not
        yet settled"""
        self.upto = 0
        """every seq below it settled"""
        self.late: deque[tuple[int, int, Any]] = deque()
        """(due, seq, id): a post whose ok came after its seq settled"""


class StreamSettling(Consumer):
    """Decides when each stream message settled and has every forgetter of
    ``settling`` drop it (module docstring). Fed after the checks, as
    :class:`~knell.checker.settle.Settling` is."""

    name = "stream-settling"

    def __init__(self, settling: Settling) -> None:
        self._settling = settling
        self._after = int(settling.after_s * _NS)
        self._rings: dict[Any, _Ring] = {}
        self._now = 0

    def _seen(self, time: int) -> None:
        if time > self._now:
            self._now = time

    @on("declare_stream", "invoke")
    def _declared(self, event: Event) -> None:
        if event["channel"] not in self._rings:
            self._rings[event["channel"]] = _Ring()

    @on("post", "ok")
    def _post_ok(self, event: Event) -> None:
        ring = self._rings.get(event["channel"])
        if ring is None:
            return
        self._seen(event["time"])
        value = event["value"]
        seq, mid = value.get("seq"), value.get("id")
        if type(seq) is not int:
            return
        if seq >= ring.upto:
            ring.ids.setdefault(seq, mid)
        elif self._settling.forgotten.has(event["channel"], seq):
            self._settling.forget(event["channel"], seq, mid)  # a retry: noted anew
        else:
            ring.late.append((event["time"] + self._after, seq, mid))
        self._expire(event["channel"], ring)

    @on(TAIL_F, "invoke")
    def _tail_invoked(self, event: Event) -> None:
        ring = self._rings.get(event["channel"])
        if ring is not None:
            self._seen(event["time"])
            ring.tails[(event["process"], event.get("incarnation"))] = event["time"]

    @on_op(TAIL_F, "ok", "fail", "info", "lost")
    def _tail_done(self, invoke: Event | None, done: Event | None) -> None:
        event = done or invoke
        if event is None:
            return
        ring = self._rings.get(event["channel"])
        if ring is None:
            return
        ring.tails.pop((event["process"], event.get("incarnation")), None)
        if done is None:
            return
        self._seen(done["time"])
        if done["type"] == "ok":
            first = done["value"]["first"]
            top = ring.floors[-1][1] if ring.floors else ring.upto
            if type(first) is int and first > top:
                ring.floors.append((done["time"], first))
        self._expire(event["channel"], ring)

    @on("kill", "info")
    @on("crash", "info")
    def _died(self, event: Event) -> None:
        """A killed streamer's tail in flight will never show anything."""
        for ring in self._rings.values():
            for key in died_in_flight(event, ring.tails):
                del ring.tails[key]

    def _expire(self, channel: Any, ring: _Ring) -> None:
        now = self._now
        while ring.floors and ring.floors[0][0] + self._after <= now:
            settled_at, first = ring.floors[0]
            if any(t < settled_at for t in ring.tails.values()):
                return  # a tail asked before it may still rightly show a seq below first
            ring.floors.popleft()
            forget = self._settling.forget
            for seq in range(ring.upto, first):
                mid = ring.ids.pop(seq, None)
                if mid is not None:
                    forget(channel, seq, mid)
            ring.upto = max(ring.upto, first)
        while ring.late and ring.late[0][0] <= now:
            _, seq, mid = ring.late.popleft()
            self._settling.forget(channel, seq, mid)

    def live(self) -> int:
        """Stream messages still tracked (not yet forgotten)."""
        return sum(len(ring.ids) for ring in self._rings.values())
