"""ring-bound: the ring never holds more than its bound once a post completed.

A stream's ring is declared with a count bound (``max_len``), an age bound
(``max_age_s``) or both (the ``declare_stream`` ok says which the bus
holds). The bus trims in the post's own write, so:

* ``over-count``: a page asked for after a post of seq ``s`` completed
  reports a ``first`` (or shows a seq) below ``s - max_len + 1``: the ring
  held more than ``max_len`` messages after that post. Witness: the post's
  ok and the page.
* ``over-age``: a page asked for more than ``max_age_s +``
  :data:`AGE_TOLERANCE` seconds after a post completed shows that post's
  message: it was older than its bound. Witness: the post's ok and the page.

A post the ring surely dropped is forgotten
(:mod:`knell.checker.stream.settle`): a page showing it again is
``ring-tail``'s finding, so its age is no longer needed.

Ages are judged by the history's clock, which on the reference bus is the
store's own (one machine); the tolerance covers the time between a post's
timestamp and its completion, and a reader's invoke and its read.
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.checker.base import Check, CheckResult, witness
from knell.checker.consumer import on, on_op
from knell.checker.keep import Held, keep, unkeep
from knell.checker.stream.book import TAIL_F, page_of
from knell.history import Event

__all__ = ["AGE_TOLERANCE", "RingBoundCheck"]

AGE_TOLERANCE = 0.5
"""Seconds past ``max_age_s`` before a message shown by a page counts as too old."""

_NS = 1_000_000_000


class RingBoundCheck(Check):
    name: ClassVar[str] = "ring-bound"
    anomaly_kinds: ClassVar[tuple[str, ...]] = ("over-count", "over-age")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._bounds: dict[str, tuple[int | None, float | None]] = {}
        self._posted: dict[str, tuple[int, Event]] = {}
        """channel -> the highest seq whose post completed ok, and that ok."""
        self._at: dict[str, dict[int, tuple[int, Held]]] = {}
        """channel with an age bound -> seq -> its post's ok (for ages): only
        those channels are kept, so a broadcast run keeps nothing here."""
        self._asked: dict[tuple[str, int], tuple[int, Event] | None] = {}
        """(process, incarnation) -> the highest post ok when its tail was invoked."""
        self._judged = 0

    @on("declare_stream", "ok")
    def _declared(self, event: Event) -> None:
        value = event["value"]
        self._bounds.setdefault(event["channel"], (value.get("max_len"), value.get("max_age_s")))
        if self._bounds[event["channel"]][1] is not None:
            self._at.setdefault(event["channel"], {})

    @on("post", "ok")
    def _post_ok(self, event: Event) -> None:
        channel, seq = event["channel"], event["value"]["seq"]
        best = self._posted.get(channel)
        if best is None or seq > best[0]:
            self._posted[channel] = (seq, event)
        ages = self._at.get(channel)
        if ages is not None:  # posts before the declaration's ok are not aged
            ages[seq] = (event["time"], keep(event))

    @on(TAIL_F, "invoke")
    def _tail_invoke(self, event: Event) -> None:
        self._asked[(event["process"], event.get("incarnation", 1))] = self._posted.get(
            event["channel"]
        )

    @on_op(TAIL_F, "ok")
    def _page(self, invoke: Event | None, done: Event) -> None:
        if invoke is None:
            return
        page = page_of(done)
        max_len, max_age_s = self._bounds.get(page.channel, (None, None))
        if max_len is None and max_age_s is None:
            return  # no declared ring seen: nothing to hold it to
        self._judged += 1
        posted = self._asked.pop((invoke["process"], invoke.get("incarnation", 1)), None)
        lowest = min((page.first, *page.seqs))
        if max_len is not None and posted is not None and lowest < posted[0] - max_len + 1:
            self._report(
                "over-count",
                f"a tail of {page.channel!r} asked for after the post of seq {posted[0]} "
                f"completed found the ring holding seq {lowest}: more than max_len {max_len}",
                witness(posted[1], invoke, done),
            )
        if max_age_s is None:
            return
        limit = (max_age_s + AGE_TOLERANCE) * _NS
        ages = self._at.get(page.channel, {})
        for seq in page.seqs:
            stamped = ages.get(seq)
            if stamped is not None and invoke["time"] - stamped[0] > limit:
                post = unkeep(stamped[1])
                age = (invoke["time"] - stamped[0]) / _NS
                self._report(
                    "over-age",
                    f"a tail of {page.channel!r} showed seq {seq}, posted {age:.2f} s before "
                    f"it was asked for: older than max_age_s {max_age_s} (+{AGE_TOLERANCE} s)",
                    witness(post, invoke, done),
                )
                return

    def forget(self, channel: Any, seq: int, mid: Any, again: bool) -> None:
        """A post the ring surely dropped (:mod:`knell.checker.stream.settle`)."""
        ages = self._at.get(channel)
        if ages is not None:
            ages.pop(seq, None)

    def result(self) -> CheckResult:
        return self._result({"pages-judged": self._judged})
