"""Stream mutants: the reference SQLite ring with one seeded bug each.

Each is a subclass of the reference SQLite bus that swaps the step of
:mod:`knell.buses.sqlite_stream` keeping the promise it breaks: the trim
trigger (``stream_triggers``: what a post drops, and whether ``first``
says so) or the page query (``_held_after``: strictly after ``after``).
The failure modes are those a ring reader cannot see for itself: a trim
that drops messages without telling (the reader's next page silently
starts later), a resume that repeats the last message read, a ring
that grows past its bound, and a reader starting over that is handed
messages the ring dropped long ago.

The reference's triggers are created only when missing, and a mutant
opens the file once as the reference first (to validate its URL), so a
mutant's own triggers replace them at every open.
"""

from __future__ import annotations

from knell.buses.contract import Message, StreamPage
from knell.buses.mutants.registry import mutant
from knell.buses.mutants.sqlite import _Mutant
from knell.buses.sqlite_stream import MOVE_FIRST, STREAM_GUARD

__all__ = [
    "RingNeverTrimsBus",
    "RingSkipsSilentlyBus",
    "TailAfterInclusiveBus",
    "TailReadsArchiveBus",
]

_DROP = (
    "DROP TRIGGER IF EXISTS stream_guard",
    "DROP TRIGGER IF EXISTS stream_trim",
)

_GUARD_BY_HEAD = """
CREATE TRIGGER stream_guard BEFORE INSERT ON messages
WHEN NEW.seq <= (SELECT MAX(seq) FROM messages WHERE channel = NEW.channel)
BEGIN SELECT RAISE(ABORT, 'seq at or below the head'); END
"""
"""Keeps seqs dense whatever is trimmed (the bug under test is elsewhere)."""


@mutant(
    "ring-skips-silently",
    failure_mode="A ring that trims without moving first: a reader behind it skips silently",
    killed_by=("ring-tail:silent-gap",),
    scenarios=("stream-ring-overrun",),
    rule="Move first in the same write that drops a message from the ring",
)
class RingSkipsSilentlyBus(_Mutant):
    """Failure mode: the ring trims by count, deleting the rows, but never
    moves ``first``: a tail after a dropped seq gets the next held message
    and a ``first`` that says nothing was dropped. Proven by ``ring-tail``
    (``silent-gap``)."""

    stream_triggers = (
        *_DROP,
        _GUARD_BY_HEAD,
        """
CREATE TRIGGER stream_trim AFTER INSERT ON messages
WHEN EXISTS (SELECT 1 FROM streams WHERE channel = NEW.channel AND max_len IS NOT NULL)
BEGIN
    DELETE FROM messages WHERE channel = NEW.channel
        AND seq <= NEW.seq - (SELECT max_len FROM streams WHERE channel = NEW.channel);
END
""",
    )


@mutant(
    "tail-after-inclusive",
    failure_mode="A tail that reads from after inclusive: every resumed page repeats one",
    killed_by=("ring-tail:duplicate",),
    scenarios=("stream-kill-tailers",),
    rule="A tail returns the messages strictly after after",
)
class TailAfterInclusiveBus(_Mutant):
    """Failure mode: ``tail`` reads ``seq >= after`` (an off-by-one in a
    resume): the reader sees the last message of its previous page again.
    Proven by ``ring-tail`` (``duplicate``)."""

    def _held_after(
        self, channel: str, after: int, first: int, limit: int, include_expired: bool = False
    ) -> tuple[tuple[Message, ...], tuple[int, ...]]:
        return super()._held_after(channel, max(after - 1, 0), first, limit, include_expired)


@mutant(
    "ring-never-trims",
    failure_mode="A ring that never trims: it grows past its bound",
    killed_by=("ring-bound:over-count",),
    scenarios=("stream-kill-tailers",),
    rule="Trim the ring in the post's own write, to its count and age bound",
)
class RingNeverTrimsBus(_Mutant):
    """Failure mode: a post never trims the ring (the trim was left to a
    sweeper that never runs): after a post of seq ``s`` the ring still
    holds seqs far below ``s - max_len + 1``. Proven by ``ring-bound``
    (``over-count``)."""

    stream_triggers = (*_DROP, _GUARD_BY_HEAD)


_TRIM_KEEPING_ROWS = f"""
CREATE TRIGGER stream_trim AFTER INSERT ON messages
WHEN EXISTS (SELECT 1 FROM streams WHERE channel = NEW.channel)
BEGIN{MOVE_FIRST}END
"""
"""The reference trim, moving ``first`` but deleting nothing: the rows
below it are kept as an archive."""


@mutant(
    "tail-reads-archive",
    failure_mode="A reader starting over is handed messages the ring dropped long ago",
    killed_by=("ring-tail:first-regressed",),
    scenarios=("stream-kill-tailers",),
    rule="A tail reads the ring only, from first on, whatever else the store keeps",
)
class TailReadsArchiveBus(_Mutant):
    """Failure mode: the ring keeps what it trims (an archive for forensic
    reads), and a tail from the very start (``after = 0``, a reader that
    starts over) reads the archive too, reporting its oldest row as
    ``first``: messages dropped minutes ago come back, and a ``first`` that
    went back says so. Proven by ``ring-tail`` (``first-regressed``), also
    once the checker forgot those messages (:mod:`knell.checker.stream.settle`).
    """

    stream_triggers = (*_DROP, STREAM_GUARD.replace(" IF NOT EXISTS", ""), _TRIM_KEEPING_ROWS)

    def _page_of(
        self, channel: str, after: int, limit: int, include_expired: bool = False
    ) -> StreamPage:
        page = super()._page_of(channel, after, limit, include_expired)
        if after > 0 or include_expired:
            return page
        low = self._db.execute(
            "SELECT MIN(seq) FROM messages WHERE channel = ?", (channel,)
        ).fetchone()[0]
        if low is None or int(low) >= page.first:
            return page
        # the bug: the archive is read as if it were the ring
        messages, expired = self._held_after(channel, 0, int(low), limit)
        return StreamPage(channel, messages, int(low), page.head, expired)
