"""ring-content: a tail page shows, at each seq, the message posted there.

A ring that trims by deleting rows, or that reuses positions after a
trim, can hand a reader another message at a seq it already read, or a
message that nobody posted at that position. Posts are the ground truth:
a post's ``ok`` says which id the bus put at which seq. Anomalies, each
witnessed by the post and the page:

* ``wrong-body``: a page shows an id at a seq where a post's ok put
  another id, or shows a posted id at another seq than its post's ok;
* ``phantom``: a page shows an id that no post ever asked for.

A post whose outcome is unknown proves nothing about its seq, so only
posts that completed ok are compared (an indeterminate post's id may show
up anywhere, once).

It also measures the figure a direct tail is compared by: post-to-page
latency, from a post's invoke to the completion of the first page that
showed it (the SSE tail's counterpart is ``tail-continuity``'s).

What it keeps: the posts of stream channels only (a channel whose
``declare_stream`` was asked for; knell's producers declare a ring before
their first post), packed (:mod:`knell.checker.keep`). A channel posted to
before any declaration was asked for is not judged: its early posts were
not kept, and an id among them would look like a phantom. A post the ring
surely dropped is forgotten (:mod:`knell.checker.stream.settle`): a page
showing its seq again is passed over (``ring-tail`` reports that page),
and one showing its id at a new seq is ``phantom``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.checker.base import Check, CheckResult, witness
from knell.checker.consumer import on, on_op
from knell.checker.keep import Held, keep
from knell.checker.stream.book import TAIL_F, page_of
from knell.history import Event
from knell.stats import Tally

__all__ = ["RingContentCheck"]


class RingContentCheck(Check):
    name: ClassVar[str] = "ring-content"
    anomaly_kinds: ClassVar[tuple[str, ...]] = ("wrong-body", "phantom")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._at: dict[str, dict[int, tuple[str, Held]]] = {}
        """stream channel -> seq -> the id a post's ok put there, and that ok."""
        self._seq_of: dict[str, dict[str, int]] = {}
        """stream channel -> id -> the seq its post's ok returned."""
        self._asked: dict[str, dict[str, int]] = {}
        """stream channel -> the id of every post invoked on it -> the time
        of its first invoke (``-1`` once a page showed it)."""
        self._unsure: set[str] = set()
        """Channels posted to before any declaration of a stream was asked
        for: their early posts were not recorded, so nothing is judged there."""
        self._compared = 0
        self._latency = Tally()  # bounded: a soak's pages are counted, not kept

    @on("declare_stream", "invoke")
    def _declare(self, event: Event) -> None:
        channel = event["channel"]
        self._asked.setdefault(channel, {})
        self._at.setdefault(channel, {})
        self._seq_of.setdefault(channel, {})

    @on("post", "invoke")
    def _post_invoke(self, event: Event) -> None:
        asked = self._asked.get(event["channel"])
        if asked is None:
            # Only stream channels are recorded (the rest never show in a
            # page): what this check keeps is what a ring can hold.
            self._unsure.add(event["channel"])
            return
        asked.setdefault(event["value"]["id"], event["time"])

    @on("post", "ok")
    def _post_ok(self, event: Event) -> None:
        channel, value = event["channel"], event["value"]
        at = self._at.get(channel)
        if at is None:
            return
        if value["seq"] not in at:
            at[value["seq"]] = (value["id"], keep(event))
        self._seq_of[channel].setdefault(value["id"], value["seq"])

    @on_op(TAIL_F, "ok")
    def _page(self, invoke: Event | None, done: Event) -> None:
        page = page_of(done)
        at, asked = self._at.get(page.channel), self._asked.get(page.channel)
        if at is None or asked is None or page.channel in self._unsure:
            return  # not a channel whose every post was recorded
        seq_of = self._seq_of[page.channel]
        forgotten = self.forgotten
        for seq, mid in zip(page.seqs, page.ids, strict=True):
            if forgotten is not None and forgotten.has(page.channel, seq):
                continue  # below a first the ring reported: ring-tail's finding
            posted = at.get(seq)
            if posted is not None:
                self._compared += 1
                if posted[0] != mid:
                    self._report(
                        "wrong-body",
                        f"a tail of {page.channel!r} showed {mid} at seq {seq}, where the post "
                        f"of {posted[0]} was acknowledged",
                        witness(posted[1], done),
                    )
                    return
            invoked = asked.get(mid)
            if invoked is not None and invoked >= 0:
                self._latency.add((done["time"] - invoked) / 1e9)
                asked[mid] = -1
            if posted is None and invoked is None:
                self._report(
                    "phantom",
                    f"a tail of {page.channel!r} showed {mid} at seq {seq}, which no process "
                    "ever posted",
                    witness(done),
                )
                return
            was = seq_of.get(mid)
            if was is not None and was != seq:
                self._report(
                    "wrong-body",
                    f"a tail of {page.channel!r} showed {mid} at seq {seq}, but its post was "
                    f"acknowledged at seq {was}",
                    witness(at[was][1], done),
                )
                return

    def forget(self, channel: Any, seq: int, mid: Any, again: bool) -> None:
        """A post the ring surely dropped (:mod:`knell.checker.stream.settle`)."""
        at = self._at.get(channel)
        if at is None:
            return
        at.pop(seq, None)
        self._seq_of[channel].pop(mid, None)
        self._asked[channel].pop(mid, None)

    def result(self) -> CheckResult:
        metrics: dict[str, float | int | None] = {
            "latency_p50_s": self._latency.percentile(0.5),
            "latency_p99_s": self._latency.percentile(0.99),
        }
        return self._result({"compared": self._compared}, metrics)
