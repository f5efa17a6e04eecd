"""Fault windows: when each fault was in force, and what it touched.

A check that excuses something "inside a fault" (a missed doorbell ring
while the waiter was frozen, an error while the store was down) must know
exactly when each fault held and whom it hurt. :class:`FaultWindows` reads
that from the history itself, in the same single pass as the checks: each
fault's apply event (a nemesis ``kill``, ``pause``...) opens a window, its
heal event (``restart``, ``resume``...) closes it, and the fault kind's
``grace`` extends it for the system to recover. Reading windows from the
history, not from the scenario, means a stored run is re-checked with the
windows it actually had, and a fault that never applied opens none. So the
windows are a pass consumer like any check and live with the checker; what
they know of faults comes from the fault-kind registry below it.

A window opens at the apply's ``invoke``, which the runner writes before
the fault kind acts (an operation can fail in the instant between the kill
and the event that records it); a ``fail`` of the apply (the fault did not
take) removes the window. The apply events record the fault's number,
fault kind, effect, grace and blast radius (see
:class:`~knell.nemesis.kind.Radius`), so windows of a fault kind this knell
does not know still count. Histories written before fault numbers existed
(schedule version 1) are paired by fault kind and target, with the target
as the only process touched.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from knell.checker.clocks import APPLY_FS, CLOCK_FS, ClockTimeline
from knell.checker.consumer import EVENT_TYPES, Consumer, Handler
from knell.history import Event
from knell.nemesis.kind import FaultKind, Radius
from knell.nemesis.registry import KindEvents, events, kind

__all__ = ["FaultWindows", "Window"]

_NS = 1_000_000_000
_FOREVER = float("inf")


_CLOCK = 1
"""Column flag: a clock fault's window (it moves a clock, stops nothing)."""
_HEALED = 2
"""Column flag: the heal was seen (``end`` holds its time)."""
_DEAD = 4
"""Column flag: the apply failed, so the window never was one."""
_OTHER = -(2**63)
"""In the fault column: the fault's number is not a 64-bit int (kept apart)."""


@dataclass(slots=True)
class Window:
    """One fault, from its apply to its confirmed heal (``end`` is None
    while it was never healed): what the checks ask of it, not the apply
    and heal events. A view, made when asked for: :class:`FaultWindows`
    keeps every window in columns (see there)."""

    kind: str
    """The fault kind's name (``kill``, ``store-pause``...)."""
    fault: Any
    effect: str
    start: int
    end: int | None
    grace_ns: int
    radius: Radius
    clock: bool = False
    """Whether this is a clock fault (it moves a clock, stops nothing)."""

    def overlaps(self, t0: int, t1: int, *, grace: bool = True) -> bool:
        """Whether the window was in force at some moment of ``[t0, t1]``."""
        if self.start > t1:
            return False
        if self.end is None:
            return True
        return self.end + (self.grace_ns if grace else 0) >= t0

    @property
    def reach(self) -> float:
        """The last moment (ns) the window touches anything, grace included
        (infinite while it was never healed)."""
        return _FOREVER if self.end is None else self.end + self.grace_ns

    def touches(self, process: str, *, indirect: bool) -> bool:
        return process in self.radius.processes or (indirect and process in self.radius.indirect)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "fault": self.fault,
            "effect": self.effect,
            "start": self.start,
            "end": self.end,
            "grace_s": self.grace_ns / _NS,
            "radius": self.radius.to_json(),
        }


