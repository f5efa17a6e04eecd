"""lease-exclusive: never two live leases on one message.

The point of a work queue is that one packet of work has one worker at a
time. A bus that lets two consumers hold live leases on the same message
at once (a claim that reads "unclaimed" and writes "mine" without an
atomic guard, so two claimers racing for the oldest message both win)
makes two agents do the same work, both believing they own it, and
whichever finishes second overwrites the first.

Two leases are proven live at once when, at the moment the later claim
completed, both had been granted and neither could have lapsed or been
ended: the later claim's ok comes before the earlier lease's ``sure_until``
(its claim's invoke + ``lease_s``, extended by completed renewals) and
before its holder invoked ``done`` or ``release``. A lease that lapsed
and was claimed again is not a violation, however short the gap.

Anomaly ``two-live-leases``; witness: both claims (invoke and ok), and the
renewal that kept the first one alive, if any.
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.checker.base import CheckResult, witness
from knell.checker.queue.book import NS, TOLERANCE_NS, Lease, QueueCheck
from knell.history import Event

__all__ = ["LeaseExclusiveCheck"]


class LeaseExclusiveCheck(QueueCheck):
    name: ClassVar[str] = "lease-exclusive"
    anomaly_kinds: ClassVar[tuple[str, ...]] = ("two-live-leases",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._claims = 0

    def claimed(self, invoke: Event | None, done: Event, lease: Lease | None) -> None:
        if lease is None:
            return
        self._claims += 1
        mid = done["value"]["id"]
        at = done["time"]
        if at >= lease.sure_until - TOLERANCE_NS:
            return  # the new lease itself may have lapsed already
        for earlier in self.live.get((done["channel"], mid), ()):
            if at >= earlier.sure_until - TOLERANCE_NS:
                continue
            if earlier.ended is not None and earlier.ended <= at:
                continue
            self._report(
                "two-live-leases",
                None
                if self.log.full("two-live-leases")
                else f"message {mid} (channel {done['channel']}) was leased to "
                f"{lease.consumer} while {earlier.consumer} still surely held it: the earlier "
                f"lease runs until at least {(earlier.sure_until - at) / NS:.3f} s after the "
                f"second claim returned",
                witness(earlier.invoke, earlier.ok, earlier.renewed, lease.invoke, lease.ok),
            )
            return

    def result(self) -> CheckResult:
        return self._result({"leases": self._claims})
