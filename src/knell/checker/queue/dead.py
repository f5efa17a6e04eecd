"""dead-letter: dead after exactly ``max_deliveries`` deliveries, and for good.

A message that fails every time it is tried (a poison packet) must not
circulate forever, crowding out good work and re-running its side effects:
after ``max_deliveries`` deliveries without a done it is dead, set aside
where a person can see it (the dead-letter listing). Neither earlier (a
message given up on before its tries are used, say after a single crash)
nor later (an attempt count that resets when the lease lapses, so it is
never dead).

* ``over-delivered``: a message claimed more than ``max_deliveries``
  times. Witness: the queue's declaration and every claim of it.
* ``dead-early``: a message listed dead with fewer known deliveries than
  ``max_deliveries``, even counting every claim on its channel whose
  outcome was unknown by then as one of its deliveries. Witness: the declaration,
  its claims, the listing.
* ``claimed-after-dead``: a message claimed after a dead-letter listing
  showed it dead. Witness: the listing and the claim.

The check reads ``max_deliveries`` from the channel's ``declare`` (the
bus's own answer, so the first declaration wins).

A done or dead message forgotten once settled
(:mod:`knell.checker.queue.settle`) drops its claims and listing (counted);
a listing that names it after that is passed over; a claim of a forgotten
dead message is still ``claimed-after-dead``, witnessed by the claim (of a
done one, ``done-terminal``'s finding).
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.checker.base import CheckResult, witness
from knell.checker.consumer import on_op
from knell.checker.queue.book import Lease, QueueCheck
from knell.history import Event

__all__ = ["DeadLetterCheck"]


class DeadLetterCheck(QueueCheck):
    name: ClassVar[str] = "dead-letter"
    anomaly_kinds: ClassVar[tuple[str, ...]] = (
        "over-delivered",
        "dead-early",
        "claimed-after-dead",
    )

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._claims: dict[tuple[Any, Any], list[Event]] = {}
        self._unknown: dict[Any, int] = {}
        self._dead: dict[tuple[Any, Any], Event] = {}
        self._reported: set[tuple[tuple[Any, Any], str]] = set()
        self._forgotten = 0
        self._forgotten_dead = 0

    @on_op("claim", "info", "lost")
    def _claim_unknown(self, invoke: Event | None, done: Event | None) -> None:
        event = done or invoke
        if event is not None:
            self._unknown[event["channel"]] = self._unknown.get(event["channel"], 0) + 1

    def claimed(self, invoke: Event | None, done: Event, lease: Lease | None) -> None:
        if lease is None:
            return
        key = (done["channel"], done["value"]["id"])
        claims = self._claims.setdefault(key, [])
        most = self.setting(key[0]).max_deliveries
        if most is None or len(claims) <= most:
            claims.append(done)  # the witness of an over-delivery needs no more
        else:
            return  # reported already
        dead = self._dead.get(key)
        if dead is not None and invoke is not None and invoke["time"] > dead["time"]:
            self._flag(
                key,
                "claimed-after-dead",
                f"message {key[1]} (channel {key[0]}) was claimed by {lease.consumer} after a "
                f"dead-letter listing showed it dead",
                [dead, invoke, done],
            )
        if most is not None and len(claims) == most + 1:
            self._flag(
                key,
                "over-delivered",
                f"message {key[1]} (channel {key[0]}) was claimed {len(claims)} times, but "
                f"max_deliveries is {most}: it should have been dead after {most}",
                [self.setting(key[0]).declared, *claims],
            )

    def forget(self, channel: Any, seq: int, mid: Any, again: bool) -> None:
        super().forget(channel, seq, mid, again)
        if self._claims.pop((channel, mid), None) is not None:
            self._forgotten += 1
        if self._dead.pop((channel, mid), None) is not None:
            self._forgotten_dead += 1

    def claimed_forgotten(self, invoke: Event, done: Event) -> None:
        value = done["value"]
        if not self.was_dead(done["channel"], value["seq"]):
            return
        self._report(
            "claimed-after-dead",
            None
            if self.log.full
            else f"message {value['id']} (channel {done['channel']}, seq {value['seq']}) was "
            f"claimed by {value.get('consumer')} after a dead-letter listing showed it dead "
            f"(long before: knell had settled and forgotten it)",
            witness(invoke, done),
        )

    def _flag(self, key: tuple[Any, Any], kind: str, message: str, events: list[Any]) -> None:
        if (key, kind) in self._reported:
            return
        self._reported.add((key, kind))
        self._report(kind, None if self.log.full else message, witness(*events))

    @on_op("dead", "ok")
    def _listed(self, invoke: Event | None, done: Event) -> None:
        channel = done["channel"]
        most = self.setting(channel).max_deliveries
        for entry in done["value"]["messages"]:
            if self.is_forgotten(channel, entry.get("seq")):
                continue
            key = (channel, entry["id"])
            self._dead.setdefault(key, done)
            if most is None:
                continue
            known = len(self._claims.get(key, ()))
            unknown = self._unknown.get(channel, 0)
            if known + unknown < most:
                self._flag(
                    key,
                    "dead-early",
                    f"message {key[1]} (channel {channel}) was listed dead after {known} known "
                    f"deliveries (and at most {unknown} unknown ones), but max_deliveries is "
                    f"{most}",
                    [self.setting(channel).declared, *self._claims.get(key, ()), done],
                )

    def result(self) -> CheckResult:
        claimed = len(self._claims) + self._forgotten
        dead = len(self._dead) + self._forgotten_dead
        return self._result({"dead": dead, "claimed": claimed})
