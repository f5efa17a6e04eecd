"""expiry: an expired message is never returned by a liveness read, a live one never dropped.

A bus with the ``expiry`` feature (:func:`knell.buses.contract.features_of`)
takes ``post(..., expires_at=T)``: ``T`` is Unix seconds *by the bus's own
clock*. From then on the message is hidden from every liveness read:
``fetch`` and a stream's ``tail`` (unless ``include_expired``), the
doorbell's ring, ``claim`` and ``receive``; before then none of them may
drop it. An expired queue message
is not a dead letter (it ran out of time, it was not delivered to death),
and the forensic ``fetch(..., include_expired=True)`` still finds it.

History: the producer records ``expires_at`` in the post's invoke (and so
its ok); a forensic fetch (``include_expired``) is recorded as its own
operation, ``forensic`` (``after``, ``messages``), which no delivery
check reads: it is a look at what the bus keeps, not a delivery; a
stream tail (``stream_tail``) names the seqs it hid as expired
(``expired``), and a forensic one carries ``"include_expired": true``;
a dead-letter listing records each letter's ``died_at`` (bus clock) when
it knows it. Every other read is the ordinary history of its contract.

**Which clock, and the tolerance.** The history's times are true time; the
bus judges ``T`` by its clock, read at some instant inside the operation.
Without a clock fault that clock is the host's, which the history's
clock is too, so a read *invoked* after ``T`` surely saw the message
expired, and a read that *completed* before ``T`` surely saw it live;
a read whose span contains ``T`` may rightly have gone either way and is
not judged (it is counted as ``ambiguous``). A clock fault that moves the
store's clock moves ``T`` with it: the instants are taken from the store
clock's envelope (:mod:`knell.checker.clocks`), at their latest for
"surely expired" and their earliest for "surely live". On top of that,
:data:`TOLERANCE_S` (50 ms) either side: float rounding of Unix seconds is
below a microsecond, but a bus may read its clock once per operation and
apply it a little later (Redis and Postgres take ``now`` at the start of a
transaction that may wait for a lock), and a judgement this check cannot
make surely must be left undecided, never failed.

Anomalies:

* ``expired-returned``: a liveness read (fetch or stream tail without
  ``include_expired``, claim, receive, or the ring of a wait, judged from
  its arm's invoke)
  invoked after the message surely expired returned it. Witness: the
  post and the read.
* ``unexpired-dropped``: a read that had to return a message surely live
  throughout did not: a fetch page that returned seqs on both sides of
  it (or above the ``after`` it asked for) but skipped it; a stream
  tail that completed while it was surely live but named its seq among
  those it hid as expired; a claim or
  receive that came back short (no message, or fewer than its limit)
  while a message posted before it, never handed out to anyone in the
  whole history (and with no claim or receive of unknown outcome on the
  channel), was live. Witness: the post and the
  read.
* ``expired-dead-lettered``: a dead letter whose ``died_at`` is at or
  after the message's ``expires_at`` (both the bus's clock, so no clock
  fault blurs it): it expired before its last lease lapsed. Witness: the
  post and the listing.
* ``forensic-missing``: a ``forensic`` read whose page
  returned seqs on both sides of a message posted before it (or above
  the ``after`` it asked for), but not that message. Witness: the post and the read.

A history without ``expires_at`` on any post gives the check nothing to
judge (valid, with ``posts-with-expiry`` 0).
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.checker.base import Check, CheckResult, witness
from knell.checker.clocks import STORE
from knell.checker.consumer import on, on_op
from knell.history import Event

__all__ = ["TOLERANCE_S", "ExpiryCheck"]

TOLERANCE_S = 0.05
"""Seconds of slack either side of ``expires_at`` (see the module docstring)."""

_NS = 1_000_000_000
_INF = float("inf")


class _Post:
    __slots__ = ("channel", "expired_from", "expires_at", "live_until", "mid", "ok", "seq")

    def __init__(self, ok: Event, expires_at: float, expired_from: float, live_until: float):
        self.ok = ok
        self.channel = ok.get("channel")
        self.seq: int = ok["value"]["seq"]
        self.mid = ok["value"]["id"]
        self.expires_at = expires_at
        self.expired_from = expired_from  # true ns from which the bus surely sees it expired
        self.live_until = live_until  # true ns before which the bus surely sees it live


class ExpiryCheck(Check):
    name: ClassVar[str] = "expiry"
    anomaly_kinds: ClassVar[tuple[str, ...]] = (
        "expired-returned",
        "unexpired-dropped",
        "expired-dead-lettered",
        "forensic-missing",
    )

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._by_seq: dict[tuple[Any, int], _Post] = {}
        self._by_id: dict[Any, _Post] = {}
        # process -> (incarnation, its latest arm's invoke ns): one entry per
        # process, not per incarnation (a soak restarts a waiter every second)
        self._arms: dict[Any, tuple[Any, int]] = {}
        self._handed: set[Any] = set()  # ids a claim or receive ever returned
        # channel -> id -> post: not handed out (yet) and maybe still live
        self._waiting: dict[Any, dict[Any, _Post]] = {}
        self._unsure: set[Any] = set()  # channels with a claim or receive of unknown outcome
        # short claims and receives that skipped a surely-live message not
        # handed out so far, judged at the end: (invoke, ok, those messages)
        self._short: list[tuple[Event, Event, list[_Post]]] = []
        self._reads = 0
        self._ambiguous = 0

    # -- the store's clock ----------------------------------------------------

    def _expired_from(self, expires_at: float) -> float:
        """The true instant (ns) from which the store's clock surely reads
        past ``expires_at`` + tolerance."""
        reading = (expires_at + TOLERANCE_S) * _NS
        store = self.windows.clocks.clock(STORE)
        return reading if store is None else store.last_below(0, reading)

    def _live_until(self, expires_at: float) -> float:
        """The true instant (ns) before which the store's clock surely reads
        below ``expires_at`` - tolerance."""
        reading = (expires_at - TOLERANCE_S) * _NS
        store = self.windows.clocks.clock(STORE)
        return reading if store is None else store.first_reaching(0, reading)

    def forget(self, channel: Any, seq: int, mid: Any, again: bool) -> None:
        """A settled message forgotten (:mod:`knell.checker.settle`): its
        hand-out matters only for a post with an expiry, and one without
        has long completed by then, so its id need not be kept."""
        if mid not in self._by_id:
            self._handed.discard(mid)

    # -- posts -------------------------------------------------------------------

    @on_op("post", "ok")
    def _post(self, inv: Event | None, ok: Event) -> None:
        expires_at = (ok.get("value") or {}).get("expires_at")
        if expires_at is None and inv is not None:
            expires_at = (inv.get("value") or {}).get("expires_at")
        if isinstance(expires_at, bool) or not isinstance(expires_at, (int, float)):
            return
        post = _Post(
            ok, float(expires_at), self._expired_from(expires_at), self._live_until(expires_at)
        )
        self._by_seq[(post.channel, post.seq)] = post
        self._by_id[post.mid] = post
        self._waiting.setdefault(post.channel, {})[post.mid] = post

    # -- liveness reads --------------------------------------------------------

    def _returned(self, post: _Post | None, inv: Event, ok: Event, what: str) -> None:
        """A liveness read invoked at ``inv`` returned ``post``'s message."""
        if post is None:
            return
        self._reads += 1
        if inv["time"] >= post.expired_from:
            late = inv["time"] / _NS - post.expires_at
            self._report(
                "expired-returned",
                f"{what} invoked {late:.3f}s after {post.mid} expired (expires_at"
                f" {post.expires_at:.3f}) returned it",
                witness(post.ok, inv, ok),
            )
        elif ok["time"] >= post.live_until:
            self._ambiguous += 1

    @on_op(("fetch", "forensic"), "ok")
    def _fetch(self, inv: Event | None, ok: Event) -> None:
        if inv is None:
            return
        channel = ok.get("channel")
        forensic = ok["f"] == "forensic"
        seqs = [m["seq"] for m in ok["value"]["messages"]]
        if not forensic:
            for m in ok["value"]["messages"]:
                self._returned(self._by_seq.get((channel, m["seq"])), inv, ok, "a fetch")
        if not seqs:
            return
        after = (inv.get("value") or {}).get("after")
        low = after if isinstance(after, int) and not isinstance(after, bool) else min(seqs)
        high, shown = max(seqs), set(seqs)
        for seq in range(low + 1, high):
            post = self._by_seq.get((channel, seq))
            if post is None or seq in shown:
                continue
            if post.ok["time"] >= inv["time"]:
                continue  # not surely committed when the read began
            if forensic:
                self._report(
                    "forensic-missing",
                    f"a forensic read returned up to seq {high} of {channel}"
                    f" after {low} without {post.mid} (seq {seq})",
                    witness(post.ok, inv, ok),
                )
            elif ok["time"] < post.live_until:
                self._report(
                    "unexpired-dropped",
                    f"a fetch returned up to seq {high} of {channel} after {low} but skipped"
                    f" {post.mid} (seq {seq}), live until {post.expires_at:.3f}",
                    witness(post.ok, inv, ok),
                )

    @on_op("stream_tail", "ok")
    def _tail(self, inv: Event | None, ok: Event) -> None:
        """A stream tail: a liveness tail must hide what surely expired and
        show what was surely live; the seqs it hid it names (``expired``),
        so a hidden live message is a witnessed drop, not a guess. A
        forensic tail (``include_expired``) is a look at what the ring
        keeps: its gaps are ``ring-tail``'s to judge, its messages no
        delivery."""
        value = ok.get("value") or {}
        if inv is None or value.get("include_expired") is True:
            return
        channel = ok.get("channel")
        for m in value.get("messages") or ():
            self._returned(self._by_seq.get((channel, m["seq"])), inv, ok, "a stream tail")
        for seq in value.get("expired") or ():
            post = self._by_seq.get((channel, seq))
            if post is None:
                continue
            self._reads += 1
            if ok["time"] < post.live_until:
                self._report(
                    "unexpired-dropped",
                    f"a stream tail of {channel} after {value.get('after')} hid {post.mid}"
                    f" (seq {seq}) as expired, but it was live until {post.expires_at:.3f}"
                    f" and the tail completed {post.expires_at - ok['time'] / _NS:.3f}s before",
                    witness(post.ok, inv, ok),
                )
            elif inv["time"] < post.expired_from:
                self._ambiguous += 1

    @on("arm", "invoke")
    def _arm(self, event: Event) -> None:
        self._arms[event.get("process")] = (event.get("incarnation"), event["time"])

    @on("wake", "ok")
    def _wake(self, event: Event) -> None:
        arm = self._arms.get(event.get("process"))
        post = self._by_seq.get((event.get("channel"), event["value"]["seq"]))
        if arm is None or arm[0] != event.get("incarnation") or post is None:
            return
        armed = arm[1]
        self._reads += 1
        if armed >= post.expired_from:
            self._report(
                "expired-returned",
                f"a wait armed {armed / _NS - post.expires_at:.3f}s after {post.mid} expired"
                f" (expires_at {post.expires_at:.3f}) rang for it",
                witness(post.ok, event),
            )

    @on_op("claim", "ok", "info", "lost")
    def _claim(self, inv: Event | None, done: Event | None) -> None:
        if inv is None:
            return
        if done is None or done["type"] != "ok":
            self._unsure.add(inv.get("channel"))
            return
        mid = done["value"].get("id")
        if mid is not None:
            self._hand_out(inv.get("channel"), mid)
            self._returned(self._by_id.get(mid), inv, done, "a claim")
        else:
            self._came_back_short(inv, done, frozenset())

    @on_op("receive", "ok", "info", "lost")
    def _receive(self, inv: Event | None, done: Event | None) -> None:
        if inv is None:
            return
        if done is None or done["type"] != "ok":
            self._unsure.add(inv.get("channel"))
            return
        got = done["value"]["messages"]
        ids = frozenset(m["id"] for m in got)
        for mid in ids:
            self._hand_out(inv.get("channel"), mid)
        for m in got:
            self._returned(self._by_id.get(m["id"]), inv, done, "a receive")
        limit = done["value"].get("limit")
        if not isinstance(limit, int) or len(got) < limit:
            self._came_back_short(inv, done, ids)

    # -- dead letters ---------------------------------------------------------------

    @on_op("dead", "ok")
    def _dead(self, inv: Event | None, ok: Event) -> None:
        for letter in ok["value"]["messages"]:
            post = self._by_id.get(letter["id"])
            died_at = letter.get("died_at")
            if post is None or not isinstance(died_at, (int, float)):
                continue
            if died_at >= post.expires_at + TOLERANCE_S:
                self._report(
                    "expired-dead-lettered",
                    f"{post.mid} is listed dead at {died_at:.3f}, after it expired at"
                    f" {post.expires_at:.3f}: it ran out of time, it was not delivered to death",
                    witness(post.ok, inv, ok),
                )

    # -- the verdict -----------------------------------------------------------------

    def _hand_out(self, channel: Any, mid: Any) -> None:
        self._handed.add(mid)
        waiting = self._waiting.get(channel)
        if waiting is not None:
            waiting.pop(mid, None)

    def _came_back_short(self, inv: Event, ok: Event, ids: frozenset[Any]) -> None:
        """Note a claim or receive that came back short, with the messages
        it skipped that were posted before it, surely live throughout and
        not handed out so far (a message live no longer is forgotten here:
        history order is time order, so no later read can owe it)."""
        waiting = self._waiting.get(inv.get("channel"))
        if not waiting:
            return
        skipped: list[_Post] = []
        for mid, post in list(waiting.items()):
            if inv["time"] >= post.live_until:
                del waiting[mid]
            elif mid not in ids and post.ok["time"] < inv["time"] and ok["time"] < post.live_until:
                skipped.append(post)
        if skipped:
            self._short.append((inv, ok, skipped))

    def _judge_short(self) -> None:
        """Short claims and receives, now that the whole history says which
        messages were ever handed out: a message never handed out to anyone
        (and on a channel with no hand-out of unknown outcome) was there to
        be handed out, so a short read while it was surely live dropped it."""
        for inv, ok, skipped in self._short:
            channel = inv.get("channel")
            if channel in self._unsure:
                continue
            for post in skipped:
                if post.mid in self._handed:
                    continue
                self._report(
                    "unexpired-dropped",
                    f"a {inv['f']} on {channel} came back short while {post.mid} (never"
                    f" handed out) was live until {post.expires_at:.3f}",
                    witness(post.ok, inv, ok),
                )
                break

    def result(self) -> CheckResult:
        self._judge_short()
        return self._result(
            {
                "posts-with-expiry": len(self._by_id),
                "reads-judged": self._reads,
                "ambiguous": self._ambiguous,
            },
            {"tolerance_s": TOLERANCE_S},
        )
