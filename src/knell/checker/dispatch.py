"""The single pass: every consumer fed from one read of the history.

:func:`run_pass` reads each event exactly once and hands it only to the
consumers that declared its ``f`` and ``type`` (see
:mod:`knell.checker.consumer`): two dict lookups per event, so a consumer
never pays for events it ignores, and ``f`` values nobody declared (a
worker's ``stop``, say) reach nobody.

Three services are shared, so no consumer writes them again:

* **Pairing.** For every ``f`` some consumer handles as an operation, the
  driver keeps the outstanding invoke of each process incarnation and, on
  its completion, calls the operation handlers with ``(invoke,
  completion)``. An operation is *lost* (``completion`` ``None``) when a
  newer incarnation of its process starts (its predecessor was killed or
  crashed mid-operation), when the same incarnation invokes again without
  completing, or when the history ends. Nemesis events are never paired:
  the runner may start several drains before any completes.
* **Deliveries.** Each distinct ``(channel, seq, id)`` shown in a ``fetch``
  ok page or a ``handle`` event is delivered once, with the first event
  that showed it, to every consumer that asked for deliveries; the common
  path (a repeat) is one tuple and one set lookup per message.
* **Unreadable events.** A handler that raises on an event lacking a field
  the format promises has the error charged to its consumer (counted once
  per event, first place kept); a check turns that into "unknown" rather
  than crashing the run or passing silently.

Within one event, single-event handlers run before operation handlers,
each group in consumer order.

Many checks keep something of every ``post`` for the whole pass: the
events themselves, packed (:mod:`knell.checker.keep`), and the strings they
name as keys of their own tables (the id, the key, the channel, the
sender). The parser gives every event its own copy of every string, so
before any consumer sees a post those strings are replaced by one shared
copy each (the key by the id when they are equal): the same values, one
string per message however many checks keep it. A ``handle`` ok event's id
and a fetched page's ids are replaced by the posted copy too (the checks
keep ids handled per handle, and the deliveries keep each message shown):
one string per message instead of one per handle and page.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from knell.checker.consumer import COMPLETIONS, Consumer, wanted
from knell.checker.settle import Forgotten, Settling
from knell.history import Event

__all__ = ["Malformed", "PassResult", "run_pass"]

UNREADABLE = (LookupError, TypeError, AttributeError, ValueError)
"""What a handler raises on an event that lacks a field the format promises."""

Call = Callable[..., None]


def _sharing(ids: dict[str, str]) -> Call:
    """The reader that makes a post event's repeated strings shared copies
    (see the module docstring), and records each posted id in ``ids`` (id
    -> the one copy). It never raises: a field that is missing or not a
    string is left as it is, for the consumers to judge."""
    shared: dict[str, str] = {}
    share = shared.setdefault
    share_id = ids.setdefault

    def sharing(event: Event) -> None:
        if type(event) is not dict:
            return  # a read-only mapping is left as it is
        channel = event.get("channel")
        if type(channel) is str:
            event["channel"] = share(channel, channel)
        value = event.get("value")
        if type(value) is not dict:
            return
        sender = value.get("sender")
        if type(sender) is str:
            value["sender"] = share(sender, sender)
        mid = value.get("id")
        if type(mid) is not str:
            return
        mid = value["id"] = share_id(mid, mid)
        if value.get("key") == mid:
            value["key"] = mid

    return sharing


_UNSEEN = object()


class _Several(set[Any]):
    """The ids shown at one ``(channel, seq)`` when there are several (a bus
    that put two messages at one position)."""

    __slots__ = ()


@dataclass
class Malformed:
    """Events a consumer could not read: how many, and the first one."""

    count: int
    index: Any
    error: str
    last: Event  # counted once per event, however many of its parts fail

    def reason(self) -> str:
        return (
            f"{self.count} event(s) could not be read (first at index {self.index}: {self.error})"
        )


@dataclass
class PassResult:
    """What the pass itself saw (the consumers hold the rest)."""

    events: int = 0
    first: Event | None = None
    last: Event | None = None
    malformed: dict[int, Malformed] = field(default_factory=dict)
    """id(consumer) -> what it could not read."""

    def for_consumer(self, consumer: Consumer) -> Malformed | None:
        return self.malformed.get(id(consumer))


class _Errors:
    """Charges handler errors to the consumer that owns the handler (the
    object a bound handler method belongs to)."""

    def __init__(self, result: PassResult, op_consumers: list[Consumer]) -> None:
        self.result = result
        self.op_consumers = op_consumers

    def note(self, owner: Consumer, event: Event, exc: BaseException) -> None:
        seen = self.result.malformed.get(id(owner))
        if seen is None:
            where = event.get("index", "?") if isinstance(event, dict) else "?"
            self.result.malformed[id(owner)] = Malformed(
                1, where, f"{type(exc).__name__}: {exc}", event
            )
        elif seen.last is not event:
            seen.count += 1
            seen.last = event

    def charge(self, handler: Call, event: Event, exc: BaseException) -> None:
        owner = getattr(handler, "__self__", None)
        if isinstance(owner, Consumer):
            self.note(owner, event, exc)
        elif isinstance(owner, _Deliveries):
            for consumer in owner.owners:
                self.note(consumer, event, exc)
        else:  # the pairing service itself could not read the event
            for consumer in self.op_consumers:
                self.note(consumer, event, exc)


class _Pairing:
    """Matches each invoke with its completion, for the ``f`` values some
    consumer handles as operations, and reports lost operations."""

    def __init__(self, ops: dict[str, dict[str, list[Call]]], errors: _Errors) -> None:
        self.ops = ops
        self.errors = errors
        self.pending: dict[tuple[Any, Any], Event] = {}

    def _lose(self, invoke: Event) -> None:
        for handler in self.ops[invoke["f"]].get("lost", ()):
            try:
                handler(invoke, None)
            except UNREADABLE as exc:
                self.errors.charge(handler, invoke, exc)

    def invoke(self, event: Event) -> None:
        if event["process"] == "nemesis":
            return
        key = (event["process"], event.get("incarnation"))
        previous = self.pending.get(key)
        if previous is not None:
            self._lose(previous)
        self.pending[key] = event

    def completer(self, f: str, type_: str) -> Call:
        """The completion reader of one ``f`` and type: it pairs the event
        with its invoke and calls that completion's handlers, which it
        holds itself (no lookup of ``f`` and type per event)."""
        handlers = tuple(self.ops[f][type_])
        pending = self.pending
        charge = self.errors.charge

        def complete(event: Event) -> None:
            process = event["process"]
            if process == "nemesis":
                return
            key = (process, event.get("incarnation"))
            invoke = pending.get(key)
            if invoke is not None:
                if invoke["f"] == event["f"]:
                    del pending[key]
                else:
                    invoke = None
            for handler in handlers:
                try:
                    handler(invoke, event)
                except UNREADABLE as exc:
                    charge(handler, event, exc)

        return complete

    def started(self, event: Event) -> None:
        """A new incarnation started: its predecessors' operations are lost."""
        process = event["process"]
        incarnation = event.get("incarnation")
        stale = [k for k in self.pending if k[0] == process and k[1] != incarnation]
        for key in stale:
            self._lose(self.pending.pop(key))

    def finish(self) -> None:
        for invoke in list(self.pending.values()):
            self._lose(invoke)
        self.pending.clear()


