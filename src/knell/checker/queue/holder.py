"""lease-holder: only the holder of a live lease may renew, finish or release.

A lease is a promise with an end: once it lapses, the message goes back to
the queue and someone else may take it. So ``renew``, ``done`` and
``release`` by a consumer whose lease has lapsed (or whose message another
consumer has claimed since) must be refused, or a worker that was frozen
past its lease marks done a message another worker is doing, or
resurrects a lease over someone else's.

* ``stale-holder-accepted``: the bus accepted a renew, done or release
  that was invoked after the caller surely no longer held the lease: its
  latest possible expiry (the last time the bus may have started its term,
  + ``lease_s`` + the declared sweep interval) had passed, or another
  consumer's claim of the message had completed (after the caller's own).
  Witness: the caller's claim, its last renewal, the other claim if that
  is the proof, and the accepted operation.
* ``wrong-refusal``: the bus refused one as ``lease-lost`` although the
  lease was surely live when the refusal came back (before ``sure_until``,
  not ended). Contract refusals are not errors for ``availability``, so
  this check keeps a bus from refusing its holders for free.

A done message forgotten once settled (:mod:`knell.checker.queue.settle`)
had every lease lapse before: a renew, done or release of it accepted
after that is ``stale-holder-accepted``, witnessed by itself alone.
"""

from __future__ import annotations

from typing import Any, ClassVar

from knell.checker.base import CheckResult, witness
from knell.checker.queue.book import NS, TOLERANCE_NS, Lease, QueueCheck
from knell.history import Event

__all__ = ["LeaseHolderCheck"]


class LeaseHolderCheck(QueueCheck):
    name: ClassVar[str] = "lease-holder"
    anomaly_kinds: ClassVar[tuple[str, ...]] = ("stale-holder-accepted", "wrong-refusal")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._accepted = 0
        self._refused = 0

    def verb(self, invoke: Event | None, done: Event, lease: Lease | None) -> None:
        if invoke is None:
            return
        if lease is None:
            value = done["value"]
            if done["type"] == "ok" and self.is_forgotten(done["channel"], value.get("seq")):
                self._accepted += 1
                self._report(
                    "stale-holder-accepted",
                    None
                    if self.log.full("stale-holder-accepted")
                    else f"{done['f']} of message {value['id']} (channel {done['channel']}) by "
                    f"{value.get('consumer')} was accepted though the message had been done and "
                    f"every lease of it had lapsed (knell had settled and forgotten it)",
                    witness(invoke, done),
                )
            return
        f = done["f"]
        mid = done["value"]["id"]
        channel = done["channel"]
        if done["type"] == "ok":
            self._accepted += 1
            expiry = lease.latest_expiry(self.setting(channel).sweep_ns)
            other = lease.taken_by
            taken = other is not None and other.ok["time"] < invoke["time"]
            if invoke["time"] > expiry or taken:
                why = (
                    f"{other.consumer} had claimed it since"
                    if taken and other is not None
                    else f"its lease had lapsed {(invoke['time'] - expiry) / NS:.3f} s before"
                )
                self._report(
                    "stale-holder-accepted",
                    None
                    if self.log.full("stale-holder-accepted")
                    else f"{f} of message {mid} (channel {channel}) by {lease.consumer} was "
                    f"accepted though {lease.consumer} no longer held it: {why}",
                    witness(
                        lease.ok,
                        lease.renewed,
                        other.ok if taken and other is not None else None,
                        invoke,
                        done,
                    ),
                )
        elif done["type"] == "fail" and done["value"].get("refused") == "lease-lost":
            self._refused += 1
            live = done["time"] < lease.sure_until - TOLERANCE_NS
            if live and (lease.ended is None or lease.ended >= invoke["time"]):
                self._report(
                    "wrong-refusal",
                    None
                    if self.log.full("wrong-refusal")
                    else f"{f} of message {mid} (channel {channel}) by {lease.consumer} was "
                    f"refused as lease-lost while its lease was surely live (for "
                    f"{(lease.sure_until - done['time']) / NS:.3f} s more)",
                    witness(lease.invoke, lease.ok, lease.renewed, invoke, done),
                )

    def result(self) -> CheckResult:
        return self._result({"accepted": self._accepted, "refused-lease-lost": self._refused})
