"""The clocks a run moved on purpose, read back from its clock-fault events.

A clock fault (``clock-skew``, ``clock-jump``, ``clock-strobe``,
``clock-rate``) moves the wall clock of some worker processes, of the
private store server, or of both (``host``); ``clock-reset`` puts them back
on true time. Each setting that took is one nemesis event naming whose
clock it moved and to what (:mod:`knell.history_schema` fixes the fields).
A person reading a finding under clock faults asks "what did this
process believe the time was, then?": this module answers from those
events alone, for the report's ``clock`` panel (drawn by
:mod:`knell.report.plots`), its table in the page and the lines of
``report.md``.

* :class:`ClockSetting` is one such event, kept in ``series.json`` (the
  report is drawn from small files, never from the history again);
* :func:`clock_faults` pairs each fault's apply with its reset: the fault,
  its target, offset or rate, and its window;
* :func:`clock_tracks` gives each clock's offset over run time, processes
  that were always moved together sharing one track (a ``host`` jump is
  one line, not one per worker).

The offset of a clock is its wall clock minus true time, in seconds: a
step (skew, jump) holds it; a strobe flips it between 0 and the offset
every ``period_s`` (drawn as a band, not each flip: the nemesis records
only the apply and the reset); a rate runs the clock at ``rate`` times
true time from the moment it is set, so its offset is a slope,
``offset_s + (rate - 1) * (t - set)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from knell.history import Event
from knell.history_schema import CLOCK_FS, CLOCK_RESET_F
from knell.text import clean

__all__ = [
    "CLOCK_FS",
    "MAX_SETTINGS",
    "STORE_TRACK",
    "ClockFault",
    "ClockSetting",
    "ClockTrack",
    "clock_faults",
    "clock_tracks",
    "read_settings",
    "setting_of",
]

_NS = 1_000_000_000
STORE_TRACK = "store"
"""The track of the private store server's clock."""
MAX_SETTINGS = 2_000
"""Clock settings kept in ``series.json`` (a strobe is one, not one per flip)."""
MAX_NAMED = 4
"""Processes named in a track's label before "+N"."""


@dataclass(frozen=True)
class ClockSetting:
    """One clock setting that took: at ``time`` (ns, true time), the clocks
    of ``processes`` (and the store's when ``store``) were set to run
    ``offset_s`` seconds from true time at ``rate``."""

    time: int
    f: str
    fault: Any
    target: str
    processes: tuple[str, ...]
    store: bool
    offset_s: float
    rate: float
    period_s: float

    @property
    def reset(self) -> bool:
        return self.f == CLOCK_RESET_F

    @property
    def clocks(self) -> tuple[str, ...]:
        """The tracks it sets: the processes, then the store's."""
        return (*self.processes, STORE_TRACK) if self.store else self.processes

    def to_json(self) -> dict[str, Any]:
        return {
            "time": self.time,
            "f": self.f,
            "fault": self.fault,
            "target": self.target,
            "processes": list(self.processes),
            "store": self.store,
            "offset_s": self.offset_s,
            "rate": self.rate,
            "period_s": self.period_s,
        }

    @classmethod
    def from_json(cls, raw: Any) -> ClockSetting | None:
        """A setting from ``series.json`` (``None``: not one knell wrote)."""
        if not isinstance(raw, dict) or type(raw.get("time")) is not int:
            return None
        if raw.get("f") not in CLOCK_FS:
            return None
        numbers = [raw.get(k) for k in ("offset_s", "rate", "period_s")]
        if not all(isinstance(n, (int, float)) and not isinstance(n, bool) for n in numbers):
            return None
        processes = raw.get("processes")
        fault = raw.get("fault")
        return cls(
            time=raw["time"],
            f=str(raw["f"]),
            fault=fault if isinstance(fault, int) and not isinstance(fault, bool) else None,
            target=clean(raw.get("target") or "", 80),
            processes=tuple(
                clean(p, 80) for p in (processes if isinstance(processes, list) else [])
            ),
            store=raw.get("store") is True,
            offset_s=float(numbers[0]),  # type: ignore[arg-type]  # checked above
            rate=float(numbers[1]),  # type: ignore[arg-type]
            period_s=float(numbers[2]),  # type: ignore[arg-type]
        )


def read_settings(raw: Any) -> list[ClockSetting]:
    """The clock settings of ``series.json``'s ``clock`` list (entries
    it cannot read are skipped: the panel is drawn from the rest)."""
    settings = (ClockSetting.from_json(r) for r in raw) if isinstance(raw, list) else ()
    return [s for s in settings if s is not None]


