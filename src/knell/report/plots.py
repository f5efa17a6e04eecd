"""The report's plots: throughput, latency, post-to-wake, cursor lag and clocks, with fault bands.

Jepsen's latency and rate plots are the model: quantiles (p50, p95, p99,
max) per time bin, never means, on a log scale, with every fault window
shaded in its kind's colour (the band its fault kind declares, a neutral
grey for kinds this knell does not know) and the grace period lighter.
The figures come from ``series.json`` (:mod:`knell.report.series`), so
drawing never reads the history. The ``clock`` panel (each clock's
offset from true time, from :mod:`knell.report.clocks`) is drawn only for
a run whose clocks were moved.

matplotlib is imported here, lazily, and only here: ``knell`` and its
worker processes start without it. No pyplot: each figure is a
:class:`matplotlib.figure.Figure` drawn by the Agg-free SVG writer, and a
lock serialises drawing because matplotlib's settings are process-wide
(the matrix checks several runs at once in threads). Each plot is made
on its own: one that fails is reported (in the page and on the terminal)
and the others still appear; a plot never decides anything.

The SVG goes into the page as an ``<img>`` data URI, not inline: text in
a plot (a handle's name comes from the bus) can then never become markup
of the page, and the page stays one self-contained file.
"""

from __future__ import annotations

import base64
import io
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from knell.report.clocks import ClockSetting, ClockTrack, clock_tracks, read_settings
from knell.report.faults import FaultWindow
from knell.text import clean

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["Plot", "render_plots"]

_LOCK = threading.Lock()
_NS = 1_000_000_000
_OP_COLOURS = {
    "post": "#1f77b4",
    "fetch": "#2ca02c",
    "ack": "#9467bd",
    "subscribe": "#8c564b",
    "cursor": "#e377c2",
    "head": "#17becf",
    "arm": "#bcbd22",
    "handled": "#333333",
}
_QUANTILE_STYLE = {
    "p50": ("#2c7fb8", 1.0),
    "p95": ("#41b6c4", 1.0),
    "p99": ("#fd8d3c", 1.0),
    "max": ("#bd0026", 0.8),
}
_RC = {
    "svg.fonttype": "none",
    "svg.hashsalt": "knell",
    "text.parse_math": False,
    "font.size": 8,
    "axes.titlesize": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.fontsize": 7,
    "legend.frameon": False,
    "axes.formatter.useoffset": False,
}
MAX_WINDOW_LABELS = 14
MAX_LAG_LINES = 10


class _NothingToDraw(Exception):
    """The run has no data for this plot (no doorbell, say): said, not an error."""


@dataclass(frozen=True)
class Plot:
    key: str
    title: str
    caption: str
    uri: str | None = None
    error: str | None = None


def _x(series: dict[str, Any], t_ref: int) -> list[float]:
    bin_s = float(series["bin_s"])
    offset = ((series.get("t0") or t_ref) - t_ref) / _NS
    return [offset + (i + 0.5) * bin_s for i in range(int(series["bins"]))]


