"""no-duplicate-seq: one message per (channel, seq), one seq per message.

A broadcast channel is a log: ``post`` appends at the next ``seq`` (1, 2,
3 ...) and every reader agrees on what sits at each position. Cursors are
positions in that log, so if two different messages ever appear at one
``(channel, seq)`` (two writers raced for the same slot, a failover
re-used a position) then a handle that acked that seq has silently skipped
one of them. The mirror image is one message id at two seqs in one
channel: an idempotent replay that appended a second copy, or a reader
that was shown a message at a shifted position.

Observations come from ``post`` ok (the seq the bus assigned) and every
message a reader was shown: each distinct ``(channel, seq, id)`` of the
``fetch`` ok pages and ``handle`` events, delivered once by the driver
(a repeat of a triple cannot tell anything new). The check keeps one entry
per position and one per id, so memory is proportional to the number of
messages however often each is re-read. It cannot forget one: a second
message at an old seq, or an old message at a new one, may be shown at any
later time (a failover, a reader paging from the start), and only the
first sighting, kept as the witness, makes that a finding. In a run that
forgets (:mod:`knell.checker.settle`), it drops a message once it settled
and the workload's retry horizon passed: a repeat or a retry after that
is passed over, and a duplicate at a forgotten seq or of a forgotten id
is past what the check can see (the reason to keep the horizon longer
than any retry the workload makes, and why a reader that goes back to a
forgotten seq is first of all a cursor regression).

Gaps (positions below a channel's highest seq that nobody ever observed)
are reported as a metric, not a violation: seqs are dense, but a gap may be
an indeterminate post that landed and was never read.
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.checker.base import Check, CheckResult, witness
from knell.checker.consumer import on, on_delivery
from knell.checker.keep import Held, keep
from knell.history import Event

__all__ = ["SeqCheck"]


class SeqCheck(Check):
    name: ClassVar[str] = "no-duplicate-seq"
    anomaly_kinds: ClassVar[tuple[str, ...]] = ("duplicate-seq", "id-at-two-seqs")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        # channel -> seq -> (id, first event that showed it)
        self._by_seq: dict[Any, dict[Any, tuple[Any, Held]]] = {}
        # channel -> id -> (seq, first event that showed it), or only the seq
        # (an int) when that event is the one kept for the seq in _by_seq
        # (the common case: a message first shown at a fresh seq)
        self._by_id: dict[Any, dict[Any, Any]] = {}
        # (channel, seq, id) already reported as a second message at that seq
        self._dups: set[tuple[Any, Any, Any]] = set()
        self._forgotten_positions = 0
        self._forgotten_ids = 0
        # channel -> highest seq forgotten (for the highest seq and gaps)
        self._forgotten_top: dict[Any, int] = {}

    @on("post", "ok")
    def _post_ok(self, event: Event) -> None:
        value = event["value"]
        forgotten = self.forgotten
        if forgotten is not None and forgotten.has(event["channel"], value["seq"]):
            return  # a retry answered with a forgotten message's seq
        self.deliver(event["channel"], value["seq"], value["id"], event)

    def forget(self, channel: Any, seq: int, mid: Any, again: bool) -> None:
        by_seq = self._by_seq.get(channel)
        if by_seq is None:
            return
        if by_seq.pop(seq, None) is not None:
            self._forgotten_positions += 1
        if self._by_id[channel].pop(mid, None) is not None:
            self._forgotten_ids += 1
        if seq > self._forgotten_top.get(channel, 0):
            self._forgotten_top[channel] = seq

    @on_delivery
    def deliver(self, channel: Any, seq: Any, mid: Any, event: Event) -> None:
        by_seq = self._by_seq.get(channel)
        if by_seq is None:
            by_seq = self._by_seq[channel] = {}
            self._by_id[channel] = {}
        prev = by_seq.get(seq)
        if prev is None or prev[0] != mid:
            self._see(channel, seq, mid, event)

    def _see(self, channel: Any, seq: Any, mid: Any, event: Event) -> None:
        by_seq = self._by_seq[channel]
        prev = by_seq.get(seq)
        fresh = prev is None
        if prev is None:
            by_seq[seq] = (mid, keep(event))
        elif prev[0] == mid:
            return  # this (channel, seq, id) was fully examined before
        elif (channel, seq, mid) in self._dups:
            return
        else:
            self._dups.add((channel, seq, mid))
            self._report(
                "duplicate-seq",
                f"two messages at channel {channel} seq {seq}: {prev[0]} "
                f"(seen by {prev[1]['process']}) and {mid} (seen by {event['process']})",
                witness(prev[1], event),
            )
        by_id = self._by_id[channel]
        other = by_id.get(mid)
        if other is None:
            by_id[mid] = seq if fresh and type(seq) is int else (seq, keep(event))
            return
        if type(other) is int:
            other = (other, by_seq[other][1])
        if other[0] != seq:
            self._report(
                "id-at-two-seqs",
                f"message {mid} appears at two seqs in channel {channel}: {other[0]} "
                f"(seen by {other[1]['process']}) and {seq} (seen by {event['process']})",
                witness(other[1], event),
            )

    def result(self) -> CheckResult:
        highest: dict[Any, int] = {}
        distinct: dict[Any, int] = {}
        forgotten = self.forgotten
        dropped = forgotten.channels() if forgotten is not None else {}
        for channel, by_seq in self._by_seq.items():
            seqs = [seq for seq in by_seq if isinstance(seq, int)]
            distinct[channel] = len(seqs) + dropped.get(channel, 0)
            highest[channel] = max(max(seqs, default=0), self._forgotten_top.get(channel, 0))
        gaps = sum(max(0, highest.get(ch, 0) - n) for ch, n in distinct.items())
        metrics: dict[str, float | int | None] = {
            "channels": len(distinct),
            "gaps": gaps,
            "max-seq": max(highest.values(), default=0),
        }
        counts = {
            "positions": sum(map(len, self._by_seq.values())) + self._forgotten_positions,
            "ids": sum(map(len, self._by_id.values())) + self._forgotten_ids,
        }
        return self._result(counts, metrics)
