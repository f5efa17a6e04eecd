"""Settling: when the pass may forget a message, so a long soak checks at a flat cost.

Several checks keep something of every message for the whole pass (its
post as a witness, its id to recognise a repeat), so without forgetting a
soak's check grows with the history: about 1.6 KB per message, a gigabyte
a day at the quickstart's rate. Most of that is kept for questions that
stop being open long before the run ends. A broadcast message is
**settled** once every handle that owes it (every handle subscribed on its
channel when its post was first invoked, the rule of
:mod:`knell.checker.loss`) has *handled* it and *acked* through its seq,
and its post completed ``ok``. From then on:

* ``no-loss`` has nothing left to decide: each handle that owed it
  handled it, and a handle's handled set only grows;
* a repeat of the message (a redelivery, a reader paging over it again, an
  idempotent retry answered with the original seq) tells nothing new;
* what *could* still be found is a bus that later shows a different
  message at its seq, or the same message at a new seq (a retry appended
  twice). Those come from a retry, a failover or a reader that went
  back: the first two arrive within the workload's retry horizon, the
  third is itself a cursor regression, which ``cursor-monotonic`` judges
  without any per-message state.

So a settled message is kept for :attr:`CheckConfig.forget_after` more
seconds of history time (the runner sets it from the scenario: twice the
operation timeout, plus the producers' longest deliberate resend delay,
``retry_after``, so every retry the workload can make lands while the
message is still known) and then **forgotten**: every check that kept it
drops it (:class:`Forgetter`), and its seq is marked in a bitmap per
channel, one bit per message, the only trace kept. A later sighting of a
forgotten seq is passed over by the pass (counted, never judged: judging
it would need what was forgotten), and a post whose ``ok`` names a
forgotten seq is a retry answered by the original seq (forgotten at once
again).

What is never forgotten, and why:

* a message some owing handle has not handled and acked: a handle killed
  for good (a joiner's old incarnation) owes everything posted after it
  joined until the final drain, so a scenario that abandons handles keeps
  those messages until the end (:doc:`soaks` says so);
* messages of a channel where a handle joined asking for the whole history
  (``at = "start"``): such a handle owes every message ever posted, so
  nothing more is forgotten there, and ``no-loss`` answers "unknown" for
  what was already forgotten (the runner does not forget at all in a
  scenario with such a joiner);
* messages with no owing handle (a queue's, a role's, a stream's, a
  channel nobody subscribed to): each of those contracts has its own
  rule (:mod:`knell.checker.queue.settle`,
  :mod:`knell.checker.atmostonce.settle`,
  :mod:`knell.checker.stream.settle`), which forgets them through
  :meth:`Settling.forget` and the same bitmap;
* non-integer seqs (the bitmap needs a position).
"""

from __future__ import annotations

from collections import deque
from typing import Any, Protocol, runtime_checkable

from knell.buses.contract import BROADCAST, QUEUE, ROLES, STREAM
from knell.checker.consumer import Consumer, on
from knell.history import Event

__all__ = ["FORGETS", "Forgetter", "Forgotten", "Settling", "kept_whole"]

FORGETS: tuple[str, ...] = (BROADCAST, QUEUE, ROLES, STREAM)
"""The contracts whose settled messages the pass forgets: a queue's done
and dead messages by :mod:`knell.checker.queue.settle`, a role's read
ones by :mod:`knell.checker.atmostonce.settle`, a stream's dropped ones by
:mod:`knell.checker.stream.settle`."""


def kept_whole(contracts: tuple[str, ...] | None, forget_after: float | None) -> list[str]:
    """The tested contracts whose checks will keep every message of a run
    (what a soak should say up front): all of them when the run forgets
    nothing (``forget_after`` None: a bare history, or a handle joined at
    the start), else those not in :data:`FORGETS`."""
    tested = list(contracts) if contracts is not None else [BROADCAST, QUEUE, ROLES, STREAM]
    if forget_after is None:
        return tested
    return [c for c in tested if c not in FORGETS]


