"""Pass consumers: anything that reads the history in the single pass.

A check, the fault windows (:mod:`knell.checker.windows`) and the run
statistics are all *consumers*: objects that declare, once, which events
they want, and are fed exactly those, in history order, by the one pass of
:mod:`knell.checker.dispatch`. A consumer never loops over the history
itself and never sees an event it did not ask for.

What a consumer can ask for, each declared by decorating the method that
handles it (the decorators are the declaration: nothing else names
``f`` values, event types or method names):

``@on(f, *types)``
    single events: ``handler(event)`` for every event with that ``f`` and
    one of ``types`` (default: every type). Use it for events that stand
    alone (``handle``, ``wake``, the nemesis's ``kill``) and for the
    *invoke* of an operation when something must be noted at invoke time
    (a snapshot to compare the completion with).
``@on_op(f, *types)``
    completed operations: ``handler(invoke, completion)`` once per
    operation, when its completion (``ok``, ``fail`` or ``info``) arrives,
    with the invoke that started it. With ``"lost"`` among ``types`` the
    handler also hears of operations that never completed because their
    process died (killed, crashed, or the history ended): ``completion``
    is then ``None``. Pairing an invoke with its completion is done once,
    by the driver, for every consumer: within one process incarnation
    operations are sequential, so a completion belongs to the outstanding
    invoke of the same ``f``.
``@on_delivery``
    ``handler(channel, seq, id, event)`` once per distinct message
    ``(channel, seq, id)`` shown to any reader, with the first ``fetch`` ok
    or ``handle`` event that showed it (repeats cannot prove anything new,
    and most sightings are repeats).

Handlers read the fields the history format promises directly; an event
that lacks one raises, and the driver charges the error to the consumer
(a check then answers "unknown", never a crash or a silent pass).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

__all__ = ["COMPLETIONS", "Consumer", "Handler", "on", "on_delivery", "on_op"]

COMPLETIONS: tuple[str, ...] = ("ok", "fail", "info")
"""The event types that complete an operation."""

EVENT_TYPES: tuple[str, ...] = ("invoke", *COMPLETIONS)

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Handler:
    """One declaration: which events a method handles, and how."""

    how: str  # "event" | "op" | "delivery"
    f: str
    types: tuple[str, ...]
    method: str


Fs = str | tuple[str, ...]
"""One ``f``, or several that the same method handles."""


def _mark(how: str, fs: Fs, types: tuple[str, ...]) -> Callable[[F], F]:
    def decorate(method: F) -> F:
        marks: list[tuple[str, str, tuple[str, ...]]] = list(getattr(method, "_knell_handles", ()))
        for f in (fs,) if isinstance(fs, str) else fs:
            marks.append((how, f, types))
        method._knell_handles = marks  # type: ignore[attr-defined]
        return method

    return decorate


def on(fs: Fs, *types: str) -> Callable[[F], F]:
    """Handle single events of ``fs`` (of the given types; default all)."""
    bad = set(types) - set(EVENT_TYPES)
    if bad:
        raise ValueError(f"@on({fs!r}): unknown event type(s) {sorted(bad)}")
    return _mark("event", fs, types or EVENT_TYPES)


def on_op(fs: Fs, *types: str) -> Callable[[F], F]:
    """Handle completed operations of ``fs`` as ``(invoke, completion)``.
    ``types`` narrows the completions (``ok``, ``fail``, ``info``, and
    ``lost`` for operations whose process died); default ``ok``, ``fail``
    and ``info``."""
    bad = set(types) - {*COMPLETIONS, "lost"}
    if bad:
        raise ValueError(f"@on_op({fs!r}): unknown completion type(s) {sorted(bad)}")
    return _mark("op", fs, types or COMPLETIONS)


def on_delivery(method: F) -> F:
    """Handle each distinct delivered message once: ``(channel, seq, id, event)``."""
    return _mark("delivery", "", ())(method)


class Consumer:
    """Base of everything the single pass feeds. Subclasses decorate their
    handler methods; :attr:`handlers` is derived from those decorations
    when the class is defined (inherited ones included)."""

    name: ClassVar[str] = ""
    handlers: ClassVar[tuple[Handler, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        found: dict[tuple[str, str, str], Handler] = {}
        for klass in reversed(cls.__mro__):
            for attr, value in vars(klass).items():
                marks = getattr(value, "_knell_handles", ())
                if not marks:
                    continue
                # A subclass that re-declares a method replaces its handlers.
                found = {k: h for k, h in found.items() if k[2] != attr}
                for how, f, types in marks:
                    key = (how, f, attr)
                    if key in found:  # stacked decorators for one f: their types add up
                        merged = tuple(dict.fromkeys((*found[key].types, *types)))
                        found[key] = Handler(how, f, merged, attr)
                    else:
                        found[key] = Handler(how, f, types, attr)
        cls.handlers = tuple(found.values())

    def finish(self) -> None:
        """Called once after the last event (before any result is read)."""

    @staticmethod
    def event_types() -> tuple[str, ...]:
        return EVENT_TYPES


def wanted(consumer: Consumer, how: str) -> list[tuple[Handler, Callable[..., None]]]:
    """The bound handler methods of ``consumer`` declared one way (``how``)."""
    return [(h, getattr(consumer, h.method)) for h in consumer.handlers if h.how == how]
