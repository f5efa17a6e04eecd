"""What the queue checks know about leases, read from the history alone.

A lease is never observed directly: a worker records that it *asked* for a
claim (invoke) and what came back (ok), and the bus granted the lease at
some instant in between, on the same host clock. So every lease has two
bounds, and every queue check reasons with them:

* **surely live** from the claim's ok until ``sure_until`` = the claim's
  invoke + ``lease_s`` (the bus read its clock no earlier than the invoke),
  extended by every renew that completed ok, from *its* invoke; and not
  after its holder invoked ``done`` or ``release`` (``ended``);
* **possibly live** until ``latest_expiry`` = the latest instant the bus
  may have started the current term (the claim's ok, or the completion of
  a renew that succeeded or whose outcome is unknown) + ``lease_s`` + the
  bus's declared sweep interval; while a renew is in flight (invoked, not
  yet completed) that bound is not known yet: the renew may have been
  applied already, and only its completion bounds when.

Both deadlines are on the store's clock (``docs/contracts.md``, "Which
clock each promise depends on"): while a clock fault moves it, ``lease_s``
of the store's time is mapped back to true time through
:mod:`knell.checker.clocks`, at its earliest for "surely" and at its
latest for "possibly" (a store clock stepped back may even revive a lease
that had lapsed). A client's clock never counts.

:class:`QueueCheck` is the base of the queue checks: it keeps the book
(one :class:`Lease` per claim, by message) and each channel's settings
(``max_deliveries`` and ``sweep_interval`` from ``declare``), and calls a
hook per lease-related operation. Messages are keyed by the body's unique
id, never by the bus's own id: knell matches deliveries to posts without
trusting the bus.

A done or dead message is forgotten once settled (:mod:`knell.checker.queue.settle`):
:meth:`QueueCheck.forget` drops its book, and a later claim of it is not
booked but handed to :meth:`QueueCheck.claimed_forgotten`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from knell.checker.base import Check
from knell.checker.clocks import STORE, ClockTimeline
from knell.checker.consumer import on, on_op
from knell.checker.settle import Forgotten
from knell.history import Event

__all__ = ["NS", "TOLERANCE_NS", "Lease", "QueueCheck", "QueueSettings", "ns"]

NS = 1_000_000_000
TOLERANCE_NS = 10_000_000
"""10 ms of slack on every time comparison (clock reads, float rounding)."""

Key = tuple[Any, Any]
"""(channel, body id)"""


def ns(seconds: Any) -> int:
    """Seconds (as the history records a lease) in nanoseconds."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise ValueError(f"expected seconds, got {seconds!r}")
    return int(seconds * NS)


@dataclass(slots=True)
class QueueSettings:
    """A queue channel's settings, as the bus declared them."""

    max_deliveries: int | None = None
    sweep_ns: int = 0
    declared: Event | None = None


@dataclass(slots=True)
class Lease:
    """One claim that returned a message, and what its holder did since."""

    consumer: Any
    invoke: Event
    ok: Event
    lease_ns: int
    sure_static: int
    """``sure_until`` while the store's clock runs with true time"""
    touch: int
    renewed: Event | None = None
    renewing: Event | None = None
    """A renew its holder invoked that has not completed: the bus may have
    extended the lease at any instant since, by an amount only the renew's
    completion bounds, so until then no one can say when the lease lapses."""
    ended: int | None = None
    ending: Event | None = None
    taken_by: Lease | None = None
    """the first later lease of the message by another consumer, claimed
    after this one's claim returned"""
    term: tuple[int, int, int] = (0, 0, 0)
    """(invoke, completion, lease ns) of the latest claim or renew that
    surely set the lease: the store set its deadline somewhere in between"""
    touch_from: int = 0
    """the invoke of the operation that gave :attr:`touch`"""
    clocks: ClockTimeline | None = None

    def _store_moved(self) -> bool:
        return self.clocks is not None and self.clocks.clock(STORE) is not None

    @property
    def sure_until(self) -> int:
        """Until when the lease is surely live: its deadline, judged by the
        store's clock (which a clock fault may move), mapped back to true
        time at its earliest."""
        if self.clocks is None or not self._store_moved():
            return self.sure_static
        return self.clocks.sure_until(*self.term)

    def latest_expiry(self, sweep_ns: int) -> float:
        """The latest instant the lease may still have been honoured (on
        the store's clock, mapped back to true time at its latest)."""
        if self.clocks is None or not self._store_moved():
            return self.touch + self.lease_ns + sweep_ns + TOLERANCE_NS
        until = self.clocks.latest_until(self.touch_from, self.touch, self.lease_ns)
        return until + sweep_ns + TOLERANCE_NS


