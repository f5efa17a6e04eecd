"""at-most-once: no message is delivered twice for one role, across holders.

The at-most-once promise is the reason this delivery mode exists: a
message may have been acted on by the run it reached even though that run
never marked it read (it crashed right after acting, say), so handing it
to the next holder can do the work twice. A bus that "helpfully" routes a
departed run's unread messages to the new holder, or redelivers on every
receive until a read, breaks exactly that.

Anomaly ``redelivered``: a message that two receives (of any runs, the
same run included) returned ok. Witness: both receives, invoke and ok;
for a message read and forgotten since (:mod:`knell.checker.atmostonce.settle`),
the second receive alone.
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.checker.atmostonce.book import Delivered, Key, RoleCheck
from knell.checker.base import CheckResult, witness
from knell.history import Event

__all__ = ["AtMostOnceCheck"]


class AtMostOnceCheck(RoleCheck):
    name: ClassVar[str] = "at-most-once"
    anomaly_kinds: ClassVar[tuple[str, ...]] = ("redelivered",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._reported: set[Key] = set()

    def delivery(
        self, key: Key, first: Delivered | None, invoke: Event | None, done: Event
    ) -> None:
        if first is None or key in self._reported:
            return
        self._reported.add(key)
        self._report(
            "redelivered",
            None
            if self.log.full("redelivered")
            else f"message {key[1]} (role {key[0]}) was delivered to run {first.run} and "
            f"again to run {done['value']['run']}",
            witness(first.invoke, first.ok, invoke, done),
        )

    def delivered_forgotten(self, invoke: Event | None, done: Event, entry: Any) -> None:
        self._report(
            "redelivered",
            None
            if self.log.full("redelivered")
            else f"message {entry.get('id')} (role {done['channel']}, seq {entry.get('seq')}) "
            f"was delivered again, to run {done['value']['run']}, long after its recipient "
            "read it (knell had settled and forgotten it)",
            witness(invoke, done),
        )

    def result(self) -> CheckResult:
        return self._result({"delivered": len(self.delivered) + self.forgotten_delivered})