@runtime_checkable
class Forgetter(Protocol):
    """A check that can drop what it kept of one message."""

    def forget(self, channel: Any, seq: int, mid: Any, again: bool) -> None:
        """Drop what is kept of message ``mid`` at ``(channel, seq)``: it
        settled ``forget_after`` seconds ago (see the module docstring).
        ``again``: it was forgotten before, and a retry of its post (answered
        with its seq) made the checks note it anew; nothing is to be tallied."""


class Forgotten:
    """The one trace of every forgotten message: a bit per seq per channel."""

    __slots__ = ("_bits", "count", "passed_over", "top")

    def __init__(self) -> None:
        self._bits: dict[Any, bytearray] = {}
        self.count = 0
        """Messages forgotten."""
        self.passed_over = 0
        """Sightings of a forgotten seq, not judged."""
        self.top: dict[Any, int] = {}
        """Channel -> its highest forgotten seq."""

    def mark(self, channel: Any, seq: int) -> bool:
        """Mark ``seq`` forgotten; whether it was not already."""
        bits = self._bits.get(channel)
        if bits is None:
            bits = self._bits[channel] = bytearray()
        byte = seq >> 3
        if byte >= len(bits):
            bits.extend(bytes(max(byte + 1 - len(bits), len(bits) // 2, 64)))
        bit = 1 << (seq & 7)
        if bits[byte] & bit:
            return False
        bits[byte] |= bit
        self.count += 1
        if seq > self.top.get(channel, -1):
            self.top[channel] = seq
        return True

    def has(self, channel: Any, seq: Any) -> bool:
        """Whether ``seq`` of ``channel`` was forgotten (cheap for a seq
        above every forgotten one: most sightings are near the head)."""
        if type(seq) is not int:
            return False
        top = self.top.get(channel)
        if top is None or seq > top or seq < 0:
            return False
        return bool(self._bits[channel][seq >> 3] & (1 << (seq & 7)))

    def channels(self) -> dict[Any, int]:
        """Channel -> messages forgotten there."""
        return {c: sum(bin(b).count("1") for b in bits) for c, bits in self._bits.items()}


class _Message:
    """A message not yet forgotten: the handles that still owe it a handle
    and an ack (a tuple shared by every message posted while the same
    handles were subscribed: a handful of handles, replaced, never
    changed), its seq once its post completed ok."""

    __slots__ = ("owing", "seq", "settled")

    def __init__(self, owing: tuple[Any, ...]) -> None:
        self.owing = owing
        self.seq: int | None = None
        self.settled = False


class Settling(Consumer):
    """Decides when each broadcast message settled and, ``after`` seconds
    of history later, has every forgetter drop it (module docstring).

    It must be fed after the checks it makes forget (last in the pass's
    list): the event that settles a message is then already handled by
    every check."""

    name = "settling"

    def __init__(self, after: float, forgetters: list[Forgetter]) -> None:
        """``forgetters`` may be added to until the pass starts (the pass
        adds its own table of messages shown)."""
        self._after = int(after * 1e9)
        self.after_s = after
        self.forgetters = forgetters
        self.forgotten = Forgotten()
        self._subs: dict[Any, tuple[Any, ...]] = {}
        self._whole: set[Any] = set()
        self._pending: dict[Any, dict[Any, _Message]] = {}
        self._cursor: dict[tuple[Any, Any], int] = {}
        # (handle, channel) -> (seq, id) handled but not yet acked, in the
        # order handled: seqs rise but for a redelivery, which then waits
        # for the ack of the later one (later than it could: never too early)
        self._unacked: dict[tuple[Any, Any], deque[tuple[int, Any]]] = {}
        # (time it may be forgotten, channel, seq, id), in settling order
        self._due: deque[tuple[int, Any, int, Any]] = deque()

    @on("subscribe", "invoke")
    def _subscribe_invoke(self, event: Event) -> None:
        if (event.get("value") or {}).get("at") == "start":
            channel = event["channel"]
            self._whole.add(channel)
            self._pending.pop(channel, None)

    @on("subscribe", "ok")
    def _subscribe_ok(self, event: Event) -> None:
        channel = event["channel"]
        subs = self._subs.get(channel, ())
        if event["handle"] not in subs:
            self._subs[channel] = (*subs, event["handle"])
        self._raise(event["handle"], channel, (event.get("value") or {}).get("cursor"), event)

    @on("post", "invoke")
    def _post_invoke(self, event: Event) -> None:
        channel = event["channel"]
        subs = self._subs.get(channel)
        if not subs or channel in self._whole or event["process"] == "nemesis":
            return
        pending = self._pending.get(channel)
        if pending is None:
            pending = self._pending[channel] = {}
        mid = event["value"]["id"]
        if mid not in pending:
            pending[mid] = _Message(subs)

    @on("post", "ok")
    def _post_ok(self, event: Event) -> None:
        self._expire(event["time"])
        channel = event["channel"]
        pending = self._pending.get(channel)
        if pending is None:
            return
        value = event["value"]
        mid = value["id"]
        msg = pending.get(mid)
        if msg is None or msg.seq is not None:
            return
        seq = value["seq"]
        if type(seq) is not int:
            del pending[mid]  # no position to mark: never forgotten
            return
        if self.forgotten.has(channel, seq):
            # a retry answered with the original seq of a forgotten message
            del pending[mid]
            self.forget(channel, seq, mid)
            return
        msg.seq = seq
        self._settle(channel, mid, msg, event["time"])

    @on("handle", "ok")
    def _handle_ok(self, event: Event) -> None:
        channel = event["channel"]
        pending = self._pending.get(channel)
        if pending is None:
            return
        value = event["value"]
        msg = pending.get(value["id"])
        handle = event["handle"]
        if msg is None or handle not in msg.owing:
            return
        seq = value["seq"]
        if type(seq) is not int:
            return
        hc = (handle, channel)
        if self._cursor.get(hc, 0) >= seq:
            msg.owing = _without(msg.owing, handle)
            self._settle(channel, value["id"], msg, event["time"])
        else:
            unacked = self._unacked.get(hc)
            if unacked is None:
                unacked = self._unacked[hc] = deque()
            unacked.append((seq, value["id"]))

    @on("ack", "ok")
    def _ack_ok(self, event: Event) -> None:
        self._raise(event["handle"], event["channel"], event["value"].get("cursor"), event)

    def _raise(self, handle: Any, channel: Any, cursor: Any, event: Event) -> None:
        if type(cursor) is not int:
            return
        hc = (handle, channel)
        if cursor <= self._cursor.get(hc, 0):
            return
        self._cursor[hc] = cursor
        unacked = self._unacked.get(hc)
        if not unacked:
            return
        pending = self._pending.get(channel, {})
        now = event["time"]
        while unacked and unacked[0][0] <= cursor:
            _, mid = unacked.popleft()
            msg = pending.get(mid)
            if msg is not None and handle in msg.owing:
                msg.owing = _without(msg.owing, handle)
                self._settle(channel, mid, msg, now)

    def _settle(self, channel: Any, mid: Any, msg: _Message, now: int) -> None:
        if msg.owing or msg.seq is None or msg.settled:
            return
        msg.settled = True
        self._due.append((now + self._after, channel, msg.seq, mid))

    def _expire(self, now: int) -> None:
        due = self._due
        while due and due[0][0] <= now:
            _, channel, seq, mid = due.popleft()
            pending = self._pending.get(channel)
            if pending is None or pending.pop(mid, None) is None:
                continue  # its channel stopped forgetting (a join at the start)
            self.forget(channel, seq, mid)

    def forget(self, channel: Any, seq: int, mid: Any) -> None:
        """Mark ``seq`` forgotten and have every forgetter drop ``mid``
        (also for a queue message, :mod:`knell.checker.queue.settle`)."""
        again = not self.forgotten.mark(channel, seq)
        for forgetter in self.forgetters:
            forgetter.forget(channel, seq, mid, again)

    def live(self) -> int:
        """Messages still tracked (not yet forgotten)."""
        return sum(map(len, self._pending.values()))


def _without(owing: tuple[Any, ...], handle: Any) -> tuple[Any, ...]:
    return tuple(h for h in owing if h != handle)