class QueueCheck(Check):
    """Base of the queue checks: keeps the lease book, calls the hooks."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.settings: dict[Any, QueueSettings] = {}
        self.live: dict[Key, list[Lease]] = {}
        """per message, its leases that may still be surely live (pruned when
        they lapse or their holder ends them, so a message claimed a million
        times stays cheap)"""
        self._holders: dict[Key, dict[Any, Lease]] = {}
        self._untaken: dict[Key, list[Lease]] = {}
        self.now = 0
        """The time of the latest event this check was fed."""
        self.dead_forgotten: Forgotten | None = None
        """The forgotten messages that ended dead (set with the forgetting)."""

    def setting(self, channel: Any) -> QueueSettings:
        found = self.settings.get(channel)
        if found is None:
            found = self.settings[channel] = QueueSettings()
        return found

    def held(self, channel: Any, mid: Any, consumer: Any) -> Lease | None:
        """The latest lease ``consumer`` got on message ``mid``."""
        held = self._holders.get((channel, mid))
        return None if held is None else held.get(consumer)

    def is_forgotten(self, channel: Any, seq: Any) -> bool:
        """Whether message ``seq`` of ``channel`` was done, settled and
        forgotten (:mod:`knell.checker.queue.settle`)."""
        return self.forgotten is not None and self.forgotten.has(channel, seq)

    def was_dead(self, channel: Any, seq: Any) -> bool:
        """Whether a forgotten message ended dead (not done)."""
        return self.dead_forgotten is not None and self.dead_forgotten.has(channel, seq)

    def forget(self, channel: Any, seq: int, mid: Any, again: bool) -> None:
        """Drop the book of a settled done message (see the module
        docstring); a subclass drops its own records too."""
        key = (channel, mid)
        self.live.pop(key, None)
        self._untaken.pop(key, None)
        self._holders.pop(key, None)

    def _book(self, key: Key, lease: Lease) -> None:
        """File a new lease: it takes the message from every earlier holder
        whose claim had returned before it was asked for, and replaces its
        own consumer's earlier lease."""
        untaken = self._untaken.get(key)
        if untaken is None:
            untaken = self._untaken[key] = []
        kept = []
        for earlier in untaken:
            if earlier.consumer == lease.consumer:
                continue
            if lease.invoke["time"] > earlier.ok["time"]:
                earlier.taken_by = lease
                continue
            kept.append(earlier)
        kept.append(lease)
        self._untaken[key] = kept
        held = self._holders.get(key)
        if held is None:
            held = self._holders[key] = {}
        held[lease.consumer] = lease
        at = lease.ok["time"]
        live = [e for e in self.live.get(key, ()) if e.sure_until > at and e.ended is None]
        live.append(lease)
        self.live[key] = live

    # -- reading the history ----------------------------------------------

    @on_op("declare", "ok")
    def _declared(self, invoke: Event | None, done: Event) -> None:
        self.now = max(self.now, done["time"])
        value = done["value"]
        setting = self.setting(done["channel"])
        if setting.declared is None:
            setting.max_deliveries = int(value["max_deliveries"])
            setting.sweep_ns = ns(value.get("sweep_interval", 0) or 0)
            setting.declared = done

    @on_op("claim", "ok")
    def _claimed(self, invoke: Event | None, done: Event) -> None:
        self.now = max(self.now, done["time"])
        value = done["value"]
        if value.get("id") is None or invoke is None:
            self.claimed(invoke, done, None)
            return
        if self.is_forgotten(done["channel"], value.get("seq")):
            self.claimed_forgotten(invoke, done)
            return
        lease_ns = ns(value["lease_s"])
        lease = Lease(
            consumer=value["consumer"],
            invoke=invoke,
            ok=done,
            lease_ns=lease_ns,
            sure_static=invoke["time"] + lease_ns,
            touch=done["time"],
            term=(invoke["time"], done["time"], lease_ns),
            touch_from=invoke["time"],
            clocks=self.windows.clocks,
        )
        key = (done["channel"], value["id"])
        self.claimed(invoke, done, lease)
        self._book(key, lease)

    @on("renew", "invoke")
    def _renewing(self, event: Event) -> None:
        self.now = max(self.now, event["time"])
        value = event["value"]
        lease = self.held(event["channel"], value["id"], value["consumer"])
        if lease is not None:
            lease.renewing = event

    @on_op("renew", "ok", "info", "fail", "lost")
    def _renewed(self, invoke: Event | None, done: Event | None) -> None:
        if done is None:
            # Its process died mid-renew: the bus may have applied it up to
            # the death, which the history places no later than now.
            if invoke is not None:
                value = invoke["value"]
                lease = self.held(invoke["channel"], value["id"], value["consumer"])
                if lease is not None and lease.renewing is invoke:
                    lease.renewing = None
                    if self.now >= lease.touch:
                        lease.touch, lease.touch_from = self.now, invoke["time"]
            return
        self.now = max(self.now, done["time"])
        value = done["value"]
        lease = self.held(done["channel"], value["id"], value["consumer"])
        if lease is not None and (invoke is None or lease.renewing is invoke):
            lease.renewing = None
        if lease is not None and done["type"] != "fail":
            if done["time"] >= lease.touch:
                lease.touch = done["time"]
                lease.touch_from = invoke["time"] if invoke is not None else done["time"]
            if done["type"] == "ok" and invoke is not None:
                renewed_ns = ns(value["lease_s"])
                lease.sure_static = max(lease.sure_static, invoke["time"] + renewed_ns)
                lease.term = (invoke["time"], done["time"], renewed_ns)
                lease.renewed = done
                live = self.live.setdefault((done["channel"], value["id"]), [])
                if lease not in live:
                    live.append(lease)
        self.verb(invoke, done, lease)

    @on("done", "invoke")
    @on("release", "invoke")
    def _ending(self, event: Event) -> None:
        self.now = max(self.now, event["time"])
        value = event["value"]
        lease = self.held(event["channel"], value["id"], value["consumer"])
        if lease is not None and lease.ended is None:
            lease.ended = event["time"]
            lease.ending = event

    @on_op(("done", "release"), "ok", "info", "fail", "lost")
    def _ended(self, invoke: Event | None, done: Event | None) -> None:
        if done is None:
            if invoke is not None:
                self.lost(invoke)
            return
        self.now = max(self.now, done["time"])
        value = done["value"]
        lease = self.held(done["channel"], value["id"], value["consumer"])
        if lease is not None and done["type"] == "fail" and lease.ending is invoke:
            lease.ended = None  # refused: the lease was not ended by it
            lease.ending = None
        self.verb(invoke, done, lease)

    # -- hooks ------------------------------------------------------------

    def claimed(self, invoke: Event | None, done: Event, lease: Lease | None) -> None:
        """A claim completed ok: ``lease`` is None when nothing was claimable.
        Called before the new lease is filed: :attr:`live` holds the
        message's earlier leases that may still be live."""

    def claimed_forgotten(self, invoke: Event, done: Event) -> None:
        """A claim completed ok with a message done and forgotten since
        (:mod:`knell.checker.queue.settle`): it is not booked."""

    def verb(self, invoke: Event | None, done: Event, lease: Lease | None) -> None:
        """A renew, done or release by a holder completed (any outcome)."""

    def lost(self, invoke: Event) -> None:
        """A done or release whose process died before it completed."""
