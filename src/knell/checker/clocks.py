"""Clock offsets: what each clock read at each true instant of a run.

The history's times are true time (knell records with a clock libfaketime
leaves alone), but a bus judges a lease by *its* clock: Postgres ``now()``
and Redis ``TIME`` on the server, the bus process's own wall clock on
SQLite (the host's). When a clock fault moves that clock on purpose, a
lease granted for 30 s may lapse after 1 s of true time (the store's clock
jumped forward) or live 60 s longer (it jumped back), and that is the
contract working, not the bus failing. So a check that compares a duration
with a promised time asks this module when the *store's* clock reached a
reading, never assumes it ran with true time. A client's wall clock is
never the judge (the contract lets no promise depend on it), which is how
a bus that trusts it is caught.

:class:`ClockTimeline` reads the nemesis's clock events in the single pass
(apply ``clock-skew``, ``clock-jump``, ``clock-strobe``, ``clock-rate``
with ``processes``, ``store``, ``offset_s``, ``rate``; heal
``clock-reset``) and keeps, per process and for the store (:data:`STORE`:
events whose ``store`` is true or whose target is ``host``, which on SQLite
is the store's clock too), the offset as an *envelope*: between a low and
a high bound, each piecewise linear in true time (a rate segment's offset
grows by ``rate - 1`` per second). An envelope, because a change is known
only to have happened between the apply's invoke (or, for a heal, which
has none, :data:`UNSURE_NS` before its record) and its recorded
completion, and a strobe is anywhere between 0 and its offset while it
runs. Every bound a check derives is then safe in the direction it needs:
"surely" bounds use the earliest the clock could have got somewhere,
"possibly" bounds the latest.

The clock events are read *before* the pass (:func:`scan`, then
:meth:`ClockTimeline.preload`): a change's record comes after the change
(the apply's offset only with its completion, a heal only once proven),
and a check judging an operation in between must already know it. In the
pass itself a preloaded timeline ignores them. Without a preload (a
stream that cannot be read twice) the timeline is fed in the pass and
knows, at each instant, what the history said so far. With no clock
events, every query is plain arithmetic on true time.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from knell.history import Event
from knell.history_files import marked_lines

__all__ = [
    "APPLY_FS",
    "CLOCK_FS",
    "RESET_F",
    "STORE",
    "UNSURE_NS",
    "ClockTimeline",
    "Envelope",
    "clock_events",
    "scan",
]

APPLY_FS: tuple[str, ...] = ("clock-skew", "clock-jump", "clock-strobe", "clock-rate")
"""The apply events of the clock fault kinds."""

RESET_F = "clock-reset"
"""Their heal: every clock the fault moved is back on true time."""

CLOCK_FS: tuple[str, ...] = (*APPLY_FS, RESET_F)

STORE = "store"
"""The key of the store's clock (the private server's; SQLite: the host's)."""

HOST = "host"

UNSURE_NS = 2_500_000_000
"""How long before its record a change without an invoke (a heal) may
have taken: a clock fault proves its change for at most 2 s first."""

_NS = 1_000_000_000
_INF = math.inf


@dataclass(frozen=True, slots=True)
class _Piece:
    """From true time ``start`` on: the offset lies in ``[lo, hi]`` (ns at
    ``start``), each bound growing by its slope (ns per ns)."""

    start: int
    lo: float
    hi: float
    lo_slope: float = 0.0
    hi_slope: float = 0.0

    def low(self, t: float) -> float:
        return self.lo + self.lo_slope * (t - self.start)

    def high(self, t: float) -> float:
        return self.hi + self.hi_slope * (t - self.start)


@dataclass(frozen=True, slots=True)
class _Setting:
    """What a clock was set to: an offset (ns) held, or running at a rate
    from the instant it was set, or strobing between 0 and the offset."""

    offset: float = 0.0
    rate: float = 1.0
    strobe: bool = False


