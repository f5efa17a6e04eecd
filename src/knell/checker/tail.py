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
    whole history is read. Witness: the reconnect, the event after the
    gap, and the post of the first missing seq.

Until a tailer has read one event it has no position to resume from (a
reconnect before its first event starts at the head again), so nothing
is owed before it. The check also measures what the figures quote:
post-to-event latency (the post's invoke to the tailer's event) and the
time from a dropped stream to the reopened one.

What it keeps, and for how long: per channel the committed seqs, the post
ok of each (packed, :mod:`knell.checker.keep`) and each post's invoke
time, for the whole run, even before any tailer exists; per tailer the
events it read. A tailer that reconnects with an old ``Last-Event-ID`` is
owed every committed seq after it, however old, and a gap is judged only
once the whole history is read (a post ok recorded later may prove it), so no
post can be forgotten before the end.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Any, ClassVar

from knell.checker.base import Check, CheckResult, witness
from knell.checker.consumer import on, on_op
from knell.checker.keep import Held, keep
from knell.history import Event

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


@dataclass(frozen=True)
class _Gap:
    channel: str
    low: int
    high: int
    cause: Event | None
    after: Event


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class TailContinuityCheck(Check):
    name: ClassVar[str] = "tail-continuity"
    anomaly_kinds: ClassVar[tuple[str, ...]] = (
        "tail-duplicate",
        "tail-out-of-order",
        "tail-gap",
    )

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._tailers: dict[tuple[str, int], _Tailer] = {}
        self._gaps: list[_Gap] = []
        self._committed: dict[str, set[int]] = {}
        # per channel (one dict each, not a key tuple per message):
        self._posts: dict[str, dict[int, Held]] = {}  # seq -> its post ok
        self._posted_at: dict[str, dict[str, int]] = {}  # id -> its first post invoke's time
        self._latency: list[float] = []
        self._reconnect: list[float] = []
        self._events = 0
        self._reconnects = 0

    def _tailer(self, event: Event) -> _Tailer:
        key = (str(event["process"]), int(event.get("incarnation", 0)))
        found = self._tailers.get(key)
        if found is None:
            found = self._tailers[key] = _Tailer()
        return found

    @on("post", "invoke")
    def _post_invoke(self, event: Event) -> None:
        channel = str(event["channel"])
        by_id = self._posted_at.get(channel)
        if by_id is None:
            by_id = self._posted_at[channel] = {}
        mid = str(event["value"]["id"])
        if mid not in by_id:
            by_id[mid] = event["time"]

    @on_op("post", "ok")
    def _post_ok(self, inv: Event | None, ok: Event) -> None:
        channel, seq = str(ok["channel"]), ok["value"]["seq"]
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
            self._reconnect.append((event["time"] - tailer.dropped_at) / 1e9)
            tailer.dropped_at = None

    @on("tail-drop")
    def _drop(self, event: Event) -> None:
        self._tailer(event).dropped_at = event["time"]

    @on("tail-event")
    def _event(self, event: Event) -> None:
        self._events += 1
        channel = str(event["channel"])
        value = event["value"]
        seq = value["seq"]
        self._committed.setdefault(channel, set()).add(seq)
        posted = self._posted_at.get(channel, {}).get(str(value["id"]))
        if posted is not None:
            self._latency.append((event["time"] - posted) / 1e9)
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
            if low is not None and seq > low + 1:
                self._gaps.append(_Gap(channel, low, seq, cause, event))
        tailer.seen[seq] = event
        tailer.resumed = None
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
            "latency_p50_s": _pct(self._latency, 0.5),
            "latency_p99_s": _pct(self._latency, 0.99),
            "reconnect_p50_s": _pct(self._reconnect, 0.5),
            "reconnect_max_s": max(self._reconnect) if self._reconnect else None,
        }
        counts = {
            "tailers": len(self._tailers),
            "events": self._events,
            "reconnects": self._reconnects,
        }
        return self._result(counts, metrics)