def _log_y(ax: Axes) -> None:
    """A log y axis labelled in plain numbers (math text is off: a label
    from the bus must never be parsed as TeX)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _final_phase(ax: Axes, final: float | None, t_end_s: float, label: bool) -> None:
    if final is None or final >= t_end_s:
        return
    ax.axvspan(
        final,
        t_end_s,
        facecolor="none",
        edgecolor="#999999",
        hatch="///",
        lw=0,
        alpha=0.35,
        zorder=0,
    )
    if label:
        ax.text(
            final,
            1.0,
            " final phase",
            transform=ax.get_xaxis_transform(),
            va="top",
            ha="left",
            fontsize=6,
            color="#666666",
        )


def _shade(
    ax: Axes,
    windows: Sequence[FaultWindow],
    t_ref: int,
    t_end: int,
    labels: bool,
    final: float | None = None,
) -> None:
    _final_phase(ax, final, (t_end - t_ref) / _NS, labels)
    # one collection per colour and shade, not one patch per window: a long
    # run has hundreds of windows on every axes
    bodies: dict[str, list[tuple[float, float]]] = {}
    graces: dict[str, list[tuple[float, float]]] = {}
    for w in windows:
        a = (w.start - t_ref) / _NS
        b = ((w.end if w.end is not None else t_end) - t_ref) / _NS
        until = w.until()
        g = ((until if until is not None else t_end) - t_ref) / _NS
        bodies.setdefault(w.band.colour, []).append((a, max(b - a, 1e-3)))
        if g > b:
            graces.setdefault(w.band.colour, []).append((b, g - b))
    spanning = ax.get_xaxis_transform()
    for spans, alpha in ((bodies, 0.2), (graces, 0.07)):
        for colour, ranges in spans.items():
            ax.broken_barh(
                ranges, (0, 1), transform=spanning, facecolors=colour, alpha=alpha, lw=0, zorder=0
            )
    for w in windows:
        if labels:
            a = (w.start - t_ref) / _NS
            ax.text(
                a,
                1.0,
                f" {clean(w.label, 30)}",
                transform=ax.get_xaxis_transform(),
                rotation=90,
                va="top",
                ha="left",
                fontsize=6,
                color=w.band.colour,
                clip_on=True,
            )


def _fault_legend(fig: Figure, windows: Sequence[FaultWindow]) -> None:
    from matplotlib.patches import Patch

    kinds: dict[str, FaultWindow] = {}
    for w in windows:
        kinds.setdefault(w.kind, w)
    if not kinds:
        return
    handles = [
        Patch(facecolor=w.band.colour, alpha=0.35, label=f"{w.band.label} window")
        for w in kinds.values()
    ]
    fig.legend(
        handles=handles,
        loc="upper right",
        bbox_to_anchor=(0.99, 1.0),
        ncols=min(6, len(handles)),
        fontsize=7,
    )


def _figure(rows: int, height: float) -> tuple[Figure, list[Axes]]:
    from matplotlib.figure import Figure

    # Fixed margins, not constrained layout: the layout engine measures every
    # tick label on every draw and took half of the drawing time.
    fig = Figure(figsize=(10, height))
    top = 1 - 0.42 / height
    fig.subplots_adjust(left=0.07, right=0.99, bottom=0.5 / height, top=top, hspace=0.45)
    axes = fig.subplots(rows, 1, sharex=True, squeeze=False)
    return fig, [row[0] for row in axes]


def _svg_uri(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _masked(values: Sequence[Any]) -> list[float]:
    return [float("nan") if v is None else float(v) for v in values]


def _throughput(
    series: dict[str, Any], windows: Sequence[FaultWindow], t_ref: int, t_end: int
) -> Figure:
    x = _x(series, t_ref)
    bin_s = float(series["bin_s"])
    ops: dict[str, dict[str, list[int]]] = series.get("ops", {})
    fig, (top, bottom) = _figure(2, 4.6)
    for f, by_type in ops.items():
        ok = by_type.get("ok")
        if ok and any(ok):
            top.plot(
                x,
                [n / bin_s for n in ok],
                drawstyle="steps-mid",
                lw=1,
                color=_OP_COLOURS.get(f, "#555555"),
                label=clean(f, 20),
            )
        fail, info = by_type.get("fail"), by_type.get("info")
        if fail and any(fail):
            bottom.plot(
                x,
                [n / bin_s for n in fail],
                drawstyle="steps-mid",
                lw=1,
                color=_OP_COLOURS.get(f, "#555555"),
                label=f"{clean(f, 20)} fail",
            )
        if info and any(info):
            bottom.plot(
                x,
                [n / bin_s for n in info],
                drawstyle="steps-mid",
                lw=1,
                ls=":",
                color=_OP_COLOURS.get(f, "#555555"),
                label=f"{clean(f, 20)} info",
            )
    handled = series.get("handled") or []
    if any(handled):
        top.plot(
            x,
            [n / bin_s for n in handled],
            drawstyle="steps-mid",
            lw=1.2,
            ls="--",
            color=_OP_COLOURS["handled"],
            label="messages handled",
        )
    _clip_to_run(top, series, t_ref)
    top.set_ylabel("ok / s")
    top.set_title(f"completed operations per second (bins of {bin_s * 1000:g} ms)")
    bottom.set_ylabel("errors / s")
    bottom.set_title("fail (definite) solid, info (unknown outcome) dotted")
    bottom.set_xlabel("seconds since the run began")
    if not bottom.lines:
        bottom.text(
            0.5,
            0.5,
            "no operation failed",
            transform=bottom.transAxes,
            ha="center",
            color="#2ca02c",
        )
    labels = len(windows) <= MAX_WINDOW_LABELS
    for i, ax in enumerate((top, bottom)):
        _shade(ax, windows, t_ref, t_end, labels and i == 0, _final_at(series, t_ref))
        if ax.lines:
            ax.legend(loc="upper left", ncols=4)
        ax.set_ylim(bottom=0)
    _fault_legend(fig, windows)
    return fig


def _final_at(series: dict[str, Any], t_ref: int) -> float | None:
    """Seconds from the run's start to its final phase (the nemesis heal)."""
    for phase in series.get("phases") or []:
        if phase.get("f") == "heal" and isinstance(phase.get("time"), int):
            return float((phase["time"] - t_ref) / _NS)
    return None


