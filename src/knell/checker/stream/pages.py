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

A page is one read of the ring (the reference bus reads it in one
snapshot), so its ``head`` and its messages agree.
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
        self._firsts: dict[str, _Firsts] = {}

    @on_op(TAIL_F, "ok")
    def _page(self, invoke: Event | None, done: Event) -> None:
        page = page_of(done)
        self._pages += 1
        self._messages += len(page.seqs)
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
            if i and seq > page.seqs[i - 1] + 1:
                self._report(
                    "silent-gap",
                    f"{where} jumped from seq {page.seqs[i - 1]} to {seq}: the ring holds "
                    f"{page.first}..{page.head}, so it skipped seqs it still holds",
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
        if page.seqs and page.after < page.seqs[0] < page.first:
            self._report(
                "below-first",
                f"{where} showed seq {page.seqs[0]}, which the ring says it no longer holds",
                witness(done),
            )
        elif page.seqs and page.seqs[0] > start and start <= page.head:
            self._report(
                "silent-gap",
                f"{where} started at seq {page.seqs[0]}, not {start}: it skipped seqs the ring "
                "still holds, without saying so",
                witness(done),
            )
        elif start <= page.head:
            owed = min(page.limit, page.head - start + 1)
            if len(page.seqs) < owed and (not page.seqs or page.seqs[0] == start):
                self._report(
                    "silent-gap",
                    f"{where} showed {len(page.seqs)} message(s) with room for {page.limit}: "
                    f"it left out seqs up to the head that the ring still holds",
                    witness(done),
                )

    def result(self) -> CheckResult:
        return self._result(
            {"pages": self._pages, "messages-shown": self._messages, "fell-behind": self._behind}
        )
