"""ring-tail: a tail page repeats nothing, skips nothing the ring holds, and
``first`` never goes back.

The contract's promise to a reader that keeps no state: a page holds
consecutive seqs, ascending, from ``max(after + 1, first)``; ``first`` is
the oldest seq the ring holds, so everything from ``first`` to ``head``
is there to be read. A page that leaves one of those out, without the
ring saying it dropped it, is a *silent* gap: the reader cannot tell it
missed anything. Anomalies, each witnessed by the page (and, for a
regression, the earlier page):

* ``duplicate``: a page shows a seq at or below its ``after`` (the reader
  had it), or the same seq twice;
* ``out-of-order``: a page's seqs go down;
* ``silent-gap``: a page starts above ``max(after + 1, first)``, jumps
  over a seq, or stops short of ``head`` with room left under ``limit``:
  in each case it skipped seqs the ring claims to hold;
* ``below-first``: a page shows a seq below the ``first`` it reports (a
  message the ring says it no longer holds);
* ``first-regressed``: a page's ``first`` is below the ``first`` of a
  page of the same channel that completed before this one was asked for
  (a trimmed message came back).

These two are what lets a stream's dropped messages be forgotten
(:mod:`knell.checker.stream.settle`): a page that shows one of them again
is reported here. The check keeps one entry per rise of ``first``, and
drops those at or below a forgotten seq.

A page is one read of the ring (the reference bus reads it in one
snapshot), so its ``head`` and its messages agree.

On a bus with the expiry feature a liveness page hides expired messages
and names their seqs (``expired``): such a seq is accounted for, not a
gap, so every rule above about where a page starts, stops and jumps is
judged over the seqs it shows *and* the seqs it hid; ``duplicate`` and
``below-first`` apply to hidden seqs too (a hidden seq at or below
``after``, or below ``first``, is as wrong as a shown one). Whether a
hidden message had really expired is the expiry check's to judge.
"""

from __future__ import annotations

import bisect
from typing import Any, ClassVar

from knell.checker.base import Check, CheckResult, witness
from knell.checker.consumer import on_op
from knell.checker.stream.book import TAIL_F, Page, page_of
from knell.history import Event

__all__ = ["RingTailCheck"]


class _Firsts:
    """One channel's ``first`` over time: the running maximum, one entry per
    rise (so at most one per seq), by completion time."""

    __slots__ = ("events", "firsts", "times")

    def __init__(self) -> None:
        self.times: list[int] = []
        self.firsts: list[int] = []
        self.events: list[Event] = []

    def add(self, time: int, first: int, event: Event) -> None:
        if not self.firsts or first > self.firsts[-1]:
            self.times.append(time)
            self.firsts.append(first)
            self.events.append(event)

    def drop_to(self, seq: int) -> None:
        """Drop the rises to a ``first`` at or below ``seq``, a forgotten
        seq: every page still to come was asked for after a page reporting a
        higher ``first`` completed, and only the highest before it counts."""
        at = bisect.bisect_right(self.firsts, seq)
        if at:
            del self.times[:at], self.firsts[:at], self.events[:at]

    def before(self, time: int) -> tuple[int, Event] | None:
        """The highest ``first`` of a page completed before ``time``."""
        at = bisect.bisect_left(self.times, time)
        if at == 0:
            return None
        return self.firsts[at - 1], self.events[at - 1]


class RingTailCheck(Check):
    name: ClassVar[str] = "ring-tail"
    anomaly_kinds: ClassVar[tuple[str, ...]] = (
        "duplicate",
        "out-of-order",
        "silent-gap",
        "below-first",
        "first-regressed",
    )

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._pages = 0
        self._messages = 0
        self._behind = 0
        self._hidden = 0
        self._firsts: dict[str, _Firsts] = {}

    @on_op(TAIL_F, "ok")
    def _page(self, invoke: Event | None, done: Event) -> None:
        page = page_of(done)
        self._pages += 1
        self._messages += len(page.seqs)
        self._hidden += len(page.expired)
        if page.first > page.after + 1:
            self._behind += 1
        if self._order(page, done):
            self._edges(page, done)
        firsts = self._firsts.setdefault(page.channel, _Firsts())
        if invoke is not None:
            earlier = firsts.before(invoke["time"])
            if earlier is not None and page.first < earlier[0]:
                self._report(
                    "first-regressed",
                    f"a tail of {page.channel!r} reported first {page.first}, below the first "
                    f"{earlier[0]} a tail reported before it was asked: a dropped message came "
                    "back",
                    witness(earlier[1], invoke, done),
                )
        firsts.add(done["time"], page.first, done)

    def _order(self, page: Page, done: Event) -> bool:
        """Within the page: ascending, consecutive, nothing at or below
        after (False: it is not, and that is reported)."""
        where = f"a tail of {page.channel!r} after {page.after}"
        seen: set[int] = set()
        for seq in page.expired:
            if seq <= page.after or seq in page.seqs:
                self._report(
                    "duplicate",
                    f"{where} listed seq {seq} as expired, but it is at or below after, or "
                    "also shown",
                    witness(done),
                )
                return False
        for i, seq in enumerate(page.seqs):
            if seq <= page.after or seq in seen:
                self._report(
                    "duplicate",
                    f"{where} showed seq {seq} again (at or below after, or twice in the page)",
                    witness(done),
                )
                return False
            seen.add(seq)
            if i and seq < page.seqs[i - 1]:
                self._report(
                    "out-of-order",
                    f"{where} showed seq {seq} after seq {page.seqs[i - 1]}",
                    witness(done),
                )
                return False
        covered = page.covered
        for i in range(1, len(covered)):
            if covered[i] > covered[i - 1] + 1:
                self._report(
                    "silent-gap",
                    f"{where} jumped from seq {covered[i - 1]} to {covered[i]}: the ring holds "
                    f"{page.first}..{page.head}, so it skipped seqs it still holds"
                    + (" (neither shown nor listed as expired)" if page.expired else ""),
                    witness(done),
                )
                return False
        return True

    def _edges(self, page: Page, done: Event) -> None:
        """Where the page starts and where it stops."""
        where = (
            f"a tail of {page.channel!r} after {page.after} (first {page.first}, head {page.head})"
        )
        start = page.start
        covered = page.covered
        if covered and page.after < covered[0] < page.first:
            self._report(
                "below-first",
                f"{where} accounted for seq {covered[0]}, which the ring says it no longer holds",
                witness(done),
            )
        elif covered and covered[0] > start and start <= page.head:
            self._report(
                "silent-gap",
                f"{where} started at seq {covered[0]}, not {start}: it skipped seqs the ring "
                "still holds, without saying so",
                witness(done),
            )
        elif start <= page.head:
            owed = min(page.limit, page.head - start + 1)
            if len(covered) < owed and (not covered or covered[0] == start):
                hidden = f" and hid {len(page.expired)} expired" if page.expired else ""
                self._report(
                    "silent-gap",
                    f"{where} showed {len(page.seqs)} message(s){hidden} with room for "
                    f"{page.limit}: it left out seqs up to the head that the ring still holds",
                    witness(done),
                )

    def forget(self, channel: Any, seq: int, mid: Any, again: bool) -> None:
        """A seq below a ``first`` that settled (:mod:`knell.checker.stream.settle`)."""
        firsts = self._firsts.get(channel)
        if firsts is not None and firsts.firsts and firsts.firsts[0] <= seq:
            firsts.drop_to(seq)

    def result(self) -> CheckResult:
        return self._result(
            {
                "pages": self._pages,
                "messages-shown": self._messages,
                "expired-hidden": self._hidden,
                "fell-behind": self._behind,
            }
        )
