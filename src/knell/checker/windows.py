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

from bisect import bisect_left
from collections.abc import Callable, Mapping
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


@dataclass(slots=True)
class Window:
    """One fault, from its apply to its confirmed heal (``end`` is None
    while it was never healed). It keeps what the checks ask of it, not
    the apply and heal events: a soak applies a fault a second, and its
    windows are kept for the whole run."""

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
    """Builds every fault window of a history in the single pass."""

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
        self.windows: list[Window] = []
        self._open: dict[Any, Window] = {}
        self._by_process: dict[str, list[Window]] = {}
        self._reach: dict[str, list[float]] = {}
        """Process -> the running maximum of :attr:`Window.reach` over its
        windows in list order: the first window that can still overlap
        ``t0`` is found by bisection instead of a walk over every fault of
        the run. Kept up to date from the window that changed onwards (a
        window opens last, and heals last or nearly), never rebuilt whole:
        a rebuild per fault made a day-long soak's checker quadratic."""
        self._radii: dict[Any, Radius] = {}
        """One :class:`Radius` per distinct blast radius (a soak's thousands
        of kills of one worker share one)."""
        self.clocks = ClockTimeline()
        """Every clock's offset over the run (:mod:`knell.checker.clocks`),
        read in the same pass: the checks that time a promise ask it."""

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
            if opened is not None and opened.end is None:
                del self._open[key]
                self._forget(opened)
            return
        if opened is not None and opened.end is None and event["type"] != "invoke":
            return  # the completion of an apply whose invoke opened the window
        radius = self._radius(value.get("radius"), target)
        grace = value["grace_s"] if "grace_s" in value else self._kind(key_of_kind).grace
        effect = value.get("effect") or self._kind(key_of_kind).effect
        window = Window(
            kind=name,
            fault=fault,
            effect=str(effect),
            start=int(event["time"]),
            end=None,
            grace_ns=int(float(grace) * _NS) if isinstance(grace, (int, float)) else 0,
            radius=radius,
            clock=event["f"] in APPLY_FS,
        )
        self.windows.append(window)
        self._open[key] = window
        for process in radius.processes | radius.indirect:
            self._by_process.setdefault(process, []).append(window)
            reach = self._reach.get(process)
            if reach is not None:
                reach.append(max(reach[-1], window.reach) if reach else window.reach)

    def _radius(self, data: Any, target: Any) -> Radius:
        """The blast radius an apply recorded (its target alone if it
        recorded none), shared with every earlier window of the same."""
        key = (repr(data), target)
        radius = self._radii.get(key)
        if radius is None:
            radius = Radius.from_json(data)
            if not radius.processes and isinstance(target, str):
                radius = Radius(processes=frozenset({target}))
            self._radii[key] = radius
        return radius

    def _changed(self, window: Window) -> None:
        """``window``'s reach changed (it healed): redo the running maxima
        of its processes from its place on."""
        for process in window.radius.processes | window.radius.indirect:
            listed = self._by_process.get(process)
            at = None if listed is None else _last_index(listed, window)
            if at is not None:
                self._redo(process, at)

    def _forget(self, window: Window) -> None:
        """An apply that did not take: its window was never one."""
        at = _last_index(self.windows, window)
        if at is not None:
            del self.windows[at]
        for process in window.radius.processes | window.radius.indirect:
            listed = self._by_process.get(process)
            at = None if listed is None else _last_index(listed, window)
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
            top = max(top, later.reach)
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
        window = self._open.pop(key, None)
        if window is not None:
            window.end = int(event["time"])
            self._changed(window)

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
            reach = self._reach[process] = _running_max(listed)
        # No window before ``first`` reaches t0, with or without grace.
        for window in listed[bisect_left(reach, t0) :]:
            if not clocks and window.clock:
                continue
            if window.touches(process, indirect=indirect) and window.overlaps(t0, t1, grace=grace):
                return window
        return None

    def to_json(self) -> list[dict[str, Any]]:
        return [w.to_json() for w in self.windows]


def _last_index(windows: list[Window], window: Window) -> int | None:
    """Where ``window`` is in ``windows``, looked for from the end (where
    the window that changes nearly always is)."""
    for at in range(len(windows) - 1, -1, -1):
        if windows[at] is window:
            return at
    return None


def _running_max(windows: list[Window]) -> list[float]:
    """``out[i]``: the largest :attr:`Window.reach` of ``windows[: i + 1]``
    (non-decreasing, so it can be bisected whatever order the windows
    opened in)."""
    out: list[float] = []
    top = -_FOREVER
    for window in windows:
        top = max(top, window.reach)
        out.append(top)
    return out