def setting_of(event: Event) -> ClockSetting | None:
    """The clock setting a nemesis event records (``None``: it records
    none: another event, an apply's ``invoke`` written before the fault
    acts, or the ``fail`` of one that did not take)."""
    if event.get("process") != "nemesis" or event.get("f") not in CLOCK_FS:
        return None
    if event.get("type") not in ("ok", "info"):
        return None
    value = event.get("value")
    if not isinstance(value, dict):
        return None
    return ClockSetting.from_json(
        {
            "offset_s": 0.0,
            "rate": 1.0,
            "period_s": 0.0,
            **value,
            "time": event.get("time"),
            "f": event.get("f"),
        }
    )


def _signed(seconds: float) -> str:
    return f"{seconds:+g} s"


@dataclass(frozen=True)
class ClockFault:
    """One clock fault: its setting and, once reset, when."""

    apply: ClockSetting
    end: int | None

    @property
    def kind(self) -> str:
        return self.apply.f

    @property
    def whom(self) -> str:
        """The target, and the clocks it moved when they are not its name."""
        clocks = self.apply.clocks
        shown = ", ".join(clocks[:MAX_NAMED]) + (
            f" +{len(clocks) - MAX_NAMED}" if len(clocks) > MAX_NAMED else ""
        )
        target = self.apply.target or "?"
        if not clocks or clocks == (target,):
            return target
        return f"{target} ({shown})"

    @property
    def setting(self) -> str:
        """Offset, rate or strobe, in words."""
        a = self.apply
        if a.f == "clock-rate" or a.rate != 1.0:
            start = f" from {_signed(a.offset_s)}" if a.offset_s else ""
            return f"rate x{a.rate:g}{start}"
        if a.f == "clock-strobe":
            every = f" every {a.period_s * 1000:g} ms" if a.period_s > 0 else ""
            return f"offset {_signed(a.offset_s)} flipping with 0{every}"
        return f"offset {_signed(a.offset_s)}"

    def window(self, t_ref: int) -> str:
        start = (self.apply.time - t_ref) / _NS
        if self.end is None:
            return f"{start:.3f} s to never reset"
        end = (self.end - t_ref) / _NS
        return f"{start:.3f} s to {end:.3f} s ({(self.end - self.apply.time) / _NS:.3f} s)"

    def line(self, t_ref: int) -> str:
        number = "?" if self.apply.fault is None else str(self.apply.fault)
        return f"fault {number}: {self.kind} {self.whom}: {self.setting}, {self.window(t_ref)}"


def clock_faults(settings: Iterable[ClockSetting]) -> list[ClockFault]:
    """Each fault's apply paired with the reset of the same fault number
    (without one, of the same target), in the order they were applied."""
    out: list[ClockFault] = []
    open_: dict[Any, int] = {}
    for s in sorted(settings, key=lambda s: s.time):
        key = s.fault if s.fault is not None else ("target", s.target)
        if s.reset:
            at = open_.pop(key, None)
            if at is not None:
                out[at] = ClockFault(out[at].apply, s.time)
            continue
        open_[key] = len(out)
        out.append(ClockFault(s, None))
    return out


@dataclass(frozen=True)
class ClockTrack:
    """The clocks that were always set together, and their settings in
    time order (a reset is a setting to offset 0, rate 1)."""

    clocks: tuple[str, ...]
    settings: tuple[ClockSetting, ...]

    @property
    def label(self) -> str:
        shown = ", ".join(self.clocks[:MAX_NAMED])
        more = len(self.clocks) - MAX_NAMED
        return shown + (f" +{more}" if more > 0 else "")

    def offset_at(self, t: int) -> float:
        """The offset (s) of these clocks at true time ``t`` (ns); a strobe
        counts as its offset (the band's far edge)."""
        current: ClockSetting | None = None
        for s in self.settings:
            if s.time > t:
                break
            current = s
        if current is None:
            return 0.0
        return current.offset_s + (current.rate - 1.0) * (t - current.time) / _NS


def clock_tracks(settings: Sequence[ClockSetting]) -> list[ClockTrack]:
    """One track per set of clocks that were always set together, in the
    order they were first moved."""
    per_clock: dict[str, list[ClockSetting]] = {}
    for s in sorted(settings, key=lambda s: s.time):
        for clock in s.clocks:
            per_clock.setdefault(clock, []).append(s)
    grouped: dict[tuple[int, ...], list[str]] = {}
    for clock, mine in per_clock.items():
        grouped.setdefault(tuple(id(s) for s in mine), []).append(clock)
    tracks = []
    for clocks in grouped.values():
        ordered = sorted(clocks, key=lambda c: (c == STORE_TRACK, c))
        tracks.append(ClockTrack(tuple(ordered), tuple(per_clock[ordered[0]])))
    tracks.sort(key=lambda t: (t.settings[0].time, t.clocks))
    return tracks
