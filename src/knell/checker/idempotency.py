"""idempotency: one idempotency key, one append.

A producer whose ``post`` came back indeterminate (a timeout, a reset, its
own crash) cannot know whether the message landed. Retrying blindly makes
duplicates; never retrying makes loss. The idempotency key is the way out:
the producer retries with the same key, and the bus promises that a
repeated key returns the *original* message and appends nothing. Every
consumer would otherwise handle the "same" message twice under two seqs,
and at-least-once would quietly become at-least-twice for exactly the
posts that went through a fault.

The workload gives all posts of one key the same message id. The check
records, per (channel, key), the seq of the first placement it sees, from
``post`` ok values and from observations of the key's id in ``fetch`` ok
and ``handle`` events (each distinct ``(channel, seq, id)`` once, as the
driver delivers them); a second, different seq for the same (channel, key)
is a ``duplicate-append``. (An observation cannot precede its post's
invoke, which the producer logs before calling the bus, so the key of an
id is always known when the id is seen.)

What it keeps: per keyed message its key, and per key its first placement
with the event that showed it. A retry may come, and append a second
copy, at any later time, so both are kept for the whole run, except in a
run that forgets (:mod:`knell.checker.settle`): there a settled message's
key is dropped once the workload's retry horizon passed, every retry the
workload makes having come by then.
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.checker.base import Check, CheckResult, witness
from knell.checker.consumer import on, on_delivery
from knell.checker.keep import Held, keep
from knell.history import Event

__all__ = ["IdempotencyCheck"]


class IdempotencyCheck(Check):
    name: ClassVar[str] = "idempotency"
    anomaly_kinds: ClassVar[tuple[str, ...]] = ("duplicate-append",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        # channel -> id -> key, for keyed posts
        self._key_of: dict[Any, dict[Any, Any]] = {}
        # (channel, key) -> (seq, first event placing it there)
        # channel -> key -> (seq, first event placing it)
        self._placed: dict[Any, dict[Any, tuple[Any, Held]]] = {}
        self._reported: set[tuple[Any, Any, Any]] = set()
        self._keyed_posts = 0
        self._forgotten_keys = 0

    def forget(self, channel: Any, seq: int, mid: Any, again: bool) -> None:
        """Drop a settled message's key: a retry of it past the horizon is
        not judged (:mod:`knell.checker.settle`)."""
        key_of = self._key_of.get(channel)
        key = None if key_of is None else key_of.pop(mid, None)
        if key is None:
            return
        placed = self._placed.get(channel)
        if placed is not None and not again:
            first = placed.get(key)
            if first is not None and first[0] == seq:
                del placed[key]
                self._forgotten_keys += 1

    @on("post", "invoke", "ok")
    def _post(self, event: Event) -> None:
        value = event["value"]
        key = value.get("key")
        if key is None:
            return
        channel = event["channel"]
        forgotten = self.forgotten
        if forgotten is not None and event["type"] == "ok" and forgotten.has(channel, value["seq"]):
            return  # a retry answered with a forgotten message's seq
        if event["type"] == "invoke":
            self._keyed_posts += 1
            key_of = self._key_of.get(channel)
            if key_of is None:
                key_of = self._key_of[channel] = {}
            key_of[value["id"]] = key
        else:
            self._place(channel, key, value["seq"], event)

    @on_delivery
    def deliver(self, channel: Any, seq: Any, mid: Any, event: Event) -> None:
        # the first time (channel, seq, mid) was shown: a repeat places the
        # key at the same seq again, which can prove nothing new
        key_of = self._key_of.get(channel)
        if key_of is not None:
            key = key_of.get(mid)
            if key is not None:
                self._place(channel, key, seq, event)

    def _place(self, channel: Any, key: Any, seq: Any, event: Event) -> None:
        placed = self._placed.get(channel)
        if placed is None:
            placed = self._placed[channel] = {}
        first = placed.get(key)
        if first is None:
            placed[key] = (seq, keep(event))
            return
        if first[0] == seq or seq is None:
            return
        rk = (channel, key, seq)
        if rk in self._reported:
            return
        self._reported.add(rk)
        if self.log.full("duplicate-append"):
            self.log.count("duplicate-append")
            return
        self.log.add(
            "duplicate-append",
            f"idempotency key {key} on channel {channel} was appended twice: at seq "
            f"{first[0]} (seen by {first[1]['process']}) and at seq {seq} "
            f"(seen by {event['process']})",
            witness(first[1], event),
        )

    def result(self) -> CheckResult:
        keys = sum(map(len, self._placed.values())) + self._forgotten_keys
        return self._result({"keyed-posts": self._keyed_posts, "keys": keys})