def _clip_to_run(ax: Axes, series: dict[str, Any], t_ref: int) -> None:
    """Scale the y axis to the run proper: the final drain reads a backlog
    in a burst that would flatten everything else; say how high it went."""
    final = _final_at(series, t_ref)
    if final is None:
        return
    before = after = 0.0
    for line in ax.lines:
        xs = cast("Sequence[float]", line.get_xdata())
        ys = cast("Sequence[float]", line.get_ydata())
        for xv, yv in zip(xs, ys, strict=False):
            if yv != yv:  # NaN
                continue
            if xv < final:
                before = max(before, float(yv))
            else:
                after = max(after, float(yv))
    if before > 0 and after > before * 1.3:
        ax.set_ylim(0, before * 1.3)
        ax.text(
            1.0,
            0.97,
            f"final phase peaks at {after:,.0f}/s (clipped) ",
            transform=ax.transAxes,
            ha="right",
            va="top",
            fontsize=6,
            color="#666666",
        )


def _quantile_lines(ax: Axes, x: list[float], q: dict[str, list[Any]]) -> None:
    for name, (colour, width) in _QUANTILE_STYLE.items():
        values = q.get(name)
        if values and any(v is not None for v in values):
            ax.plot(x, _masked(values), drawstyle="steps-mid", lw=width, color=colour, label=name)


def _latency(
    series: dict[str, Any], windows: Sequence[FaultWindow], t_ref: int, t_end: int
) -> Figure:
    x = _x(series, t_ref)
    latency: dict[str, dict[str, list[Any]]] = series.get("latency", {})
    totals = series.get("latency_total", {})
    kinds: list[str] = [
        f for f in ("post", "fetch", "ack", "subscribe", "cursor", "head") if f in latency
    ]
    kinds += [f for f in latency if f not in kinds]
    if not kinds:
        raise _NothingToDraw("no operation completed in this run")
    fig, axes = _figure(len(kinds), 1.35 * len(kinds) + 0.9)
    labels = len(windows) <= MAX_WINDOW_LABELS
    for i, (ax, f) in enumerate(zip(axes, kinds, strict=True)):
        _quantile_lines(ax, x, latency[f])
        _log_y(ax)
        total = totals.get(f, {})
        ax.set_title(
            f"{clean(f, 20)}: {total.get('count', 0)} ops, p50 {total.get('p50')} ms, "
            f"p99 {total.get('p99')} ms, max {total.get('max')} ms",
            loc="left",
        )
        ax.set_ylabel("ms")
        _shade(ax, windows, t_ref, t_end, labels and i == 0, _final_at(series, t_ref))
        if i == 0:
            ax.legend(loc="upper left", ncols=4)
    axes[-1].set_xlabel("seconds since the run began")
    _fault_legend(fig, windows)
    return fig


