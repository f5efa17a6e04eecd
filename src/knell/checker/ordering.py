"""ordering: a fetch returns one page of the log, in log order.

Readers page through a channel: ``fetch(after=n)`` must return messages
with ``seq > n`` in strictly increasing order, and the next page starts
after the last seq seen. A page that is out of order, repeats a seq, or
reaches back to ``seq <= after`` breaks that loop: a reader that acks the
last seq of a page may skip a message that sorted after it, or re-handle
ones it already passed.

Judged within each ``fetch`` ``ok`` alone (the ``after`` comes from its
invoke), so it needs no state beyond the outstanding invokes.
"""

from __future__ import annotations

from operator import lt
from typing import Any, ClassVar

from knell.checker.base import Check, CheckResult, witness
from knell.checker.consumer import on_op
from knell.history import Event

__all__ = ["OrderingCheck"]

_INT = {int}


class OrderingCheck(Check):
    name: ClassVar[str] = "ordering"
    anomaly_kinds: ClassVar[tuple[str, ...]] = ("fetch-out-of-order", "fetch-below-after")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._fetches = 0
        self._messages = 0

    @on_op("fetch", "ok")
    def _ok(self, inv: Event | None, event: Event) -> None:
        self._fetches += 1
        messages = (event.get("value") or {}).get("messages") or ()
        self._messages += len(messages)
        if not messages:
            return
        after = (inv.get("value") or {}).get("after") if inv is not None else None
        seqs = [m.get("seq") for m in messages]
        # Nearly every page is clean: plain ints, strictly increasing, the
        # first above ``after``. Proving that takes a few C-level passes
        # (types, pairwise ``<``) instead of a Python step per message;
        # anything else takes the exact path below, which finds the witness.
        if (
            set(map(type, seqs)) == _INT
            and all(map(lt, seqs, seqs[1:]))
            and (not isinstance(after, int) or isinstance(after, bool) or seqs[0] > after)
        ):
            return
        previous = None
        for seq in seqs:
            if previous is not None and isinstance(seq, int) and seq <= previous:
                self._found(
                    "fetch-out-of-order",
                    f"fetch by {event['process']} (handle {event.get('handle')}, channel "
                    f"{event.get('channel')}) returned seq {seq} after seq {previous}: "
                    f"seqs {seqs} are not strictly increasing",
                    inv,
                    event,
                )
                break
            if isinstance(seq, int):
                previous = seq
        if isinstance(after, int) and not isinstance(after, bool):
            low = [s for s in seqs if isinstance(s, int) and s <= after]
            if low:
                self._found(
                    "fetch-below-after",
                    f"fetch by {event['process']} (handle {event.get('handle')}, channel "
                    f"{event.get('channel')}) after seq {after} returned seq {low[0]}",
                    inv,
                    event,
                )

    def _found(self, kind: str, message: str, inv: Event | None, ok: Event) -> None:
        self._report(kind, message, witness(inv, ok))

    def result(self) -> CheckResult:
        return self._result({"fetches": self._fetches, "messages": self._messages})
