"""An anomaly's timeline: who did what to the messages involved, and which faults held.

One lane per process (its incarnations marked where they change), the
fault windows shaded on the lanes of the processes they hit (and all of
them on a ``faults`` lane on top), every event as a mark at its time
(shape by operation, fill by outcome), invoke-to-completion spans as thin
bars, the witness events ringed in red with their history index, and the
path of each followed message drawn across lanes: post, then each
process's first fetch of it, its handling and the ack that covered it.
That is Maelstrom's message diagram with Jepsen's fault bands, for one
anomaly at a time.

:func:`lifecycle` says the same in words (one line per message), for
reading and for tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from knell.history import Event
from knell.report.faults import FaultWindow
from knell.report.scene import Band, Lane, Line, Mark, Scene, Text, TimeAxis
from knell.text import clean

__all__ = ["FLOW_COLOURS", "Lifecycle", "build_timeline", "lifecycle"]

WIDTH = 980.0
LABEL_W = 150.0
RIGHT_PAD = 16.0
LANE_H = 30.0
TOP = 8.0
FAULT_LANE_H = 22.0
AXIS_H = 26.0
EDGE_NS = 300_000_000
"""A window edge this close to a stretch of events widens the stretch."""
MAX_WINDOWS = 30
"""Fault windows drawn on one timeline (the nearest to its witness)."""
FLOW_COLOURS = ("#7b3294", "#008837", "#e66101", "#0571b0")
_SHAPES = {
    "post": "circle",
    "fetch": "square",
    "handle": "diamond",
    "ack": "triangle",
    "cursor": "bar",
    "subscribe": "bar",
    "head": "bar",
    "wake": "star",
    "arm": "star",
}
_NS = 1_000_000_000


def _key(value: Any) -> str:
    return orjson.dumps(value).decode("utf-8", "replace")


def _short(value: Any, limit: int = 160) -> str:
    try:
        text = orjson.dumps(value).decode("utf-8", "replace")
    except TypeError:
        text = str(value)
    return clean(text, limit)


def _describe(event: Event, t_ref: int) -> str:
    where = "/".join(clean(event[k], 60) for k in ("handle", "channel") if event.get(k) is not None)
    return (
        f"#{event.get('index', '?')} at {(event.get('time', t_ref) - t_ref) / _NS:.4f} s: "
        f"{clean(event.get('process'), 60)}#{event.get('incarnation', '?')} "
        f"{clean(event.get('type'), 10)} {clean(event.get('f'), 20)}"
        + (f" {where}" if where else "")
        + f" {_short(event.get('value', {}))}"
    )


@dataclass
class Lifecycle:
    """What happened to one message, in order."""

    mid: str
    colour: str
    steps: list[tuple[str, Event]] = field(default_factory=list)
    """(what, event): posted, post-invoked, fetched, handled, acked."""

    def text(self, t_ref: int) -> list[str]:
        out = []
        for what, event in self.steps:
            t = (event.get("time", t_ref) - t_ref) / _NS
            who = f"{clean(event.get('process'), 60)}#{event.get('incarnation', '?')}"
            extra = ""
            raw = event.get("value")
            value: dict[str, Any] = raw if isinstance(raw, dict) else {}
            if what == "posted" and "seq" in value:
                extra = f" (seq {clean(value['seq'], 20)})"
            elif what == "acked":
                extra = f" (cursor {clean(value.get('cursor'), 20)})"
            elif what in ("handled", "fetched") and event.get("handle") is not None:
                extra = f" (handle {clean(event.get('handle'), 60)})"
            out.append(f"{what} by {who} at {t:.3f} s{extra}")
        return out


def _ids(event: Event) -> list[str]:
    value = event.get("value")
    if not isinstance(value, dict):
        return []
    found = [_key(value["id"])] if "id" in value else []
    messages = value.get("messages")
    if isinstance(messages, list):
        found += [_key(m.get("id")) for m in messages if isinstance(m, dict) and "id" in m]
    return found


def lifecycle(events: Sequence[Event], ids: Sequence[Any]) -> list[Lifecycle]:
    """The steps of each followed message (``ids`` as in the history)."""
    out = []
    for n, raw in enumerate(ids):
        mid = _key(raw)
        life = Lifecycle(mid=clean(raw, 200), colour=FLOW_COLOURS[n % len(FLOW_COLOURS)])
        fetched: set[tuple[Any, Any]] = set()
        handled: dict[tuple[Any, Any, Any, Any], int] = {}
        for event in events:
            f, type_ = event.get("f"), event.get("type")
            who = (event.get("process"), event.get("incarnation"))
            if mid in _ids(event):
                if f == "post":
                    life.steps.append(("posted" if type_ == "ok" else f"post {type_}", event))
                elif f == "fetch" and type_ == "ok" and who not in fetched:
                    fetched.add(who)
                    life.steps.append(("fetched", event))
                elif f == "handle":
                    seq = (event.get("value") or {}).get("seq")
                    key = (*who, event.get("handle"), event.get("channel"))
                    if isinstance(seq, int):
                        handled[key] = seq
                    life.steps.append(("handled", event))
            elif f == "ack" and type_ == "ok":
                key = (*who, event.get("handle"), event.get("channel"))
                seq = handled.get(key)
                cursor = (event.get("value") or {}).get("cursor")
                if seq is not None and isinstance(cursor, int) and cursor >= seq:
                    del handled[key]
                    life.steps.append(("acked", event))
        out.append(life)
    return out


def _lane_order(events: Sequence[Event]) -> list[str]:
    first: dict[str, int] = {}
    for event in events:
        first.setdefault(str(event.get("process")), event.get("time", 0))
    names = sorted(first, key=lambda p: (p == "nemesis", first[p]))
    return names


def build_timeline(
    events: Sequence[Event],
    witness: Sequence[Event],
    windows: Sequence[FaultWindow],
    t_ref: int,
    lives: Sequence[Lifecycle] = (),
    *,
    title: str = "",
) -> Scene:
    """The scene of one anomaly: ``events`` (witness included), the fault
    ``windows`` of the run (those near the events are drawn), times from
    ``t_ref``."""
    wit = {e.get("index") for e in witness}
    times = [e["time"] for e in events if isinstance(e.get("time"), int)]
    if not times:
        times = [t_ref]
    lo, hi = min(times), max(times)
    margin = max(100_000_000, (hi - lo) // 5)
    near = [
        w
        for w in windows
        if w.start <= hi + margin and (w.until() is None or (w.until() or 0) >= lo - margin)
    ]
    x0, x1 = LABEL_W, WIDTH - RIGHT_PAD
    # the stretches with events decide the axis; a window's edges widen a
    # stretch they fall just beside, never fill a cut between two
    axis_times = list(times)
    first = TimeAxis(times, x0, x1, t_ref)
    for w in near:
        for t in (w.start, w.end):
            if t is not None and first.shows(t - EDGE_NS, t + EDGE_NS):
                axis_times.append(t)
    axis = TimeAxis(axis_times, x0, x1, t_ref)
    # only the windows that show on a drawn stretch (a loss proven by the
    # drain spans the run; the faults in its cut-out middle are not its story)
    near = [w for w in near if axis.shows(w.start, w.until())]
    if len(near) > MAX_WINDOWS:  # keep the ones closest to the witness
        anchors = [e["time"] for e in witness if isinstance(e.get("time"), int)] or [lo]

        def distance(w: FaultWindow) -> int:
            until = w.until()
            return min(
                0
                if w.start <= a <= (until if until is not None else a)
                else min(abs(a - w.start), abs(a - (until if until is not None else a)))
                for a in anchors
            )

        near = sorted(sorted(near, key=distance)[:MAX_WINDOWS], key=lambda w: w.start)
    lanes = _lane_order(events)
    fault_lane = bool(near)
    y = TOP + (FAULT_LANE_H + 4 if fault_lane else 0)
    lane_y = {name: y + i * LANE_H for i, name in enumerate(lanes)}
    axis_y = y + len(lanes) * LANE_H + 4
    height = axis_y + AXIS_H
    scene = Scene(width=WIDTH, height=height, title=title, axis_y=axis_y, plot_x0=x0, plot_x1=x1)
    scene.ticks = axis.ticks()
    scene.breaks = axis.breaks()

    def x(t: int) -> float:
        return max(x0, min(x1, axis.x(t)))

    if fault_lane:
        scene.lanes.append(
            Lane(TOP, FAULT_LANE_H, "faults", "fault windows near these events", "faults")
        )
    for name in lanes:
        scene.lanes.append(Lane(lane_y[name], LANE_H, clean(name, 22), clean(name, 200)))
    # fault bands: all on the faults lane, and on the lanes of the processes they hit
    for w in near:
        xa = x(max(w.start, axis.lo))
        end = w.end if w.end is not None else axis.hi
        xb = x(min(end, axis.hi))
        until = w.until()
        xg = x(min(until if until is not None else axis.hi, axis.hi))
        title_text = w.describe(t_ref)
        if fault_lane:
            scene.bands.append(
                Band(
                    xa,
                    TOP + 2,
                    max(2.0, xb - xa),
                    FAULT_LANE_H - 4,
                    w.band.colour,
                    0.55,
                    title_text,
                    w.label if xb - xa > 50 else "",
                    "fault",
                )
            )
            if xg > xb:
                scene.bands.append(
                    Band(
                        xb,
                        TOP + 2,
                        xg - xb,
                        FAULT_LANE_H - 4,
                        w.band.colour,
                        0.2,
                        title_text + " (grace)",
                        "",
                        "grace",
                    )
                )
        for name in lanes:
            direct = name in w.processes
            if not direct and name not in w.indirect:
                continue
            yl = lane_y[name] + 3
            scene.bands.append(
                Band(
                    xa,
                    yl,
                    max(2.0, xb - xa),
                    LANE_H - 6,
                    w.band.colour,
                    0.28 if direct else 0.12,
                    title_text,
                    "",
                    "lane-fault",
                )
            )
            if xg > xb and direct:
                scene.bands.append(
                    Band(
                        xb,
                        yl,
                        xg - xb,
                        LANE_H - 6,
                        w.band.colour,
                        0.1,
                        title_text + " (grace)",
                        "",
                        "grace",
                    )
                )
    # operation spans and incarnation changes
    pending: dict[tuple[Any, Any, Any], Event] = {}
    last_incarnation: dict[str, Any] = {}
    for event in events:
        name = str(event.get("process"))
        if name not in lane_y or not isinstance(event.get("time"), int):
            continue
        yc = lane_y[name] + LANE_H / 2
        inc = event.get("incarnation")
        if name in last_incarnation and inc != last_incarnation[name]:
            xi = x(event["time"]) - 4
            scene.lines.append(
                Line(xi, lane_y[name] + 2, xi, lane_y[name] + LANE_H - 2, "incarnation")
            )
            scene.texts.append(Text(xi + 2, lane_y[name] + 9, f"#{clean(inc, 8)}", "incarnation"))
        last_incarnation[name] = inc
        op = (name, inc, event.get("f"))
        if event.get("type") == "invoke":
            pending[op] = event
        elif op in pending:
            start = pending.pop(op)
            scene.lines.append(Line(x(start["time"]), yc, x(event["time"]), yc, "span"))
    # message paths
    for life in lives:
        steps = [(what, e) for what, e in life.steps if str(e.get("process")) in lane_y]
        posted = next((e for what, e in steps if what == "posted"), None)
        origin = posted or next((e for what, e in steps if what.startswith("post")), None)
        chain: dict[tuple[Any, Any], Event] = {}
        for what, e in steps:
            if what in ("posted",) or what.startswith("post"):
                continue
            p = (e.get("process"), e.get("incarnation"))
            yc = lane_y[str(e.get("process"))] + LANE_H / 2
            prev = chain.get(p)
            if prev is None and origin is not None:
                yo = lane_y[str(origin.get("process"))] + LANE_H / 2
                scene.lines.append(
                    Line(
                        x(origin["time"]),
                        yo,
                        x(e["time"]),
                        yc,
                        "flow",
                        life.colour,
                        f"{life.mid}: {what}",
                    )
                )
            elif prev is not None:
                scene.lines.append(
                    Line(
                        x(prev["time"]),
                        yc,
                        x(e["time"]),
                        yc,
                        "flow-lane",
                        life.colour,
                        f"{life.mid}: {what}",
                    )
                )
            chain[p] = e
    # the events themselves (witness labels staggered so neighbours stay legible)
    staggered: dict[str, int] = {}
    for event in events:
        name = str(event.get("process"))
        if name not in lane_y or not isinstance(event.get("time"), int):
            continue
        index = event.get("index")
        is_witness = index in wit
        type_ = clean(event.get("type"), 10)
        dy = -11.0
        if is_witness:
            k = staggered.get(name, 0)
            staggered[name] = k + 1
            dy = -11.0 if k % 2 == 0 else 19.0
        scene.marks.append(
            Mark(
                x=x(event["time"]),
                y=lane_y[name] + LANE_H / 2,
                shape=_SHAPES.get(str(event.get("f")), "circle"),
                cls=f"ev {type_}" + (" witness" if is_witness else ""),
                title=_describe(event, t_ref),
                label=f"#{index}" if is_witness else "",
                index=index if isinstance(index, int) else None,
                t=round((event["time"] - t_ref) / _NS, 6),
                label_dy=dy,
            )
        )
    return scene
