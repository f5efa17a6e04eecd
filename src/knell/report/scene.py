"""A small drawing, as data: what the report's hand-made SVGs are made of.

The anomaly timelines and the run overview are drawn as inline SVG by one
template macro from a :class:`Scene`: lanes, bands, marks, lines and text
with their coordinates already computed. Keeping the geometry in Python
(testable: a mark's ``t`` and ``x`` can be asserted) and the markup in a
template (escaped by jinja2's autoescape, like every other string in the
page) means no string from the bus is ever pasted into SVG by hand.

:class:`TimeAxis` maps times to x. A timeline of a message posted at 1 s
and proven lost by the drain at 14 s would squeeze everything of interest
into two dots; the axis therefore cuts long empty stretches out (a *break*
drawn as a zigzag with the time it hides), keeping real-time proportion
inside each stretch that has events.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["Band", "Lane", "Line", "Mark", "Scene", "Text", "TimeAxis", "seconds_label"]

_NS = 1_000_000_000


@dataclass(frozen=True)
class Lane:
    y: float
    height: float
    label: str
    title: str = ""
    cls: str = ""


@dataclass(frozen=True)
class Band:
    x: float
    y: float
    w: float
    h: float
    colour: str
    opacity: float
    title: str
    label: str = ""
    cls: str = ""


@dataclass(frozen=True)
class Mark:
    x: float
    y: float
    shape: str  # circle | square | diamond | triangle | bar | cross | star
    cls: str
    title: str
    label: str = ""
    index: int | None = None
    t: float | None = None
    """seconds from the run's start (also a ``data-t`` attribute)."""
    href: str = ""
    colour: str = ""
    label_dy: float = -11.0


@dataclass(frozen=True)
class Line:
    x1: float
    y1: float
    x2: float
    y2: float
    cls: str
    colour: str = ""
    title: str = ""


@dataclass(frozen=True)
class Text:
    x: float
    y: float
    text: str
    cls: str = ""
    anchor: str = "start"


@dataclass
class Scene:
    width: float
    height: float
    title: str
    lanes: list[Lane] = field(default_factory=list)
    bands: list[Band] = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    texts: list[Text] = field(default_factory=list)
    ticks: list[tuple[float, str]] = field(default_factory=list)
    breaks: list[tuple[float, float, str]] = field(default_factory=list)
    axis_y: float = 0.0
    plot_x0: float = 0.0
    plot_x1: float = 0.0


def seconds_label(seconds: float, step: float | None = None) -> str:
    """``3.412 s`` with as many decimals as ``step`` (or the value) needs."""
    if step is None:
        step = abs(seconds) if seconds else 1.0
    decimals = 0 if step >= 1 else min(4, max(1, math.ceil(-math.log10(step) - 1e-9)))
    return f"{seconds:.{decimals}f} s"


def _nice_step(span_s: float, slots: int) -> float:
    raw = span_s / max(1, slots)
    if raw <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if factor * power >= raw:
            return float(factor * power)
    return float(10 * power)


class TimeAxis:
    """Times (ns) to x between ``x0`` and ``x1``, with long empty
    stretches cut out; labels in seconds from ``t_ref``."""

    BREAK_PX = 34.0
    MAX_BREAKS = 5

    def __init__(
        self,
        times: Iterable[int],
        x0: float,
        x1: float,
        t_ref: int,
        *,
        breaks: bool = True,
        gap_share: float = 0.05,
        min_gap_ns: int = 150_000_000,
    ) -> None:
        ts = sorted(set(times))
        if not ts:
            ts = [t_ref]
        if ts[-1] == ts[0]:
            ts = [ts[0] - 5_000_000, ts[0] + 5_000_000]
        self.x0, self.x1, self.t_ref = x0, x1, t_ref
        span = ts[-1] - ts[0]
        threshold = max(min_gap_ns, int(gap_share * span))
        gaps = sorted(
            ((ts[i + 1] - ts[i], i) for i in range(len(ts) - 1) if ts[i + 1] - ts[i] > threshold),
            reverse=True,
        )
        cuts = sorted(i for _, i in gaps[: self.MAX_BREAKS]) if breaks else []
        clusters: list[list[int]] = []
        start = 0
        for i in cuts:
            clusters.append([ts[start], ts[i]])
            start = i + 1
        clusters.append([ts[start], ts[-1]])
        inner = sum(b - a for a, b in clusters)
        pad = max(2_000_000, int(0.04 * max(inner, 1) / len(clusters)))
        between = [b[0] - a[1] for a, b in itertools.pairwise(clusters)]
        if between:
            pad = min(pad, min(between) // 4)  # stretches never overlap
        for cluster in clusters:
            cluster[0] -= pad
            cluster[1] += pad
        spans = [b - a for a, b in clusters]
        total = sum(spans)
        room = (x1 - x0) - self.BREAK_PX * (len(clusters) - 1)
        # Each stretch gets half its share by time and half an equal share, so
        # a burst of events a few ms long beside a long quiet stretch stays legible.
        widths = [room * (0.5 * span / total + 0.5 / len(clusters)) for span in spans]
        self.segments: list[tuple[int, int, float, float]] = []
        x = x0
        for (a, b), w in zip(clusters, widths, strict=True):
            self.segments.append((a, b, x, x + w))
            x += w + self.BREAK_PX
        self._starts = [seg[0] for seg in self.segments]
        self.lo = self.segments[0][0]
        self.hi = self.segments[-1][1]

    def x(self, t: int) -> float:
        i = bisect.bisect_right(self._starts, t) - 1
        if i < 0:
            return self.x0
        a, b, xa, xb = self.segments[i]
        if t <= b:
            return xa + (t - a) * (xb - xa) / (b - a)
        if i + 1 >= len(self.segments):
            return self.x1
        # inside a break: spread over the zigzag, monotonic
        nxt = self.segments[i + 1]
        share = (t - b) / max(1, nxt[0] - b)
        return xb + share * (nxt[2] - xb)

    def shows(self, t0: int, t1: int | None) -> bool:
        """Whether any moment of ``[t0, t1]`` (``None``: open-ended) falls in a
        drawn stretch (not only in a cut)."""
        return any(t0 <= b and (t1 is None or t1 >= a) for a, b, _, _ in self.segments)

    def seconds(self, t: int) -> float:
        return (t - self.t_ref) / _NS

    def ticks(self, px_per_tick: float = 90.0) -> list[tuple[float, str]]:
        out: list[tuple[float, str]] = []
        for a, b, xa, xb in self.segments:
            slots = max(1, int((xb - xa) / px_per_tick))
            step = _nice_step((b - a) / _NS, slots)
            first = math.ceil(self.seconds(a) / step) * step
            value = first
            while value <= self.seconds(b) + 1e-12:
                t = self.t_ref + round(value * _NS)
                out.append((self.x(t), seconds_label(value, step)))
                value += step
        return out

    def breaks(self) -> list[tuple[float, float, str]]:
        out = []
        for (_, b, _, xb), (a, _, xa, _) in zip(self.segments, self.segments[1:], strict=False):
            out.append((xb, xa, f"{(a - b) / _NS:.1f} s"))
        return out