class FaultWindows(Consumer):
    """Builds every fault window of a history in the single pass.

    **Why columns.** A soak applies about a fault a second and every
    window is kept to the end (a check may still ask about an operation
    that began long ago, and the report lists them all), so a window's
    size is a soak's growth per fault: as an object with its own list
    entries it cost about 300 bytes, 26 MB a day. Kept as one row of typed
    arrays (times, grace, flags, and numbers into shared tables of names
    and blast radii) it costs about 45 bytes and 12 per process it
    touched. :class:`Window` objects are made only for what is asked: a
    lookup's answer, the list for the report."""

    name = "fault-windows"

    def __init__(self, registry: Mapping[str, FaultKind] | None = None) -> None:
        # Which kind each event opens or closes a window of, by name: from
        # the registry's table, so no kind is imported until a window of it
        # needs what its apply did not record (a history from before
        # applies carried their effect and grace).
        table: Mapping[str, KindEvents]
        if registry is None:
            table = events()
            self._kind: Callable[[str], FaultKind] = kind
        else:
            given = dict(registry)
            table = {n: KindEvents(k.name, k.apply_f, k.heal_f) for n, k in given.items()}
            self._kind = given.__getitem__
        self._by_apply = {k.apply_f: (n, k.name) for n, k in table.items()}
        self._by_heal = {k.heal_f: k.name for k in table.values()}
        handlers = [Handler("event", f, EVENT_TYPES, "_applied") for f in self._by_apply]
        handlers += [Handler("event", f, EVENT_TYPES, "_healed") for f in self._by_heal]
        handlers += [Handler("event", f, EVENT_TYPES, "_clock") for f in CLOCK_FS]
        self.handlers = tuple(handlers)  # type: ignore[misc]  # per instance: fault kinds vary
        # The columns: row n is the n-th apply, in history order.
        self._start = array("q")
        self._end = array("q")
        self._grace = array("q")
        self._flags = array("B")
        self._kinds = array("I")  # into _names
        self._effects = array("I")  # into _names
        self._radius_of = array("I")  # into _radius_list
        self._faults = array("q")  # _OTHER: in _other_faults
        self._other_faults: dict[int, Any] = {}
        self._names: list[str] = []
        self._name_ids: dict[str, int] = {}
        self._dead = 0
        self._open: dict[Any, int] = {}
        """Fault -> the row of its window, while it is not healed."""
        self._by_process: dict[str, array[int]] = {}
        """Process -> the rows of the windows that touch it, in order."""
        self._reach: dict[str, array[float]] = {}
        """Process -> the running maximum of a window's reach over its rows
        in list order: the first window that can still overlap ``t0`` is
        found by bisection instead of a walk over every fault of the run.
        Kept up to date from the window that changed onwards (a window
        opens last, and heals last or nearly), never rebuilt whole: a
        rebuild per fault made a day-long soak's checker quadratic."""
        self._radii: dict[Any, int] = {}
        self._radius_list: list[Radius] = []
        """One :class:`Radius` per distinct blast radius (a soak's thousands
        of kills of one worker share one)."""
        self.clocks = ClockTimeline()
        """Every clock's offset over the run (:mod:`knell.checker.clocks`),
        read in the same pass: the checks that time a promise ask it."""

    # -- the columns -------------------------------------------------------------

    def _name(self, text: str) -> int:
        at = self._name_ids.get(text)
        if at is None:
            at = self._name_ids[text] = len(self._names)
            self._names.append(text)
        return at

    def _row_reach(self, row: int) -> float:
        if not self._flags[row] & _HEALED:
            return _FOREVER
        return self._end[row] + self._grace[row]

    def _view(self, row: int) -> Window:
        fault = self._faults[row]
        flags = self._flags[row]
        return Window(
            kind=self._names[self._kinds[row]],
            fault=self._other_faults.get(row) if fault == _OTHER else fault,
            effect=self._names[self._effects[row]],
            start=self._start[row],
            end=self._end[row] if flags & _HEALED else None,
            grace_ns=self._grace[row],
            radius=self._radius_list[self._radius_of[row]],
            clock=bool(flags & _CLOCK),
        )

    @property
    def windows(self) -> list[Window]:
        """Every window that applied, in the order they opened (made now)."""
        flags = self._flags
        return [self._view(row) for row in range(len(flags)) if not flags[row] & _DEAD]

    def __len__(self) -> int:
        return len(self._flags) - self._dead

    def _clock(self, event: Event) -> None:
        self.clocks.feed(event)

    def _applied(self, event: Event) -> None:
        if event["process"] != "nemesis":
            return
        value = event.get("value") or {}
        key_of_kind, kind_name = self._by_apply[event["f"]]
        name = str(value.get("kind") or kind_name)
        target = value.get("target")
        fault = value.get("fault")
        key = fault if fault is not None else (name, target)
        opened = self._open.get(key)
        if event["type"] == "fail":  # it did not apply: it never was a window
            if opened is not None:
                del self._open[key]
                self._forget(opened)
            return
        if opened is not None and event["type"] != "invoke":
            return  # the completion of an apply whose invoke opened the window
        radius = self._radius(value.get("radius"), target)
        grace = value["grace_s"] if "grace_s" in value else self._kind(key_of_kind).grace
        effect = value.get("effect") or self._kind(key_of_kind).effect
        start = _i64(event["time"])
        grace_ns = _i64(float(grace) * _NS) if isinstance(grace, (int, float)) else 0
        row = len(self._flags)
        self._start.append(start)
        self._end.append(0)
        self._grace.append(grace_ns)
        self._flags.append(_CLOCK if event["f"] in APPLY_FS else 0)
        self._kinds.append(self._name(name))
        self._effects.append(self._name(str(effect)))
        self._radius_of.append(radius)
        if type(fault) is int and _OTHER < fault < 2**63:
            self._faults.append(fault)
        else:
            self._faults.append(_OTHER)
            self._other_faults[row] = fault
        self._open[key] = row
        touched = self._radius_list[radius]
        for process in touched.processes | touched.indirect:
            self._by_process.setdefault(process, array("I")).append(row)
            reach = self._reach.get(process)
            if reach is not None:
                reach.append(_FOREVER)  # an open window reaches for ever

    def _radius(self, data: Any, target: Any) -> int:
        """The blast radius an apply recorded (its target alone if it
        recorded none), shared with every earlier window of the same: its
        number in :attr:`_radius_list`."""
        key = (repr(data), target)
        at = self._radii.get(key)
        if at is None:
            radius = Radius.from_json(data)
            if not radius.processes and isinstance(target, str):
                radius = Radius(processes=frozenset({target}))
            at = self._radii[key] = len(self._radius_list)
            self._radius_list.append(radius)
        return at

    def _touched(self, row: int) -> frozenset[str]:
        radius = self._radius_list[self._radius_of[row]]
        return radius.processes | radius.indirect

    def _changed(self, row: int) -> None:
        """Row ``row``'s reach changed (it healed): redo the running maxima
        of its processes from its place on."""
        for process in self._touched(row):
            listed = self._by_process.get(process)
            at = None if listed is None else _last_index(listed, row)
            if at is not None:
                self._redo(process, at)

    def _forget(self, row: int) -> None:
        """An apply that did not take: its window was never one."""
        self._flags[row] |= _DEAD
        self._dead += 1
        for process in self._touched(row):
            listed = self._by_process.get(process)
            at = None if listed is None else _last_index(listed, row)
            if listed is not None and at is not None:
                del listed[at]
                self._redo(process, at)

    def _redo(self, process: str, at: int) -> None:
        """The running maxima of ``process``'s windows from index ``at`` on."""
        reach = self._reach.get(process)
        if reach is None:
            return  # built when first asked
        del reach[at:]
        top = reach[-1] if reach else -_FOREVER
        for later in self._by_process[process][at:]:
            top = max(top, self._row_reach(later))
            reach.append(top)

    def _healed(self, event: Event) -> None:
        if event["process"] != "nemesis":
            return
        value = event.get("value") or {}
        kind_name = self._by_heal[event["f"]]
        fault = value.get("fault")
        key = (
            fault
            if fault is not None
            else (str(value.get("kind") or kind_name), value.get("target"))
        )
        row = self._open.pop(key, None)
        if row is not None:
            self._end[row] = _i64(event["time"])
            self._flags[row] |= _HEALED
            self._changed(row)

    # -- queries ---------------------------------------------------------------

    def touching(
        self,
        process: str,
        t0: int,
        t1: int,
        *,
        indirect: bool = True,
        grace: bool = True,
        clocks: bool = True,
    ) -> Window | None:
        """The first window that touched ``process`` at some moment of
        ``[t0, t1]`` (ns): directly, or also indirectly; with each
        window's grace period, or (``grace=False``) only while in force;
        with ``clocks=False`` a clock fault's window is not one (a wait
        or a timeout is a duration, which no wall clock may decide)."""
        listed = self._by_process.get(process)
        if not listed:
            return None
        reach = self._reach.get(process)
        if reach is None:
            reach = self._reach[process] = self._running_max(listed)
        # No window before the first reach >= t0 reaches t0, with or without grace.
        for at in range(bisect_left(reach, t0), len(listed)):
            row = listed[at]
            if not clocks and self._flags[row] & _CLOCK:
                continue
            window = self._view(row)
            if window.touches(process, indirect=indirect) and window.overlaps(t0, t1, grace=grace):
                return window
        return None

    def _running_max(self, rows: Iterable[int]) -> array[float]:
        """``out[i]``: the largest reach of the windows of ``rows[: i + 1]``
        (non-decreasing, so it can be bisected whatever order the windows
        opened in)."""
        out = array("d")
        top = -_FOREVER
        for row in rows:
            top = max(top, self._row_reach(row))
            out.append(top)
        return out

    def to_json(self) -> list[dict[str, Any]]:
        return [w.to_json() for w in self.windows]


def _i64(value: Any) -> int:
    """``value`` as an int of the 64-bit columns; one beyond them is an
    event the windows cannot read (a ValueError, charged as malformed)."""
    try:
        number = int(value)
    except OverflowError:  # an infinite float
        raise ValueError(f"{value!r} does not fit a 64-bit time") from None
    if not _OTHER < number < 2**63:
        raise ValueError(f"{value!r} does not fit a 64-bit time")
    return number


def _last_index(rows: array[int], row: int) -> int | None:
    """Where ``row`` is in ``rows``, looked for from the end (where the
    window that changes nearly always is)."""
    for at in range(len(rows) - 1, -1, -1):
        if rows[at] == row:
            return at
    return None
