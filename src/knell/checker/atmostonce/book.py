"""What the at-most-once checks know about a role inbox, from the history.

A delivery is known when a ``receive`` returned ok with the message in it:
the bus then wrote "delivered to run R", at some instant between that
receive's invoke and its ok. A receive whose outcome is unknown (``info``,
or its process died) may have delivered messages nobody saw, to its run.
A read by the recipient *may* have happened from its invoke on (unless it
failed) and surely happened at its ok.

:class:`RoleCheck` keeps that book (each message's first known delivery,
each run's receives of unknown outcome, reads by recipient) and calls a
hook per delivery and per read; messages are keyed by ``(role, body id)``,
never by the bus's own id.

A message its recipient read is forgotten once settled
(:mod:`knell.checker.atmostonce.settle`): :meth:`RoleCheck.forget` drops
its book, and a later receive or read of it (known by its seq) is not
booked but handed to :meth:`RoleCheck.delivered_forgotten` or
:meth:`RoleCheck.read_forgotten`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from knell.checker.base import Check
from knell.checker.consumer import on, on_op
from knell.history import Event

__all__ = ["TOLERANCE_NS", "Delivered", "RoleCheck"]

TOLERANCE_NS = 10_000_000
"""10 ms of slack on every comparison of a history time with a bus clock reading."""

Key = tuple[Any, Any]
"""(role, body id)"""


@dataclass(slots=True)
class Delivered:
    """A message's first known delivery, and whether its recipient read it."""

    run: Any
    invoke: Event | None
    ok: Event
    reading: Event | None = None
    """the recipient's first read invoke that did not fail (it may have landed)"""
    read: Event | None = None
    """the recipient's first read that returned ok"""


class RoleCheck(Check):
    """Base of the at-most-once checks: keeps the delivery book, calls hooks."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.delivered: dict[Key, Delivered] = {}
        self.unknown_receives: dict[Key, int] = {}
        """(role, run) -> receives whose outcome is unknown"""
        self.roles: set[Any] = set()
        self.forgotten_delivered = 0
        """Messages delivered, read and forgotten since (counted, not kept)."""

    def is_forgotten(self, role: Any, seq: Any) -> bool:
        """Whether message ``seq`` of ``role`` was read, settled and forgotten."""
        return self.forgotten is not None and self.forgotten.has(role, seq)

    def forget(self, channel: Any, seq: int, mid: Any, again: bool) -> None:
        """Drop the book of a settled read message; a subclass drops its
        own records too."""
        if self.delivered.pop((channel, mid), None) is not None:
            self.forgotten_delivered += 1

    @on_op("receive", "ok", "info", "lost")
    def _received(self, invoke: Event | None, done: Event | None) -> None:
        event = done or invoke
        if event is None:
            return
        role = event["channel"]
        self.roles.add(role)
        if done is None or done["type"] == "info":
            key = (role, event["value"]["run"])
            self.unknown_receives[key] = self.unknown_receives.get(key, 0) + 1
            return
        run = done["value"]["run"]
        for entry in done["value"]["messages"]:
            if self.is_forgotten(role, entry.get("seq")):
                self.delivered_forgotten(invoke, done, entry)
                continue
            key = (role, entry["id"])
            first = self.delivered.get(key)
            if first is None:
                self.delivered[key] = Delivered(run, invoke, done)
                self.delivery(key, None, invoke, done)
            else:
                self.delivery(key, first, invoke, done)

    @on("read", "invoke")
    def _reading(self, event: Event) -> None:
        if self.is_forgotten(event["channel"], event["value"].get("seq")):
            return
        got = self.delivered.get((event["channel"], event["value"]["id"]))
        if got is not None and got.run == event["value"]["run"] and got.reading is None:
            got.reading = event

    @on_op("read", "ok", "fail", "info")
    def _read(self, invoke: Event | None, done: Event) -> None:
        if self.is_forgotten(done["channel"], done["value"].get("seq")):
            self.read_forgotten(invoke, done)
            return
        got = self.delivered.get((done["channel"], done["value"]["id"]))
        if got is not None and got.run == done["value"]["run"]:
            if done["type"] == "ok" and got.read is None:
                got.read = done
            elif done["type"] == "fail" and got.reading is invoke:
                got.reading = None  # refused: it did not happen
        self.reading(invoke, done, got)

    @on_op("claim_role", "ok")
    def _role(self, invoke: Event | None, done: Event) -> None:
        self.roles.add(done["channel"])

    def maybe_beyond_cap(self, got: Delivered, last_at: Any) -> bool:
        """Whether a full stranded list whose last entry was delivered at
        ``last_at`` (the bus's clock) may rightly leave ``got`` out: its
        receive returned no earlier than that delivery. One receive delivers
        several messages at one instant and the list orders those by seq, so
        the cap may fall between two of them. False when ``last_at`` is not
        a time (nothing to place the message against)."""
        if isinstance(last_at, bool) or not isinstance(last_at, (int, float)):
            return False
        return bool(got.ok["time"] >= self.windows.clocks.true_time(last_at) - TOLERANCE_NS)

    def maybe_delivered_to(self, role: Any, run: Any) -> bool:
        """Whether a receive of unknown outcome by ``run`` may have delivered
        messages nobody saw."""
        return self.unknown_receives.get((role, run), 0) > 0

    # -- hooks ------------------------------------------------------------

    def delivery(
        self, key: Key, first: Delivered | None, invoke: Event | None, done: Event
    ) -> None:
        """A receive returned this message: ``first`` is its earlier known
        delivery, if there was one (there must not be)."""

    def reading(self, invoke: Event | None, done: Event, got: Delivered | None) -> None:
        """A read completed (ok, refused, unknown)."""

    def delivered_forgotten(self, invoke: Event | None, done: Event, entry: Any) -> None:
        """A receive returned a message read and forgotten since: it is not
        booked (a second delivery, ``at-most-once``'s finding)."""

    def read_forgotten(self, invoke: Event | None, done: Event) -> None:
        """A read of a message read and forgotten since completed: not judged
        (who it was delivered to is forgotten)."""
