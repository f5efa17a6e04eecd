"""read-refusal: only the run a message was delivered to may read it.

A read marks a message handled. If a run that never received a message can
mark it read (a new holder clearing what its predecessor left, say), the
message disappears from the stranded list without anyone having acted on
it: the person who should decide whether to resend never hears of it.

* ``read-by-other``: a read returned ok for a run the message was not
  delivered to: its known delivery was to another run, or it was never
  known to be delivered and this run had no receive of unknown outcome
  that could have delivered it. Witness: the delivery (if known) and the
  read. (The holders probe this on purpose: a new holder tries to read a
  message stranded by another run.)
* ``wrong-refusal``: a read by the run a message was delivered to, refused
  as ``not-delivered-to``. Contract refusals are not errors for
  ``availability``; this keeps a bus from refusing its recipients for free.

A read of a message its recipient read and that was forgotten since
(:mod:`knell.checker.atmostonce.settle`) is counted, not judged: who it
was delivered to is no longer kept. The holders never read a message
twice, nor probe one that was read (they probe stranded ones), so what
this gives up is a bus that lets another run read a message long after
its recipient did.
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.checker.atmostonce.book import Delivered, RoleCheck
from knell.checker.base import CheckResult, witness
from knell.history import Event

__all__ = ["ReadRefusalCheck"]


class ReadRefusalCheck(RoleCheck):
    name: ClassVar[str] = "read-refusal"
    anomaly_kinds: ClassVar[tuple[str, ...]] = ("read-by-other", "wrong-refusal")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._reads = 0
        self._refused = 0

    def reading(self, invoke: Event | None, done: Event, got: Delivered | None) -> None:
        value = done["value"]
        role, mid, run = done["channel"], value["id"], value["run"]
        if done["type"] == "ok":
            self._reads += 1
            if got is not None and got.run == run:
                return
            if got is None and self.maybe_delivered_to(role, run):
                return
            whose = f"run {got.run}" if got is not None else "no run known to this history"
            self._report(
                "read-by-other",
                None
                if self.log.full("read-by-other")
                else f"message {mid} (role {role}) was delivered to {whose}, yet a read by run "
                f"{run} was accepted",
                witness(None if got is None else got.ok, invoke, done),
            )
        elif done["type"] == "fail" and value.get("refused") == "not-delivered-to":
            self._refused += 1
            if got is None or got.run != run or invoke is None:
                return
            if got.ok["time"] < invoke["time"]:
                self._report(
                    "wrong-refusal",
                    None
                    if self.log.full("wrong-refusal")
                    else f"message {mid} (role {role}) was delivered to run {run}, yet its read "
                    f"by that run was refused as not-delivered-to",
                    witness(got.invoke, got.ok, invoke, done),
                )

    def read_forgotten(self, invoke: Event | None, done: Event) -> None:
        """Counted, not judged: who the message was delivered to is forgotten."""
        if done["type"] == "ok":
            self._reads += 1
        elif done["type"] == "fail" and done["value"].get("refused") == "not-delivered-to":
            self._refused += 1

    def result(self) -> CheckResult:
        return self._result({"reads-ok": self._reads, "refused-not-delivered-to": self._refused})
