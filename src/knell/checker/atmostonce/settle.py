"""When a message to a role may be forgotten: once its recipient read it.

An at-most-once message ends one of two ways: read by the run it was
delivered to, or stranded (its run left without reading it) and listed
for a person to decide. Without a rule of its own, the at-most-once
checks keep every message for the whole run, and a soak of a role inbox
grows with its length.

A message is **settled** once a ``read`` by its recipient (the run of its
first known delivery) returned ok. From then on every question about it
is decided, or is answered by its seq alone:

* ``nothing-vanishes``: it was read; it can never vanish (counted read);
* ``at-most-once``: any later receive that returns it is a second
  delivery, ``redelivered``, known by the seq in the receive (witness:
  that receive);
* ``stranded-listed``: it was read before any later listing began, so a
  judged listing that names it is ``listed-read`` (witness: the listing);
* ``read-refusal``: a later read of it is counted, not judged (who it was
  delivered to is forgotten). The holders never read a message twice and
  probe only stranded ones, so no shipped scenario loses a finding here.

It is kept :attr:`~knell.checker.settle.Settling.after_s` more seconds
(the retry horizon: a retried post lands while it is still known) and then
forgotten through the shared bitmap, by every
:class:`~knell.checker.settle.Forgetter`. A retry of its post answered
with its seq later is forgotten again at once.

What is never forgotten: a message not (yet) delivered, and one delivered
and never read, stranded: the final phase must find it in the stranded
list. A scenario whose runs leave messages unread (``leave_unread_every``)
keeps those to the end, one per such run.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from knell.checker.consumer import Consumer, on, on_op
from knell.checker.settle import Settling
from knell.history import Event

__all__ = ["RoleSettling"]

_NS = 1_000_000_000


class RoleSettling(Consumer):
    """Decides when each message to a role settled and has every forgetter
    of ``settling`` drop it (module docstring). Fed after the checks, as
    :class:`~knell.checker.settle.Settling` is."""

    name = "role-settling"

    def __init__(self, settling: Settling) -> None:
        self._settling = settling
        self._after = int(settling.after_s * _NS)
        self._roles: set[Any] = set()
        self._unread: dict[tuple[Any, Any], tuple[Any, int]] = {}
        """(role, id) -> (run, seq) of its first known delivery, until read"""
        self._delivered: set[tuple[Any, Any]] = set()
        """(role, id) of messages read and waiting to be forgotten"""
        self._due: deque[tuple[int, Any, int, Any]] = deque()
        """(when, role, seq, id), in time order"""

    @on_op("receive", "ok")
    def _received(self, invoke: Event | None, done: Event) -> None:
        role = done["channel"]
        self._roles.add(role)
        run = done["value"]["run"]
        forgotten = self._settling.forgotten
        for entry in done["value"]["messages"]:
            seq = entry.get("seq")
            key = (role, entry["id"])
            if type(seq) is not int or forgotten.has(role, seq) or key in self._delivered:
                continue
            self._unread.setdefault(key, (run, seq))
        self._expire(done["time"])

    @on_op("read", "ok")
    def _read(self, invoke: Event | None, done: Event) -> None:
        value = done["value"]
        key = (done["channel"], value["id"])
        got = self._unread.get(key)
        if got is not None and got[0] == value["run"]:
            del self._unread[key]
            self._delivered.add(key)
            self._due.append((done["time"] + self._after, key[0], got[1], key[1]))
        self._expire(done["time"])

    @on("post", "ok")
    def _post_ok(self, event: Event) -> None:
        """A retry of a forgotten message's post, answered with its seq:
        the checks noted it anew, so they drop it again."""
        channel, value = event["channel"], event["value"]
        if channel not in self._roles:
            return
        if self._settling.forgotten.has(channel, value.get("seq")):
            self._settling.forget(channel, value["seq"], value["id"])
        self._expire(event["time"])

    def _expire(self, now: int) -> None:
        due = self._due
        while due and due[0][0] <= now:
            _, role, seq, mid = due.popleft()
            self._delivered.discard((role, mid))
            self._settling.forget(role, seq, mid)

    def live(self) -> int:
        """Messages delivered and not yet forgotten (unread, or read and
        waiting out the horizon)."""
        return len(self._unread) + len(self._due)
