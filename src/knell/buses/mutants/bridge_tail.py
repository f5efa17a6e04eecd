"""Bridge mutants of the SSE tail: a bridge that resumes a tail in the wrong place.

A client that lost its tail reconnects with ``Last-Event-ID``, the seq of
the last event it read, and the bridge must resume *strictly after* it
(:func:`knell.bridge.tail.resume_after`). The two plausible ways to get
that wrong are one character apart and one shortcut away: a ``>=`` for a
``>``, and a bridge that ignores the header (every new stream starts at
the head, as a fresh watcher's does). Each mutant is a bus wrapper (see
:mod:`knell.buses.mutants.bridge`) that answers the bridge's
``tail_resume`` seam wrongly; everything else is the reference bus.
"""

from __future__ import annotations

from knell.buses.mutants.bridge import _Wrapper
from knell.buses.mutants.registry import mutant

__all__ = ["BridgeTailResumesAtHeadBus", "BridgeTailResumesInclusiveBus"]


@mutant(
    "bridge-tail-resume-inclusive",
    failure_mode="Bridge resumes an SSE tail at Last-Event-ID inclusive: the last event twice",
    killed_by=("tail-continuity",),
    scenarios=("bridge-sse-tail-kill",),
    rule="A tail resumed with Last-Event-ID N starts at the first seq above N",
    store="bridge",
)
class BridgeTailResumesInclusiveBus(_Wrapper):
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
    scenarios=("bridge-sse-tail-kill",),
    rule="A tail resumed with Last-Event-ID N sends every message above N, however old",
    store="bridge",
)
class BridgeTailResumesAtHeadBus(_Wrapper):
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
