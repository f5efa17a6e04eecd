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

Three more contracts sit beside it (the raven and at-most-once seed
designs), each its own Protocol so a bus can implement any of them:

* :class:`QueueBus` (work claiming): ``claim`` leases the oldest claimable
  message of a queue channel to one consumer for ``lease_s`` seconds;
  ``renew``, ``done`` (terminal) and ``release`` (voluntary requeue) are
  refused unless the caller holds a live lease. A lapsed lease requeues the
  message with its delivery count kept; at ``max_deliveries`` it becomes
  dead (listed by ``dead``), never silently dropped.
* :class:`RoleBus` (at-most-once role delivery): one run at a time holds a
  role (``claim_role``, ``release_role``, a lease so a dead run's hold
  lapses); ``receive`` delivers each message addressed to the role at most
  once, to the current holder's run; ``read`` is refused unless the caller
  is the run it was delivered to; a delivery whose run left without
  reading it is *stranded*: never redelivered, listed by ``stranded``.
* :class:`StreamBus` (raven's stream channels): observe-only, no acks and
  no cursors. A bounded *ring* keeps the newest messages (by count and/or
  age); ``tail`` reads from a position onward and says where the ring now
  starts, so a reader that fell behind learns it (never a silent skip).

``post`` is shared: every contract appends to the same log, and a channel's
kind (broadcast, queue, role or stream) only decides which read-state
serves it. A kind is fixed by the first kind-specific use (``subscribe``,
``declare_queue`` or ``claim``, ``claim_role``, ``declare_stream``) and
never changes; an
operation of another kind is refused with :class:`WrongChannelKind`.

The same operations as data (arguments and their wire types, results,
refusals), from which every wire form and its documents are derived,
are the table in :mod:`knell.buses.operations`; a test keeps it and the
Protocols below in step.

A bus says which contracts it implements with a ``contracts`` attribute
(:func:`contracts_of`); a bus without one implements broadcast only, and
knell refuses to run a scenario for a contract the bus lacks.

Errors form a small tree so workers can log the right completion type::

    BusError                      base: the call failed
    ├── DefiniteError             it certainly did not happen  -> history "fail"
    │   ├── AckBeyondHead         ack above head refused
    │   ├── NotSubscribed         the handle has no cursor on the channel
    │   └── Refused               a refusal the contract requires in this
    │       │                     situation ("fail" with "refused": its kind;
    │       │                     judged by the contract's checks, not an error)
    │       ├── WrongChannelKind  an operation of another channel kind
    │       ├── LeaseLost         renew/done/release without a live lease
    │       ├── RoleHeld          another run holds the role
    │       ├── NotHolder         the run does not hold the role
    │       └── NotDeliveredTo    read by a run the message was not delivered to
    └── IndeterminateError        it may or may not have happened -> "info"
        └── DriverFault           the way to the bus failed, not the bus (an
                                  adapter that broke its protocol): "info",
                                  marked knell-side; the run is then never VALID

Any other exception escaping a bus is treated as indeterminate too: a
worker cannot know whether a write it was in the middle of landed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal, Protocol, runtime_checkable

__all__ = [
    "BROADCAST",
    "CONTRACTS",
    "CONTRACT_METHODS",
    "EXPIRY",
    "FEATURES",
    "QUEUE",
    "ROLES",
    "STRANDED_CAP",
    "STREAM",
    "AckBeyondHead",
    "Bus",
    "BusError",
    "ChannelKind",
    "Claim",
    "DeadLetter",
    "DefiniteError",
    "Delivery",
    "DriverFault",
    "IndeterminateError",
    "JoinAt",
    "LeaseLost",
    "Message",
    "NotDeliveredTo",
    "NotHolder",
    "NotSubscribed",
    "QueueBus",
    "QueueInfo",
    "Refused",
    "RoleBus",
    "RoleHeld",
    "RoleHold",
    "Stranded",
    "StreamBus",
    "StreamInfo",
    "StreamPage",
    "Wake",
    "WrongChannelKind",
    "contracts_of",
    "features_of",
]

JoinAt = Literal["head", "start"]
ChannelKind = Literal["broadcast", "queue", "role", "stream"]
"""Which read-state serves a channel: cursors, leases, role deliveries, or
a ring read by tails."""

BROADCAST = "broadcast"
QUEUE = "queue"
ROLES = "at-most-once"
STREAM = "stream"
CONTRACTS = (BROADCAST, QUEUE, ROLES, STREAM)
"""The delivery contracts knell can test, by name."""

EXPIRY = "expiry"
FEATURES = (EXPIRY,)
"""Optional features a bus may declare beside its contracts (its
``features`` attribute, read by :func:`features_of`). A feature widens
operations every contract shares instead of adding a contract:

* ``expiry``: ``post(..., expires_at=T)`` takes a Unix time *by the bus's
  own clock* after which the message is expired, and ``fetch(...,
  include_expired=False)`` and ``tail(..., include_expired=False)`` take
  the forensic flag. An expired message is never returned by a liveness
  read (``fetch`` or ``tail`` without ``include_expired``, ``wait``'s
  ring, ``claim``, ``receive``); one not yet expired is never dropped; a
  stream tail names the seqs it hid because they expired
  (:attr:`StreamPage.expired`), so hiding is never a silent gap; an expired queue message is never
  dead-lettered (it was not delivered, it lapsed); ``fetch(...,
  include_expired=True)`` still returns it. A lease taken before the
  message expired stays the holder's: ``renew`` and ``done`` keep working
  until the lease itself lapses, and only then is the message judged
  expired instead of claimable again.

knell passes these arguments only when a scenario asks for expiry, and
refuses to run such a scenario on a bus without the feature, so a bus
written before the feature existed keeps working unchanged."""

STRANDED_CAP = 50
"""``stranded`` lists at most this many messages (the oldest deliveries)."""


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


class Refused(DefiniteError):
    """The contract requires the bus to refuse this call in this situation,
    and it did: nothing happened. Workers record the ``fail`` with
    ``"refused": refusal``, so the availability check does not count it as
    an error; the contract's own checks judge whether the refusal was right
    (a refusal while the caller surely held its lease is a finding)."""

    refusal: ClassVar[str] = "refused"


class WrongChannelKind(Refused):
    """An operation of one channel kind on a channel of another (a claim on
    a broadcast channel, a subscribe on a queue)."""

    refusal = "wrong-kind"


class LeaseLost(Refused):
    """``renew``, ``done`` or ``release`` by a consumer that holds no live
    lease on the message (it lapsed, someone else claimed it, it is done)."""

    refusal = "lease-lost"


class RoleHeld(Refused):
    """``claim_role`` while another run holds the role with a live lease."""

    refusal = "role-held"


class NotHolder(Refused):
    """``receive`` or ``release_role`` by a run that does not hold the role
    (never did, released it, or its hold lapsed)."""

    refusal = "not-holder"


class NotDeliveredTo(Refused):
    """``read`` by a run the message was not delivered to."""

    refusal = "not-delivered-to"


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


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """A queue channel's settings, as the bus holds them (the first
    declaration wins; later ones return these). ``sweep_interval`` is the
    bus's own promise: how long after a lease expires the message may still
    be unclaimable (0 when expiry is judged at claim time)."""

    channel: str
    max_deliveries: int
    sweep_interval: float = 0.0


@dataclass(frozen=True, slots=True)
class Claim:
    """A leased message. ``id`` is the bus's own id of the message, opaque
    to callers (``renew``, ``done`` and ``release`` take it); ``deliveries``
    counts the deliveries so far, this one included."""

    id: str
    channel: str
    seq: int
    body: str
    sender: str
    consumer: str
    deliveries: int
    expires_at: float
    """Unix time at which the lease lapses (the bus's clock)."""


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A message that used up ``max_deliveries`` deliveries without a done."""

    id: str
    channel: str
    seq: int
    body: str
    sender: str
    deliveries: int
    died_at: float


@dataclass(frozen=True, slots=True)
class RoleHold:
    """A run's hold on a role, until ``expires_at`` unless renewed (by
    claiming again) or released."""

    role: str
    run: str
    expires_at: float


@dataclass(frozen=True, slots=True)
class Delivery:
    """A message delivered to a run, at most once ever."""

    id: str
    role: str
    seq: int
    body: str
    sender: str
    run: str


@dataclass(frozen=True, slots=True)
class Stranded:
    """A message delivered to a run that left the role without reading it."""

    id: str
    role: str
    seq: int
    body: str
    sender: str
    run: str
    delivered_at: float


@dataclass(frozen=True, slots=True)
class StreamInfo:
    """A stream channel's ring bound, as the bus holds it (the first
    declaration wins; later ones return these). ``None`` means unbounded
    in that dimension; at least one of the two is set."""

    channel: str
    max_len: int | None
    """The ring holds at most this many messages once a post completes."""
    max_age_s: float | None
    """Messages older than this (the bus's clock) are dropped from the ring."""


@dataclass(frozen=True, slots=True)
class StreamPage:
    """One ``tail`` read. ``messages`` are consecutive seqs, ascending,
    starting at ``max(after + 1, first)``; ``first`` is the oldest seq the
    ring still holds (``head + 1`` when it holds none), so ``first > after
    + 1`` tells the reader that the messages ``after + 1 .. first - 1`` were
    dropped before it asked. ``head`` is the channel's highest seq when the
    page was read.

    On a bus with the ``expiry`` feature a liveness tail hides the
    messages that expired (by the bus's clock, at the read) but still
    accounts for their seqs: ``expired`` lists them, ascending, so
    ``messages`` and ``expired`` together are the consecutive seqs from
    ``max(after + 1, first)``, and a reader tells "hidden because it
    expired" from a silent gap. ``limit`` bounds that whole span (shown
    plus hidden), so a page stays bounded however much expired, and a
    reader moves ``after`` to the highest seq of either. A forensic tail
    (``include_expired=True``) shows the expired messages and ``expired``
    is empty; so it is on a bus without the feature."""

    channel: str
    messages: tuple[Message, ...]
    first: int
    head: int
    expired: tuple[int, ...] = ()

    @property
    def last(self) -> int | None:
        """The highest seq the page accounts for (shown or hidden as
        expired): where the next page starts after; ``None`` for a page
        that accounts for none."""
        shown = self.messages[-1].seq if self.messages else None
        hidden = self.expired[-1] if self.expired else None
        if shown is None:
            return hidden
        return shown if hidden is None else max(shown, hidden)


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


@runtime_checkable
class QueueBus(Protocol):
    """Queue channels: exactly one live lease per message (raven's claims).

    * ``declare_queue`` fixes the channel's kind as a queue with
      ``max_deliveries`` (idempotent: the first declaration wins and every
      call returns the channel's actual settings); ``claim`` on an
      undeclared channel declares it with the bus's default.
    * ``claim`` leases the oldest claimable message (never claimed,
      released, or whose lease lapsed with deliveries left) to
      ``consumer`` until now + ``lease_s``, counting one delivery; ``None``
      when nothing is claimable.
    * ``renew`` extends a live lease, ``done`` ends the message (terminal),
      ``release`` requeues it now; each is refused with :class:`LeaseLost`
      unless ``consumer`` holds a live lease on ``id``.
    * A lease that lapses (or a release) with ``max_deliveries`` used makes
      the message dead: ``dead`` lists it, oldest first, paged by seq.
    """

    def declare_queue(self, channel: str, max_deliveries: int) -> QueueInfo: ...

    def post(
        self, channel: str, body: str, sender: str, idempotency_key: str | None = None
    ) -> Message: ...

    def claim(self, channel: str, consumer: str, lease_s: float) -> Claim | None: ...

    def renew(self, id: str, consumer: str, lease_s: float) -> Claim: ...

    def done(self, id: str, consumer: str) -> None: ...

    def release(self, id: str, consumer: str) -> None: ...

    def dead(self, channel: str, after: int = 0, limit: int = 100) -> list[DeadLetter]: ...

    def close(self) -> None: ...


@runtime_checkable
class RoleBus(Protocol):
    """At-most-once delivery to whichever run holds a role, with stranded
    deliveries listed rather than lost or replayed.

    * ``claim_role`` gives ``run`` the role until now + ``lease_s`` (the
      same run claiming again renews); refused with :class:`RoleHeld`
      while another run's hold is live. ``release_role`` ends the hold.
    * ``receive`` delivers up to ``limit`` pending messages of the roles
      ``run`` holds, oldest first, each at most once ever (refused with
      :class:`NotHolder` if it holds none).
    * ``read`` marks a delivered message read; refused with
      :class:`NotDeliveredTo` unless ``run`` is the run it was delivered to.
    * ``stranded`` lists the role's messages delivered to a run that no
      longer holds the role and never read them: oldest delivery first, at
      most 50. Nothing is redelivered.
    """

    def post(
        self, channel: str, body: str, sender: str, idempotency_key: str | None = None
    ) -> Message: ...

    def claim_role(self, role: str, run: str, lease_s: float) -> RoleHold: ...

    def release_role(self, role: str, run: str) -> None: ...

    def receive(self, run: str, limit: int = 50) -> list[Delivery]: ...

    def read(self, id: str, run: str) -> None: ...

    def stranded(self, role: str) -> list[Stranded]: ...

    def close(self) -> None: ...


@runtime_checkable
class StreamBus(Protocol):
    """Stream channels: a bounded ring that tails observe (raven's
    ``stream`` kind). No acks, no cursors, no leases.

    * ``declare_stream`` fixes the channel's kind as a stream with its ring
      bound (idempotent: the first declaration wins, every call returns the
      channel's actual settings); ``max_len`` and ``max_age_s`` may not
      both be ``None``.
    * ``post`` appends as on every kind (dense seq per channel) and trims
      the ring in the same write: once it completes, the ring holds at most
      ``max_len`` messages and none older than ``max_age_s``.
    * ``tail`` returns up to ``limit`` messages after ``after`` that the
      ring still holds (a :class:`StreamPage`), never one twice, never out
      of order, never skipping a message the ring still holds; a reader
      that fell behind sees it in ``first``. ``tail`` on an undeclared
      channel is refused with :class:`WrongChannelKind` (a tail never
      fixes a kind with a default ring). On a bus with the ``expiry``
      feature ``tail`` also takes ``include_expired`` (see
      :data:`EXPIRY`): a liveness tail hides expired messages and lists
      their seqs in :attr:`StreamPage.expired`; ``limit`` counts shown
      and hidden seqs together.
    * Every stream operation on a channel of another kind, and every
      other kind's operation on a stream, is refused with
      :class:`WrongChannelKind`.
    """

    def declare_stream(
        self, channel: str, max_len: int | None = None, max_age_s: float | None = None
    ) -> StreamInfo: ...

    def post(
        self, channel: str, body: str, sender: str, idempotency_key: str | None = None
    ) -> Message: ...

    def tail(self, channel: str, after: int = 0, limit: int = 100) -> StreamPage: ...

    def close(self) -> None: ...


CONTRACT_METHODS: dict[str, tuple[str, ...]] = {
    BROADCAST: ("post", "subscribe", "fetch", "ack", "cursor", "head", "wait", "close"),
    QUEUE: ("declare_queue", "post", "claim", "renew", "done", "release", "dead", "close"),
    ROLES: ("post", "claim_role", "release_role", "receive", "read", "stranded", "close"),
    STREAM: ("declare_stream", "post", "tail", "close"),
}
"""What an object must have to be driven under each contract."""


def contracts_of(bus: object) -> frozenset[str]:
    """The contracts ``bus`` declares (its ``contracts`` attribute: any
    iterable of names from :data:`CONTRACTS`); broadcast when it declares
    none, as every bus did before the other contracts existed."""
    declared = getattr(bus, "contracts", None)
    if declared is None:
        return frozenset({BROADCAST})
    if isinstance(declared, str):
        return frozenset({declared})
    try:
        return frozenset(str(name) for name in declared)
    except TypeError:
        return frozenset({BROADCAST})


def features_of(bus: object) -> frozenset[str]:
    """The optional features ``bus`` declares (its ``features`` attribute:
    any iterable of names from :data:`FEATURES`); none when it declares
    none, as every bus did before features existed."""
    declared = getattr(bus, "features", None)
    if declared is None:
        return frozenset()
    if isinstance(declared, str):
        return frozenset({declared})
    try:
        return frozenset(str(name) for name in declared)
    except TypeError:
        return frozenset()