def _wake(
    series: dict[str, Any],
    windows: Sequence[FaultWindow],
    t_ref: int,
    t_end: int,
    bound_ms: float | None,
) -> Figure:
    x = _x(series, t_ref)
    q = series.get("wake_latency") or {}
    if not any(q.get("count") or []):
        raise _NothingToDraw("no doorbell rang for a post in this run")
    fig, (ax,) = _figure(1, 2.6)
    _quantile_lines(ax, x, q)
    if bound_ms:
        ax.axhline(bound_ms, color="#d62728", lw=0.8, ls="--", label=f"bound {bound_ms:g} ms")
    _log_y(ax)
    total = series.get("wake_latency_total", {})
    ax.set_title(
        f"post ok to ring: {total.get('count', 0)} rings, p50 {total.get('p50')} ms, "
        f"p99 {total.get('p99')} ms, max {total.get('max')} ms",
        loc="left",
    )
    ax.set_ylabel("ms")
    ax.set_xlabel("seconds since the run began")
    _shade(ax, windows, t_ref, t_end, len(windows) <= MAX_WINDOW_LABELS, _final_at(series, t_ref))
    ax.legend(loc="upper left", ncols=5)
    _fault_legend(fig, windows)
    return fig


def _lag(series: dict[str, Any], windows: Sequence[FaultWindow], t_ref: int, t_end: int) -> Figure:
    lag = series.get("lag") or []
    if not lag:
        raise _NothingToDraw("no ack, cursor read or subscribe completed in this run")
    bin_s = float(series["bin_s"])
    offset = ((series.get("t0") or t_ref) - t_ref) / _NS
    fig, (ax,) = _figure(1, 3.0)
    for entry in lag[:MAX_LAG_LINES]:
        points = entry.get("points") or []
        xs = [offset + (i + 0.5) * bin_s for i, _ in points]
        ys = [v for _, v in points]
        ax.plot(
            xs,
            ys,
            lw=1,
            marker=".",
            ms=2,
            label=f"{clean(entry.get('handle'), 30)} / {clean(entry.get('channel'), 20)}",
        )
    ax.set_title(
        "cursor lag: channel head minus the cursor each ack / cursor read / subscribe "
        "returned (worst per bin)",
        loc="left",
    )
    ax.set_ylabel("messages behind head")
    ax.set_xlabel("seconds since the run began")
    ax.set_ylim(bottom=0)
    _shade(ax, windows, t_ref, t_end, len(windows) <= MAX_WINDOW_LABELS, _final_at(series, t_ref))
    ax.legend(loc="upper left", ncols=3)
    if len(lag) > MAX_LAG_LINES:
        ax.text(
            1.0,
            1.02,
            f"{len(lag) - MAX_LAG_LINES} more handles in series.json",
            transform=ax.transAxes,
            ha="right",
            fontsize=6,
        )
    _fault_legend(fig, windows)
    return fig


_TRACK_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2")
MAX_CLOCK_TRACKS = 12


def _track_line(track: ClockTrack, t_ref: int, t_end: int) -> tuple[list[float], list[float]]:
    """The track's offset as points: steps at each setting, a slope while
    a rate holds (straight between settings, so two points suffice)."""
    xs, ys = [0.0], [0.0]
    settings = track.settings
    for k, s in enumerate(settings):
        a = (s.time - t_ref) / _NS
        until = settings[k + 1].time if k + 1 < len(settings) else max(t_end, s.time)
        xs += [a, a, (until - t_ref) / _NS]
        ys += [ys[-1], s.offset_s, s.offset_s + (s.rate - 1.0) * (until - s.time) / _NS]
    if len(xs) > 1 and xs[-1] < (t_end - t_ref) / _NS:
        xs.append((t_end - t_ref) / _NS)
        ys.append(ys[-1])
    return xs, ys