class _Deliveries:
    """The readers of ``handle`` ok and ``fetch`` ok events (one each, so
    neither re-reads ``f``) that deliver each new ``(channel, seq, id)``
    once. A message list they cannot read is charged to every consumer
    that asked for deliveries."""

    def __init__(
        self, owners: list[Consumer], deliverers: list[Call], errors: _Errors, ids: dict[str, str]
    ) -> None:
        self.owners = owners
        self.deliverers = deliverers
        self.errors = errors
        self.seen: dict[Any, dict[Any, Any]] = {}
        """Channel -> seq -> the id shown there, or a :class:`_Several` of
        ids when a bus showed more than one at a seq: one entry per message,
        not a tuple."""
        self.ids = ids
        """Posted id -> its one copy: a fetched page's ids are copies."""
        self.forgotten: Forgotten | None = None
        """The forgotten messages, when the pass forgets: a sighting of one
        is passed over (:mod:`knell.checker.settle`)."""

    def forget(self, channel: Any, seq: int, mid: Any, again: bool) -> None:
        by_seq = self.seen.get(channel)
        if by_seq is not None:
            by_seq.pop(seq, None)
        if type(mid) is str:
            self.ids.pop(mid, None)

    def _show(self, channel: Any, seq: Any, mid: Any, event: Event) -> None:
        for deliver in self.deliverers:
            try:
                deliver(channel, seq, mid, event)
            except UNREADABLE as exc:
                self.errors.charge(deliver, event, exc)

    def handled(self, event: Event) -> None:
        # First reader of a handle ok: it gives the event the posted copy of
        # its id, so the checks keeping ids per handle share one string.
        channel = event["channel"]
        value = event["value"]
        mid = value["id"]
        if type(mid) is str and type(value) is dict:
            mid = value["id"] = self.ids.get(mid, mid)
        seq = value["seq"]
        # the common case inline (a repeat, shown by the id's one copy);
        # the rest as in fetched
        by_seq = self.seen.get(channel)
        if by_seq is not None and by_seq.get(seq) is mid:
            return
        forgotten = self.forgotten
        if forgotten is not None and forgotten.has(channel, seq):
            forgotten.passed_over += 1
            return
        if self._first(channel, seq, mid):
            self._show(channel, seq, mid, event)

    def fetched(self, event: Event) -> None:
        channel = event["channel"]
        first = self._first
        ids = self.ids
        forgotten = self.forgotten
        # every seq above the channel's highest forgotten one is known (most)
        top = -1 if forgotten is None else forgotten.top.get(channel, -1)
        for m in event["value"]["messages"]:
            seq = m["seq"]
            mid = m["id"]
            if type(mid) is str:
                mid = ids.get(mid, mid)
            if (
                top >= 0
                and type(seq) is int
                and seq <= top
                and forgotten is not None
                and forgotten.has(channel, seq)
            ):
                forgotten.passed_over += 1
                continue
            if first(channel, seq, mid):
                self._show(channel, seq, mid, event)

    def _first(self, channel: Any, seq: Any, mid: Any) -> bool:
        """Whether ``(channel, seq, mid)`` is shown for the first time (and
        note it). Raises TypeError on an unhashable part, as a set would."""
        by_seq = self.seen.get(channel)
        if by_seq is None:
            by_seq = self.seen[channel] = {}
        shown = by_seq.get(seq, _UNSEEN)
        if shown is mid:
            return False
        if shown is _UNSEEN:
            hash(mid)
            by_seq[seq] = mid
            return True
        if type(shown) is _Several:
            if mid in shown:
                return False
            shown.add(mid)
            return True
        if shown == mid:
            return False
        by_seq[seq] = _Several((shown, mid))
        return True


