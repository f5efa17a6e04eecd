"""lease-expiry: a lapsed lease becomes claimable within lease + sweep interval.

Leases exist so that a worker that dies (or freezes) with a message in hand
does not take it down with it: once the lease lapses, the message must
come back. A bus whose leases never expire (or whose sweeper never runs)
strands every message a crashed worker held: the queue looks drained while
the work is stuck forever. And claims hand out the *oldest* claimable
message, so a lapsed message must come back ahead of newer work.

The history proves a message *surely claimable* at an instant t when: its
post returned ok before t; it is not done (no done that did not fail) and
cannot be dead (its known deliveries, plus every claim on the channel whose
outcome is unknown, are fewer than ``max_deliveries``); and every lease it
ever had surely lapsed before t: t is past the lease's latest possible
expiry (the last time the bus may have started its term, + ``lease_s`` on
the store's clock, which a clock fault may move (:mod:`knell.checker.clocks`),
+ the sweep interval the bus declared, + 10 ms), no renew of it is still in
flight (a renew invoked before the lease lapsed may already have extended
it, however late its reply comes), and t is past every claim of unknown
outcome on the channel (it may have taken this very message).
A claim invoked at t that returned nothing, or a newer message, while an
older message was surely claimable, with no other claim on the channel in
flight to have taken it meanwhile, is the anomaly ``not-claimable``.
Witness: the message's post, its last lease (claim and last renewal), and
the claim that should have returned it.

The queue's final phase makes this decisive: its claims come after every
lease has had time to lapse, and run alone.

A message posted with ``expires_at`` is not judged here: once expired it
is rightly never claimable again, which :mod:`knell.checker.expiry`
judges by the store's clock.
"""

from __future__ import annotations

import heapq
from typing import Any, ClassVar

from knell.checker.base import CheckResult, witness
from knell.checker.consumer import on, on_op
from knell.checker.inflight import died_in_flight
from knell.checker.queue.book import NS, TOLERANCE_NS, Lease, QueueCheck
from knell.history import Event

__all__ = ["LeaseExpiryCheck"]

_INF = float("inf")


class _Msg:
    __slots__ = ("closed", "deliveries", "lease", "post", "post_invoke", "released", "seq")

    def __init__(self, seq: int, post: Event, post_invoke: int) -> None:
        self.seq = seq
        self.post = post
        self.post_invoke = post_invoke
        self.deliveries = 0
        self.lease: Lease | None = None
        self.released: Event | None = None
        self.closed = False  # done (or may be), reported, or possibly dead: never judged again


class _Channel:
    __slots__ = ("heap", "msgs", "outstanding", "unknown")

    def __init__(self) -> None:
        self.msgs: dict[Any, _Msg] = {}
        self.heap: list[tuple[int, Any]] = []  # (seq, id) of open messages
        self.outstanding: dict[tuple[Any, Any], int] = {}  # claims in flight: their lease (ns)
        self.unknown: list[tuple[int, int]] = []  # claims of unknown outcome: (end, lease ns)


_WAIT = -1
"""Not judgeable now, maybe later (its holder's done is in flight)."""