class Envelope:
    """One clock's offset from true time, as bounds (see the module docstring)."""

    __slots__ = ("_pieces",)

    def __init__(self) -> None:
        self._pieces: list[_Piece] = []

    @property
    def moved(self) -> bool:
        """Whether any clock event touched this clock."""
        return bool(self._pieces)

    def change(self, early: int, late: int, setting: _Setting) -> None:
        """The clock was set to ``setting`` at an unknown instant of
        ``[early, late]`` (true ns)."""
        if self._pieces and early < self._pieces[-1].start:
            early = self._pieces[-1].start  # history order: never rewrite the past
        late = max(early, late)
        old_lo, old_hi, old_los, old_his = self._at(early)
        self._cut(early)
        if setting.strobe:
            new_lo, new_hi, slope = min(0.0, setting.offset), max(0.0, setting.offset), 0.0
        else:
            new_lo = new_hi = setting.offset
            slope = setting.rate - 1.0
        span = late - early
        # a rate that began somewhere in [early, late] has run between none
        # and all of that span by ``late``
        drift_lo, drift_hi = min(0.0, slope * span), max(0.0, slope * span)
        if span > 0:
            # while the change may or may not have happened: anything
            # between the old setting and the new one, each at its worst
            lo = min(old_lo, old_lo + old_los * span, new_lo + drift_lo)
            hi = max(old_hi, old_hi + old_his * span, new_hi + drift_hi)
            self._pieces.append(_Piece(early, lo, hi))
        self._pieces.append(_Piece(late, new_lo + drift_lo, new_hi + drift_hi, slope, slope))

    def _cut(self, at: int) -> None:
        while self._pieces and self._pieces[-1].start >= at:
            self._pieces.pop()

    def _at(self, t: float) -> tuple[float, float, float, float]:
        """(low, high, low slope, high slope) in force at ``t``."""
        piece = self._piece(t)
        if piece is None:
            return 0.0, 0.0, 0.0, 0.0
        return piece.low(t), piece.high(t), piece.lo_slope, piece.hi_slope

    def _piece(self, t: float) -> _Piece | None:
        found = None
        for piece in self._pieces:
            if piece.start > t:
                break
            found = piece
        return found

    def low(self, t: float) -> float:
        """The lowest offset (ns) the clock may have had at true ``t``."""
        piece = self._piece(t)
        return 0.0 if piece is None else piece.low(t)

    def high(self, t: float) -> float:
        piece = self._piece(t)
        return 0.0 if piece is None else piece.high(t)

    def _spans(self, t0: float) -> list[tuple[float, float, _Piece | None]]:
        """The pieces in force from ``t0`` on, as (from, to, piece)."""
        spans: list[tuple[float, float, _Piece | None]] = []
        current = self._piece(t0)
        later = [p for p in self._pieces if p.start > t0]
        begin = t0
        for piece in later:
            spans.append((begin, piece.start, current))
            begin, current = piece.start, piece
        spans.append((begin, _INF, current))
        return spans

    def lowest_reading(self, t0: int, t1: int) -> float:
        """The lowest the clock may have read at some instant of ``[t0, t1]``."""
        best = t0 + self.low(t0)
        for begin, end, piece in self._spans(t0):
            if begin > t1:
                break
            stop = min(end, t1)
            for t in (begin, stop):
                best = min(best, t + (0.0 if piece is None else piece.low(t)))
        return best

    def highest_reading(self, t0: int, t1: int) -> float:
        """The highest the clock may have read at some instant of ``[t0, t1]``."""
        best = t0 + self.high(t0)
        for begin, end, piece in self._spans(t0):
            if begin > t1:
                break
            stop = min(end, t1)
            for t in (begin, stop):
                best = max(best, t + (0.0 if piece is None else piece.high(t)))
        return best

    def first_reaching(self, t0: int, reading: float) -> float:
        """The earliest true instant from ``t0`` at which the clock may
        read ``reading`` or more (``inf``: never, as far as is known)."""
        for begin, end, piece in self._spans(t0):
            off = 0.0 if piece is None else piece.high(begin)
            slope = 1.0 + (0.0 if piece is None else piece.hi_slope)
            value = begin + off
            if value >= reading:
                return begin
            if slope > 0:
                at = begin + (reading - value) / slope
                if at < end:
                    return at
        return _INF

    def last_below(self, t0: int, reading: float) -> float:
        """The latest true instant from ``t0`` at which the clock may read
        less than ``reading`` (``t0`` if never; ``inf``: it may for ever)."""
        last: float = t0
        for begin, end, piece in self._spans(t0):
            off = 0.0 if piece is None else piece.low(begin)
            slope = 1.0 + (0.0 if piece is None else piece.lo_slope)
            value = begin + off
            if value >= reading:
                continue
            if end == _INF:
                return _INF if slope <= 0 else max(last, begin + (reading - value) / slope)
            crossing = begin + (reading - value) / slope if slope > 0 else _INF
            last = max(last, min(end, crossing))
        return last


def clock_events(events: Iterable[Event]) -> list[Event]:
    """The nemesis's clock events among ``events``, in order."""
    return [e for e in events if e.get("f") in CLOCK_FS and e.get("process") == "nemesis"]


_MARK = b'"clock-'


