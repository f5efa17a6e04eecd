"""tail-continuity: an SSE tail resumed with Last-Event-ID loses nothing and repeats nothing.

A tailer (:mod:`knell.workload.tailer`) follows a channel through a
bridge's SSE tail and, after every drop, reconnects sending the seq of the
last event it read as ``Last-Event-ID``. The bridge promises to resume
*strictly after* that seq. Judged per tailer incarnation, across all its
reconnects (its first connection starts at the head, so messages posted
before it are not owed):

``tail-duplicate``
    a seq the tailer already read came again (a bridge that resumes at
    ``Last-Event-ID`` inclusive). Witness: both events.
``tail-out-of-order``
    a seq below one already read, not read before: the tail went back.
    Witness: the two events.
``tail-gap``
    between the position the tailer held (the ``Last-Event-ID`` it sent on
    a reconnect, or its last event within one connection) and the next
    event, seqs are missing that the history proves committed on the
    channel (a ``post`` ok, or an event some tailer read): a bridge that
    resumes at the head, or skips. Seqs a bus never committed (a dense
    counter is not promised) prove nothing, so the gap is judged once the
    whole history is read; nor do the seqs of posts made with an expiry
    (``expires_at``), which a tail rightly skips once they expired. Witness:
    the reconnect, the event after the gap, and the post of the first
    missing seq.

``tail-behind-unfounded``
    on a stream channel (a ring), the only gap a tail may have is one the
    bridge announced with a ``behind`` event (``tail-behind``: the ring
    dropped ``after + 1 .. first - 1`` before they could be sent), which
    moves the tailer's position to ``first - 1``. The announcement is
    itself judged where the ring's bound decides it: a ring bounded by
    count alone (``max_len``, no age bound) holds the newest ``max_len``
    seqs, and the head when the bridge read it is at most the number of
    posts invoked on the channel before the notice arrived, so a ``first``
    above that count minus ``max_len`` plus one claims dropped what the
    ring still held (a bridge that skips and calls it the ring's doing).
    Witness: the notice and the declaration.

Until a tailer has read one event it has no position to resume from (a
reconnect before its first event starts at the head again), so nothing
is owed before it. The check also measures what the figures quote:
post-to-event latency (the post's invoke to the tailer's event) and the
time from a dropped stream to the reopened one.

What it keeps, and for how long: per channel the committed seqs, the post
ok of each (packed, :mod:`knell.checker.keep`) and each post's invoke
time (on a stream channel, every invoke's), for the whole run, even
before any tailer exists; per tailer the events it read. A tailer that
reconnects with an old ``Last-Event-ID`` is owed every committed seq
after it, however old, and a gap is judged only once the whole history
is read (a post ok recorded later may prove it), so no post can be
forgotten before the end.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Any, ClassVar

from knell.checker.base import Check, CheckResult, witness
from knell.checker.consumer import on, on_op
from knell.checker.keep import Held, keep
from knell.history import Event
from knell.stats import Tally

__all__ = ["TailContinuityCheck"]


@dataclass
class _Tailer:
    """One tailer incarnation: what it read and where it stands."""

    seen: dict[int, Event] = field(default_factory=dict)
    last: Event | None = None
    """The last event read (the position within a connection)."""
    resumed: Event | None = None
    """The ``tail`` invoke of the current connection, until its first event."""
    dropped_at: int | None = None
    """When the last open stream dropped (for the reconnect time)."""
    behind: int | None = None
    """The ``first`` of a ``behind`` notice since the last event: seqs
    below it were announced dropped, not owed."""


@dataclass(frozen=True)
class _Gap:
    channel: str
    low: int
    high: int
    cause: Event | None
    after: Event


class TailContinuityCheck(Check):
    name: ClassVar[str] = "tail-continuity"
    anomaly_kinds: ClassVar[tuple[str, ...]] = (
        "tail-duplicate",
        "tail-out-of-order",
        "tail-gap",
        "tail-behind-unfounded",
    )

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._tailers: dict[tuple[str, int], _Tailer] = {}
        self._gaps: list[_Gap] = []
        self._committed: dict[str, set[int]] = {}
        # per channel (one dict each, not a key tuple per message):
        self._posts: dict[str, dict[int, Held]] = {}  # seq -> its post ok
        self._posted_at: dict[str, dict[str, int]] = {}  # id -> its first post invoke's time
        self._latency = Tally()  # bounded: a soak's events are counted, not kept
        self._reconnect = Tally()
        self._events = 0
        self._reconnects = 0
        self._behinds = 0
        # stream channels: the declared ring (max_len when bounded by count
        # alone, else None: undecidable) and the times of their post invokes
        self._rings: dict[str, tuple[int | None, Held]] = {}
        self._invoked: dict[str, list[int]] = {}
        # posts with an expiry: a tail rightly skips one once it expired
        # (fetch and tail hide it), so its seq is never owed to a tail
        self._expiring: set[tuple[str, str]] = set()

    def _tailer(self, event: Event) -> _Tailer:
        key = (str(event["process"]), int(event.get("incarnation", 0)))
        found = self._tailers.get(key)
        if found is None:
            found = self._tailers[key] = _Tailer()
        return found

    @on_op("declare_stream", "ok")
    def _declared(self, inv: Event | None, ok: Event) -> None:
        channel, value = str(ok["channel"]), ok["value"]
        max_len = value.get("max_len")
        count_only = isinstance(max_len, int) and max_len > 0 and not value.get("max_age_s")
        known = self._rings.get(channel)
        same = known is None or known[0] == max_len
        bound: int | None = max_len if count_only and same else None
        self._rings[channel] = (bound, keep(ok))
        self._invoked.setdefault(channel, [])

    @on("post", "invoke")
    def _post_invoke(self, event: Event) -> None:
        channel = str(event["channel"])
        if "expires_at" in event["value"]:
            self._expiring.add((channel, str(event["value"]["id"])))
        invoked = self._invoked.get(channel)
        if invoked is not None:
            invoked.append(event["time"])
        by_id = self._posted_at.get(channel)
        if by_id is None:
            by_id = self._posted_at[channel] = {}
        mid = str(event["value"]["id"])
        if mid not in by_id:
            by_id[mid] = event["time"]

    @on_op("post", "ok")
    def _post_ok(self, inv: Event | None, ok: Event) -> None:
        channel, seq = str(ok["channel"]), ok["value"]["seq"]
        if (channel, str(ok["value"]["id"])) in self._expiring:
            return  # it may rightly be hidden by the time a tail reaches it
        self._committed.setdefault(channel, set()).add(seq)
        posts = self._posts.get(channel)
        if posts is None:
            posts = self._posts[channel] = {}
        if seq not in posts:
            posts[seq] = keep(ok)

    @on("tail", "invoke")
    def _connect(self, event: Event) -> None:
        tailer = self._tailer(event)
        if "last_event_id" in event["value"]:
            self._reconnects += 1
            tailer.resumed = event

    @on("tail", "ok")
    def _open(self, event: Event) -> None:
        tailer = self._tailer(event)
        if tailer.dropped_at is not None:
            self._reconnect.add((event["time"] - tailer.dropped_at) / 1e9)
            tailer.dropped_at = None

    @on("tail-behind")
    def _behind(self, event: Event) -> None:
        self._behinds += 1
        channel, first = str(event["channel"]), event["value"]["first"]
        self._tailer(event).behind = first
        ring = self._rings.get(channel)
        if ring is None:
            return
        max_len, declared = ring
        if max_len is None:
            return
        invoked = self._invoked.get(channel, [])
        most = bisect_left(invoked, event["time"])  # posts invoked before the notice
        if first > max(1, most - max_len + 1):
            self._report(
                "tail-behind-unfounded",
                f"tailer {event['process']} was told the ring of {channel!r} had dropped every "
                f"seq below {first}, but it keeps the newest {max_len} and at most {most} "
                f"post(s) had been invoked: it still held seq {max(1, most - max_len + 1)}",
                witness(declared, event),
            )

    @on("tail-drop")
    def _drop(self, event: Event) -> None:
        self._tailer(event).dropped_at = event["time"]

    @on("tail-event")
    def _event(self, event: Event) -> None:
        self._events += 1
        channel = str(event["channel"])
        value = event["value"]
        seq = value["seq"]
        if (channel, str(value["id"])) not in self._expiring:
            self._committed.setdefault(channel, set()).add(seq)
        posted = self._posted_at.get(channel, {}).get(str(value["id"]))
        if posted is not None:
            self._latency.add((event["time"] - posted) / 1e9)
        tailer = self._tailer(event)
        first = tailer.seen.get(seq)
        if first is not None:
            self._report(
                "tail-duplicate",
                f"tailer {event['process']} read seq {seq} of {channel!r} twice"
                + self._since(tailer),
                witness(first, tailer.resumed, event),
            )
            tailer.resumed = None
            return
        last = tailer.last
        if last is not None and seq < last["value"]["seq"]:
            self._report(
                "tail-out-of-order",
                f"tailer {event['process']} read seq {seq} of {channel!r} after seq "
                f"{last['value']['seq']}" + self._since(tailer),
                witness(last, event),
            )
        else:
            low: int | None = None
            cause: Event | None = None
            if tailer.resumed is not None and last is not None:
                low, cause = tailer.resumed["value"]["last_event_id"], tailer.resumed
            elif last is not None:
                low, cause = last["value"]["seq"], last
            if low is not None and tailer.behind is not None:
                low = max(low, tailer.behind - 1)  # announced: the ring dropped them
            if low is not None and seq > low + 1:
                self._gaps.append(_Gap(channel, low, seq, cause, event))
        tailer.seen[seq] = event
        tailer.resumed = None
        tailer.behind = None
        tailer.last = event

    @staticmethod
    def _since(tailer: _Tailer) -> str:
        resumed = tailer.resumed
        if resumed is None:
            return ""
        return f", first after reconnecting with Last-Event-ID {resumed['value']['last_event_id']}"

    def finish(self) -> None:
        for gap in self._gaps:
            committed = sorted(self._committed.get(gap.channel, ()))
            missing = committed[bisect_right(committed, gap.low) : bisect_left(committed, gap.high)]
            if not missing:
                continue
            shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
            how = (
                f"after reconnecting with Last-Event-ID {gap.low}"
                if gap.cause is not None and gap.cause["f"] == "tail"
                else f"right after seq {gap.low}"
            )
            self._report(
                "tail-gap",
                f"tailer {gap.after['process']} read seq {gap.high} of {gap.channel!r} {how}: "
                f"{len(missing)} committed seq(s) between were never sent to it ({shown})",
                witness(gap.cause, gap.after, self._posts.get(gap.channel, {}).get(missing[0])),
            )

    def result(self) -> CheckResult:
        metrics: dict[str, float | int | None] = {
            "latency_p50_s": self._latency.percentile(0.5),
            "latency_p99_s": self._latency.percentile(0.99),
            "reconnect_p50_s": self._reconnect.percentile(0.5),
            "reconnect_max_s": self._reconnect.max,
        }
        counts = {
            "tailers": len(self._tailers),
            "events": self._events,
            "reconnects": self._reconnects,
            "behind-notices": self._behinds,
        }
        return self._result(counts, metrics)
