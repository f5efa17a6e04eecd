"""Events a check keeps for later, held as their compact JSON text.

Most per-message findings need the message's post (invoke and ok) as their
witness, and the finding can come at the very end of the history (a loss
is proven only by the final drain), so several checks keep a post event of
every message for the whole pass. As a parsed dict an event is a dozen
Python objects (the dict, its value dict, ints, strings: about 800 bytes
for a post); as the JSON text orjson writes it is one ``bytes`` of about
200. A kept event is read again only to build a witness or, rarely, to
look at one field, so paying a parse then costs nothing the pass notices.

:func:`keep` packs an event once, however many checks keep it: all the
handlers of one event run back to back, so a one-slot memo (the event last
packed) hands every check the same :class:`Kept`. An event that does not
survive the trip through JSON unchanged (a tuple, a non-string key, an
integer beyond 64 bits: never in a recorded history, possible in a test's
hand-built one) is kept as it is, so a witness is always the event itself.
"""

from __future__ import annotations

from typing import Any

import orjson

from knell.history import Event

__all__ = ["Held", "Kept", "keep", "unkeep"]


class Kept:
    """One event as its JSON text. Reading a field parses it (rare by
    design: the checks read kept events to build witnesses)."""

    __slots__ = ("raw",)

    def __init__(self, raw: bytes) -> None:
        self.raw = raw

    def event(self) -> Event:
        """The event, parsed again (a fresh dict equal to the original)."""
        event: Event = orjson.loads(self.raw)
        return event

    def __getitem__(self, name: str) -> Any:
        return self.event()[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self.event().get(name, default)

    def __repr__(self) -> str:
        return f"Kept({self.raw!r})"


Held = Event | Kept
"""What a check holds of an event it keeps: the event or its :class:`Kept`."""


class _Memo:
    """The event last packed and its :class:`Kept` (held, so the identity
    test cannot match a new event that reuses a freed one's address)."""

    __slots__ = ("event", "kept")

    def __init__(self) -> None:
        self.event: Event | None = None
        self.kept: Held | None = None


_memo = _Memo()


def keep(event: Event) -> Held:
    """The form of ``event`` to keep: a :class:`Kept` shared by every
    check that keeps the same event, or the event itself when JSON would
    not give it back unchanged."""
    memo = _memo
    if event is memo.event and memo.kept is not None:
        return memo.kept
    held: Held
    try:
        raw = orjson.dumps(event)
    except TypeError:
        held = event
    else:
        # orjson's buffer is a few KB whatever the length: keep an exact copy
        held = Kept(bytes(memoryview(raw))) if orjson.loads(raw) == event else event
    memo.event = event
    memo.kept = held
    return held


def unkeep(held: Held) -> Event:
    """The event a check kept (parsed again if packed)."""
    return held.event() if isinstance(held, Kept) else held
