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
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.checker.base import Check, CheckResult, witness
from knell.checker.consumer import on_delivery, on_op
from knell.history import Event

__all__ = ["OutcomeCheck"]


class OutcomeCheck(Check):
    name: ClassVar[str] = "post-outcome"
    anomaly_kinds: ClassVar[tuple[str, ...]] = ("failed-but-applied", "retry-refused")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        # (channel, id) -> [attempts, failed attempts, last fail completion]
        self._attempts: dict[tuple[Any, Any], list[Any]] = {}
        self._seen: dict[tuple[Any, Any], Event] = {}
        # (channel, key) -> the first event proving the key landed
        self._landed: dict[tuple[Any, Any], Event] = {}
        self._key_of: dict[tuple[Any, Any], Any] = {}
        self._retries = 0

    @on_op("post", "ok", "fail", "info", "lost")
    def _posted(self, invoke: Event | None, done: Event | None) -> None:
        if invoke is None or invoke["process"] == "nemesis":
            return
        value = invoke["value"]
        ck = (invoke.get("channel"), value["id"])
        record = self._attempts.get(ck)
        if record is None:
            record = self._attempts[ck] = [0, 0, None]
        record[0] += 1
        key = value.get("key")
        if key is not None:
            self._key_of[ck] = key
        if done is None:
            return
        if done["type"] == "fail":
            record[1] += 1
            record[2] = done
        if key is None:
            return
        lk = (invoke.get("channel"), key)
        landed = self._landed.get(lk)
        retry = landed is not None and landed["time"] < invoke["time"]
        self._retries += retry
        if done["type"] == "ok":
            if landed is None:
                self._landed[lk] = done
            return
        if not retry or (done.get("value") or {}).get("knell_side"):
            return
        assert landed is not None
        if self.windows.touching(invoke["process"], invoke["time"], done["time"]) is not None:
            return
        self._report(
            "retry-refused",
            None
            if self.log.full
            else f"a retry of post {value['id']} (key {key}, channel {invoke.get('channel')}) by "
            f"{invoke['process']} completed {done['type']} "
            f"({(done.get('value') or {}).get('error', 'no error text')}) although the key had "
            f"already landed; a repeated key must return the original message",
            witness(landed, invoke, done),
        )

    @on_delivery
    def _shown(self, channel: Any, seq: Any, mid: Any, event: Event) -> None:
        ck = (channel, mid)
        if ck not in self._seen:
            self._seen[ck] = event
        key = self._key_of.get(ck)
        if key is not None and (channel, key) not in self._landed:
            self._landed[(channel, key)] = event

    def result(self) -> CheckResult:
        failed_only = 0
        for ck, (attempts, failed, last_fail) in self._attempts.items():
            if not failed or failed != attempts:
                continue
            failed_only += 1
            seen = self._seen.get(ck)
            if seen is None:
                continue
            self._report(
                "failed-but-applied",
                None
                if self.log.full
                else f"post {ck[1]} on channel {ck[0]} completed fail "
                f"({(last_fail.get('value') or {}).get('error', 'no error text')}) on every "
                f"attempt, yet {seen['process']} was handed it at seq "
                f"{_seq_of(seen, ck[1])}",
                witness(last_fail, seen),
            )
        return self._result(
            {
                "posts": len(self._attempts),
                "failed-posts": failed_only,
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
