"""The stream contract's checks (raven's stream channels: a bounded ring
read by tails that keep no state).

One module per property: :mod:`.pages` (a tail page is consecutive from
``max(after + 1, first)``, repeats nothing, skips nothing the ring still
holds, and ``first`` never goes back), :mod:`.content` (a page shows the
message posted at each seq), :mod:`.bound` (the ring never holds more than
its count bound after a post completed, nor anything older than its age
bound plus :data:`~knell.checker.stream.bound.AGE_TOLERANCE`) and
:mod:`.kinds` (a stream operation on another kind, and another kind's
operation on a stream, are refused). :mod:`.book` is what they share: a
page as the history records it.

Every check judges only what was observed: a ``stream_tail`` whose
outcome is unknown (``info``) shows nothing and is never judged, and a
post whose outcome is unknown bounds nothing.
"""

from __future__ import annotations

from knell.checker.stream.bound import RingBoundCheck
from knell.checker.stream.content import RingContentCheck
from knell.checker.stream.kinds import StreamKindCheck
from knell.checker.stream.pages import RingTailCheck

__all__ = ["RingBoundCheck", "RingContentCheck", "RingTailCheck", "StreamKindCheck"]
