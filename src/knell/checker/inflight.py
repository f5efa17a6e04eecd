"""Operations in flight, and the processes that die with them.

Several checks and settlers keep the operations invoked and not yet
completed, keyed by ``(process, incarnation)`` (within one incarnation
operations are sequential, so that names one operation): a claim that
may still lease a message, a tail page that may still show a seq. The
nemesis records each SIGKILL (``kill``) and each crash of a process it
watched (``crash``), naming the process as ``target``. A killed process
writes nothing more: its operation in flight will never complete, and
from the death on its outcome is unknown (it may have reached the bus, or
not). Each reader decides what that means for it; this module only says
which of its operations died.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from knell.history import Event

__all__ = ["died_in_flight"]


def died_in_flight(event: Event, keys: Iterable[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Of the operations in flight ``keys`` (``(process, incarnation)``),
    those of the process a nemesis ``kill`` or ``crash`` event names.
    Empty for any other event."""
    target = (event.get("value") or {}).get("target")
    if event["process"] != "nemesis" or target is None:
        return []
    return [key for key in keys if key[0] == target]