def _table(
    consumers: Sequence[Consumer], errors: _Errors, ids: dict[str, str]
) -> tuple[dict[tuple[Any, Any], tuple[Call, ...]], _Pairing | None]:
    """``(f, type) -> handlers`` for the whole pass, and the pairing service
    (``None`` when no consumer handles operations). One flat key, so an
    event costs one lookup however many consumers want it."""
    table: dict[Any, dict[Any, list[Call]]] = {}
    ops: dict[str, dict[str, list[Call]]] = {}
    deliverers: list[Call] = []
    delivering: list[Consumer] = []
    for consumer in consumers:
        for handler, method in wanted(consumer, "event"):
            for type_ in handler.types:
                table.setdefault(handler.f, {}).setdefault(type_, []).append(method)
        for handler, method in wanted(consumer, "op"):
            for type_ in handler.types:
                ops.setdefault(handler.f, {}).setdefault(type_, []).append(method)
        for _, method in wanted(consumer, "delivery"):
            deliverers.append(method)
            delivering.append(consumer)
    if deliverers:
        readers = _Deliveries(delivering, deliverers, errors, ids)
        for consumer in consumers:
            if isinstance(consumer, Settling):
                readers.forgotten = consumer.forgotten
                consumer.forgetters.append(readers)
        table.setdefault("handle", {}).setdefault("ok", []).insert(0, readers.handled)
        table.setdefault("fetch", {}).setdefault("ok", []).insert(0, readers.fetched)
    pairing: _Pairing | None = None
    if ops:
        pairing = _Pairing(ops, errors)
        for f, by_type in ops.items():
            table.setdefault(f, {}).setdefault("invoke", []).append(pairing.invoke)
            for type_ in COMPLETIONS:
                by_type.setdefault(type_, [])
                table.setdefault(f, {}).setdefault(type_, []).append(pairing.completer(f, type_))
        table.setdefault("start", {})
        for type_ in ("ok", "info"):
            table["start"].setdefault(type_, []).append(pairing.started)
    frozen = {
        (f, type_): tuple(handlers)
        for f, by_type in table.items()
        for type_, handlers in by_type.items()
        if handlers
    }
    return frozen, pairing


def run_pass(
    events: Iterable[Event], consumers: Sequence[Consumer], *, pause_gc: bool = True
) -> PassResult:
    """Feed every event to the consumers that declared it, then let each
    finish. Pairing errors (an event without ``process``) are charged to
    every consumer of operations. ``pause_gc``: collect garbage once,
    afterwards (see below); an online pass, which lasts as long as its run
    and shares its process with the runner, leaves the collector on."""
    result = PassResult()
    op_consumers = [c for c in consumers if any(h.how == "op" for h in c.handlers)]
    errors = _Errors(result, op_consumers)
    ids: dict[str, str] = {}
    table, pairing = _table(consumers, errors, ids)
    sharing = _sharing(ids)
    for kind in (("post", "invoke"), ("post", "ok")):
        if kind in table:
            table[kind] = (sharing, *table[kind])
    charge = errors.charge
    get = table.get
    count = 0
    event: Event | None = None
    # The pass allocates millions of small tuples that can never form
    # reference cycles; with every event alive, each full collection would
    # walk the whole history for nothing. Collect once, afterwards.
    collecting = gc.isenabled() and pause_gc
    if collecting:
        gc.disable()
    try:
        for event in events:
            if not count:
                result.first = event
            count += 1
            handlers = get((event.get("f"), event.get("type")))
            if handlers is None:
                continue
            for handler in handlers:
                try:
                    handler(event)
                except UNREADABLE as exc:
                    charge(handler, event, exc)
        result.last = event
        if pairing is not None:
            pairing.finish()
        for consumer in consumers:
            try:
                consumer.finish()
            except UNREADABLE as exc:
                errors.note(consumer, {}, exc)
    finally:
        if collecting:
            gc.enable()
    result.events = count
    return result