def _clock(
    settings: list[ClockSetting], windows: Sequence[FaultWindow], t_ref: int, t_end: int
) -> Figure:
    tracks = clock_tracks(settings)
    fig, (ax,) = _figure(1, 3.0)
    for i, track in enumerate(tracks[:MAX_CLOCK_TRACKS]):
        colour = _TRACK_COLOURS[i % len(_TRACK_COLOURS)]
        xs, ys = _track_line(track, t_ref, t_end)
        # Clocks moved together by one fault overlap there: each line is
        # drawn thinner than the one before, so the ones beneath still show.
        width = max(0.8, 2.6 - 0.4 * i)
        ax.plot(xs, ys, lw=width, color=colour, label=clean(track.label, 60))
        for k, s in enumerate(track.settings):
            if s.f != "clock-strobe":
                continue
            until = track.settings[k + 1].time if k + 1 < len(track.settings) else t_end
            ax.fill_between(
                [(s.time - t_ref) / _NS, (until - t_ref) / _NS],
                0,
                s.offset_s,
                facecolor="none",
                edgecolor=colour,
                hatch="xx",
                lw=0,
                alpha=0.6,
            )
    ax.axhline(0, color="#999999", lw=0.6)
    ax.set_title(
        "clock offset applied (wall clock minus true time); a strobe flips within its "
        "hatched band, a rate is a slope",
        loc="left",
    )
    ax.set_ylabel("offset (s)")
    ax.set_xlabel("seconds since the run began")
    ax.set_xlim(0, max((t_end - t_ref) / _NS, 1e-3))
    _shade(ax, windows, t_ref, t_end, len(windows) <= MAX_WINDOW_LABELS)
    ax.legend(loc="best", ncols=4)
    if len(tracks) > MAX_CLOCK_TRACKS:
        ax.text(
            1.0,
            1.02,
            f"{len(tracks) - MAX_CLOCK_TRACKS} more clocks in series.json",
            transform=ax.transAxes,
            ha="right",
            fontsize=6,
        )
    _fault_legend(fig, windows)
    return fig


def render_plots(
    series: dict[str, Any],
    windows: Sequence[FaultWindow],
    t_ref: int,
    t_end: int,
    *,
    wake_bound_ms: float | None = None,
) -> list[Plot]:
    """Every plot of a run; a plot that cannot be drawn carries its error
    (an empty figure, such as no doorbell in the run, carries the reason)."""
    makers: list[tuple[str, str, str, Callable[[], Figure]]] = [
        (
            "throughput",
            "Throughput",
            "Completed operations per second by kind, and errors per "
            "second (fail and info apart); fault windows shaded in their kind's colour.",
            lambda: _throughput(series, windows, t_ref, t_end),
        ),
        (
            "latency",
            "Operation latency",
            "Invoke to completion per operation kind: p50, p95, "
            "p99 and max per time bin, log scale (quantiles within about 6 %; max exact).",
            lambda: _latency(series, windows, t_ref, t_end),
        ),
        (
            "wake",
            "Post-to-wake latency",
            "From a post's ok to the doorbell ring it caused "
            "(rings for a post by someone else), with the scenario's wake bound.",
            lambda: _wake(series, windows, t_ref, t_end, wake_bound_ms),
        ),
        (
            "lag",
            "Cursor lag per handle",
            "How far each handle's durable cursor trailed the "
            "channel head, as observed at each ack, cursor read and subscribe.",
            lambda: _lag(series, windows, t_ref, t_end),
        ),
    ]
    settings = read_settings(series.get("clock"))
    if settings:  # the panel exists only where clocks were moved
        makers.append(
            (
                "clock",
                "Clock offsets",
                "The offset from true time applied to each process's wall clock (and the "
                "store server's) by the clock faults, beside the fault windows; processes "
                "always moved together share a line.",
                lambda: _clock(settings, windows, t_ref, t_end),
            )
        )
    out = []
    try:
        import matplotlib
    except Exception as exc:  # matplotlib missing or broken: every plot says so
        why = f"matplotlib cannot be imported ({type(exc).__name__}: {clean(exc, 300)})"
        return [Plot(key, title, caption, error=why) for key, title, caption, _ in makers]
    with _LOCK, matplotlib.rc_context(cast(Any, _RC)):
        for key, title, caption, make in makers:
            try:
                fig = make()
                uri = _svg_uri(fig)
                out.append(Plot(key, title, caption, uri=uri))
            except _NothingToDraw as exc:  # nothing to draw: a fact about the run, not an error
                out.append(Plot(key, title, f"{caption} Not drawn: {clean(exc, 300)}."))
            except Exception as exc:
                out.append(
                    Plot(key, title, caption, error=f"{type(exc).__name__}: {clean(exc, 500)}")
                )
    return out
