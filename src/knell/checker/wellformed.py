"""Is this a history knell could have written? Asked of every event before any check reads it.

The checks trust the history: a ``post`` ok proves a post landed, an
``ack`` ok proves a cursor moved, and the order of a process's events is
the order it did things. Fed a file that is not a history at all (a line
twice, the file concatenated to itself, lines out of order, a seq that
is a string), they would still find anomalies, blame the bus for them and
show made-up witnesses. So the history is held, in the same single pass
(:func:`validated` wraps the stream the checks read), to what the format
guarantees:

* **Schema.** Every event has the envelope knell writes (``time`` in
  nanoseconds, ``process``, ``incarnation``, ``type``, ``f``, ``value``
  an object; ``handle`` and ``channel`` strings, present where its ``f``
  happens on a handle or channel), an ``f`` a worker or the nemesis
  writes, and the value that ``f`` carries, field by field
  (:mod:`knell.history_schema`).
* **Numbering.** A merged history numbers its events ``0, 1, 2, ...`` in
  ``index``: a duplicated, dropped or moved line breaks the count. A
  history without indexes (one from another harness) must have none.
* **Pairing.** A process incarnation runs one operation at a time: an
  invoke while its previous operation has no completion, a completion
  with no invoke (or of another ``f``, handle or channel), or a ``wake``
  outside an ``arm`` is not something a worker does. (The nemesis may run
  several operations at once, such as drains; it is not paired.)

Each of these refuses the file (:class:`~knell.history.HistoryError`,
exit 3) with the file, line, field and value. One property is a doubt
rather than a refusal: **time going backwards**, within a process
incarnation or from one line of the file to the next. Knell writes the
wall clock, which an administrator or NTP may step back, so a real
history can show it; but the checks order events by it, so a history
where it happens cannot be judged. It makes
the verdict "unknown" with the reason, whatever the checks found
(:attr:`WellFormed.doubts`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from knell.history import Event, HistoryError
from knell.history_schema import (
    CLOCK_FS,
    OPERATION_FS,
    PLACES,
    PLAIN_SHAPES,
    SINGLE_FS,
    nemesis_problem,
    value_problem,
)
from knell.history_shape import fits
from knell.nemesis.registry import events
from knell.stores.integrity import INTEGRITY_F

__all__ = ["NEMESIS_FS", "WellFormed", "nemesis_fs"]

NEMESIS_FS = frozenset(
    (
        "begin",
        "ready",
        "heal",
        "stop",
        "drain",
        "crash",
        "give-up",
        "restart",
        "kill",
        "fault-failed",
        INTEGRITY_F,
        *CLOCK_FS,
    )
)
"""What the runner itself records as the nemesis, and the clock faults'
events (their shape is fixed by :mod:`knell.history_schema` whether or not
their fault kinds are installed); each fault kind adds its own apply and
heal (:func:`nemesis_fs`)."""


def nemesis_fs() -> frozenset[str]:
    """Every ``f`` the nemesis writes: the runner's and every kind's (a
    built-in kind's from the registry's table, none of them imported)."""
    own = {f for k in events().values() for f in (k.apply_f, k.heal_f, *k.other_fs)}
    return NEMESIS_FS | own


_TYPES_OF_SINGLE = frozenset(("ok",))


class WellFormed:
    """The validation pass over one history file: :meth:`events` yields each
    event unchanged once it is known to be one knell could have written.

    ``line`` gives the file's line number of the current event (a
    :class:`~knell.history.HistoryReader`'s ``line``), so a refusal names
    it; without it, the count of events read stands in.
    """

    def __init__(self, path: Path, line: Callable[[], int] | None = None) -> None:
        self.path = path
        self._line = line
        self.doubts: list[str] = []
        """Why the history cannot be judged, though knell may have written it."""
        self._nemesis_fs = nemesis_fs()
        self._count = 0
        self._indexed: bool | None = None
        self._last_time: dict[tuple[str, int], int] = {}
        self._pending: dict[tuple[str, int], tuple[Event, int]] = {}
        self._backwards: set[tuple[str, int]] = set()
        self._latest = 0
        self._unordered = False

    def _where(self) -> int:
        return self._line() if self._line is not None else self._count

    def _refuse(self, problem: str) -> HistoryError:
        return HistoryError(
            f"{self.path}:{self._where()}: not a history knell could have written: {problem}"
        )

    def events(self, events: Iterable[Event]) -> Iterator[Event]:
        """Each event, once held to everything above. The loop is the hot
        path of ``knell check`` (every event of a history passes here before
        any check), so what nearly every event does (numbered in turn, a
        plain worker event (:func:`_plain`), in time order, an invoke or the
        completion of the pending one) is tested inline, and anything else
        goes to the methods that decide and word it."""
        line = self._line
        last_time = self._last_time
        pending_of = self._pending
        single = SINGLE_FS
        for event in events:
            self._count = count = self._count + 1
            index = event.get("index")
            if not self._indexed or type(index) is not int or index != count - 1:
                self._numbering(event)
            if not _plain(event):
                self._schema(event)
            process = event["process"]
            key = (process, event["incarnation"])
            now = event["time"]
            if now >= self._latest:
                self._latest = now
            else:
                self._out_of_order(now)
            last = last_time.get(key)
            if last is None or now > last:
                last_time[key] = now
            elif now < last:
                self._backwards_in(key, last, now)
            if process != "nemesis":
                f = event["f"]
                if event["type"] == "invoke":
                    if key in pending_of:
                        self._pair(key, event)  # refused: one operation at a time
                    pending_of[key] = (event, line() if line is not None else count)
                elif f in single:
                    if f == "wake":
                        self._pair(key, event)
                else:
                    pending = pending_of.get(key)
                    invoke = pending[0] if pending is not None else None
                    if (
                        invoke is not None
                        and invoke["f"] == f
                        and invoke.get("handle") == event.get("handle")
                        and invoke.get("channel") == event.get("channel")
                    ):
                        del pending_of[key]
                    else:
                        self._pair(key, event)  # refused, and why
            yield event

    # -- one event ---------------------------------------------------------------

    def _schema(self, event: Event) -> None:
        """Refuse an event whose envelope, ``f``, value or places are not
        what knell writes (the full test, which words the refusal)."""
        problem = _envelope(event)
        if problem is not None:
            raise self._refuse(problem)
        process: str = event["process"]
        f: str = event["f"]
        type_: str = event["type"]
        if process == "nemesis":
            if f not in self._nemesis_fs:
                raise self._refuse(f"the nemesis writes no event {f!r}")
            problem = nemesis_problem(f, type_, event["value"])
        elif f in OPERATION_FS:
            problem = value_problem(f, type_, event["value"])
        elif f in SINGLE_FS:
            if type_ not in _TYPES_OF_SINGLE:
                raise self._refuse(f"a {f} event is written only as ok, not {type_!r}")
            problem = value_problem(f, type_, event["value"])
        else:
            raise self._refuse(f"no worker writes an event {f!r} (process {process!r})")
        if problem is not None:
            raise self._refuse(problem)
        for name in PLACES.get(f, ()):
            if event.get(name) is None:
                raise self._refuse(f"a {f} event without its {name!r}")

    def _numbering(self, event: Event) -> None:
        index = event.get("index")
        if self._indexed is None:
            self._indexed = index is not None
        if not self._indexed:
            if index is not None:
                raise self._refuse(f"index {_shown(index)} in a history whose first event has none")
            return
        due = self._count - 1
        if type(index) is not int or index != due:
            raise self._refuse(
                f"index {_shown(index)} where {due} is due: a merged history numbers its "
                "events 0, 1, 2, ... (a line duplicated, dropped or moved?)"
            )

    def _out_of_order(self, now: int) -> None:
        """An event earlier than one before it in the file: said once."""
        if not self._unordered:
            self._unordered = True
            self.doubts.append(
                f"{self.path}:{self._where()}: events out of time order "
                f"({(self._latest - now) / 1e9:.6f} s back): a merged history is in time "
                "order unless a clock was stepped back, and the checks order events by it"
            )

    def _backwards_in(self, key: tuple[str, int], last: int, now: int) -> None:
        """An event earlier than one before it of the same process
        incarnation: said once per incarnation."""
        if key not in self._backwards:
            self._backwards.add(key)
            self.doubts.append(
                f"{self.path}:{self._where()}: time goes backwards in process {key[0]} "
                f"incarnation {key[1]} ({(last - now) / 1e9:.6f} s): the wall clock was "
                "stepped back or lines are out of order, and the checks order events by it"
            )

    def _pair(self, key: tuple[str, int], event: Event) -> None:
        f = event["f"]
        type_ = event["type"]
        pending = self._pending.get(key)
        if type_ == "invoke":
            if pending is not None:
                raise self._refuse(
                    f"{f} invoked by {key[0]} (incarnation {key[1]}) while its {pending[0]['f']} "
                    f"of line {pending[1]} has no completion: a process runs one operation "
                    "at a time"
                )
            self._pending[key] = (event, self._where())
            return
        if f in SINGLE_FS:
            if f == "wake" and (pending is None or pending[0]["f"] != "arm"):
                raise self._refuse(f"a wake of {key[0]} (incarnation {key[1]}) outside an arm")
            return
        if pending is None:
            raise self._refuse(
                f"{type_} of {f} by {key[0]} (incarnation {key[1]}) with no invoke before it"
            )
        invoke = pending[0]
        for name in ("f", "handle", "channel"):
            if invoke.get(name) != event.get(name):
                raise self._refuse(
                    f"{type_} of {f} by {key[0]} (incarnation {key[1]}) completes the "
                    f"invoke of line {pending[1]}, whose {name} is "
                    f"{_shown(invoke.get(name))}, not {_shown(event.get(name))}"
                )
        del self._pending[key]


_PLAIN = {key: (shape, PLACES.get(key[0], ())) for key, shape in PLAIN_SHAPES.items()}
_NONE = type(None)


def _plain(event: Event) -> bool:
    """Whether a worker's event is certainly what :meth:`WellFormed._schema`
    accepts: its envelope, value (:mod:`knell.history_shape`) and places
    tested with plain Python. ``False`` only means "not certainly": the full
    test then decides, and words the refusal. This is the path nearly every
    event takes; the full test, with pydantic, cost as much as the checks."""
    if event["time"] < 0 or event["process"] in ("", "nemesis"):
        return False
    incarnation = event.get("incarnation")
    if type(incarnation) is not int or incarnation < 0:
        return False
    get = event.get
    if type(get("pid")) not in _INT_OR_NONE:
        return False
    if type(get("handle")) not in _STR_OR_NONE or type(get("channel")) not in _STR_OR_NONE:
        return False
    plain = _PLAIN.get((event["f"], event["type"]))
    if plain is None or not fits(plain[0], get("value")):
        return False
    for name in plain[1]:  # noqa: SIM110 - a loop over one or two names beats all() here
        if get(name) is None:
            return False
    return True


_INT_OR_NONE = frozenset((int, _NONE))
_STR_OR_NONE = frozenset((str, _NONE))


def _envelope(event: Event) -> str | None:
    """What is wrong with the fields every event has (the reader already
    holds ``time``, ``process``, ``type`` and ``f`` to their types)."""
    if event["time"] < 0:
        return f"'time' must not be negative, got {event['time']}"
    if not event["process"]:
        return "'process' must not be empty"
    incarnation = event.get("incarnation")
    if type(incarnation) is not int or incarnation < 0:
        return f"'incarnation' must be a whole number, got {_shown(incarnation)}"
    pid = event.get("pid")
    if pid is not None and type(pid) is not int:
        return f"'pid' must be an integer, got {_shown(pid)}"
    for name in ("handle", "channel"):
        value = event.get(name)
        if value is not None and type(value) is not str:
            return f"{name!r} must be a string, got {_shown(value)}"
    if type(event.get("value")) is not dict:
        return f"'value' must be an object, got {_shown(event.get('value'))}"
    return None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
