"""post-outcome: what a bus said about a post must be what happened to it.

A post completes ``ok`` (it landed, here is its seq), ``fail`` (it
certainly did not land) or ``info`` (unknown). Producers act on the
difference: a definite failure is not retried, an unknown outcome is
retried with the same idempotency key. Two ways a bus can lie about it:

* ``failed-but-applied``: it said ``fail``, yet the message exists (a
  reader was handed it). The producer gave up on a message that every
  subscriber then handled: the "failure" reached the user while the work
  went ahead. Judged per message id: only when *every* attempt to post it
  completed ``fail`` (a retry that succeeded explains a sighting).
* ``retry-refused``: a keyed post whose key had already landed (an earlier
  post with that key completed ``ok``, or its message was seen by a reader,
  before this attempt was invoked) came back with an error, outside any
  fault window. The contract says a repeated key returns the original
  message; a bus that answers the retry with "duplicate key" strands the
  producer between a lost reply and a refused retry.

Sightings come from the shared deliveries (each distinct message once);
fault windows from :mod:`knell.checker.windows`.

What it keeps, and for how long: per message id its attempt counts; the
first sighting of a message only while every attempt to post it so far
failed (or none completed yet). An attempt that did not complete ``fail``
can never be undone, so from then on the message cannot be
``failed-but-applied`` and its sighting (often a whole fetched page) is
forgotten. Per key, the first event proving it landed, for as long as a
retry of that key may come (the whole run: a producer may retry late); a
message's key only until the key landed, since a sighting is remembered
for its key only to prove that the key landed. In a run that forgets
(:mod:`knell.checker.settle`), all of it goes once the message settled
and the workload's retry horizon passed: it was handed out, so it is not
``failed-but-applied`` if any attempt did not fail, and the retries the
workload makes have come by then.
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.checker.base import Check, CheckResult, witness
from knell.checker.consumer import on_delivery, on_op
from knell.checker.keep import Held, keep, unkeep
from knell.history import Event

__all__ = ["OutcomeCheck"]


class OutcomeCheck(Check):
    name: ClassVar[str] = "post-outcome"
    anomaly_kinds: ClassVar[tuple[str, ...]] = ("failed-but-applied", "retry-refused")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        # (channel, id) -> attempts while none failed (an int: most messages),
        # then [attempts, failed attempts, last fail completion]
        self._attempts: dict[tuple[Any, Any], int | list[Any]] = {}
        self._seen: dict[tuple[Any, Any], Held] = {}
        # channel -> key -> (time, first event proving the key landed)
        self._landed: dict[Any, dict[Any, tuple[Any, Held]]] = {}
        self._key_of: dict[tuple[Any, Any], Any] = {}
        self._retries = 0
        # (channel, id) -> key, kept only when the pass forgets: the key to
        # drop from the landed keys with the message
        self._keys: dict[tuple[Any, Any], Any] = {}
        self._forgotten = [0, 0]  # posts, of which failed-only

    @on_op("post", "ok", "fail", "info", "lost")
    def _posted(self, invoke: Event | None, done: Event | None) -> None:
        if invoke is None or invoke["process"] == "nemesis":
            return
        value = invoke["value"]
        ck = (invoke.get("channel"), value["id"])
        forgotten = self.forgotten
        if (
            forgotten is not None
            and done is not None
            and done["type"] == "ok"
            and forgotten.has(ck[0], done["value"]["seq"])
        ):
            self._attempts.pop(ck, None)  # a retry answered with a forgotten message's seq
            self._keys.pop(ck, None)
            return
        failing = done is not None and done["type"] == "fail"
        record = self._attempts.get(ck, 0)
        if isinstance(record, list):
            record[0] += 1
            if failing:
                record[1] += 1
                record[2] = done
        elif failing:  # the first failure: the count grows into a record
            self._attempts[ck] = [record + 1, 1, done]
        else:
            self._attempts[ck] = record + 1
        if done is None or done["type"] != "fail":
            # an attempt that did not fail: never failed-but-applied now
            self._seen.pop(ck, None)
        key = value.get("key")
        if key is not None and self.forgotten is not None:
            self._keys[ck] = key
        if key is not None:
            if key in self._landed.get(invoke.get("channel"), ()):
                self._key_of.pop(ck, None)  # a sighting can prove nothing new of it
            else:
                self._key_of[ck] = key
        if done is None:
            return
        if key is None:
            return
        landed_in = self._landed.get(invoke.get("channel"))
        if landed_in is None:
            landed_in = self._landed[invoke.get("channel")] = {}
        landed = landed_in.get(key)
        retry = landed is not None and landed[0] < invoke["time"]
        self._retries += retry
        if done["type"] == "ok":
            if landed is None:
                landed_in[key] = (done["time"], keep(done))
                self._key_of.pop(ck, None)
            return
        if not retry or (done.get("value") or {}).get("knell_side"):
            return
        assert landed is not None
        if self.windows.touching(invoke["process"], invoke["time"], done["time"]) is not None:
            return
        self._report(
            "retry-refused",
            None
            if self.log.full("retry-refused")
            else f"a retry of post {value['id']} (key {key}, channel {invoke.get('channel')}) by "
            f"{invoke['process']} completed {done['type']} "
            f"({(done.get('value') or {}).get('error', 'no error text')}) although the key had "
            f"already landed; a repeated key must return the original message",
            witness(landed[1], invoke, done),
        )

    def forget(self, channel: Any, seq: int, mid: Any, again: bool) -> None:
        ck = (channel, mid)
        record = self._attempts.pop(ck, None)
        self._key_of.pop(ck, None)
        key = self._keys.pop(ck, None)
        if key is not None:
            self._landed.get(channel, {}).pop(key, None)
        kept = self._seen.pop(ck, None)
        if record is None or again:
            return
        self._forgotten[0] += 1
        if type(record) is list and record[1] == record[0]:
            # every attempt failed, yet it was handed out: judged now, as at the end
            self._forgotten[1] += 1
            self._failed_but_applied(ck, record[2], kept)

    @on_delivery
    def _shown(self, channel: Any, seq: Any, mid: Any, event: Event) -> None:
        ck = (channel, mid)
        if ck not in self._seen:
            record = self._attempts.get(ck)
            if record is None or (type(record) is list and record[1] == record[0]):
                # every attempt so far failed
                self._seen[ck] = keep(event)
        key = self._key_of.get(ck)
        if key is not None:
            landed_in = self._landed.get(channel)
            if landed_in is None:
                landed_in = self._landed[channel] = {}
            if key in landed_in:
                return
            landed_in[key] = (event["time"], keep(event))
            del self._key_of[ck]

    def _failed_but_applied(self, ck: tuple[Any, Any], last_fail: Event, kept: Held | None) -> None:
        if kept is None:
            return
        seen = unkeep(kept)
        self._report(
            "failed-but-applied",
            None
            if self.log.full("failed-but-applied")
            else f"post {ck[1]} on channel {ck[0]} completed fail "
            f"({(last_fail.get('value') or {}).get('error', 'no error text')}) on every "
            f"attempt, yet {seen['process']} was handed it at seq "
            f"{_seq_of(seen, ck[1])}",
            witness(last_fail, seen),
        )

    def result(self) -> CheckResult:
        failed_only = 0
        for ck, record in self._attempts.items():
            if type(record) is not list:
                continue  # no attempt failed
            attempts, failed, last_fail = record
            if not failed or failed != attempts:
                continue
            failed_only += 1
            self._failed_but_applied(ck, last_fail, self._seen.get(ck))
        return self._result(
            {
                "posts": len(self._attempts) + self._forgotten[0],
                "failed-posts": failed_only + self._forgotten[1],
                "keyed-retries-after-landing": self._retries,
            }
        )


def _seq_of(event: Event, mid: Any) -> Any:
    value = event.get("value") or {}
    if event.get("f") == "handle":
        return value.get("seq")
    for m in value.get("messages") or ():
        if m.get("id") == mid:
            return m.get("seq")
    return None