class LeaseExpiryCheck(QueueCheck):
    name: ClassVar[str] = "lease-expiry"
    anomaly_kinds: ClassVar[tuple[str, ...]] = ("not-claimable",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._channels: dict[Any, _Channel] = {}
        self._pending_posts: dict[tuple[Any, Any], int] = {}
        self._expiring: set[Any] = set()  # ids posted with expires_at: not judged here
        self._judged = 0

    def _channel(self, channel: Any) -> _Channel:
        found = self._channels.get(channel)
        if found is None:
            found = self._channels[channel] = _Channel()
        return found

    # -- what happened ------------------------------------------------------

    @on("post", "invoke", "ok")
    def _post(self, event: Event) -> None:
        if "expires_at" in event["value"]:
            # whether it had to come back depends on when it expired: the
            # expiry check judges it (knell.checker.expiry)
            self._expiring.add(event["value"]["id"])
            return
        ch = self._channels.get(event["channel"])
        if ch is None:
            return  # not (yet) known as a queue: see _adopt
        key = (event["channel"], event["value"]["id"])
        if event["type"] == "invoke":
            self._pending_posts.setdefault(key, event["time"])
            return
        if key[1] in ch.msgs or self.is_forgotten(key[0], event["value"]["seq"]):
            return  # known, or a retry answered with a done message's seq
        invoked = self._pending_posts.pop(key, event["time"])
        self._track(ch, key[1], _Msg(int(event["value"]["seq"]), event, invoked))

    @staticmethod
    def _track(ch: _Channel, mid: Any, msg: _Msg) -> None:
        ch.msgs[mid] = msg
        heapq.heappush(ch.heap, (msg.seq, mid))

    @on_op("declare", "ok")
    def _queue(self, invoke: Event | None, done: Event) -> None:
        self._channel(done["channel"])  # from now on its posts are tracked

    @on("kill", "info")
    @on("crash", "info")
    def _died(self, event: Event) -> None:
        """A claim in flight in a process that died: its outcome is unknown
        (it may have leased a message, until the death + its lease)."""
        self.now = max(self.now, event["time"])
        for ch in self._channels.values():
            for key in died_in_flight(event, ch.outstanding):
                ch.unknown.append((event["time"], ch.outstanding.pop(key)))

    @on("claim", "invoke")
    def _claim_invoked(self, event: Event) -> None:
        self.now = max(self.now, event["time"])
        ch = self._channel(event["channel"])
        lease = int(event["value"]["lease_s"] * NS)
        ch.outstanding[(event["process"], event.get("incarnation"))] = lease

    @on_op("claim", "info", "fail", "lost")
    def _claim_unknown(self, invoke: Event | None, done: Event | None) -> None:
        event = done or invoke
        if event is None:
            return
        ch = self._channel(event["channel"])
        lease = ch.outstanding.pop((event["process"], event.get("incarnation")), None)
        if lease is None or (done is not None and done["type"] == "fail"):
            return  # already counted at the death, or definitely did not happen
        ch.unknown.append((self.now if done is None else done["time"], lease))

    def claimed(self, invoke: Event | None, done: Event, lease: Lease | None) -> None:
        ch = self._channel(done["channel"])
        ch.outstanding.pop((done["process"], done.get("incarnation")), None)
        returned = _INF if lease is None else int(done["value"]["seq"])
        if invoke is not None:
            self._judge(done["channel"], ch, invoke, done, returned)
        if lease is not None:
            mid = done["value"]["id"]
            msg = ch.msgs.get(mid)
            if msg is None and mid in self._expiring:
                return
            if msg is None:
                # posted before its channel was known as a queue: adopt it, its
                # claim as the proof that it landed (every unknown claim counts)
                msg = _Msg(int(done["value"]["seq"]), done, 0)
                self._track(ch, mid, msg)
            msg.deliveries += 1
            msg.lease = lease
            msg.released = None

    def claimed_forgotten(self, invoke: Event, done: Event) -> None:
        """A claim returned a done message forgotten since: judged as any
        claim that returned that seq (it is done-terminal's finding)."""
        ch = self._channel(done["channel"])
        ch.outstanding.pop((done["process"], done.get("incarnation")), None)
        self._judge(done["channel"], ch, invoke, done, int(done["value"]["seq"]))

    def forget(self, channel: Any, seq: int, mid: Any, again: bool) -> None:
        """Drop a settled done message (:mod:`knell.checker.queue.settle`):
        done, it was closed already; its heap entry is dropped when met."""
        super().forget(channel, seq, mid, again)
        ch = self._channels.get(channel)
        if ch is not None:
            ch.msgs.pop(mid, None)
        self._pending_posts.pop((channel, mid), None)

    def verb(self, invoke: Event | None, done: Event, lease: Lease | None) -> None:
        msg = self._channel(done["channel"]).msgs.get(done["value"]["id"])
        if msg is None or done["type"] == "fail":
            return
        if done["f"] == "done":
            msg.closed = True  # done, or may be
        elif done["f"] == "release" and done["type"] == "ok" and lease is msg.lease:
            msg.released = done

    def lost(self, invoke: Event) -> None:
        if invoke["f"] == "done":
            msg = self._channel(invoke["channel"]).msgs.get(invoke["value"]["id"])
            if msg is not None:
                msg.closed = True

    # -- judging a claim ----------------------------------------------------

    def _claimable_since(self, channel: Any, ch: _Channel, msg: _Msg) -> float | None:
        """From when ``msg`` is surely claimable; None if it never will be
        (done, or possibly dead); :data:`_WAIT` while its holder's done is
        in flight."""
        if msg.closed:
            return None
        setting = self.setting(channel)
        most = setting.max_deliveries
        unknown = [(end, n) for end, n in ch.unknown if end >= msg.post_invoke]
        if most is not None and msg.deliveries + len(unknown) >= most:
            return None
        since: float = msg.post["time"]
        lease = msg.lease
        if lease is not None:
            if lease.ending is not None and lease.ending["f"] == "done":
                return _WAIT
            if lease.renewing is not None:
                return _WAIT  # the lease may have been extended: wait for the renew
            if msg.released is not None:
                since = msg.released["time"] + setting.sweep_ns + TOLERANCE_NS
            else:
                since = lease.latest_expiry(setting.sweep_ns)
        clocks = self.windows.clocks
        for end, lease_ns in unknown:
            # on the store's clock: its lease may have taken this very message
            lapsed = clocks.latest_until(end, end, lease_ns)
            since = max(since, lapsed + setting.sweep_ns + TOLERANCE_NS)
        return since

    def _judge(
        self, channel: Any, ch: _Channel, invoke: Event, done: Event, returned: float
    ) -> None:
        if ch.outstanding:
            return  # another claim in flight may have taken the older message
        self._judged += 1
        at = invoke["time"]
        kept: list[tuple[int, Any]] = []
        while ch.heap and ch.heap[0][0] < returned:
            seq, mid = heapq.heappop(ch.heap)
            msg = ch.msgs.get(mid)
            if msg is None or msg.closed:
                continue
            since = self._claimable_since(channel, ch, msg)
            if since is None:
                msg.closed = True
                continue
            if since == _WAIT or since >= at:
                kept.append((seq, mid))
                continue
            msg.closed = True
            what = "nothing" if returned == _INF else f"the newer seq {int(returned)}"
            lease = msg.lease
            self._report(
                "not-claimable",
                None
                if self.log.full("not-claimable")
                else f"message {mid} (channel {channel}, seq {seq}) was surely claimable "
                f"({(at - since) / NS:.3f} s after it was posted, released or its last lease "
                f"surely lapsed) yet a claim by {invoke['process']} returned {what}",
                witness(
                    msg.post,
                    None if lease is None else lease.ok,
                    None if lease is None else lease.renewed,
                    msg.released,
                    invoke,
                    done,
                ),
            )
        for entry in kept:
            heapq.heappush(ch.heap, entry)

    def result(self) -> CheckResult:
        return self._result({"claims-judged": self._judged})
