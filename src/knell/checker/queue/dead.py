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
  ``max_deliveries``, even counting as one of its deliveries every claim
  on its channel that may have returned it unseen: every claim still in
  flight when the listing returned (a claimer lists dead letters while
  others claim), and every claim of unknown outcome (it timed out, or its
  process died) that ended after the message's post was invoked (one
  that ended before could not have taken it). Witness: the declaration,
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

from bisect import bisect_left, insort
from typing import Any, ClassVar

from knell.checker.base import CheckResult, witness
from knell.checker.consumer import on, on_op
from knell.checker.inflight import died_in_flight
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
        self._posted: dict[tuple[Any, Any], int] = {}
        """a queue message's first post invoke: no claim that ended before
        it could have delivered the message"""
        self._inflight: dict[Any, set[tuple[Any, Any]]] = {}
        """per channel, the claims invoked and not yet returned: (process,
        incarnation)"""
        self._unknown: dict[Any, list[int]] = {}
        """per channel, when each claim of unknown outcome ended (sorted)"""
        self._dead: dict[tuple[Any, Any], Event] = {}
        self._reported: set[tuple[tuple[Any, Any], str]] = set()
        self._forgotten = 0
        self._forgotten_dead = 0

    @on("post", "invoke")
    def _post(self, event: Event) -> None:
        setting = self.settings.get(event["channel"])
        if setting is not None and setting.declared is not None:
            self._posted.setdefault((event["channel"], event["value"]["id"]), event["time"])

    @on("claim", "invoke")
    def _claim_invoked(self, event: Event) -> None:
        self.now = max(self.now, event["time"])
        claims = self._inflight.get(event["channel"])
        if claims is None:
            claims = self._inflight[event["channel"]] = set()
        claims.add((event["process"], event.get("incarnation")))

    def _returned(self, event: Event) -> bool:
        """The claim of ``event``'s process is no longer in flight; False
        if it was not (its process's death accounted for it already)."""
        claims = self._inflight.get(event["channel"])
        key = (event["process"], event.get("incarnation"))
        if claims is None or key not in claims:
            return False
        claims.discard(key)
        return True

    def _unknown_at(self, channel: Any, end: int) -> None:
        insort(self._unknown.setdefault(channel, []), end)

    @on_op("claim", "info", "fail", "lost")
    def _claim_unknown(self, invoke: Event | None, done: Event | None) -> None:
        event = done or invoke
        if event is None or not self._returned(event):
            return
        if done is None:
            self._unknown_at(event["channel"], self.now)
        elif done["type"] == "info":
            self._unknown_at(event["channel"], done["time"])

    @on("kill", "info")
    @on("crash", "info")
    def _died(self, event: Event) -> None:
        """A claim in flight in a process that died: its outcome is unknown,
        and it ended at the death."""
        self.now = max(self.now, event["time"])
        for channel, claims in self._inflight.items():
            for key in died_in_flight(event, claims):
                claims.discard(key)
                self._unknown_at(channel, event["time"])

    def _maybe_delivered(self, channel: Any, key: tuple[Any, Any]) -> int:
        """How many claims on ``channel`` may have delivered message
        ``key`` unseen, as of now (module docstring, ``dead-early``)."""
        ends = self._unknown.get(channel, ())
        since = self._posted.get(key)
        unknown = len(ends) - (0 if since is None else bisect_left(ends, since))
        return unknown + len(self._inflight.get(channel, ()))

    def claimed(self, invoke: Event | None, done: Event, lease: Lease | None) -> None:
        self._returned(done)
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
        self._posted.pop((channel, mid), None)

    def claimed_forgotten(self, invoke: Event, done: Event) -> None:
        self._returned(done)
        value = done["value"]
        if not self.was_dead(done["channel"], value["seq"]):
            return
        self._report(
            "claimed-after-dead",
            None
            if self.log.full("claimed-after-dead")
            else f"message {value['id']} (channel {done['channel']}, seq {value['seq']}) was "
            f"claimed by {value.get('consumer')} after a dead-letter listing showed it dead "
            f"(long before: knell had settled and forgotten it)",
            witness(invoke, done),
        )

    def _flag(self, key: tuple[Any, Any], kind: str, message: str, events: list[Any]) -> None:
        if (key, kind) in self._reported:
            return
        self._reported.add((key, kind))
        self._report(kind, None if self.log.full(kind) else message, witness(*events))

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
            if known >= most:
                continue
            unknown = self._maybe_delivered(channel, key)
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