def scan(path: Path) -> list[Event]:
    """The clock events of a history file, read ahead of the pass: only
    lines that mention a clock event are parsed (an unreadable one is left
    to the pass, which reports it). Clock events are a handful among
    millions, so the file is searched in blocks
    (:func:`knell.history_files.marked_lines`), not split into lines."""
    found: list[Event] = []
    try:
        for line in marked_lines(path, _MARK):
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                found.extend(clock_events([event]))
    except OSError:
        return []  # the pass reads the file again and reports why it cannot
    return found


class ClockTimeline:
    """Every clock's envelope, from the nemesis's clock events in history order."""

    __slots__ = ("_clocks", "_invoked", "_preloaded")

    def __init__(self) -> None:
        self._clocks: dict[str, Envelope] = {}
        self._invoked: dict[Any, int] = {}
        self._preloaded = False

    def preload(self, events: Iterable[Event]) -> None:
        """Read every clock event of the history before the pass; the pass
        then feeds none (see the module docstring)."""
        for event in events:
            self._read(event)
        self._preloaded = True

    def feed(self, event: Event) -> None:
        """Read one clock event in the pass, unless the timeline was preloaded."""
        if not self._preloaded:
            self._read(event)

    def _read(self, event: Event) -> None:
        if event.get("process") != "nemesis" or event.get("f") not in CLOCK_FS:
            return
        value = event.get("value") or {}
        fault = value.get("fault")
        time = int(event["time"])
        kind = event.get("type")
        if kind == "invoke":
            self._invoked[fault if fault is not None else value.get("target")] = time
            return
        key = fault if fault is not None else value.get("target")
        if kind == "fail":
            self._invoked.pop(key, None)
            return
        if event["f"] == RESET_F:
            setting = _Setting()
            early = time - UNSURE_NS
        else:
            offset = float(value.get("offset_s") or 0.0)
            given = value.get("rate", 1.0)
            rate = float(given) if isinstance(given, (int, float)) and given >= 0 else 1.0
            setting = _Setting(offset * _NS, rate, event["f"] == "clock-strobe")
            early = self._invoked.pop(key, time)
        for name in self._targets(value):
            envelope = self._clocks.get(name)
            if envelope is None:
                envelope = self._clocks[name] = Envelope()
            envelope.change(early, time, setting)

    @staticmethod
    def _targets(value: dict[str, Any]) -> list[str]:
        names = [str(p) for p in value.get("processes") or ()]
        if value.get("store") or value.get("target") in (STORE, HOST):
            names.append(STORE)
        return names

    def clock(self, name: str = STORE) -> Envelope | None:
        """The envelope of one clock, None if no event ever moved it."""
        return self._clocks.get(name)

    @property
    def moved(self) -> bool:
        return bool(self._clocks)

    def offset_s(self, name: str, t: int) -> tuple[float, float]:
        """(lowest, highest) offset in seconds of clock ``name`` at true ``t``."""
        envelope = self._clocks.get(name)
        if envelope is None:
            return 0.0, 0.0
        return envelope.low(t) / _NS, envelope.high(t) / _NS

    # -- what the checks ask -------------------------------------------------

    def sure_until(self, t0: int, t1: int, duration_ns: int) -> int:
        """A promise of ``duration_ns`` granted by the store at some
        instant of ``[t0, t1]``: the true instant until which it surely
        holds (its deadline on the store's clock is at least the lowest
        reading of that window plus the duration; it lapses no earlier
        than the clock may first reach that)."""
        store = self._clocks.get(STORE)
        if store is None:
            return t0 + duration_ns
        reached = store.first_reaching(t0, store.lowest_reading(t0, t1) + duration_ns)
        return int(min(reached, t0 + duration_ns)) if reached == _INF else int(reached)

    def latest_until(self, t0: int, t1: int, duration_ns: int) -> float:
        """The same promise: the last true instant it may still hold (its
        deadline is at most the highest reading of the window plus the
        duration; it holds while the clock may read less). ``inf`` when the
        clock may never get there as far as is known."""
        store = self._clocks.get(STORE)
        if store is None:
            return t1 + duration_ns
        return store.last_below(t1, store.highest_reading(t0, t1) + duration_ns)

    def true_time(self, reading_s: float) -> float:
        """The earliest true instant (ns) at which the store's clock may
        have read ``reading_s`` (a time the bus returned, in Unix seconds,
        such as a delivery's ``at``)."""
        reading = reading_s * _NS
        store = self._clocks.get(STORE)
        if store is None:
            return reading
        return store.first_reaching(0, reading)
