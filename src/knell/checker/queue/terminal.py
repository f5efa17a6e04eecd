"""done-terminal: a message marked done is never claimed again.

``done`` is the end of a work packet: the worker is telling the queue
"this is finished, never hand it out again". A bus whose done merely
drops the lease (the message looks claimable again) or whose sweep
resurrects done messages makes finished work run again, silently.

Anomaly ``claimed-after-done``: a claim that returned a message and was
invoked after a ``done`` of that message had completed ok. Witness: the
done (invoke and ok) and the claim (invoke and ok). A done message is
forgotten once settled (:mod:`knell.checker.queue.settle`); a claim of it
after that is still this anomaly (every claim invoked before its done
completed had completed by then), witnessed by the claim alone.
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.checker.base import CheckResult, witness
from knell.checker.queue.book import Lease, QueueCheck
from knell.history import Event

__all__ = ["DoneTerminalCheck"]


class DoneTerminalCheck(QueueCheck):
    name: ClassVar[str] = "done-terminal"
    anomaly_kinds: ClassVar[tuple[str, ...]] = ("claimed-after-done",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._done: dict[tuple[Any, Any], tuple[Event | None, Event]] = {}
        self._forgotten = 0

    def verb(self, invoke: Event | None, done: Event, lease: Lease | None) -> None:
        if done["f"] == "done" and done["type"] == "ok":
            self._done.setdefault((done["channel"], done["value"]["id"]), (invoke, done))

    def claimed(self, invoke: Event | None, done: Event, lease: Lease | None) -> None:
        if lease is None or invoke is None:
            return
        mid = done["value"]["id"]
        finished = self._done.get((done["channel"], mid))
        if finished is None or finished[1]["time"] >= invoke["time"]:
            return
        self._report(
            "claimed-after-done",
            None
            if self.log.full("claimed-after-done")
            else f"message {mid} (channel {done['channel']}) was claimed by {lease.consumer} "
            f"after {finished[1]['value'].get('consumer')} had marked it done",
            witness(finished[0], finished[1], invoke, done),
        )

    def claimed_forgotten(self, invoke: Event, done: Event) -> None:
        value = done["value"]
        if self.was_dead(done["channel"], value["seq"]):
            return  # dead, not done: dead-letter's finding
        self._report(
            "claimed-after-done",
            None
            if self.log.full("claimed-after-done")
            else f"message {value['id']} (channel {done['channel']}, seq {value['seq']}) was "
            f"claimed by {value.get('consumer')} after it had been marked done (its done "
            f"completed long before: knell had settled and forgotten it)",
            witness(invoke, done),
        )

    def forget(self, channel: Any, seq: int, mid: Any, again: bool) -> None:
        super().forget(channel, seq, mid, again)
        if self._done.pop((channel, mid), None) is not None:
            self._forgotten += 1

    def result(self) -> CheckResult:
        return self._result({"done": len(self._done) + self._forgotten})
