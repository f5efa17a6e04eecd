"""The delivery contract every bus under test promises, as a Protocol.

knell never trusts a bus: it records what each process asked and what came
back, and the checker decides afterwards whether the promises held. This
module is therefore the only thing workers import about a bus. Everything
concrete (SQLite, a user's own bus, a deliberately broken mutant) arrives
through :func:`knell.buses.open_bus` as an object satisfying :class:`Bus`.

The promises, in one place (design section 1, broadcast channels):

* ``post`` appends with a dense per-channel ``seq`` (1, 2, 3 ...). A repeated
  idempotency key returns the *original* message and appends nothing.
* ``subscribe`` joins a new handle at the current head (no history flood)
  unless ``at="start"``; subscribing again never moves an existing cursor.
* ``fetch`` is a peek: it never consumes and never moves a cursor. A short
  page means "end of this batch", not "head": readers page until empty.
* ``ack`` is forward-only (``MAX(old, up_to)`` inside the write transaction)
  and refuses ``up_to`` beyond head.
* ``wait`` is the doorbell: peek-only, no durable state, rings at once on
  unacked backlog written by others, otherwise on the first post by someone
  else; never on the handle's own posts; carries no body.

Errors form a small tree so workers can log the right completion type::

    BusError                      base: the call failed
    ├── DefiniteError             it certainly did not happen  -> history "fail"
    │   ├── AckBeyondHead         ack above head refused
    │   └── NotSubscribed         the handle has no cursor on the channel
    └── IndeterminateError        it may or may not have happened -> "info"
        └── DriverFault           the way to the bus failed, not the bus (an
                                  adapter that broke its protocol): "info",
                                  marked knell-side; the run is then never VALID

Any other exception escaping a bus is treated as indeterminate too: a
worker cannot know whether a write it was in the middle of landed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

__all__ = [
    "AckBeyondHead",
    "Bus",
    "BusError",
    "DefiniteError",
    "DriverFault",
    "IndeterminateError",
    "JoinAt",
    "Message",
    "NotSubscribed",
    "Wake",
]

JoinAt = Literal["head", "start"]


class BusError(Exception):
    """A bus operation did not succeed."""


class DefiniteError(BusError):
    """The operation definitely did not take effect (history type ``fail``)."""


class AckBeyondHead(DefiniteError):
    """An ack named a seq above the channel's head; the bus refused it."""


class NotSubscribed(DefiniteError):
    """The handle has no cursor on the channel (fetch from the cursor, ack,
    cursor); nothing was done. A bus may raise plain :class:`DefiniteError`
    instead: the history records ``fail`` either way."""


class IndeterminateError(BusError):
    """The outcome is unknown: timeout, lost connection (history type ``info``)."""


class DriverFault(IndeterminateError):
    """The driver between knell and the bus failed (an adapter that answered
    with malformed JSON, exited or hung), so the outcome is unknown *and* the
    failure says nothing about the bus. Recorded ``info`` with ``"knell_side":
    true``; a run with such operations is at best "unknown", never VALID and
    never INVALID because of them."""


@dataclass(frozen=True, slots=True)
class Message:
    """One appended message. ``body`` is opaque to the bus; knell puts a
    unique id in it (``producer-2:431``) so deliveries can be matched to
    posts without trusting the bus's own bookkeeping."""

    channel: str
    seq: int
    body: str
    sender: str
    idempotency_key: str | None = None


@dataclass(frozen=True, slots=True)
class Wake:
    """A doorbell ring. Deliberately carries no body: content flows only
    through fetch, where the handling discipline lives."""

    channel: str
    seq: int
    sender: str
    reason: Literal["backlog", "post"]


@runtime_checkable
class Bus(Protocol):
    """A broadcast bus with durable per-(handle, channel) cursors."""

    def post(
        self, channel: str, body: str, sender: str, idempotency_key: str | None = None
    ) -> Message: ...

    def subscribe(self, handle: str, channel: str, at: JoinAt = "head") -> int: ...

    def fetch(
        self, handle: str, channel: str, after: int | None = None, limit: int = 100
    ) -> list[Message]: ...

    def ack(self, handle: str, channel: str, up_to: int) -> int: ...

    def cursor(self, handle: str, channel: str) -> int: ...

    def head(self, channel: str) -> int: ...

    def wait(self, handle: str, timeout: float) -> Wake | None: ...

    def close(self) -> None: ...
