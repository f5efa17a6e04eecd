"""nothing-vanishes: every message to a role ends read, pending, or listed.

At-most-once delivery trades redelivery for visibility: a message may go
unread, but then it must still be somewhere a person can find it. At the
end of a run every message posted to a role must be read (by the run it
was delivered to), still pending (undelivered: the final phase receives
those, so none should remain), or in the stranded list. A bus that marks
messages read when it delivers them, or forgets deliveries, makes work
disappear with nobody told.

Decided at the end. The role's final phase (see :mod:`knell.final_phase`)
is one last run that takes the role, receives and reads everything
pending, and lists the stranded messages; the runner records it as a
``drain`` with ``contract = "at-most-once"``. After it, a message whose
post returned ok (or that a receive showed) must have been read (a read
that returned ok, or whose outcome is unknown) or appear in that last
listing. Otherwise it ``vanished``; witness: its post, its delivery (if
known), the final listing and the drain. When the final list is full (the
cap is 50) a message that may lie beyond the cap (its receive returned
no earlier than the last listed delivery: one receive delivers several
messages at one instant) cannot be judged: the
result is then "unknown", with the reason, as it is without a completed
final phase.

What it keeps, and for how long: per message its post invoke and the proof
that it landed (packed, :mod:`knell.checker.keep`), and the messages read.
A message vanished only if it was never read and the last listing after
the final phase lacks it, so a message its recipient read is decided: once
settled (:mod:`knell.checker.atmostonce.settle`) it is counted read and
forgotten. Every other message is kept to the end.

A message posted with ``expires_at`` (counted as ``expiring``) is not
judged here: an expired message is rightly never delivered, which
:mod:`knell.checker.expiry` judges by the store's clock.
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.buses.contract import STRANDED_CAP
from knell.checker.atmostonce.book import Delivered, Key, RoleCheck
from knell.checker.base import CheckResult, witness
from knell.checker.consumer import on, on_op
from knell.checker.keep import Held, keep
from knell.history import Event

__all__ = ["NothingVanishesCheck"]


class NothingVanishesCheck(RoleCheck):
    name: ClassVar[str] = "nothing-vanishes"
    anomaly_kinds: ClassVar[tuple[str, ...]] = ("vanished",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        # per channel: id -> [post invoke, post ok or the receive that showed it]
        self._posts: dict[Any, dict[Any, list[Held | None]]] = {}
        self._was_read: set[Key] = set()
        self._listing: dict[Any, Event] = {}  # process -> its last stranded listing
        self._final: dict[Any, tuple[Event, Event | None]] = {}  # role -> (drain ok, listing)
        self._failed: dict[Any, Event] = {}
        self._began: dict[Any, int] = {}
        self._folded: dict[Any, list[int]] = {}  # role -> forgotten [read, expiring]

    def forget(self, channel: Any, seq: int, mid: Any, again: bool) -> None:
        super().forget(channel, seq, mid, again)
        by_id = self._posts.get(channel)
        rec = None if by_id is None else by_id.pop(mid, None)
        self._was_read.discard((channel, mid))
        if rec is None or again or rec[1] is None:
            return
        post = rec[0]
        began = self._began.get(channel)
        if post is not None and began is not None and post["time"] >= began:
            return  # posted during the final phase: not counted either way
        folded = self._folded.get(channel)
        if folded is None:
            folded = self._folded[channel] = [0, 0]
        folded[1 if post is not None and "expires_at" in post["value"] else 0] += 1

    @on("post", "invoke", "ok")
    def _post(self, event: Event) -> None:
        by_id = self._posts.setdefault(event["channel"], {})
        mid = event["value"]["id"]
        rec = by_id.get(mid)
        if rec is None:
            rec = by_id[mid] = [None, None]
        if event["type"] == "invoke":
            rec[0] = rec[0] or keep(event)
        elif rec[1] is None or rec[1]["f"] != "post":
            rec[1] = keep(event)

    def delivery(
        self, key: Key, first: Delivered | None, invoke: Event | None, done: Event
    ) -> None:
        rec = self._posts.setdefault(key[0], {}).setdefault(key[1], [None, None])
        if rec[1] is None:
            rec[1] = done  # it landed, whatever its post said

    def reading(self, invoke: Event | None, done: Event, got: Delivered | None) -> None:
        if done["type"] in ("ok", "info"):
            self._was_read.add((done["channel"], done["value"]["id"]))

    @on_op("read", "lost")
    def _read_lost(self, invoke: Event | None, done: Event | None) -> None:
        if invoke is not None:
            self._was_read.add((invoke["channel"], invoke["value"]["id"]))

    @on_op("stranded", "ok")
    def _listed(self, invoke: Event | None, done: Event) -> None:
        self._listing[done["process"]] = done

    @on("drain")
    def _drain(self, event: Event) -> None:
        value = event.get("value") or {}
        if value.get("contract") != "at-most-once":
            return
        role = event["channel"]
        if event["type"] == "invoke":
            self._began[role] = event["time"]
        elif event["type"] == "ok":
            self._final[role] = (event, self._listing.get(value.get("handle")))
        else:
            self._failed[role] = event

    def result(self) -> CheckResult:
        counts = {"messages": 0, "read": 0, "listed": 0, "unresolved": 0, "expiring": 0}
        reasons: list[str] = []
        for role in sorted(self.roles, key=str):
            final = self._final.get(role)
            listing = None if final is None else final[1]
            entries = [] if listing is None else listing["value"]["messages"]
            listed = {e["id"] for e in entries}
            last_at = entries[-1].get("at") if entries else None
            full = len(entries) >= STRANDED_CAP
            began = self._began.get(role)
            unresolved = 0
            beyond = 0
            read_before, expiring_before = self._folded.get(role, (0, 0))
            counts["messages"] += read_before
            counts["read"] += read_before
            counts["expiring"] += expiring_before
            for mid, (post, proof) in self._posts.get(role, {}).items():
                if proof is None:
                    continue  # never known to have landed
                if post is not None and began is not None and post["time"] >= began:
                    continue
                if post is not None and "expires_at" in post["value"]:
                    counts["expiring"] += 1  # may rightly never be delivered: see the expiry check
                    continue
                counts["messages"] += 1
                if (role, mid) in self._was_read:
                    counts["read"] += 1
                    continue
                if mid in listed:
                    counts["listed"] += 1
                    continue
                if final is None or listing is None:
                    unresolved += 1
                    continue
                got = self.delivered.get((role, mid))
                if full and (
                    got is None
                    or got.invoke is None
                    or not isinstance(last_at, (int, float))
                    or self.maybe_beyond_cap(got, last_at)
                ):
                    beyond += 1
                    continue
                self._report(
                    "vanished",
                    None
                    if self.log.full("vanished")
                    else f"message {mid} (role {role}) is neither read nor listed as stranded "
                    f"after the final phase read everything pending"
                    + ("" if got is None else f" (it was delivered to run {got.run})"),
                    witness(post, proof, None if got is None else got.ok, listing, final[0]),
                )
            if unresolved:
                failed = self._failed.get(role)
                why = (
                    f"its final phase did not complete ({failed['value'].get('error')})"
                    if failed is not None
                    else "no final phase (with a stranded listing) recorded for it"
                )
                reasons.append(
                    f"role {role}: {unresolved} message(s) neither read nor listed, {why}"
                )
            if beyond:
                reasons.append(
                    f"role {role}: {beyond} message(s) neither read nor listed, but the final "
                    f"stranded list is full ({STRANDED_CAP}): they may lie beyond its cap"
                )
            counts["unresolved"] += unresolved + beyond
        return self._result(counts, unknown_reason="; ".join(reasons) or None)
