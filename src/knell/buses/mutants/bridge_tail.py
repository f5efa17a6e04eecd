"""Bridge mutants of the SSE tail: a bridge that resumes a tail in the wrong place.

A client that lost its tail reconnects with ``Last-Event-ID``, the seq of
the last event it read, and the bridge must resume *strictly after* it
(:func:`knell.bridge.tail.resume_after`). The two plausible ways to get
that wrong are one character apart and one shortcut away: a ``>=`` for a
``>``, and a bridge that ignores the header (every new stream starts at
the head, as a fresh watcher's does). Each mutant is a bus wrapper (see
:mod:`knell.buses.mutants.bridge`) that answers the bridge's
``tail_resume`` seam wrongly; everything else is the reference bus,
stream channels included, so the same two bugs are caught on a ring's
tail too.

A third bug is a stream channel's alone: a bridge that serves tails from
a buffer of its own, smaller than the ring, and answers a reader that
lags further behind as if the *ring* had dropped the rest: the SSE
``behind`` notice, which excuses a gap, is then a lie.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from knell.buses.contract import StreamInfo, StreamPage
from knell.buses.mutants.bridge import _Wrapper
from knell.buses.mutants.registry import mutant

__all__ = [
    "BridgeStreamOwnBufferBus",
    "BridgeTailResumesAtHeadBus",
    "BridgeTailResumesInclusiveBus",
]

_SCENARIOS = ("bridge-sse-tail-kill", "bridge-sse-stream-kill")


class _StreamThrough(_Wrapper):
    """The reference bus's stream channels, passed through untouched."""

    contracts = ("broadcast", "stream")

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self._s: Any = inner

    def declare_stream(
        self, channel: str, max_len: int | None = None, max_age_s: float | None = None
    ) -> StreamInfo:
        info: StreamInfo = self._s.declare_stream(channel, max_len, max_age_s)
        return info

    def tail(self, channel: str, after: int = 0, limit: int = 100) -> StreamPage:
        page: StreamPage = self._s.tail(channel, after, limit)
        return page


@mutant(
    "bridge-tail-resume-inclusive",
    failure_mode="Bridge resumes an SSE tail at Last-Event-ID inclusive: the last event twice",
    killed_by=("tail-continuity",),
    scenarios=_SCENARIOS,
    rule="A tail resumed with Last-Event-ID N starts at the first seq above N",
    store="bridge",
)
class BridgeTailResumesInclusiveBus(_StreamThrough):
    """Failure mode: a reconnecting tailer is sent its last event again.

    The bridge reads "resume from N" as "from N on": after every drop the
    tailer's last event comes a second time, which a client that handles
    each event (a counter, a notification) acts on twice. Proven by
    ``tail-continuity`` (``tail-duplicate``).
    """

    def tail_resume(self, channel: str, last_event_id: int | None) -> int:
        if last_event_id is None:
            return self.inner.head(channel)
        return max(0, last_event_id - 1)


@mutant(
    "bridge-tail-resume-at-head",
    failure_mode="Bridge ignores Last-Event-ID and resumes an SSE tail at the head: a gap",
    killed_by=("tail-continuity",),
    scenarios=_SCENARIOS,
    rule="A tail resumed with Last-Event-ID N sends every message above N, however old",
    store="bridge",
)
class BridgeTailResumesAtHeadBus(_StreamThrough):
    """Failure mode: a reconnecting tailer silently misses what was posted
    while it was away.

    The bridge treats every stream as a new watcher's and starts it at the
    head, ignoring the header. Nothing looks wrong on the wire: the events
    keep coming, in order, without repeats; the messages posted between the
    drop and the reconnect are just never sent. Proven by
    ``tail-continuity`` (``tail-gap``).
    """

    def tail_resume(self, channel: str, last_event_id: int | None) -> int:
        return self.inner.head(channel)


OWN_BUFFER = 10
"""Messages the buggy bridge keeps per stream channel, fewer than any
ring a shipped scenario declares."""


@mutant(
    "bridge-stream-own-buffer",
    failure_mode="Bridge serves stream tails from its own small buffer and blames the ring",
    killed_by=("tail-continuity",),
    scenarios=("bridge-sse-stream-kill",),
    rule="A behind notice names only what the ring itself dropped",
    store="bridge",
)
class BridgeStreamOwnBufferBus(_StreamThrough):
    """Failure mode: a tail that lags is told the ring dropped messages the
    ring still holds.

    The bridge keeps the newest :data:`OWN_BUFFER` messages of each stream
    in memory and serves tails from there; a reader further behind gets a
    page whose ``first`` is the buffer's start, which the SSE tail turns
    into a ``behind`` notice. The reader, told the ring lost them, never
    asks again. Proven by ``tail-continuity`` (``tail-behind-unfounded``):
    the ring's count bound and the posts so far show it still held them.
    """

    def tail(self, channel: str, after: int = 0, limit: int = 100) -> StreamPage:
        page = super().tail(channel, after, limit)
        start = max(page.first, page.head - OWN_BUFFER + 1)
        if start <= page.first:
            return page
        kept = tuple(m for m in page.messages if m.seq >= start)
        return replace(page, messages=kept, first=start)
