"""queue-no-loss: every message on a queue ends done or dead.

A queue's promise to a producer is that the work it posted will be done,
or, if it cannot be (it failed ``max_deliveries`` times), set aside as dead
where a person can see it. A message that is neither (a lease nobody can
take over, a dead letter deleted instead of kept) is lost: the work is
silently never done and nobody is told.

This is decidable only at the end. The queue's final phase (see
:mod:`knell.final_phase`) stops every claimer, claims until the queue has
stayed empty longer than any lease, doing what comes, and lists the dead
letters; the runner records it as a ``drain`` with ``contract = "queue"``.
After it, every message whose post returned ok (or that a claim showed,
so it landed) must have a ``done`` that returned ok (or whose outcome is
unknown: it may have landed), or appear in a dead-letter listing. A
message that is neither is ``lost``; witness: its post, its last claim,
the last dead-letter listing, and the final drain.

Without a completed final drain for a channel, messages not yet done are
undecided: the result is "unknown", with the reason.

What it keeps, and for how long: per message its post invoke and the proof
that it landed (packed, :mod:`knell.checker.keep`), its last claim and its
state, on every channel. Which channels are queues is known only once one
is declared or claimed, which may come after its first posts, and a
message is lost only when the final phase finds the queue empty, so an
open message is kept to the end. A done or dead message is settled and
forgotten (:mod:`knell.checker.queue.settle`): it can no longer be lost,
so it is counted done, dead (or expiring) and dropped, and a dead-letter
listing that names it later is passed over.

A message posted with ``expires_at`` (counted as ``expiring``) is not
judged here: an expired message is rightly neither done nor dead, which
:mod:`knell.checker.expiry` judges by the store's clock.
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.checker.base import CheckResult, witness
from knell.checker.consumer import on, on_op
from knell.checker.keep import keep
from knell.checker.queue.book import Lease, QueueCheck
from knell.history import Event

__all__ = ["QueueLossCheck"]

# per message: [post invoke, post ok or the first claim that showed it, last claim ok, state]
_Msg = list[Any]
_DONE, _MAYBE_DONE, _DEAD = "done", "maybe-done", "dead"


class QueueLossCheck(QueueCheck):
    name: ClassVar[str] = "queue-no-loss"
    anomaly_kinds: ClassVar[tuple[str, ...]] = ("lost",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._msgs: dict[Any, dict[Any, _Msg]] = {}
        self._queues: set[Any] = set()
        self._drained: dict[Any, Event] = {}
        self._drain_failed: dict[Any, Event] = {}
        self._drain_began: dict[Any, int] = {}
        self._last_listing: dict[Any, Event] = {}
        self._folded: dict[Any, list[int]] = {}  # channel -> forgotten [done, expiring, dead]

    def _msg(self, channel: Any, mid: Any) -> _Msg:
        by_id = self._msgs.setdefault(channel, {})
        msg = by_id.get(mid)
        if msg is None:
            msg = by_id[mid] = [None, None, None, None]
        return msg

    def forget(self, channel: Any, seq: int, mid: Any, again: bool) -> None:
        super().forget(channel, seq, mid, again)
        by_id = self._msgs.get(channel)
        msg = None if by_id is None else by_id.pop(mid, None)
        if msg is None or again or msg[1] is None:
            return
        folded = self._folded.get(channel)
        if folded is None:
            folded = self._folded[channel] = [0, 0, 0]
        post = msg[0]
        if post is not None and "expires_at" in post["value"]:
            folded[1] += 1
        else:
            folded[2 if msg[3] == _DEAD else 0] += 1

    @on("post", "invoke", "ok")
    def _post(self, event: Event) -> None:
        msg = self._msg(event["channel"], event["value"]["id"])
        if event["type"] == "invoke":
            if msg[0] is None:
                msg[0] = keep(event)
        elif msg[1] is None or msg[1]["f"] != "post":
            msg[1] = keep(event)

    def claimed(self, invoke: Event | None, done: Event, lease: Lease | None) -> None:
        self._queues.add(done["channel"])
        if lease is None:
            return
        msg = self._msg(done["channel"], done["value"]["id"])
        msg[2] = done
        if msg[1] is None:
            msg[1] = done  # it landed, whatever its post said

    @on_op("declare", "ok")
    def _queue(self, invoke: Event | None, done: Event) -> None:
        self._queues.add(done["channel"])

    def verb(self, invoke: Event | None, done: Event, lease: Lease | None) -> None:
        if done["f"] != "done" or done["type"] == "fail":
            return
        msg = self._msg(done["channel"], done["value"]["id"])
        if done["type"] == "ok":
            msg[3] = _DONE
        elif msg[3] is None:
            msg[3] = _MAYBE_DONE

    def lost(self, invoke: Event) -> None:
        if invoke["f"] == "done":
            msg = self._msg(invoke["channel"], invoke["value"]["id"])
            if msg[3] is None:
                msg[3] = _MAYBE_DONE

    @on_op("dead", "ok")
    def _dead(self, invoke: Event | None, done: Event) -> None:
        self._last_listing[done["channel"]] = done
        for entry in done["value"]["messages"]:
            if self.is_forgotten(done["channel"], entry.get("seq")):
                continue  # done, settled and forgotten: not dead
            msg = self._msg(done["channel"], entry["id"])
            if msg[3] != _DONE:
                msg[3] = _DEAD

    @on("drain")
    def _drain(self, event: Event) -> None:
        value = event.get("value") or {}
        if value.get("contract") != "queue":
            return
        channel = event["channel"]
        if event["type"] == "invoke":
            self._drain_began[channel] = event["time"]
        elif event["type"] == "ok":
            self._drained[channel] = event
        else:
            self._drain_failed[channel] = event

    def result(self) -> CheckResult:
        counts = {
            "messages": 0,
            "done": 0,
            "maybe-done": 0,
            "dead": 0,
            "unresolved": 0,
            "expiring": 0,
        }
        reasons: list[str] = []
        for channel in sorted(self._queues, key=str):
            drained = self._drained.get(channel)
            began = self._drain_began.get(channel)
            unresolved = 0
            done_before, expiring_before, dead_before = self._folded.get(channel, (0, 0, 0))
            counts["messages"] += done_before + dead_before
            counts["done"] += done_before
            counts["dead"] += dead_before
            counts["expiring"] += expiring_before
            for mid, (post, proof, last, state) in self._msgs.get(channel, {}).items():
                if proof is None:
                    continue  # never known to have landed
                if post is not None and began is not None and post["time"] >= began:
                    continue  # posted after the final phase began
                if post is not None and "expires_at" in post["value"]:
                    counts["expiring"] += 1  # may rightly be gone: the expiry check's to judge
                    continue
                counts["messages"] += 1
                if state is not None:
                    counts[state] += 1
                    continue
                if drained is None:
                    unresolved += 1
                    continue
                self._report(
                    "lost",
                    None
                    if self.log.full("lost")
                    else f"message {mid} (channel {channel}) is neither done nor dead after the "
                    f"final phase claimed the queue empty and listed its dead letters",
                    witness(post, proof, last, self._last_listing.get(channel), drained),
                )
            if unresolved:
                counts["unresolved"] += unresolved
                failed = self._drain_failed.get(channel)
                why = (
                    f"its final phase did not complete ({failed['value'].get('error')})"
                    if failed is not None
                    else "no final phase recorded for it"
                )
                reasons.append(
                    f"queue {channel}: {unresolved} message(s) neither done nor dead, and {why}"
                )
        return self._result(counts, unknown_reason="; ".join(reasons) or None)
