"""The run at a glance: every process, every fault, every anomaly, on one time axis.

The first drawing of a report answers "what broke, when, under which
fault" before any table: one lane per process with its fault windows in
their kind's colour (grace lighter), crashes as crosses and its
incarnation count; an ``anomalies`` lane on top with each stored
anomaly from its onset (earliest witness event) to the moment it was
proven (latest), linked to its section; and the run's phases (all
processes ready, final heal, drains) as vertical rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from knell.report.faults import FaultWindow
from knell.report.scene import Band, Lane, Line, Mark, Scene, Text, TimeAxis
from knell.text import clean

__all__ = ["AnomalyMark", "build_overview"]

WIDTH = 980.0
LABEL_W = 150.0
RIGHT_PAD = 40.0
LANE_H = 18.0
TOP = 6.0
ANOMALY_LANE_H = 24.0
AXIS_H = 26.0
MAX_LANES = 40
_ROLE_ORDER = {"producer": 0, "consumer": 1, "waiter": 2, "joiner": 3, "drain": 5}
_NS = 1_000_000_000
_PRIMARY_COLOURS = ("#7b1fa2", "#00838f", "#ef6c00", "#2e7d32")
"""One colour per successive primary, so a change shows at a glance."""


@dataclass(frozen=True)
class AnomalyMark:
    number: int
    check: str
    kind: str
    onset: int
    detected: int
    linked: bool


def build_overview(
    processes: Sequence[dict[str, Any]],
    windows: Sequence[FaultWindow],
    anomalies: Sequence[AnomalyMark],
    phases: Sequence[dict[str, Any]],
    t_ref: int,
    t_end: int,
    primaries: Sequence[tuple[int, int, str]] = (),
) -> Scene:
    """``primaries``: (from, to, node) of a replicated store's primary
    (:meth:`knell.report.primaries.PrimaryTimeline.spans`), drawn as a lane
    of its own under the anomalies when the run had a failover."""

    def order(p: dict[str, Any]) -> tuple[int, str]:
        return (_ROLE_ORDER.get(str(p.get("role")), 4), str(p.get("name")))

    shown = sorted(processes, key=order)
    drains = [p for p in shown if p.get("role") == "drain"]
    others = [p for p in shown if p.get("role") != "drain"]
    lanes: list[dict[str, Any]] = others[:MAX_LANES]
    if drains:
        firsts = [p["first"] for p in drains if isinstance(p.get("first"), int)]
        lasts = [p["last"] for p in drains if isinstance(p.get("last"), int)]
        lanes.append(
            {
                "name": f"drains ({len(drains)})",
                "role": "drain",
                "incarnations": len(drains),
                "first": min(firsts) if firsts else None,
                "last": max(lasts) if lasts else None,
                "members": {p["name"] for p in drains},
            }
        )
    hidden = len(others) - min(len(others), MAX_LANES)
    primary_y = TOP + ANOMALY_LANE_H + 4
    y = primary_y + (LANE_H + 4 if primaries else 0)
    lane_y = {str(p["name"]): y + i * LANE_H for i, p in enumerate(lanes)}
    axis_y = y + len(lanes) * LANE_H + 4
    x0, x1 = LABEL_W, WIDTH - RIGHT_PAD
    axis = TimeAxis([t_ref, max(t_end, t_ref + 1)], x0, x1, t_ref, breaks=False)
    scene = Scene(
        width=WIDTH,
        height=axis_y + AXIS_H,
        title="the run at a glance",
        axis_y=axis_y,
        plot_x0=x0,
        plot_x1=x1,
    )
    scene.ticks = axis.ticks(110.0)

    def x(t: int) -> float:
        return max(x0, min(x1, axis.x(t)))

    scene.lanes.append(
        Lane(TOP, ANOMALY_LANE_H, "anomalies", "each anomaly from onset to proof", "anomalies")
    )
    if primaries:
        scene.lanes.append(
            Lane(primary_y, LANE_H, "primary", "which store node took writes when", "primary")
        )
    for k, (start, end, node) in enumerate(primaries):
        xa, xb = x(start), x(end)
        span = f"{clean(node, 60)} primary {(start - t_ref) / _NS:.2f}-{(end - t_ref) / _NS:.2f} s"
        scene.bands.append(
            Band(
                xa,
                primary_y + 2,
                max(2.0, xb - xa),
                LANE_H - 4,
                _PRIMARY_COLOURS[k % len(_PRIMARY_COLOURS)],
                0.35,
                span,
                clean(node, 30),
                "primary",
            )
        )
    for p in lanes:
        name = str(p["name"])
        role = clean(p.get("role") or "?", 20)
        incs = p.get("incarnations") or 0
        scene.lanes.append(
            Lane(
                lane_y[name],
                LANE_H,
                clean(name, 22),
                f"{clean(name, 200)} ({role}, {incs} incarnation(s))",
            )
        )
        first, last = p.get("first"), p.get("last")
        if isinstance(first, int) and isinstance(last, int):
            yc = lane_y[name] + LANE_H / 2
            scene.lines.append(Line(x(first), yc, x(last), yc, "activity"))
        if incs and incs > 1:
            scene.texts.append(
                Text(x1 + 4, lane_y[name] + LANE_H / 2 + 4, f"x{incs}", "incarnations")
            )
    if hidden:
        scene.texts.append(Text(4, axis_y - 2, f"+{hidden} more processes", "note"))
    member_of = {m: str(p["name"]) for p in lanes for m in p.get("members", ())}
    for w in windows:
        xa = x(w.start)
        xb = x(w.end if w.end is not None else t_end)
        until = w.until()
        xg = x(until if until is not None else t_end)
        targets = {member_of.get(n, n) for n in w.processes}
        touched = [n for n in targets if n in lane_y]
        if not touched:  # a store or link fault: across every lane, faintly
            scene.bands.append(
                Band(
                    xa,
                    TOP + ANOMALY_LANE_H + 4,
                    max(2.0, xb - xa),
                    len(lanes) * LANE_H,
                    w.band.colour,
                    0.12,
                    w.describe(t_ref),
                    "",
                    "fault",
                )
            )
            continue
        for name in touched:
            scene.bands.append(
                Band(
                    xa,
                    lane_y[name] + 2,
                    max(2.0, xb - xa),
                    LANE_H - 4,
                    w.band.colour,
                    0.85,
                    w.describe(t_ref),
                    "",
                    "fault",
                )
            )
            if xg > xb:
                scene.bands.append(
                    Band(
                        xb,
                        lane_y[name] + 2,
                        xg - xb,
                        LANE_H - 4,
                        w.band.colour,
                        0.25,
                        w.describe(t_ref) + " (grace)",
                        "",
                        "grace",
                    )
                )
        for name in {member_of.get(n, n) for n in w.indirect} - set(touched):
            if name in lane_y:
                scene.bands.append(
                    Band(
                        xa,
                        lane_y[name] + 5,
                        max(2.0, xb - xa),
                        LANE_H - 10,
                        w.band.colour,
                        0.25,
                        w.describe(t_ref) + " (indirect)",
                        "",
                        "indirect",
                    )
                )
    labelled: list[float] = []
    for phase in phases:
        f, t = phase.get("f"), phase.get("time")
        if not isinstance(t, int):
            continue
        if f == "crash" or f == "give-up":
            target = member_of.get(str(phase.get("target")), str(phase.get("target")))
            if target in lane_y:
                scene.marks.append(
                    Mark(
                        x(t),
                        lane_y[target] + LANE_H / 2,
                        "cross",
                        "crash",
                        f"{f} of {clean(target, 80)} at {(t - t_ref) / _NS:.3f} s",
                    )
                )
        elif f in ("ready", "heal") or (f == "drain" and phase.get("type") == "invoke"):
            if f == "drain" and any(
                p.get("f") == "drain" and p.get("type") == "invoke" and p.get("time", 0) < t
                for p in phases
            ):
                continue  # only the first drain
            label = {"ready": "ready", "heal": "final heal", "drain": "drain"}[str(f)]
            xr = x(t)
            scene.lines.append(
                Line(xr, TOP, xr, axis_y, "phase", "", f"{label} at {(t - t_ref) / _NS:.3f} s")
            )
            crowded = sum(1 for xp in labelled if abs(xp - xr) < 60)
            labelled.append(xr)
            scene.texts.append(Text(xr + 2, axis_y - 3 - 10 * crowded, label, "phase"))
    for row, a in enumerate(anomalies):
        xa, xb = x(a.onset), x(a.detected)
        yc = TOP + 6 + (row % 3) * 6
        title = (
            f"anomaly {a.number}: {clean(a.check, 60)} / {clean(a.kind, 60)}, onset "
            f"{(a.onset - t_ref) / _NS:.3f} s, proven {(a.detected - t_ref) / _NS:.3f} s"
        )
        if xb - xa > 1:
            scene.lines.append(Line(xa, yc, xb, yc, "anomaly-span", "", title))
        scene.marks.append(
            Mark(
                xb,
                yc,
                "diamond",
                "anomaly",
                title,
                href=f"#anomaly-{a.number}" if a.linked else "",
                t=round((a.detected - t_ref) / _NS, 6),
            )
        )
    return scene
