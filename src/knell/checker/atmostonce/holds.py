"""role-exclusive: one run holds a role at a time.

A role hold is a lease: ``claim_role`` gives the run the role until its
deadline (the same run claiming again renews), and another run's claim is
refused with ``role-held`` while that hold is live. Everything else of the
at-most-once contract leans on it: "delivered to the holder" and "stranded
is what runs that no longer hold left unread" mean nothing if two runs
hold at once. A bus that times the hold on a client's wall clock breaks it
the moment that clock is skewed: a claimer behind writes a deadline already
past, the next claimer takes the role while the first still holds it.

Like a message lease (:mod:`knell.checker.queue.book`), a hold is never
observed, only bounded: it is *surely live* from its claim's ok until the
store's clock has surely advanced ``lease_s`` past the claim's invoke
(mapped back to true time through :mod:`knell.checker.clocks`, so a store
clock moved on purpose shortens or stretches it without blame), extended
by the holder's later claims, and not after its holder invoked
``release_role``. Anomaly ``two-live-holds``: another run's ``claim_role``
was invoked after a hold's claim returned and returned ok before that hold
surely lapsed. Witness: the hold's claim (and its last renewal) and the
other run's claim.
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.checker.base import Check, CheckResult, witness
from knell.checker.clocks import STORE
from knell.checker.consumer import on, on_op
from knell.history import Event

__all__ = ["RoleExclusiveCheck"]

NS = 1_000_000_000
TOLERANCE_NS = 10_000_000


class _Hold:
    __slots__ = ("asked", "claimed", "ended", "renewed", "sure_static", "term")

    def __init__(self, asked: Event, claimed: Event, term: tuple[int, int, int]) -> None:
        self.asked = asked
        self.claimed = claimed
        self.renewed: Event | None = None
        self.term = term
        """(invoke, ok, lease ns) of the latest claim that set the deadline"""
        self.sure_static = term[0] + term[2]
        self.ended: int | None = None


class RoleExclusiveCheck(Check):
    name: ClassVar[str] = "role-exclusive"
    anomaly_kinds: ClassVar[tuple[str, ...]] = ("two-live-holds",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._holds: dict[Any, dict[Any, _Hold]] = {}  # role -> run -> its latest hold
        self._claims = 0

    def _sure_until(self, hold: _Hold) -> int:
        clocks = self.windows.clocks
        if clocks.clock(STORE) is None:
            return hold.sure_static
        return clocks.sure_until(*hold.term)

    @on_op("claim_role", "ok")
    def _claimed(self, invoke: Event | None, done: Event) -> None:
        if invoke is None:
            return
        self._claims += 1
        role, run = done["channel"], done["value"]["run"]
        lease_ns = int(done["value"]["lease_s"] * NS)
        term = (invoke["time"], done["time"], lease_ns)
        holds = self._holds.setdefault(role, {})
        for other, hold in list(holds.items()):
            if other == run:
                continue
            ended = hold.ended is not None and hold.ended <= done["time"]
            if ended or done["time"] >= self._sure_until(hold) - TOLERANCE_NS:
                del holds[other]  # lapsed or released: never live again to this claim
                continue
            if hold.claimed["time"] >= invoke["time"]:
                continue  # the two claims overlapped: either may have come first
            self._report(
                "two-live-holds",
                None
                if self.log.full("two-live-holds")
                else f"run {run} was given role {role} while run {other}'s hold was surely "
                f"live (for {(self._sure_until(hold) - done['time']) / NS:.3f} s more)",
                witness(hold.asked, hold.claimed, hold.renewed, invoke, done),
            )
            del holds[other]  # one report per hold
        mine = holds.get(run)
        if mine is None or mine.ended is not None:
            holds[run] = _Hold(invoke, done, term)
        else:
            mine.renewed = done
            mine.term = term
            mine.sure_static = max(mine.sure_static, term[0] + term[2])

    @on("release_role", "invoke")
    def _releasing(self, event: Event) -> None:
        hold = self._holds.get(event["channel"], {}).get(event["value"]["run"])
        if hold is not None and hold.ended is None:
            hold.ended = event["time"]

    @on_op("release_role", "fail")
    def _refused(self, invoke: Event | None, done: Event) -> None:
        hold = self._holds.get(done["channel"], {}).get(done["value"]["run"])
        if hold is not None and invoke is not None and hold.ended == invoke["time"]:
            hold.ended = None  # refused: it did not end the hold

    def result(self) -> CheckResult:
        return self._result({"holds-claimed": self._claims})
